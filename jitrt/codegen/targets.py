"""Target hooks: what differs between CPU, NVPTX and AMDGPU in the generated LLVM IR.

Stage: codegen. A `Target` names the triple and data layout, maps math functions to intrinsics
or device-library symbols, and says how a parallel task finds its index (a loop over a chunk on
the CPU; the thread/block index on GPUs). The lowering in `emit_*.py` is the same for all.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

MATH_INTRINSIC = {"sin": "llvm.sin", "cos": "llvm.cos", "tan": "llvm.tan", "exp": "llvm.exp",
                  "log": "llvm.log", "sqrt": "llvm.sqrt", "tanh": "llvm.tanh",
                  "floor": "llvm.floor", "ceil": "llvm.ceil", "abs": "llvm.fabs",
                  "pow": "llvm.pow"}


class _PrivateAlloca(ir.instructions.AllocaInstr):
    """An alloca in AMDGPU's private address space (5), as that target requires."""

    def __init__(self, parent: ir.Block, typ: ir.Type, name: str) -> None:
        super().__init__(parent, typ, None, name)
        self.type = typ.as_pointer(5)

    def descr(self, buf: list[str]) -> None:
        buf.append(f"alloca {self.allocated_type}, addrspace(5)")


@dataclass(frozen=True)
class Target:
    name: str
    triple: str
    data_layout: str
    is_gpu: bool

    def alloca(self, builder: ir.IRBuilder, ty: ir.Type, name: str) -> ir.Value:
        return builder.alloca(ty, name=name)

    def math_function(self, module: ir.Module, fn: str, ty: ir.Type, nargs: int) -> ir.Function:
        name = self.math_symbol(fn, ty)
        existing = module.globals.get(name)
        if existing is not None:
            return existing  # type: ignore[return-value]
        return ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name)

    def math_symbol(self, fn: str, ty: ir.Type) -> str:
        suffix = "f32" if isinstance(ty, ir.FloatType) else "f64"
        return f"{MATH_INTRINSIC[fn]}.{suffix}"


@dataclass(frozen=True)
class NvptxTarget(Target):
    def math_symbol(self, fn: str, ty: ir.Type) -> str:
        if fn in ("sqrt", "floor", "ceil", "abs"):
            return super().math_symbol(fn, ty)
        single = isinstance(ty, ir.FloatType)
        return f"__nv_{fn}{'f' if single else ''}"


@dataclass(frozen=True)
class AmdgpuTarget(Target):
    def alloca(self, builder: ir.IRBuilder, ty: ir.Type, name: str) -> ir.Value:
        instr = _PrivateAlloca(builder.block, ty, name)
        builder._insert(instr)
        return builder.addrspacecast(instr, ty.as_pointer())

    def math_symbol(self, fn: str, ty: ir.Type) -> str:
        if fn in ("sqrt", "floor", "ceil", "abs"):
            return super().math_symbol(fn, ty)
        return f"__ocml_{fn}_{'f32' if isinstance(ty, ir.FloatType) else 'f64'}"


NVPTX = NvptxTarget("cuda", "nvptx64-nvidia-cuda",
                    "e-i64:64-i128:128-v16:16-v32:32-n16:32:64", True)
AMDGPU = AmdgpuTarget("amdgpu", "amdgcn-amd-amdhsa",
                      "e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256"
                      ":256:32-p8:128:128-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64"
                      "-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5"
                      "-G1-ni:7:8:9", True)
