"""The pipeline's output records: what the passes hand to codegen and the offline cache stores.

Stage: passes (output). `LoweredKernel` is the result of `pipeline.run_pipeline`: the tasked
kernel, its write set, the types of its locals and, for grad kernels, a `StackSizing` (capacity
`SizeExpr`) per adstack; `local_capacity` says which stacks a GPU keeps in local memory.
They live apart from the passes so that a process loading kernels from the offline cache,
which unpickles these records, imports no pass.
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


# a GPU adstack whose capacity is known when compiling and whose values take at most this many
# bytes per thread lives in each thread's local memory instead of the adstack heap
LOCAL_STACK_BYTES = 256


def local_capacity(s: StackSizing, forced: int) -> int | None:
    """The capacity of `s` where a GPU keeps its entries in per-thread local memory: known
    when compiling (`forced`, the `ad_stack_size` option, else a constant `SizeExpr`) and at
    most `LOCAL_STACK_BYTES` of values; None: the stack lives in the adstack heap. Codegen
    (`codegen/emit_adstack.py`) and the sizing service's heap layout (`runtime/adstack.py`)
    both follow it."""
    if forced > 0:
        cap = forced
    elif isinstance(s.capacity, se.Const):
        cap = max(s.capacity.value, 1)     # the sizing service's floor, as at launch
    else:
        return None
    return cap if cap * s.stack.dtype.nbytes <= LOCAL_STACK_BYTES else None


@frozen
class LoweredKernel:
    tasked: n.TaskedKernel
    writes: WriteSet
    local_types: dict[str, DataType]
    stacks: tuple[StackSizing, ...] = field(default=())
    bound_reads: WriteSet = field(default=WriteSet((), ()))   # data that decides trip counts
