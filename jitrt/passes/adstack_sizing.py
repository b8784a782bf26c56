"""Adstack sizing analysis: a SizeExpr per adstack, and the max-reducer specs.

Stage: pass (grad kernels). Input: the normalized body of each adjoint task (see autodiff.py),
its stacks and the kernel's earlier serial tasks. Output per task: the capacity of every stack
as a folded SizeExpr (1 for the initial entry plus the pushes on the longest path, maximised
over the task's index range) and the closed MaxOverRange sub-trees (the max-reducer specs).

Trip counts are traced through locals assigned before the loop (sequential substitution,
inlined funcs included, since their returns are plain expressions) into the grammar of
ir/sizeexpr.py. A loop whose pushes depend on a bound outside the grammar raises
`KernelCompileError` at the loop, unless `ad_stack_size` forces every capacity.
"""
from __future__ import annotations

import re
from typing import Any

from ..frozen import frozen
from ..errors import error_at
from ..ir import nodes as n
from ..ir import sizeexpr as se
from ..ir.walk import assigned_names


class NotSizable(Exception):
    pass


@frozen
class Untraceable:
    reason: str
    synthetic: bool = False   # a bound local made by `normalize`: the reason stands alone


Env = dict[str, "se.SizeExpr | Untraceable"]


def to_size(e: n.Expr, env: Env) -> se.SizeExpr:
    if isinstance(e, n.Const) and e.dtype.is_int:
        return se.Const(int(e.value))
    if isinstance(e, n.Arg) and e.dtype.is_int:
        if e.component >= 0:
            raise NotSizable(f"'{e.name}', a component of a vector parameter, is outside the "
                             "sizing grammar (pass it as a scalar parameter)")
        return se.ScalarArg(e.index, e.name)
    if isinstance(e, n.Shape):
        return se.NdarrayShape(e.ref.arg, e.ref.name, e.axis)
    if isinstance(e, n.Load) and e.dtype.is_int and not e.ref.grad:
        idx = tuple(to_size(i, env) for i in e.indices)
        if isinstance(e.ref, n.FieldRef):
            return se.FieldLoad(e.ref.slot, e.ref.name, idx)
        return se.NdarrayRead(e.ref.arg, e.ref.name, idx)
    if isinstance(e, n.Local):
        found = env.get(e.name)
        if found is None:
            raise NotSizable(f"'{short(e.name)}' is not defined before the loop")
        if isinstance(found, Untraceable):
            raise NotSizable(found.reason if found.synthetic else
                             f"'{short(e.name)}' {found.reason}")
        return found
    if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
        return to_size(e.x, env)
    if isinstance(e, n.Cast) and e.x.dtype.is_float:
        raise NotSizable("a float value converted to an integer is outside the sizing grammar")
    if isinstance(e, n.Binary) and e.dtype.is_int:
        ops = {"+": se.Add, "-": se.Sub, "*": se.Mul, "max": se.Max, "min": se.Min}
        if e.op in ops:
            make: Any = ops[e.op]
            return make(to_size(e.a, env), to_size(e.b, env))  # type: ignore[no-any-return]
        raise NotSizable(f"operator {e.op} is outside the sizing grammar (+ - * min max)")
    if isinstance(e, n.Load):
        raise NotSizable(f"'{e.ref.name}' is not an integer field or ndarray")
    raise NotSizable(f"{type(e).__name__.lower()} expressions are outside the sizing grammar")


def short(name: str) -> str:
    """A local's name as the user wrote it: no inlined func's prefix, no version suffix."""
    return VERSION.sub("", name.rsplit(".", 1)[-1].lstrip("$"))


VERSION = re.compile(r"\$i\d+$")   # `v$i2`: autodiff's version of a local (ad_recompute.py)


def trace_assign(env: Env, name: str, value: n.Expr) -> None:
    """Bind `name` to its SizeExpr, or to the reason it has none. The begin/end locals that
    `normalize` introduces keep the reason of the user's bound expression as it is, so errors
    never name them."""
    if isinstance(value, n.Select) and VERSION.search(name):   # an `if` made a select
        env[name] = Untraceable("is assigned inside a branch")
        return
    try:
        env[name] = to_size(value, env)
    except NotSizable as exc:
        if name.startswith("$"):
            env[name] = Untraceable(str(exc), synthetic=True)
        else:
            env[name] = Untraceable(
                f"is computed from something outside the sizing grammar ({exc})")


