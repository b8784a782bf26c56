"""A kernel's fault record, raised as the exception a user sees.

Stage: shared by the runtime and the backends (below both: the CPU launch path reads the
record from the launch context right after a launch, a GPU device from its status block at the
next synchronisation; both raise through `raise_fault`). A record is the context's error
slots (`codegen/abi.py`): the access site (1-based; `ERROR_INTERRUPTED` for Ctrl-C), the axis
and the index. Raises `KeyboardInterrupt`, `KernelAssertionError` or `KernelBoundsError`
naming the kernel, the array and the index, with the user's source line and a caret. Caches
nothing.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Protocol, Sequence

from .codegen import abi
from .errors import KernelAssertionError, KernelBoundsError, caret_text, source_line

if TYPE_CHECKING:
    from .codegen.abi import AccessSite


class FaultingKernel(Protocol):
    """What a fault names of its kernel (`runtime/compiler.CompiledKernel`)."""

    @property
    def name(self) -> str: ...
    @property
    def sites(self) -> Sequence["AccessSite"]: ...


def raise_fault(buf: "ctypes.Array[ctypes.c_int64]", compiled: FaultingKernel) -> None:
    """Raise what the error slot reports (and clear it): an interrupt or a bad index."""
    if buf[abi.SLOT_ERROR] == abi.ERROR_INTERRUPTED:
        buf[abi.SLOT_ERROR] = 0
        raise KeyboardInterrupt(f"kernel {compiled.name} was interrupted and stopped early; "
                                "the data it writes may be partly updated")
    site_id, axis, index = buf[abi.SLOT_ERROR] - 1, buf[abi.SLOT_ERROR_AXIS], \
        buf[abi.SLOT_ERROR_INDEX]
    buf[abi.SLOT_ERROR] = buf[abi.SLOT_ERROR_AXIS] = buf[abi.SLOT_ERROR_INDEX] = 0
    site = compiled.sites[site_id]
    line = source_line(site.loc)
    if site.kind == "assert":
        raise KernelAssertionError(
            f"kernel {compiled.name}: assertion failed at {site.loc}: {site.name}"
            + ("\n" + caret_text(line, site.loc.col) if line else ""))
    if site.offset:       # an offset field: the user's index, not the storage's
        index += site.offset[axis]
        where = f" (its indices on axis {axis} start at {site.offset[axis]})"
    else:
        where = ""
    raise KernelBoundsError(
        f"kernel {compiled.name}: index {index} out of bounds on axis {axis} of '{site.name}' "
        f"({site.kind}){where} at {site.loc}; the access was skipped"
        + ("\n" + caret_text(line, site.loc.col) if line else ""))
