"""The types where the runtime meets the layers around it.

Stage: runtime. `KernelLike` is what the runtime needs of a `@jr.kernel` object (implemented by
`jitrt/kernel.py`, one layer up, which the runtime must not import). `ProgramLike` is what the
compiler and the adstack sizing read of a `Program` (`program.py` imports them, so they must
not name it, not even for a type checker). `Device` and `CompiledKernel` are the concrete
classes; modules annotate with them under `TYPE_CHECKING`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..dtypes import DataType
from ..frontend.source import SourceInfo
from ..ir import nodes as n

if TYPE_CHECKING:
    import weakref

    from ..backends.base import Device


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


class ProgramLike(Protocol):
    """A `Program` (`program.py`) as the compiler and the adstack sizing service see it."""

    config: Any                   # `config.Config`
    cache_store: Any              # the offline cache's store, or None
    device: "Device"
    registry: Any                 # `registry.Registry`: adstack task ids
    heap: Any                     # the adstack heap
    spec_cache: dict[Any, tuple[tuple[Any, ...], int]]
    sizing_states: "weakref.WeakSet[Any]"
    current_results: Any

    def count(self, name: str, amount: int = 1) -> None: ...
