"""The pipeline's output records: what the passes hand to codegen and the offline cache stores.

Stage: passes (output). `LoweredKernel` is the result of `pipeline.run_pipeline`: the tasked
kernel, its write set, the types of its locals and, for grad kernels, a `StackSizing` (capacity
`SizeExpr`) per adstack. They live apart from the passes so that a process loading kernels
from the offline cache, which unpickles these records, imports no pass.
"""
from __future__ import annotations

from dataclasses import field

from ..dtypes import DataType
from ..frozen import frozen
from ..ir import nodes as n
from ..ir import sizeexpr as se
from .analysis import WriteSet


@frozen
class StackSizing:
    task: int                      # index of the grad task owning the stack
    stack: n.AdStack
    capacity: se.SizeExpr | None   # None: outside the grammar (allowed with ad_stack_size=N)


@frozen
class LoweredKernel:
    tasked: n.TaskedKernel
    writes: WriteSet
    local_types: dict[str, DataType]
    stacks: tuple[StackSizing, ...] = field(default=())
    bound_reads: WriteSet = field(default=WriteSet((), ()))   # data that decides trip counts
