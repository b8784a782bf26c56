"""Loop versioning of bounds checks: one test per task instead of one per access.

Stage: codegen (parallel tasks). An access whose every index is affine in one task variable
(`a[i]`, `b[i + 1, j - 1]`, `x[2 * i + k]` with `k` unchanged by the body) stays inside its
array for the whole box exactly when the ends of each index's range do, which the task can
test once, before its loop. `affine_accesses` finds those accesses (the variable must not be
reassigned in the body; offsets may be constants, scalar arguments, shapes and locals the body
does not assign); `box_inside` builds the test from the box (begins, extents) and the arrays'
extents, in 64 bits, and also requires each index's range to fit its integer type, so that the
kernel's own (wrapping) arithmetic gives the same values. The task then runs one of two copies
of its loop: without those accesses' checks when the test holds (nothing in the loop body
blocks vectorization any more), with every check otherwise, so an out-of-bounds access is
still skipped and reported with its index. Other accesses (data-dependent indices) keep their
check in both copies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from .. import dtypes
from ..ir import nodes as n
from ..passes.offload import assigned_names
from ..passes.walk import all_exprs, walk_stmts
from .emit_expr import I1, I64

AccessKey = tuple[n.Ref, tuple[n.Expr, ...]]


@dataclass(frozen=True)
class Affine:
    """index = coef * variable + offset (offset: an expression the body does not change)."""
    var: int
    coef: int
    offset: n.Expr
    dtype: dtypes.DataType       # the index expression's type (its arithmetic wraps there)


def _const(value: int) -> n.Expr:
    return n.Const(value, dtypes.i64)


def _wide(e: n.Expr) -> n.Expr:
    """`e` as an i64 expression (offsets are summed in 64 bits)."""
    return e if e.dtype == dtypes.i64 else n.Cast(e, dtypes.i64)


def invariant(e: n.Expr, changing: set[str]) -> bool:
    """An integer expression whose value is the same for every point of the box."""
    if not e.dtype.is_int:
        return False
    if isinstance(e, (n.Const, n.Arg, n.Shape)):
        return True
    if isinstance(e, n.Local):
        return e.name not in changing
    if isinstance(e, n.Cast):
        return invariant(e.x, changing)
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*"):
        return invariant(e.a, changing) and invariant(e.b, changing)
    return False


def affine(e: n.Expr, variables: dict[str, int], changing: set[str]) -> Affine | None:
    """`e` as coef * variable + offset, or None."""
    if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
        inner = affine(e.x, variables, changing)
        return None if inner is None else Affine(inner.var, inner.coef, inner.offset, e.dtype)
    if isinstance(e, n.Local) and e.name in variables:
        return Affine(variables[e.name], 1, _const(0), e.dtype)
    if not isinstance(e, n.Binary) or not e.dtype.is_int:
        return None
    a, b = affine(e.a, variables, changing), affine(e.b, variables, changing)
    if e.op == "*":
        if a is not None and isinstance(e.b, n.Const):
            c = int(e.b.value)
            return Affine(a.var, a.coef * c, n.Binary("*", a.offset, _const(c), dtypes.i64),
                          e.dtype)
        if b is not None and isinstance(e.a, n.Const):
            c = int(e.a.value)
            return Affine(b.var, b.coef * c, n.Binary("*", b.offset, _const(c), dtypes.i64),
                          e.dtype)
        return None
    if e.op in ("+", "-") and a is not None and invariant(e.b, changing):
        return Affine(a.var, a.coef, n.Binary(e.op, a.offset, _wide(e.b), dtypes.i64),
                      e.dtype)
    if e.op == "+" and b is not None and invariant(e.a, changing):
        return Affine(b.var, b.coef, n.Binary("+", b.offset, _wide(e.a), dtypes.i64), e.dtype)
    return None


def affine_accesses(task: n.Task) -> dict[AccessKey, list[Affine]]:
    """Every access of the task's body whose indices are all affine in its variables."""
    changing = assigned_names(task.body) | set(task.vars)
    assigned = assigned_names(task.body)
    variables = {v: k for k, v in enumerate(task.vars) if v not in assigned}
    found: dict[AccessKey, list[Affine]] = {}
    keys: list[AccessKey] = [(e.ref, e.indices) for e in all_exprs(task.body)
                             if isinstance(e, (n.Load, n.Atomic))]
    keys += [(s.ref, s.indices) for s in walk_stmts(task.body) if isinstance(s, n.Store)]
    for ref, indices in keys:
        axes = [affine(i, variables, changing) for i in indices]
        if indices and all(a is not None for a in axes):
            found[(ref, indices)] = axes  # type: ignore[assignment]
    return found


def box_inside(b: ir.IRBuilder, accesses: dict[AccessKey, list[Affine]],
               begins: list[ir.Value], exts: list[ir.Value],
               extents_of: Callable[[n.Ref], list[ir.Value]],
               value_of: Callable[[n.Expr], ir.Value]) -> ir.Value:
    """True when every listed access stays in bounds over the whole (non-empty) box.
    `value_of(expr)` evaluates an invariant offset as an i64 at the task's entry."""
    ok: ir.Value = ir.Constant(I1, 1)
    one = ir.Constant(I64, 1)
    for (ref, _), axes in accesses.items():
        for ax, extent in zip(axes, extents_of(ref)):
            coef, off = ir.Constant(I64, ax.coef), value_of(ax.offset)
            first_var = begins[ax.var]
            last_var = b.sub(b.add(begins[ax.var], exts[ax.var]), one)
            first = b.add(b.mul(first_var, coef), off)
            last = b.add(b.mul(last_var, coef), off)
            low = b.select(b.icmp_signed("<", first, last), first, last)
            high = b.select(b.icmp_signed("<", first, last), last, first)
            top = ir.Constant(I64, dtypes.int_range(ax.dtype)[1] if ax.dtype.bits < 64
                              else (1 << 62))
            inside = b.and_(b.icmp_signed(">=", low, ir.Constant(I64, 0)),
                            b.and_(b.icmp_signed("<", high, extent),
                                   b.icmp_signed("<=", high, top)))
            ok = b.and_(ok, inside)
    return ok
