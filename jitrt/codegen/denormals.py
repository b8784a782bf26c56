"""Denormal float results flush to zero in CPU kernels, as in Taichi.

Stage: codegen (used by `kernel_module.build_module` and the thread pool). Taichi sets the
CPU's flush-to-zero mode for its whole process (x86 MXCSR FTZ, bit 15; arm64 FPCR FZ, bit 24),
so a float result too small to be a normal number becomes 0 with its sign (Taichi's
`test_fp_flush_to_zero.py`: `1e-10 * 1e-35` stored into an f32 is 0). jitrt sets the mode only
where kernel code runs: a launch's CPU entry sets it on the launching thread and gives the
caller's mode back when it returns (`wrap_entry`), and each thread-pool worker sets it once
for itself (it runs nothing but kernels). Python-scope code and numpy keep IEEE gradual
underflow. Kernel functions carry LLVM's `denormal-fp-math` attribute, so that LLVM's
constant folding flushes as the hardware does, and a kernel's float constants are flushed
when emitted (`flushed`). Other CPUs (no known mode register) keep IEEE results; GPU code is
untouched (docs/usage.md, "Denormal floats"). Caches nothing.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..dtypes import DataType

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
X86_FTZ = 1 << 15            # MXCSR's flush-to-zero bit
ARM64_FZ = 1 << 24           # FPCR's flush-to-zero bit
# outputs flushed (keeping the sign), inputs read as they are (the hardware's FTZ, no DAZ)
ATTRIBUTE = '"denormal-fp-math"="preserve-sign,ieee"'


def register(triple: str) -> str:
    """"x86", "arm64" or "" (a CPU whose mode jitrt does not set)."""
    if triple.startswith("x86_64"):
        return "x86"
    if triple.startswith(("aarch64", "arm64")):
        return "arm64"
    return ""


def _intrinsic(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ty, name)  # type: ignore


def set_flush(module: ir.Module, b: ir.IRBuilder, triple: str) -> ir.Value | None:
    """Turn flush-to-zero on for this thread; the previous mode word (None: no register)."""
    kind = register(triple)
    if kind == "x86":
        i8p = I8.as_pointer()
        slot = b.alloca(I32)
        b.call(_intrinsic(module, "llvm.x86.sse.stmxcsr",
                          ir.FunctionType(ir.VoidType(), [i8p])), [b.bitcast(slot, i8p)])
        old = b.load(slot)
        b.store(b.or_(old, ir.Constant(I32, X86_FTZ)), slot)
        b.call(_intrinsic(module, "llvm.x86.sse.ldmxcsr",
                          ir.FunctionType(ir.VoidType(), [i8p])), [b.bitcast(slot, i8p)])
        return old
    if kind == "arm64":
        old = b.call(_intrinsic(module, "llvm.aarch64.get.fpcr", ir.FunctionType(I64, [])), [])
        b.call(_intrinsic(module, "llvm.aarch64.set.fpcr", ir.FunctionType(ir.VoidType(), [I64])),
               [b.or_(old, ir.Constant(I64, ARM64_FZ))])
        return old
    return None


def restore(module: ir.Module, b: ir.IRBuilder, triple: str, old: ir.Value | None) -> None:
    """Give this thread back the mode word `set_flush` returned."""
    kind = register(triple)
    if old is None or not kind:
        return
    if kind == "x86":
        i8p = I8.as_pointer()
        slot = b.alloca(I32)
        b.store(old, slot)
        b.call(_intrinsic(module, "llvm.x86.sse.ldmxcsr",
                          ir.FunctionType(ir.VoidType(), [i8p])), [b.bitcast(slot, i8p)])
    else:
        b.call(_intrinsic(module, "llvm.aarch64.set.fpcr", ir.FunctionType(ir.VoidType(), [I64])),
               [old])


def wrap_entry(module: ir.Module, triple: str, body: ir.Function, name: str) -> ir.Function:
    """A function `name` that runs `body` (made internal, not inlined: nothing of it moves
    across the mode change) with flush-to-zero on, and then restores the caller's mode."""
    body.linkage = "internal"
    body.attributes.add("noinline")
    fn = ir.Function(module, body.function_type, name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    old = set_flush(module, b, triple)
    b.call(body, fn.args)
    restore(module, b, triple, old)
    b.ret_void()
    return fn


def mark(module: ir.Module) -> None:
    """Give every function defined in `module` the flush-to-zero `denormal-fp-math`."""
    for fn in module.functions:
        if not fn.is_declaration:
            set.add(fn.attributes, ATTRIBUTE)    # llvmlite checks only known attribute names


def flushed(dt: DataType, value: float) -> float:
    """`value` as a constant of float type `dt` in a kernel: 0.0 with its sign when it rounds
    to a denormal of `dt`, else unchanged."""
    typed = dt.np.type(value)
    if typed != 0 and abs(typed) < np.finfo(dt.np).tiny:
        return float(np.copysign(0.0, value))
    return value
