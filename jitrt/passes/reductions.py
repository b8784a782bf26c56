"""Reduction analysis: `+=` into one fixed element from a parallel loop.

Stage: pass (run by `pipeline.annotate_tasks` and `pipeline.codegen_facts`; codegen reads
`Task.reductions` and `ir.facts.TaskFacts`). `loss[None] += v`
in a parallel loop is an atomic add on one address from every thread, which serialises on that
cache line. When the element's indices are constants and the task never reads or stores that data
otherwise, the task keeps a private partial sum per chunk and adds it once at the end of the chunk
(as Taichi's reduction optimisation does). Floating-point sums are then associated differently, as
with any parallel reduction.

`private_refs(task)`: the fields whose every access in a parallel task uses the task's own loop
variables at fixed index positions (`x.grad[f, p] += ...` in a loop over `p`, as adjoints
emit). No two iterations touch the same element of such a field, so codegen makes their
atomics plain read-modify-writes (Taichi's atomic demotion): no `lock cmpxchg` loop on x86, no
device atomic on GPUs, and loops that vectorize. `private_arrays(task)`: the ndarrays with the
same property (`x[i] += 1`); two ndarray arguments may be views of one buffer, so codegen
demotes their atomics only in launches where the array shares no memory with another array
the task writes (a test at the task's entry)."""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.facts import ReductionKey, reduction_key
from ..ir.walk import all_exprs, walk_stmts


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


def private_refs(task: n.Task) -> frozenset[n.Ref]:
    """Fields whose elements only one iteration of the parallel `task` touches (see the
    module docstring)."""
    return frozenset(r for r in _index_private(task) if isinstance(r, n.FieldRef))


def private_arrays(task: n.Task) -> frozenset[n.Ref]:
    """Ndarrays whose elements only one iteration of the parallel `task` touches, as long
    as they share no memory with another array the task writes (see the module docstring)."""
    return frozenset(r for r in _index_private(task) if isinstance(r, n.ArrayRef))


def _index_private(task: n.Task) -> set[n.Ref]:
    """Refs with atomics in the parallel `task` whose every load, store and atomic holds, for
    each loop variable, exactly that variable at a fixed index position; none when a loop
    variable is assigned in the body."""
    if n.has_call(task.body):      # a real function's accesses are not seen here
        return set()
    if task.kind != "parallel" or not task.vars:
        return set()
    if any(isinstance(st, n.Assign) and st.name in task.vars for st in walk_stmts(task.body)):
        return set()
    accesses: dict[n.Ref, list[tuple[n.Expr, ...]]] = {}
    atomics: set[n.Ref] = set()
    for st in walk_stmts(task.body):
        if isinstance(st, n.Store):
            accesses.setdefault(st.ref, []).append(st.indices)
    for e in all_exprs(task.body):
        if isinstance(e, (n.Load, n.Atomic)):
            accesses.setdefault(e.ref, []).append(e.indices)
            if isinstance(e, n.Atomic):
                atomics.add(e.ref)

    def var_positions(indices: tuple[n.Expr, ...]) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {v: set() for v in task.vars}
        for k, i in enumerate(indices):
            if isinstance(i, n.Local) and i.name in found:
                found[i.name].add(k)
        return found

    private = set()
    for ref in atomics:
        common = None
        for indices in accesses[ref]:
            found = var_positions(indices)
            common = found if common is None else {v: common[v] & found[v] for v in common}
        if common is not None and all(common.values()):
            private.add(ref)
    return private
