"""Integer + - * << that report wrap-around (jr.init(debug=True)), as Taichi's debug builds do.

Stage: codegen (called by `emit_expr.expr_Binary` for a `Binary` whose `overflow` message the
frontend set). The result is the ordinary wrapped value; when the operation overflowed the
task prints the message (kernel, place, source line) and goes on, as Taichi's
`debug_add/sub/mul/shl` do. + - * use LLVM's `*.with.overflow` intrinsics (signed or unsigned
by the dtype); << overflows when shifting the result back does not give the operand. The
message goes out through the target's printf (CPU, CUDA); AMDGPU has no kernel printf here,
so its code keeps the plain operation.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from .. import dtypes
from ..ir import nodes as n

_INTRINSIC = {"+": "add", "-": "sub", "*": "mul"}


def can_check(e: n.Binary, target: Any) -> bool:
    """Whether `e` gets an overflow check on `target`."""
    return bool(e.overflow) and e.op in ("+", "-", "*", "<<") and not e.dtype.is_float and \
        bool(target.printer)          # the check prints: only targets that have a printf


def checked_binary(em: Any, e: n.Binary, a: ir.Value, c: ir.Value) -> ir.Value:
    """`a op c` in e.dtype; prints `e.overflow` when it wraps."""
    b = em.builder
    dt = e.dtype
    if e.op == "<<":
        result = em.int_binary("<<", a, c, dt)
        amount = b.and_(c, ir.Constant(c.type, dt.bits - 1))
        back = b.ashr(result, amount) if dt.is_signed else b.lshr(result, amount)
        wrapped = b.icmp_unsigned("!=", back, a)
    else:
        kind = ("s" if dt.is_signed else "u") + _INTRINSIC[e.op]
        pair = getattr(b, f"{kind}_with_overflow")(a, c)
        result, wrapped = b.extract_value(pair, 0), b.extract_value(pair, 1)
    with b.if_then(wrapped, likely=False):
        em.expr_Print(n.Print((e.overflow,), (), dtypes.i32, e.loc))
    return result
