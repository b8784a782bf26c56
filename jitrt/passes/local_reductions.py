"""Reductions into kernel-scope locals: `s = 0.0; for i in x: s += x[i]`.

Stage: pass (run by `offload` on each outermost loop; `reduction_adjoints` by the pipeline for
grad kernels). A kernel-scope local (assigned before the loop) that the loop updates with
`s += v`, `s -= v`, `jr.atomic_add/sub/min/max(s, v)` or, on integers, `&=`, `|=`, `^=` and
`jr.atomic_and/or/xor` (the frontend tags them:
`n.Assign.reduce`) becomes, for that loop, a hidden 0-d field appended to the kernel's field
table (`$reduce.<name>`, private storage per compiled kernel): the serial code before the loop
stores `s` into it, the loop's updates become atomics on it (so `reductions.py` gives `+=` a
partial sum per chunk and one atomic per chunk), and the serial code after the loop loads it
back into `s`. Taichi does the same through a global temporary.

A loop with any other assignment of such a local (`s = s + v`: a data race in Taichi), mixing
`+=`/`-=` with min or max, or another read of it in the loop (its value there would depend on
the order threads run in) is not reduced: `offload` runs it serially, in order, and logs the
reason this module gives.

Gradients (`reduction_adjoints`): the grad kernel first replays the reductions (the primal
tasks up to the last reducing loop, without their other writes: the buffers are private to each
compiled kernel) so that code after a loop sees the reduced value; the gradient of each buffer
lives in a hidden field `$reduce.<name>.adj`, zeroed by the replay.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..errors import error_at
from ..ir import nodes as n
from ..ir.walk import exprs_of, map_expr, map_stmt, walk_expr, walk_stmts

REDUCE_OPS = {"add": "+", "sub": "-", "min": "min", "max": "max", "and": "&", "or": "|",
              "xor": "^"}
BUFFER_PREFIX = "$reduce."


def reduction_operand(name: str, value: n.Expr, reduce: str) -> n.Expr | None:
    """`v` when `value` is `name <op> v` for the reduction `reduce` (casts allowed around the
    operation and the local: `s += x` of an f32 `s` and an f64 `x`), else None."""
    op = REDUCE_OPS.get(reduce)
    e = value.x if isinstance(value, n.Cast) else value
    if op is None or not isinstance(e, n.Binary) or e.op != op:
        return None
    a = e.a.x if isinstance(e.a, n.Cast) else e.a
    if not isinstance(a, n.Local) or a.name != name or a.dtype != value.dtype:
        return None
    if any(isinstance(x, n.Local) and x.name == name for x in walk_expr(e.b)):
        return None
    return e.b


def shown(name: str) -> str:
    return name.split(".")[-1]


def refuse_assignment(s: n.Assign) -> Exception:
    name = shown(s.name)
    return error_at(s.loc, f"'{name}' is a kernel-scope variable assigned inside the outermost "
                    "loop otherwise than by a reduction; in parallel every thread would share "
                    f"it (a data race in Taichi). Write `{name} += v`, `{name} -= v` or "
                    f"jr.atomic_add/sub/min/max/and/or/xor({name}, v) for a parallel reduction, "
                    "or use a local of the loop body")


def loop_reductions(body: n.Body, names: set[str]) -> dict[str, str]:
    """For each kernel-scope local in `names` that the loop `body` assigns, its reduction kind
    ("add" for += and -=, "min", "max", "and", "or", "xor"); raises at the first assignment or
    read that keeps the loop from running in parallel (`offload` serializes it then)."""
    kinds: dict[str, str] = {}
    first: dict[str, n.Assign] = {}
    for s in walk_stmts(body):
        if not isinstance(s, n.Assign) or s.name not in names:
            continue
        if reduction_operand(s.name, s.value, s.reduce) is None:
            raise refuse_assignment(s)
        kind = "add" if s.reduce in ("add", "sub") else s.reduce
        if kinds.setdefault(s.name, kind) != kind:
            raise error_at(s.loc, f"'{shown(s.name)}' is reduced with {kinds[s.name]} and "
                           f"{kind} in one parallel loop (line {first[s.name].loc.line}); "
                           "the result would depend on the order threads run in: use one "
                           "kind of update per loop")
        first.setdefault(s.name, s)
    for s in walk_stmts(body):
        if isinstance(s, n.Assign) and s.name in kinds:
            operand = reduction_operand(s.name, s.value, s.reduce)
            exprs: list[n.Expr] = [operand] if operand is not None else []
        else:
            exprs = list(exprs_of(s))
        for e in exprs:
            for x in walk_expr(e):
                if isinstance(x, n.Local) and x.name in kinds:
                    where = first[x.name].loc.line
                    raise error_at(x.loc, f"'{shown(x.name)}' is reduced by this loop "
                                   f"(line {where}) and read inside it; in parallel the value "
                                   "read would depend on the order threads run in: read it "
                                   "after the loop for a parallel reduction")
    return kinds


def to_atomics(body: n.Body, buffers: dict[str, n.FieldRef]) -> n.Body:
    """`body` with every reduction of a local in `buffers` made an atomic on its buffer."""
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, n.Assign) and s.name in buffers:
            ref = buffers[s.name]
            v = reduction_operand(s.name, s.value, s.reduce)
            assert v is not None                # loop_reductions checked it
            if v.dtype != ref.dtype:
                v = n.Cast(v, ref.dtype, v.loc)
            out.append(n.Eval(n.Atomic(s.reduce, ref, (), v, ref.dtype, s.loc), s.loc))
            continue
        changes = {k: to_atomics(getattr(s, k), buffers) for k in ("body", "orelse")
                   if isinstance(getattr(s, k, None), tuple)}
        out.append(replace(s, **changes) if changes else s)
    return tuple(out)


def reduce_loop(loop: n.ParFor, kernel_scope: set[str], local_types: dict,
                first_slot: int) -> tuple[list[n.Stmt], n.ParFor, list[n.Stmt],
                                          list[n.FieldRef]]:
    """The loop with its kernel-scope reductions on hidden buffers (slots from `first_slot`):
    (statements before it, the loop, statements after it, the buffers)."""
    kinds = loop_reductions(loop.body, kernel_scope)
    buffers = {name: n.FieldRef(first_slot + k, BUFFER_PREFIX + name, local_types[name], ())
               for k, name in enumerate(sorted(kinds))}
    before: list[n.Stmt] = []
    after: list[n.Stmt] = []
    for name, ref in buffers.items():
        before.append(n.Store(ref, (), n.Local(name, ref.dtype, loop.loc), loop.loc))
        after.append(n.Assign(name, n.Load(ref, (), ref.dtype, loop.loc), loop.loc))
    return before, replace(loop, body=to_atomics(loop.body, buffers)), after, \
        list(buffers.values())


# ---- gradients --------------------------------------------------------------------------

def is_buffer(ref: n.Ref) -> bool:
    return isinstance(ref, n.FieldRef) and ref.name.startswith(BUFFER_PREFIX)


def replay_body(body: n.Body) -> n.Body:
    """`body` keeping only what recomputes locals and reduction buffers."""
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, (n.Store, n.Eval)):
            target = s.ref if isinstance(s, n.Store) else getattr(s.expr, "ref", None)
            if target is not None and is_buffer(target) and not target.grad:
                out.append(s)
            continue
        if isinstance(s, n.Return):
            continue
        if isinstance(s, n.Assign):
            s = replace(s, value=map_expr(s.value, as_load))
        changes = {k: replay_body(getattr(s, k)) for k in ("body", "orelse")
                   if isinstance(getattr(s, k, None), tuple)}
        out.append(replace(s, **changes) if changes else s)
    return tuple(out)


def as_load(x: n.Expr) -> n.Expr:
    return n.Load(x.ref, x.indices, x.dtype, x.loc) if isinstance(x, n.Atomic) else x


def reduction_adjoints(primal: n.TaskedKernel, grad: n.TaskedKernel) -> n.TaskedKernel:
    """The grad kernel of a primal with reduction buffers: the replay of the reductions first
    (with the buffers' gradients zeroed), and every buffer gradient moved to a hidden field of
    its own (compiled kernels give the fields passes add no gradient storage)."""
    buffers = [f for f in primal.fields if is_buffer(f)]
    if not buffers:
        return grad
    floats = [f for f in buffers if f.dtype.is_float]
    last = max(k for k, t in enumerate(primal.tasks) if t.kind == "parallel" and any(
        isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic) and is_buffer(s.expr.ref)
        for s in walk_stmts(t.body)))
    fields = grad.fields
    adjoint: dict[n.FieldRef, n.FieldRef] = {}
    for ref in floats:
        adjoint[ref.adjoint()] = n.FieldRef(len(fields), ref.name + ".adj", ref.dtype, ())
        fields = fields + (adjoint[ref.adjoint()],)
    zero = tuple(n.Store(g, (), n.Const(0.0, g.dtype), primal.tasks[0].loc)
                 for g in adjoint.values())
    replay = [n.Task("serial", zero)]
    for t in primal.tasks[:last + 1]:
        body = replay_body(t.body)
        if t.kind == "serial" or any(isinstance(s, n.Eval) for s in walk_stmts(body)):
            replay.append(replace(t, body=body))

    def move(x: n.Expr) -> n.Expr:
        if isinstance(x, (n.Load, n.Atomic)) and x.ref in adjoint:
            return replace(x, ref=adjoint[x.ref])  # type: ignore[arg-type]
        return x
    tasks = tuple(replace(t, body=moved(t.body, move, adjoint)) for t in grad.tasks)
    return replace(grad, fields=fields, tasks=tuple(replay) + tasks)


def moved(body: n.Body, move: Callable[[n.Expr], n.Expr],
          adjoint: dict[n.FieldRef, n.FieldRef]) -> n.Body:
    out: list[n.Stmt] = []
    for s in body:
        s = map_stmt(s, move)
        if isinstance(s, n.Store) and s.ref in adjoint:
            s = replace(s, ref=adjoint[s.ref])  # type: ignore[index]
        changes = {k: moved(getattr(s, k), move, adjoint) for k in ("body", "orelse")
                   if isinstance(getattr(s, k, None), tuple)}
        out.append(replace(s, **changes) if changes else s)
    return tuple(out)


def buffer_grads(has_grad: Callable[[n.Ref], bool]) -> Callable[[n.Ref], bool]:
    """`has_grad` where float reduction buffers have a gradient (`reduction_adjoints` gives
    it storage)."""
    return lambda r: (is_buffer(r) and r.dtype.is_float) or has_grad(r)
