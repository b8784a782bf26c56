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
    """What a fault names of its kernel (`runtime/artifact.CompiledKernel`)."""

    @property
    def name(self) -> str: ...
    @property
    def sites(self) -> Sequence["AccessSite"]: ...


def assert_message(site: "AccessSite", words: tuple[int, int]) -> str:
    """An assertion's message with its run-time values (raw 64-bit words of the record's
    axis and index slots, at most 2) put in its NULs, each by its printf spec or as Python
    prints it."""
    if not site.values:
        return str(site.name)
    import numpy as np
    pieces = site.name.split("\0")
    out = pieces[0]
    for (dtype, spec), word, piece in zip(site.values, words, pieces[1:]):
        raw = np.array([word], np.int64)
        if dtype.startswith("f"):
            wide = float(raw.view(np.float64)[0])
            value: object = np.float32(wide) if dtype == "f32" else wide
            text = ("%" + spec) % wide if spec else repr(wide) if dtype == "f64" else str(value)
        else:
            number = int(raw.view(np.uint64)[0]) if dtype.startswith("u") else int(raw[0])
            text = ("%" + spec) % number if spec else str(number)
        out += text + piece
    return out


def raise_fault(buf: "ctypes.Array[ctypes.c_int64]", compiled: FaultingKernel,
                thread_ended: bool = False) -> None:
    """Raise what the error slot reports (and clear it): an interrupt or a bad index.
    `thread_ended`: the failing thread stopped there (`TargetTraits.fault_ends_thread`)."""
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
            f"kernel {compiled.name}: assertion failed at {site.loc}: "
            f"{assert_message(site, (axis, index))}"
            + ("\n" + caret_text(line, site.loc.col) if line else ""))
    if site.offset:       # an offset field: the user's index, not the storage's
        index += site.offset[axis]
        where = f" (its indices on axis {axis} start at {site.offset[axis]})"
    else:
        where = ""
    raise KernelBoundsError(
        f"kernel {compiled.name}: Out of bound access: index {index} out of bounds on axis "
        f"{axis} of '{site.name}' "
        f"({site.kind}){where} at {site.loc}; the access was skipped"
        + (" and the thread that made it stopped there" if thread_ended else "")
        + ("\n" + caret_text(line, site.loc.col) if line else ""))
