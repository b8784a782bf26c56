"""Facts the passes hand codegen about each task, so that codegen runs no pass itself.

Stage: IR. `passes/pipeline.codegen_facts(kernel, lanes)` computes one `TaskFacts` per task of a
lowered kernel for a codegen target's lane count; `codegen/kernel_module.build_module` reads
them: the fields and ndarrays whose atomics no other iteration races with
(`passes/reductions.py`), a parallel task's interleaved body (`passes/interleave.py`),
which codegen uses where its own bounds proof says the body cannot fault, on GPUs the
adstacks kept in local memory (`passes/lowered.local_capacity`), and the data a task only
reads (`passes/analysis.read_only`). `reduction_key` is the
key under which a `+=` into one fixed element is accumulated per chunk (`Task.reductions`).
They are not stored with the kernel (the offline cache keeps the tasks, not these).
"""
from __future__ import annotations

from typing import Any

from ..frozen import frozen
from . import nodes as n

ReductionKey = tuple[n.Ref, tuple[int, ...]]


def reduction_key(e: n.Atomic) -> ReductionKey | None:
    """The key of a `+=`/`-=` into one element at constant indices, else None."""
    if e.op not in ("add", "sub") or not all(isinstance(i, n.Const) for i in e.indices):
        return None
    return (e.ref, tuple(int(i.value) for i in e.indices if isinstance(i, n.Const)))


@frozen
class TaskFacts:
    private_refs: frozenset[n.Ref] = frozenset()     # fields: plain read-modify-writes
    private_arrays: frozenset[n.Ref] = frozenset()   # ndarrays: plain while apart
    # (a `passes.interleave.Lanes`, the body for `lanes` consecutive indices), or None
    interleaved: Any = None
    # GPUs: (stack id, capacity) of the task's adstacks kept in per-thread local memory
    # (`passes.lowered.local_capacity`); the others live in the adstack heap
    local_stacks: tuple[tuple[int, int], ...] = ()
    # GPUs: the refs the task loads and nothing writes while it runs
    # (`passes/analysis.read_only`; serial tasks too), whose loads are `!invariant.load`
    # (PTX `ld.global.nc`)
    read_only: frozenset[n.Ref] = frozenset()

