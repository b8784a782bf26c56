"""Faults and adstack overflows that GPU kernels record, raised on the host.

Stage: backend (helpers of `gpu.py`). Kernels record a fault (kernel, array, index), an
adstack overflow or a return value in the device's *status block* (device memory,
`abi.STATUS_SLOTS` words). `check_status` reads it back into pinned memory at a
synchronisation (`read_status` queues the copy, `raise_status` reads it after the wait) and
raises what it holds: `KernelRuntimeError` naming kernel, array and index, or
`AdStackOverflowError` naming kernel and task, as on the CPU; the block is cleared first so
the next launch starts clean. Caches nothing.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from ..codegen import abi
from ..faults import raise_fault

if TYPE_CHECKING:
    from .gpu import GpuDevice


def check_status(device: "GpuDevice") -> None:
    """After a synchronisation: raise the fault a kernel recorded, if any (and clear it)."""
    read_status(device)
    device.driver.synchronize()
    raise_status(device)


def read_status(device: "GpuDevice") -> None:
    """Queue the copy of the status block into pinned memory (read after a synchronisation
    by `raise_status`)."""
    status = device._status_host
    device.driver.copy_d2h(ctypes.addressof(status), device.status, abi.STATUS_SLOTS * 8)


def raise_status(device: "GpuDevice") -> None:
    """Once the status block's copy (`read_status`) has run: raise what it holds."""
    driver, status = device.driver, device._status_host
    if status[abi.SLOT_OVERFLOW] and not status[abi.SLOT_ERROR]:
        context = device.launches[status[abi.STATUS_OVERFLOW_LAUNCH]].context
        context.buf[abi.SLOT_OVERFLOW] = status[abi.SLOT_OVERFLOW]
        driver.memset(device.status, abi.STATUS_SLOTS * 8)
        context.overflow()            # raises AdStackOverflowError naming kernel and task
    if not status[abi.SLOT_ERROR]:
        return
    launch_id = status[abi.SLOT_LAUNCH_ID]
    record = (ctypes.c_int64 * abi.HEADER_SLOTS)()
    for slot in (abi.SLOT_ERROR, abi.SLOT_ERROR_AXIS, abi.SLOT_ERROR_INDEX):
        record[slot] = status[slot]
    driver.memset(device.status, abi.STATUS_SLOTS * 8)
    driver.synchronize()
    raise_fault(record, device.launches[launch_id].context.compiled,
                device.codegen_target.traits.fault_ends_thread)
