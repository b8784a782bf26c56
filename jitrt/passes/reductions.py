"""Reduction analysis: `+=` into one fixed element from a parallel loop.

Stage: pass (run by `pipeline.annotate_tasks`; codegen reads `Task.reductions`). `loss[None] += v`
in a parallel loop is an atomic add on one address from every thread, which serialises on that
cache line. When the element's indices are constants and the task never reads or stores that data
otherwise, the task keeps a private partial sum per chunk and adds it once at the end of the chunk
(as Taichi's reduction optimisation does). Floating-point sums are then associated differently, as
with any parallel reduction."""
from __future__ import annotations

from ..ir import nodes as n
from .walk import all_exprs, walk_stmts

ReductionKey = tuple[n.Ref, tuple[int, ...]]


def reduction_key(e: n.Atomic) -> ReductionKey | None:
    if e.op not in ("add", "sub") or not all(isinstance(i, n.Const) for i in e.indices):
        return None
    return (e.ref, tuple(int(i.value) for i in e.indices if isinstance(i, n.Const)))


def reducible_atomics(body: n.Body) -> list[ReductionKey]:
    """Keys of `Eval(Atomic add/sub)` statements that can accumulate privately per chunk."""
    candidates: dict[ReductionKey, bool] = {}
    for s in walk_stmts(body):
        if isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic):
            key = reduction_key(s.expr)
            if key is not None:
                candidates.setdefault(key, True)
    if not candidates:
        return []
    touched: set[n.Ref] = set()
    for s in walk_stmts(body):
        if isinstance(s, n.Store):
            touched.add(s.ref)
    evals = {id(s.expr) for s in walk_stmts(body) if isinstance(s, n.Eval)}
    for e in all_exprs(body):
        if isinstance(e, n.Load):
            touched.add(e.ref)
        elif isinstance(e, n.Atomic) and (id(e) not in evals or reduction_key(e) is None):
            touched.add(e.ref)
    return [key for key in candidates if key[0] not in touched]