def _add(total: dict[str, se.SizeExpr], name: str, amount: se.SizeExpr) -> None:
    total[name] = se.Add(total[name], amount) if name in total else amount


def count_pushes(body: n.Body, env: Env, stacks: dict) -> dict[str, se.SizeExpr]:
    """Pushes per stack along the longest path through `body`."""
    total: dict[str, se.SizeExpr] = {}
    for s in body:
        if isinstance(s, n.Assign):
            if s.name in stacks:
                _add(total, s.name, se.Const(1))
            trace_assign(env, s.name, s.value)
        elif isinstance(s, n.If):
            c1 = count_pushes(s.body, dict(env), stacks)
            c2 = count_pushes(s.orelse, dict(env), stacks)
            for name in sorted(set(c1) | set(c2)):
                _add(total, name, se.Max(c1.get(name, se.Const(0)), c2.get(name, se.Const(0))))
            for v in assigned_names(s.body) | assigned_names(s.orelse):
                env[v] = Untraceable("is assigned inside a branch")
        elif isinstance(s, n.For):
            changed = assigned_names(s.body)
            inner: Env = dict(env)
            for v in changed:
                inner[v] = Untraceable("changes inside an enclosing loop")
            inner[s.var] = se.BoundVar(s.var)
            per_iter = count_pushes(s.body, inner, stacks)
            if per_iter:
                try:
                    begin, end = to_size(s.begin, env), to_size(s.end, env)
                except NotSizable as exc:
                    raise error_at(s.loc, "cannot size the autodiff stack of this loop: its "
                                   f"trip count is not computable before the loop: {exc}; "
                                   "bounds may use constants, kernel arguments, shapes, "
                                   "integer field/ndarray elements and locals computed from "
                                   "them, or set jr.init(ad_stack_size=N)") from None
                trip = se.Sub(end, begin)
                for name in sorted(per_iter):
                    count = per_iter[name]
                    if s.var in se.free_vars(count):
                        count = se.MaxOverRange(s.var, begin, end, count)
                    _add(total, name, se.Mul(trip, count))
            for v in changed | {s.var}:
                env[v] = Untraceable("changes inside an earlier loop")
    return total


def kernel_scope_env(serial_bodies: list[n.Body]) -> Env:
    env: Env = {}
    for body in serial_bodies:
        for s in body:
            if isinstance(s, n.Assign):
                trace_assign(env, s.name, s.value)
            else:
                for v in assigned_names((s,)):
                    env[v] = Untraceable("is assigned inside a loop or branch of serial code")
    return env


def task_capacities(task: n.Task, normalized: n.Body, stacks: dict,
                    serial_prefix: list[n.Body]) -> dict[str, se.SizeExpr]:
    """Capacity per stack: 1 + pushes, maximised over the task's index box."""
    env = kernel_scope_env(serial_prefix)
    for var in task.vars:
        env[var] = se.BoundVar(var)
    counts = count_pushes(normalized, env, stacks)
    box: list[tuple[str, se.SizeExpr | None, se.SizeExpr | str]] = []
    if task.kind == "parallel":
        outer = kernel_scope_env(serial_prefix)
        for var, b, e in zip(task.vars, task.begins, task.ends):
            try:
                box.append((var, to_size(b, outer), to_size(e, outer)))
            except NotSizable as exc:
                box.append((var, None, str(exc)))
    caps: dict[str, se.SizeExpr] = {}
    for name in stacks:
        cap: se.SizeExpr = se.Add(se.Const(1), counts.get(name, se.Const(0)))
        for var, lo, hi in reversed(box):
            if var in se.free_vars(cap):
                if lo is None or isinstance(hi, str):
                    raise error_at(task.loc, "cannot size the autodiff stack: the range of "
                                   f"this loop is not computable before it: {hi}; set "
                                   "jr.init(ad_stack_size=N)")
                cap = se.MaxOverRange(var, lo, hi, cap)
        caps[name] = se.fold(cap)
    return caps
