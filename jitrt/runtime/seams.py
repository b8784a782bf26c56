"""The types where the runtime meets the layers around it.

Stage: runtime. `KernelLike` is what the runtime needs of a `@jr.kernel` object (implemented by
`jitrt/kernel.py`, one layer up, which the runtime must not import). `Program`, `Device` and
`CompiledKernel` are the concrete classes; modules annotate with them under `TYPE_CHECKING`.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from ..dtypes import DataType
from ..frontend.source import SourceInfo
from ..ir import nodes as n


class KernelLike(Protocol):
    """A `@jr.kernel` (or its adjoint) as the launcher, compiler and Tape see it."""

    qualname: str
    name: str
    fn: Callable[..., Any]
    adjoint: bool
    params: tuple[n.Param, ...]
    defaults: dict[str, Any]      # parameter name -> its default value (`k: jr.f32 = 2.0`)
    ret: DataType | None
    handles: dict[Any, Any]       # specialization key -> LaunchHandle
    # a forward-mode kernel: the ndarray parameters whose duals follow the kernel's own
    # parameters as hidden ones (None: not forward mode)
    dual_args: tuple[int, ...] | None
    validate: bool                # the checked copy a Tape(validation=True) launches

    def source(self) -> SourceInfo: ...

    def forward_kernel(self, dual_args: tuple[int, ...]) -> "KernelLike": ...

    def validation_kernel(self) -> "KernelLike": ...
