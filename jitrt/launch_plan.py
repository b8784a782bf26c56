"""The launch plan: everything fixed about the launches of one (kernel, specialization).

Stage: shared by the runtime and the backends (imports the IR and dtypes only). A `LaunchPlan`
is built once per launch handle by `runtime/plan_builder.py` from the compiled kernel, the
device and the template values, and then only read: by the generated Python launcher
(`runtime/launch_source.py`, `runtime/launcher.py`), the bound launcher (`runtime/bound.py`),
the native launch table (`runtime/native_launch.py`) and a GPU's task loop (`run_tasks(plan,
ctx)`). It holds each parameter's packing (kind, dtype, context slot, shape facts, range,
template value, default), the write set whose generations a launch bumps, the tasks with
their boxes and block sizes, the adstack sizing a launch does, and how the return value is
read. What changes from launch to launch (the last arrays packed, the context buffers, the
counters) stays on the handle and its contexts.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .dtypes import DataType
from .frozen import frozen
from .ir import nodes as n

NO_DEFAULT: Any = None     # `ParamPlan.has_default` False: `default` is not read


def large_shape(shape: "Iterable[int]") -> bool:
    """Whether an array of this shape has 2**31 elements or more: a specialization for one
    addresses it in 64 bits (`ir.nodes.Param.large`); one for smaller arrays may use 32 (GPUs'
    `narrow_offsets`), so packing refuses such an array there (`ParamPlan.small`) and the
    slow path specializes again."""
    return math.prod(shape) >= 1 << 31


@frozen
class ParamPlan:
    """How one parameter is packed into the launch context."""
    index: int
    name: str
    kind: str                    # "scalar" | "vector" | "ndarray" | "template"
    dtype: DataType | None       # None for a template
    slot: int                    # its first context slot (-1: a template has none)
    ndim: int = 0
    element_shape: tuple[int, ...] = ()
    element_dim: int = 0         # `ir.nodes.Param.element_dim`: where an array's element is from
    uses_grad: bool = False      # the kernel reads or writes the argument's .grad
    packs_grad: bool = False     # its .grad pointer is packed (used, or annotated needs_grad)
    written: bool = False        # the kernel may write the array's data
    small: bool = False          # an ndarray specialized for fewer than 2**31 elements
    int_range: tuple[int, int] | None = None   # an integer's (or int vector's) allowed range
    template: Any = None         # a template: the value compiled for
    has_default: bool = False
    default: Any = NO_DEFAULT    # the signature's default, as a launcher takes it


@frozen
class TaskPlan:
    """One task of the launch, in order: what a device that launches task by task runs."""
    index: int
    kind: str                    # "parallel" | "serial"
    symbol: str                  # the function launched ("" where the tasks are fused)
    ndim: int
    cost: int                    # estimated work of one iteration
    stacks: int                  # adstacks (sized from the plan's sizing)
    block_dim: int               # threads per block asked for (0: the device's default)
    # the box, per dimension (begin, end) as IR expressions over the context; () where the
    # device fuses the tasks into one entry (the CPU: the box is never read on the host)
    box: tuple[tuple[n.Expr, n.Expr], ...] = ()


@frozen
class ReturnPlan:
    """Where the launch's result is read from."""
    kind: str = "none"           # "none" | "float" | "signed" | "unsigned" | "field" | "tuple"
    bits: int = 0                # an unsigned integer's width (its mask)
    # "field": (0, field index); "tuple": (position, field index, whether a 0-d field)
    fields: tuple[tuple[int, int, bool], ...] = ()


@frozen
class LaunchPlan:
    name: str
    nargs: int                   # the arguments a caller passes (hidden dual ones excluded)
    params: tuple[ParamPlan, ...]
    field_bumps: tuple[tuple[int, bool], ...]   # (field table index, its gradient?) written
    array_bumps: tuple[tuple[int, bool], ...]   # (parameter, its gradient?) written
    tasks: tuple[TaskPlan, ...]
    returns: ReturnPlan
    faults_in_context: bool      # the error slot is read after each launch (else at a sync)
    adstacks: bool               # the kernel has adstacks: an overflow is checked
    # per-launch adstack sizing: the snapshot expression and the fields it reads (None: no
    # per-launch sizing, the capacities are fixed)
    sizing_snapshot: str | None = None
    sizing_fields: tuple[int, ...] = ()

    def of_kind(self, *kinds: str) -> tuple[ParamPlan, ...]:
        return tuple(p for p in self.params if p.kind in kinds)

    @property
    def written(self) -> frozenset[int]:
        """The ndarray parameters whose data the kernel may write."""
        return frozenset(p.index for p in self.params if p.written)
