"""AST -> IR for Quadrants' `qd.simt` primitives: block barriers and fences, warp and
subgroup shuffles and ballots, and block-shared arrays (`simt.block.SharedArray`).

Stage: frontend (a family of the call lowering; `lower_call.call_builtin` sends the
`simt.*` builtins here, and the subscript lowering the reads and writes of shared arrays).
Each primitive is one `n.Simt` expression (an effect: never moved or merged); codegen
(`codegen/emit_simt.py`) lowers it on GPUs and refuses it on the CPU. `SharedArray(shape,
dtype)` in a kernel or func is a compile-time handle (`SharedHandle`) naming a new
`n.SharedDecl`; `a[i, j]` reads element `i * shape[1] + j` (row-major, unchecked, as in
Quadrants), `a[i, j] = v` writes it, and `+=`, `-=` (and `&=`, `|=`, `^=` on integers) or
`jr.atomic_*` on it are atomic in shared memory. The higher-level operations (reductions,
scans, tiles) are `@jr.func`s over these (`quadrants/simt_funcs.py`). Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..ir import nodes as n
from . import builtins as bi
from .context import LoweringHost, PyValue

# builtin name -> (IR op, argument kinds, result): "v" a value of any 32/64-bit scalar type
# (the result has its type), "i" an i32 (a lane or offset), "m" a u32 mask, "p" a predicate
PRIMITIVES: dict[str, tuple[str, str, Any]] = {
    "simt.block.sync": ("block.sync", "", None),
    "simt.block.mem_fence": ("block.mem_fence", "", None),
    "simt.block.thread_idx": ("block.thread_idx", "", dtypes.i32),
    "simt.block.global_thread_idx": ("block.global_thread_idx", "", dtypes.i32),
    "simt.grid.mem_fence": ("grid.mem_fence", "", None),
    "simt.grid.memfence": ("grid.mem_fence", "", None),
    "simt.warp.sync": ("warp.sync", "m", None),
    "simt.warp.ballot": ("warp.ballot", "p", dtypes.i32),
    "simt.subgroup.sync": ("subgroup.sync", "", None),
    "simt.subgroup.barrier": ("subgroup.sync", "", None),
    "simt.subgroup.mem_fence": ("subgroup.mem_fence", "", None),
    "simt.subgroup.memory_barrier": ("subgroup.mem_fence", "", None),
    "simt.subgroup.invocation_id": ("subgroup.invocation_id", "", dtypes.i32),
    "simt.subgroup.shuffle": ("subgroup.shuffle", "vi", "v"),
    "simt.subgroup.broadcast": ("subgroup.shuffle", "vi", "v"),
    "simt.subgroup.shuffle_up": ("subgroup.shuffle_up", "vi", "v"),
    "simt.subgroup.shuffle_down": ("subgroup.shuffle_down", "vi", "v"),
    "simt.subgroup.ballot": ("subgroup.ballot", "p", dtypes.u64),
    "simt.subgroup.ballot_full_subgroup": ("subgroup.ballot", "p", dtypes.u64),
}
# warp.shfl_*_<t>(mask, value, offset): CUDA's spelling of the shuffles (the mask must be
# the full warp's, as the subgroup forms use)
for _mode, _op in (("sync", "subgroup.shuffle"), ("up", "subgroup.shuffle_up"),
                   ("down", "subgroup.shuffle_down")):
    for _t in ("i32", "f32"):
        PRIMITIVES[f"simt.warp.shfl_{_mode}_{_t}"] = (_op, "mvi", getattr(dtypes, _t))
SHUFFLED = (dtypes.f32, dtypes.f64)     # and every integer type (narrow ones widened)
ATOMIC_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "xchg")


class SharedHandle:
    """A block-shared array in a kernel being compiled (the value `SharedArray(...)` gives):
    passed to funcs and indexed as a field is."""

    def __init__(self, decl: n.SharedDecl) -> None:
        self.decl = decl
        self.shape, self.dtype = decl.shape, decl.dtype     # (a.shape in kernels)

    def __repr__(self) -> str:
        return f"<jitrt block-shared array {self.decl.name} {list(self.decl.shape)}>"


class SimtLowering(LoweringHost):
    def simt_call(self, fn: bi.Builtin, node: ast.Call) -> Any:
        entry = PRIMITIVES.get(fn.name)
        if entry is None:
            raise self.err(node, f"jr.{fn.name}() is not supported by jitrt (see "
                           "docs/porting.md, 'qd.simt')")
        op, kinds, result = entry
        if node.keywords or len(node.args) != len(kinds):
            raise self.err(node, f"jr.{fn.name}() takes {len(kinds)} positional argument(s), "
                           f"got {len(node.args)}")
        args: list[n.Expr] = []
        for kind, arg in zip(kinds, node.args):
            e = self.value(arg)
            if kind == "v":
                if isinstance(result, dtypes.DataType):
                    e = self.cast(e, result)
                elif not (e.dtype.is_int or e.dtype in SHUFFLED):
                    raise self.err(arg, f"jr.{fn.name}() moves integers, f32 and f64 values, "
                                   f"got {e.dtype.name}")
            elif kind == "p":
                e = self.truth(e)
            elif not e.dtype.is_int:
                raise self.err(arg, f"jr.{fn.name}(): this argument must be an integer, got "
                               f"{e.dtype.name}")
            else:
                e = self.cast(e, dtypes.u32 if kind == "m" else dtypes.i32)
            if kind == "m" and op.startswith("subgroup."):
                continue             # warp.shfl_*: the mask is the full warp's, as Quadrants
            args.append(e)
        dt = args[0].dtype if result == "v" else result or dtypes.i32
        return n.Simt(op, tuple(args), dt, self.loc(node))

    # ---- block-shared arrays ----------------------------------------------------------------
    def shared_array(self, node: ast.Call) -> PyValue:
        """`SharedArray(shape, dtype)`: a new block-shared array of this compile."""
        if len(node.args) + len(node.keywords) != 2:
            raise self.err(node, "SharedArray(shape, dtype) takes a shape and a dtype")
        given = {k.arg: k.value for k in node.keywords}
        shape_node = node.args[0] if node.args else given.get("shape")
        dtype_node = node.args[1] if len(node.args) > 1 else given.get("dtype")
        if shape_node is None or dtype_node is None:
            raise self.err(node, "SharedArray(shape, dtype) takes a shape and a dtype")
        shape = self.expr(shape_node)
        obj = shape.obj if isinstance(shape, PyValue) else None
        shape_t = (obj,) if isinstance(obj, int) else tuple(obj) if isinstance(
            obj, (tuple, list)) else None
        if not shape_t or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                  for s in shape_t):
            raise self.err(shape_node, "SharedArray: the shape must be a positive int or a "
                           f"tuple of positive ints known at compile time, got {obj!r}")
        dt = self.expr(dtype_node)
        dt_obj = dt.obj if isinstance(dt, PyValue) else None
        try:
            dtype = dtypes.coerce(dt_obj)
        except (TypeError, ValueError, KeyError):
            raise self.err(dtype_node, "SharedArray: the dtype must be a scalar type (jr.f32, "
                           f"jr.i32, ...), got {dt_obj!r}") from None
        self.ctx.shared_count += 1
        decl = n.SharedDecl(self.ctx.shared_count, ast.unparse(node)[:80], dtype, shape_t)
        return PyValue(SharedHandle(decl))

    def shared_index(self, handle: SharedHandle, index_node: ast.AST) -> n.Expr:
        """The flat element index of `a[i, j, ...]` (row-major)."""
        decl = handle.decl
        parts = index_node.elts if isinstance(index_node, ast.Tuple) else [index_node]
        if len(parts) != len(decl.shape):
            raise self.err(index_node, f"shared array `{decl.name}` has {len(decl.shape)} "
                           f"dimension(s) {list(decl.shape)}, indexed with {len(parts)}")
        loc = self.loc(index_node)
        flat: n.Expr | None = None
        for part, extent in zip(parts, decl.shape):
            k = self.value(part)
            if not k.dtype.is_int:
                raise self.err(part, f"a shared array index must be an integer, got "
                               f"{k.dtype.name}")
            if isinstance(k, n.Const) and not 0 <= int(k.value) < extent:
                raise self.err(part, f"index {k.value} out of range for shared array "
                               f"'{decl.name}' of shape {list(decl.shape)}")
            k = self.cast(k, dtypes.i32)
            if flat is None:
                flat = k
            else:
                scaled = n.Binary("*", flat, n.Const(extent, dtypes.i32, loc), dtypes.i32, loc)
                flat = n.Binary("+", scaled, k, dtypes.i32, loc)
        assert flat is not None
        return flat

    def shared_load(self, handle: SharedHandle, node: ast.Subscript) -> n.Expr:
        index = self.shared_index(handle, node.slice)
        return n.Simt("shared.load", (index,), handle.decl.dtype, self.loc(node),
                      handle.decl)

    def shared_store(self, handle: SharedHandle, target: ast.Subscript, v: Any,
                     node: ast.AST) -> None:
        index = self.shared_index(handle, target.slice)
        value = self.typed(v, handle.decl.dtype, node)
        self.emit(n.Eval(n.Simt("shared.store", (index, value), dtypes.i32, self.loc(node),
                                handle.decl), self.loc(node)))

    def shared_update(self, handle: SharedHandle, node: ast.AugAssign, op: str) -> None:
        """`a[i] op= v`: atomic for + and - (and &, |, ^ on integers), as on fields."""
        decl = handle.decl
        assert isinstance(node.target, ast.Subscript)
        atomic = {"+": "add", "-": "sub"}.get(op) or (
            {"&": "and", "|": "or", "^": "xor"}.get(op) if decl.dtype.is_int else None)
        if atomic is None:
            old = self.shared_load(handle, node.target)
            self.shared_store(handle, node.target, self.binary(op, old, self.expr(node.value),
                                                               node), node)
            return
        self.emit(n.Eval(self.shared_atomic(handle, node.target, atomic,
                                            self.expr(node.value), node), self.loc(node)))

    def shared_atomic(self, handle: SharedHandle, target: ast.Subscript, op: str, v: Any,
                      node: ast.AST) -> n.Expr:
        """`jr.atomic_<op>(a[i], v)` on a shared array: the element's old value."""
        index = self.shared_index(handle, target.slice)
        value = self.typed(v, handle.decl.dtype, node)
        if op in ("and", "or", "xor") and not handle.decl.dtype.is_int:
            raise self.err(node, f"atomic_{op} needs an integer shared array")
        return n.Simt(f"shared.atomic_{op}", (index, value), handle.decl.dtype, self.loc(node),
                      handle.decl)


def shared_handle(v: Any) -> SharedHandle | None:
    """The shared array a lowered value names, if it is one."""
    return v.obj if isinstance(v, PyValue) and isinstance(v.obj, SharedHandle) else None
