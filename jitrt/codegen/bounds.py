"""Loop versioning of bounds checks: one test per task instead of one per access.

Stage: codegen (parallel tasks). An access whose every index is a task variable plus a
constant (`a[i]`, `b[i + 1, j - 1]`) stays inside its array for the whole box exactly when
its first and last points do, which the task can test once, before its loop. `affine_accesses`
finds those accesses (the variable must not be reassigned in the body); `box_inside` builds
the test from the box (begins, extents) and the arrays' extents. The task then runs one of
two copies of its loop: without those accesses' checks when the test holds (the common case:
nothing in the loop body blocks vectorization any more), with every check otherwise, so an
out-of-bounds access is still skipped and reported with its index. Accesses whose indices are
anything else (data, other locals, products) keep their check in both copies.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import nodes as n
from ..passes.offload import assigned_names
from ..passes.walk import all_exprs, walk_stmts
from .emit_expr import I1, I64

AccessKey = tuple[n.Ref, tuple[n.Expr, ...]]
Axis = tuple[int, int]          # (task variable, constant offset)


def affine_index(e: n.Expr, variables: dict[str, int]) -> Axis | None:
    """(variable, offset) when `e` is a task variable plus or minus a constant."""
    if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
        return affine_index(e.x, variables)
    if isinstance(e, n.Local) and e.name in variables:
        return variables[e.name], 0
    if isinstance(e, n.Binary) and e.op in ("+", "-"):
        left = affine_index(e.a, variables)
        if left is not None and isinstance(e.b, n.Const) and isinstance(e.b.value, int):
            return left[0], left[1] + (e.b.value if e.op == "+" else -e.b.value)
        right = affine_index(e.b, variables)
        if e.op == "+" and right is not None and isinstance(e.a, n.Const) and \
                isinstance(e.a.value, int):
            return right[0], right[1] + e.a.value
    return None


def affine_accesses(task: n.Task) -> dict[AccessKey, list[Axis]]:
    """Every access of the task's body whose indices are all affine in its variables."""
    assigned = assigned_names(task.body)
    variables = {v: k for k, v in enumerate(task.vars) if v not in assigned}
    found: dict[AccessKey, list[Axis]] = {}
    keys: list[AccessKey] = [(e.ref, e.indices) for e in all_exprs(task.body)
                             if isinstance(e, (n.Load, n.Atomic))]
    keys += [(s.ref, s.indices) for s in walk_stmts(task.body) if isinstance(s, n.Store)]
    for ref, indices in keys:
        axes = [affine_index(i, variables) for i in indices]
        if indices and all(a is not None for a in axes):
            found[(ref, indices)] = axes  # type: ignore[assignment]
    return found


def box_inside(b: ir.IRBuilder, accesses: dict[AccessKey, list[Axis]],
               begins: list[ir.Value], exts: list[ir.Value], extents_of) -> ir.Value:
    """True when every listed access stays in bounds over the whole (non-empty) box."""
    ok: ir.Value = ir.Constant(I1, 1)
    one = ir.Constant(I64, 1)
    for (ref, _), axes in accesses.items():
        extents = extents_of(ref)
        for (var, offset), extent in zip(axes, extents):
            first = b.add(begins[var], ir.Constant(I64, offset))
            last = b.add(b.sub(b.add(begins[var], exts[var]), one), ir.Constant(I64, offset))
            inside = b.and_(b.icmp_signed(">=", first, ir.Constant(I64, 0)),
                            b.icmp_signed("<", last, extent))
            ok = b.and_(ok, inside)
    return ok
