"""Reverse mode through atomics: `jr.atomic_min`/`atomic_max` reductions, and atomics whose
old value is used.

Stage: pass helpers for `autodiff.py` (grad kernels only). Input: the primal `TaskedKernel`
and which refs have a gradient. Output: refusals (`NotDifferentiableError` at the line) and,
for every float field with a gradient that a task min/max-reduces into, two hidden scratch
fields and two replay tasks around that task's adjoint.

The gradient of a min/max reduction (the rule, docs/adstack.md): the final value m of the
element (what the primal launch left there) passes its adjoint to the contributions equal to
m, **split evenly among them** (k ties get g / k each, the central difference of a max of k
equal values); when some contribution equals m, the element's previous value lost and its
adjoint is used up (reset to 0, as for a store); when none does, the previous value is the
result and keeps its adjoint. The grad kernel, per primal task with such reductions:
1. a count task (the primal body replayed without writes): each contribution equal to m adds
   1 to the element's count; the first one moves the element's adjoint into a scratch slot
   and zeroes it;
2. the adjoint task: at each reduction, a contribution equal to m gets scratch / count;
3. a clear task (replayed again): the matching contributions zero count and scratch.
A contribution is recomputed in the grad kernel by the same code that computed it, so it
matches m bit for bit. Destinations that are ndarrays (whose shape is known only at launch,
where the scratch would live) are refused.

The old value an atomic returns (`old = jr.atomic_add(a[0], v)`) depends on the order the
threads ran in, which the reverse sweep cannot recover; in a differentiated kernel a float
atomic whose value is used and carries a derivative (its target has a gradient, or its value
depends on data with one) is refused. Integer atomics (tickets, counters) are not affected.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .. import dtypes
from ..errors import not_differentiable_at
from ..ir import nodes as n
from ..ir.walk import exprs_of, map_expr, sub_exprs, walk_expr, walk_stmts

HasGrad = Callable[[n.Ref], bool]
Scratch = dict[n.Ref, tuple[n.FieldRef, n.FieldRef]]   # destination -> (count, adjoint)


def is_extremum(e: n.Expr, has_grad: HasGrad) -> bool:
    """A float min/max reduction into data with a gradient (a statement `jr.atomic_max(..)`)."""
    return isinstance(e, n.Atomic) and e.op in ("min", "max") and e.ref.dtype.is_float \
        and has_grad(e.ref) and not e.ref.grad


def extrema(body: n.Body, has_grad: HasGrad) -> list[n.Atomic]:
    return [s.expr for s in walk_stmts(body) if isinstance(s, n.Eval)
            and isinstance(s.expr, n.Atomic) and is_extremum(s.expr, has_grad)]


def scratch_fields(fields: tuple[n.FieldRef, ...], kernel: n.TaskedKernel, has_grad: HasGrad
                   ) -> tuple[tuple[n.FieldRef, ...], Scratch]:
    """The field table `fields` with a count (i32) and an adjoint scratch field appended per
    destination `kernel` min/max-reduces into; refuses ndarray destinations."""
    scratch: Scratch = {}
    kernel_name = kernel.name
    for task in kernel.tasks:
        for a in extrema(task.body, has_grad):
            if a.ref in scratch:
                continue
            if not isinstance(a.ref, n.FieldRef):
                raise not_differentiable_at(
                    a.loc, kernel_name, f"jr.atomic_{a.op} into the ndarray '{a.ref.name}' "
                    "cannot be differentiated in this version (its gradient needs a count "
                    "per element, kept in a field of the destination's shape); reduce into a "
                    "field, or differentiate with the result in a local")
            count = n.FieldRef(len(fields), f"$extremum.{a.ref.name}.count", dtypes.i32,
                               a.ref.shape)
            adj = n.FieldRef(len(fields) + 1, f"$extremum.{a.ref.name}.adj", a.ref.dtype,
                             a.ref.shape)
            fields = fields + (count, adj)
            scratch[a.ref] = (count, adj)
    return fields, scratch


def _strip(e: n.Expr) -> n.Expr:
    return map_expr(e, lambda x: n.Load(x.ref, x.indices, x.dtype, x.loc)
                    if isinstance(x, n.Atomic) else x)


def replay(body: n.Body, has_grad: HasGrad,
           at_extremum: Callable[[n.Atomic, n.Loc], list[n.Stmt]]) -> n.Body:
    """`body` without its writes (stores, atomics, returns; atomics used as values read
    their target), each min/max reduction replaced by `at_extremum(atomic, loc)`."""
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, n.Eval) and is_extremum(s.expr, has_grad):
            out.extend(at_extremum(s.expr, s.loc))  # type: ignore[arg-type]
            continue
        if isinstance(s, (n.Store, n.Eval, n.Return)):
            continue
        if isinstance(s, n.If):
            s = replace(s, cond=_strip(s.cond), body=replay(s.body, has_grad, at_extremum),
                        orelse=replay(s.orelse, has_grad, at_extremum))
        elif isinstance(s, n.For):
            s = replace(s, begin=_strip(s.begin), end=_strip(s.end),
                        body=replay(s.body, has_grad, at_extremum))
        elif isinstance(s, n.While):
            s = replace(s, cond=_strip(s.cond), body=replay(s.body, has_grad, at_extremum))
        elif isinstance(s, n.Assign):
            s = replace(s, value=_strip(s.value))
        out.append(s)
    return tuple(out)


def matches(a: n.Atomic, value: n.Expr, indices: tuple[n.Expr, ...]) -> n.Expr:
    """Whether the contribution `value` equals the element's final value."""
    final = n.Load(a.ref, indices, a.ref.dtype, a.loc)
    if value.dtype != a.ref.dtype:
        value = n.Cast(value, a.ref.dtype, a.loc)
    return n.Binary("==", value, final, dtypes.i32, a.loc)


