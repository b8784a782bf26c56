"""Analyses: the write set of a kernel (which fields and ndarray arguments it may modify), the
data a task only reads, and the data its loop bounds read.

Stage: pass. Input `TaskedKernel`; output `WriteSet`s: the write set, used by the launcher to
bump the generation counters of exactly the data a launch can change, and the bound reads,
used by `jr.ad.Tape` to refuse recordings whose trip counts would change before the reverse
pass.
"""
from __future__ import annotations

from ..frozen import frozen
from ..ir import nodes as n
from ..ir.walk import all_exprs, walk_expr, walk_stmts, written_refs


@frozen
class WriteSet:
    fields: tuple[tuple[int, bool], ...]   # (field slot, grad)
    arrays: tuple[tuple[int, bool], ...]   # (param index, grad)


def write_set(kernel: n.TaskedKernel) -> WriteSet:
    refs: set[n.Ref] = set()
    for body in [t.body for t in kernel.tasks] + [f.body for f in kernel.funcs]:
        refs |= written_refs(body)
    fields = sorted({(r.slot, r.grad) for r in refs if isinstance(r, n.FieldRef)})
    arrays = sorted({(r.arg, r.grad) for r in refs if isinstance(r, n.ArrayRef)})
    return WriteSet(tuple(fields), tuple(arrays))


def read_only(task: n.Task) -> frozenset[n.Ref]:
    """The refs `task` loads that nothing writes while it runs (on GPUs their loads take the
    read-only data path, `!invariant.load`). A field qualifies when the task writes neither
    it nor any ndarray (an ndarray argument may view a field's memory); an ndarray when the
    task writes no field and no ndarray (two arguments may be one array). None in a task
    that calls a real function (what it writes is not in the body)."""
    if n.has_call(task.body):
        return frozenset()
    written = written_refs(task.body) | {key[0] for key in task.reductions}
    if any(isinstance(r, n.ArrayRef) for r in written):
        return frozenset()
    fields = {(r.slot, r.grad) for r in written if isinstance(r, n.FieldRef)}
    loads = {e.ref for e in all_exprs(task.body) if isinstance(e, n.Load)}
    return frozenset(r for r in loads if ((r.slot, r.grad) not in fields
                                          if isinstance(r, n.FieldRef) else not fields))


def bound_reads(kernel: n.TaskedKernel) -> WriteSet:
    """The fields and ndarray arguments whose data decide a trip count: read by a loop bound
    (a parallel box or a serial `for`), directly or through the locals a bound is computed
    from. A Tape uses it to refuse a recording in which a later launch changes that data,
    since the reverse pass would replay other trip counts and give a wrong gradient."""
    sources: dict[str, list[n.Expr]] = {}      # local -> every expression assigned to it
    pending: list[n.Expr] = []
    for task in kernel.tasks:
        for var, begin, end in zip(task.vars, task.begins, task.ends):
            sources.setdefault(var, []).extend((begin, end))
        pending += list(task.begins) + list(task.ends)
        for s in walk_stmts(task.body):
            if isinstance(s, n.Assign):
                sources.setdefault(s.name, []).append(s.value)
            elif isinstance(s, n.For):
                sources.setdefault(s.var, []).extend((s.begin, s.end))
                pending += [s.begin, s.end]
    refs: set[tuple[str, int]] = set()
    seen_locals: set[str] = set()
    while pending:
        for e in walk_expr(pending.pop()):
            if isinstance(e, n.Load) and not e.ref.grad:
                refs.add(("field" if isinstance(e.ref, n.FieldRef) else "array",
                          e.ref.slot if isinstance(e.ref, n.FieldRef) else e.ref.arg))
            elif isinstance(e, n.Local) and e.name not in seen_locals:
                seen_locals.add(e.name)
                pending += sources.get(e.name, [])
    return WriteSet(tuple(sorted((i, False) for kind, i in refs if kind == "field")),
                    tuple(sorted((i, False) for kind, i in refs if kind == "array")))
