"""Lowering of `n.Simt`: Quadrants' `qd.simt` block, warp and subgroup primitives and the
block-shared arrays, on GPU targets.

Stage: codegen (a mixin of the function emitter). Each op asks the target's hooks
(`targets.py`: barrier, fence, lane id, shuffle, ballot, warp barrier), so the same lowering
serves NVPTX and AMDGPU. A shared array becomes one static array in the GPU's shared memory
(LLVM address space 3: NVPTX `.shared`, AMDGPU LDS) per declaration and task function, so
that every thread block of the task has its own; a task's arrays together may take at most
`MAX_SHARED_BYTES` (the static limit of a CUDA block), checked here with the declaration's
source line. Shuffles move 32-bit words: a 64-bit value moves as two halves, a narrower
integer widened. A target without grid launches (the CPU) refuses every op with a
`KernelCompileError` at the call, as Quadrants does on the CPU. Caches nothing beyond the
emitter's table of shared arrays.
"""
from __future__ import annotations

from llvmlite import ir

from ..dtypes import DataType
from ..ir import nodes as n
from .emit_expr import I32, I64, ExprEmitter, ll_type

MAX_SHARED_BYTES = 48 * 1024    # static shared memory one CUDA thread block may declare
_RMW = {"add": ("add", "fadd"), "sub": ("sub", "fsub"), "and": ("and", ""), "or": ("or", ""),
        "xor": ("xor", ""), "xchg": ("xchg", "xchg")}


class SimtEmitter(ExprEmitter):
    shared_arrays: dict[int, tuple[ir.GlobalVariable, int]]    # id -> (array, bytes)

    def expr_Simt(self, e: n.Simt) -> ir.Value:
        if not self.target.traits.grid_launch:
            from ..errors import error_at
            what = "block-shared arrays are" if e.op.startswith("shared.") else \
                f"jr.simt.{e.op}() is"
            why = "the CPU runs no thread blocks" if e.op.startswith("shared.") else \
                "Quadrants refuses it on the CPU too"
            raise error_at(e.loc, f"{what} GPU block-level code: not supported on "
                           f"{self.target.name} ({why}); reach it only behind a "
                           "jr.static(...) test of the arch")
        if e.op.startswith("shared."):
            return self.shared_op(e)
        b, module, target = self.builder, self.module, self.target
        args = [self.expr(a) for a in e.args]
        if e.op == "block.sync":
            target.barrier(module, b)
        elif e.op in ("block.mem_fence", "subgroup.mem_fence", "grid.mem_fence"):
            target.fence(module, b, "grid" if e.op == "grid.mem_fence" else "block")
        elif e.op in ("warp.sync", "subgroup.sync"):
            mask = args[0] if args else ir.Constant(I32, -1)
            target.warp_barrier(module, b, mask)
        elif e.op == "block.thread_idx":
            return target.thread_in_block(module, b)
        elif e.op == "block.global_thread_idx":
            size = target.block_size(module, b)
            return b.add(b.mul(target.block_index(module, b), size),
                         target.thread_in_block(module, b))
        elif e.op == "subgroup.invocation_id":
            return target.lane_id(module, b)
        elif e.op in ("subgroup.ballot", "warp.ballot"):
            mask = target.ballot(module, b, self.truth(args[0], e.args[0].dtype))
            return mask if e.dtype.bits == 64 else b.trunc(mask, I32)
        elif e.op.startswith("subgroup.shuffle"):
            mode = {"subgroup.shuffle": "idx", "subgroup.shuffle_up": "up",
                    "subgroup.shuffle_down": "down"}[e.op]
            return self.shuffled(mode, args[0], e.dtype, args[1])
        else:
            raise AssertionError(f"unknown simt op {e.op}")
        return ir.Constant(I32, 0)

    def shuffled(self, mode: str, v: ir.Value, dt: DataType, x: ir.Value) -> ir.Value:
        """`v` of the lane `mode` and `x` name (`Target.shuffle`), moved as 32-bit words."""
        b, module, target = self.builder, self.module, self.target
        bits = ir.IntType(dt.bits)
        raw = b.bitcast(v, bits) if dt.is_float else v
        if dt.bits == 64:
            lo = target.shuffle(module, b, mode, b.trunc(raw, I32), x)
            hi = target.shuffle(module, b, mode, b.trunc(b.lshr(raw, ir.Constant(I64, 32)),
                                                         I32), x)
            out = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        elif dt.bits == 32:
            out = target.shuffle(module, b, mode, raw, x)
        else:
            out = b.trunc(target.shuffle(module, b, mode, b.zext(raw, I32), x), bits)
        return b.bitcast(out, ll_type(dt)) if dt.is_float else out

    # ---- block-shared arrays ----------------------------------------------------------------
    def shared_global(self, decl: n.SharedDecl, loc: n.Loc) -> ir.GlobalVariable:
        """The static shared-memory array of `decl` in this function (made on first use)."""
        found = self.shared_arrays.get(decl.id)
        if found is not None:
            return found[0]
        used = sum(size for _, size in self.shared_arrays.values()) + \
            decl.size * decl.dtype.bits // 8
        if used > MAX_SHARED_BYTES:
            from ..errors import error_at
            raise error_at(loc, f"block-shared array `{decl.name}` brings this loop's shared "
                           f"memory to {used} "
                           f"bytes: a thread block may declare at most {MAX_SHARED_BYTES} "
                           "(48 KiB)")
        ty = ir.ArrayType(ll_type(decl.dtype), max(decl.size, 1))
        g = ir.GlobalVariable(self.module, ty, f"{self.fn.name}_shared{decl.id}", addrspace=3)
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, ir.Undefined)
        g.align = 16
        self.shared_arrays[decl.id] = (g, decl.size * decl.dtype.bits // 8)
        return g

    def shared_op(self, e: n.Simt) -> ir.Value:
        """`shared.load(k)`, `shared.store(k, v)`, `shared.atomic_<op>(k, v)` of element k
        (the flat row-major index the frontend computed; unchecked, as in Quadrants)."""
        assert e.shared is not None
        b = self.builder
        g = self.shared_global(e.shared, e.loc)
        index = self.expr(e.args[0])
        ptr = b.gep(g, [ir.Constant(I32, 0), b.sext(index, I64) if index.type != I64 else
                        index])
        if e.op == "shared.load":
            return b.load(ptr)
        value = self.expr(e.args[1])
        if e.op == "shared.store":
            b.store(value, ptr)
            return ir.Constant(I32, 0)
        op = e.op.split("_", 1)[1]
        dt = e.shared.dtype
        if op in ("min", "max"):
            name = ("f" if dt.is_float else "" if dt.is_signed else "u") + op
        else:
            name = _RMW[op][1 if dt.is_float else 0]
        return b.atomic_rmw(name, ptr, value, "monotonic")