def count_statements(a: n.Atomic, loc: n.Loc, scratch: Scratch,
                     fresh: Callable[[str, dtypes.DataType], str]) -> list[n.Stmt]:
    """Count task: a matching contribution counts itself; the first moves the adjoint."""
    count, adj = scratch[a.ref]
    idx = tuple(_strip(i) for i in a.indices)
    c = fresh("ties", dtypes.i32)
    one = n.Const(1, dtypes.i32, loc)
    first = (n.Store(adj, idx, n.Load(a.ref.adjoint(), idx, a.ref.dtype, loc), loc),
             n.Store(a.ref.adjoint(), idx, n.Const(0.0, a.ref.dtype, loc), loc))
    body = (n.Assign(c, n.Atomic("add", count, idx, one, dtypes.i32, loc), loc),
            n.If(n.Binary("==", n.Local(c, dtypes.i32, loc), n.Const(0, dtypes.i32, loc),
                          dtypes.i32, loc), first, (), loc))
    return [n.If(matches(a, _strip(a.value), idx), body, (), loc)]


def clear_statements(a: n.Atomic, loc: n.Loc, scratch: Scratch) -> list[n.Stmt]:
    """Clear task: matching contributions zero the scratch for the next launch."""
    count, adj = scratch[a.ref]
    idx = tuple(_strip(i) for i in a.indices)
    zero = (n.Store(count, idx, n.Const(0, dtypes.i32, loc), loc),
            n.Store(adj, idx, n.Const(0.0, adj.dtype, loc), loc))
    return [n.If(matches(a, _strip(a.value), idx), zero, (), loc)]


def share(a: n.Atomic, value: n.Expr, indices: tuple[n.Expr, ...], scratch: Scratch
          ) -> tuple[n.Expr, n.Expr]:
    """(condition, adjoint) of one contribution in the adjoint task: scratch / count (a count
    of 0, which the same code cannot give, would leave the scratch's 0, never 0 / 0)."""
    count, adj = scratch[a.ref]
    loc, dt = a.loc, a.ref.dtype
    ties = n.Binary("max", n.Load(count, indices, dtypes.i32, loc), n.Const(1, dtypes.i32, loc),
                    dtypes.i32, loc)
    g: n.Expr = n.Binary("/", n.Load(adj, indices, dt, loc), n.Cast(ties, dt, loc), dt, loc)
    if value.dtype != dt:
        g = n.Cast(g, value.dtype, loc)
    return matches(a, value, indices), g


# ---- atomics used as values -----------------------------------------------------------------

def _carries(e: n.Expr, active: set[str], has_grad: HasGrad) -> bool:
    """Whether float expression `e` may carry a derivative (reads data with a gradient or an
    active local), not looking through stop_grad."""
    if isinstance(e, n.Unary) and e.op == n.STOP_GRAD:
        return False
    if isinstance(e, n.Local):
        return e.name in active
    if isinstance(e, (n.Load, n.Atomic)) and e.dtype.is_float and has_grad(e.ref) \
            and not e.ref.grad:
        return True
    return any(_carries(x, active, has_grad) for x in sub_exprs(e))


def refuse_atomic_values(kernel: n.TaskedKernel, has_grad: HasGrad) -> None:
    """A float atomic whose old value is used and carries a derivative: NotDifferentiable."""
    active: set[str] = set()
    assigns = [s for t in kernel.tasks for s in walk_stmts(t.body) if isinstance(s, n.Assign)
               and s.value.dtype.is_float]
    grown = True
    while grown:
        grown = False
        for s in assigns:
            if s.name not in active and _carries(s.value, active, has_grad):
                active.add(s.name)
                grown = True
    for task in kernel.tasks:
        for stmt in walk_stmts(task.body):
            top = stmt.expr if isinstance(stmt, n.Eval) else None
            for root in exprs_of(stmt):
                for x in walk_expr(root):
                    if isinstance(x, n.Atomic) and x is not top and x.dtype.is_float and (
                            (has_grad(x.ref) and not x.ref.grad)
                            or _carries(x.value, active, has_grad)):
                        raise not_differentiable_at(
                            x.loc, kernel.name, f"the value jr.atomic_{x.op} returns (the "
                            f"old content of '{x.ref.name}') is used, and its derivative "
                            "depends on the order the threads ran in, which the reverse pass "
                            "cannot recover; use the atomic as a statement, or read the "
                            "element in a later kernel")
