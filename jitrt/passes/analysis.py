"""Analyses: the write set of a kernel (which fields and ndarray arguments it may modify).

Stage: pass. Input `TaskedKernel`; output a `WriteSet`, used by the launcher to bump the
generation counters of exactly the data a launch can change.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as n
from .walk import all_exprs, walk_stmts


@dataclass(frozen=True)
class WriteSet:
    fields: tuple[tuple[int, bool], ...]   # (field slot, grad)
    arrays: tuple[tuple[int, bool], ...]   # (param index, grad)


def write_set(kernel: n.TaskedKernel) -> WriteSet:
    refs: list[n.Ref] = []
    for task in kernel.tasks:
        for s in walk_stmts(task.body):
            if isinstance(s, n.Store):
                refs.append(s.ref)
        refs += [e.ref for e in all_exprs(task.body) if isinstance(e, n.Atomic)]
    fields = sorted({(r.slot, r.grad) for r in refs if isinstance(r, n.FieldRef)})
    arrays = sorted({(r.arg, r.grad) for r in refs if isinstance(r, n.ArrayRef)})
    return WriteSet(tuple(fields), tuple(arrays))
