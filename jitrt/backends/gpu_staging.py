"""Host arrays passed to a GPU launch, and whole-array uploads: staged through pinned buffers.

Stage: backend (helpers of `gpu_launch.py`). A plain numpy argument (or a host tensor wrapped
by `jr.ndarray.from_dlpack`) has no device mirror: each launch copies it host -> pinned buffer
-> device staging buffer before the kernels and, when they write it, back the same way after
them (DMA from and to the pinned buffer, never the array itself; one synchronisation). A pinned
buffer is written again only after the event of the copy that last read it. `Uploads` does the
same for `from_numpy` into an array with a device copy: the new data goes up at once through
one of two pinned buffers used in turn, so that the call never waits for the stream (an upload
from pageable memory may: the driver stages it and can synchronise). Caches: one device staging
buffer and one pinned buffer per launch context and slot (grow-only), on the launch; the two
upload buffers per device (grow-only, up to `UPLOAD_PINNED_MAX` bytes each). `ElementCopies`
moves one element read or written at Python scope (`loss[None]`, `x[i] = v`) through a pinned
ring of the device (allocated at its first use).
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gpu import GpuDevice
    from .gpu_launch import GpuLaunch

CopyOut = list[tuple[Any, int, int]]      # (host array, device ptr, pinned ptr) to copy back


def staging_buffer(launch: "GpuLaunch", slot: int, nbytes: int) -> int:
    """The device buffer that holds the host array of `slot` during a launch (grow-only)."""
    device = launch.device
    ptr, size = launch.staging.get(slot, (0, 0))
    if not ptr or size < nbytes:
        if ptr:
            device.free(ptr)
        ptr, size = device.alloc(nbytes), max(nbytes, 1)
        device.counters["allocations"] += 1
        launch.staging[slot] = (ptr, size)
    return ptr


def stage_in(launch: "GpuLaunch") -> CopyOut:
    """Copy host-memory arguments (numpy arrays, wrapped host tensors) to their staging
    buffers; returns those the kernels write, to copy out after them."""
    copy_out = []
    driver = launch.device.driver
    for slot, (_, host, written) in launch.arrays.items():
        if host is not None:
            ptr, pinned = launch.staging[slot][0], pinned_buffer(launch, slot, host.nbytes)
            ctypes.memmove(pinned[0], host.ctypes.data, host.nbytes)
            driver.copy_h2d(ptr, pinned[0], host.nbytes)      # DMA from pinned memory
            driver.event_record(pinned[2])       # the buffer is free again after this
            if written:
                copy_out.append((host, ptr, pinned[0]))
    return copy_out


def pinned_buffer(launch: "GpuLaunch", slot: int, nbytes: int) -> list[Any]:
    """[address, size, event] of the pinned host buffer that stages the host array of
    `slot` (grow-only, one per context and slot); the copy that last read it has
    finished (its event), so it may be written."""
    driver = launch.device.driver
    found = launch.pinned.get(slot)
    if found is not None:
        driver.event_synchronize(found[2])
        if found[1] >= nbytes:
            return found
        driver.free_pinned(found[0])
        driver.event_destroy(found[2])
    size = max(nbytes, 1)
    launch.pinned[slot] = [driver.alloc_pinned(size), size, driver.event_create()]
    return launch.pinned[slot]


def copy_back(device: "GpuDevice", copy_out: CopyOut) -> None:
    """After the kernels: the staged host arrays they wrote come back through their pinned
    buffers (DMA, one synchronisation), then into the arrays themselves."""
    for host, ptr, pinned in copy_out:
        device.driver.copy_d2h(pinned, ptr, host.nbytes)
    try:
        device.synchronize()        # may raise a kernel's fault: the copies are done by then
    finally:
        for host, _, pinned in copy_out:
            ctypes.memmove(host.ctypes.data, pinned, host.nbytes)


def release(launch: "GpuLaunch") -> None:
    """Free a launch context's staging and pinned buffers."""
    device = launch.device
    for ptr, _ in launch.staging.values():
        device.free(ptr)
    launch.staging.clear()
    for ptr, _, event in launch.pinned.values():
        device.driver.event_synchronize(event)
        device.driver.free_pinned(ptr)
        device.driver.event_destroy(event)
    launch.pinned.clear()


# larger uploads go straight from the array (pageable memory): the copy's own time dwarfs a
# wait for the stream, and pinned memory is not spent on them
UPLOAD_PINNED_MAX = 64 << 20


class Uploads:
    """Whole-array uploads of one device through two pinned buffers used in turn (see the
    module docstring): one memmove into the buffer, one asynchronous copy from it."""

    def __init__(self, device: "GpuDevice") -> None:
        self.device = device
        self.buffers: list[list[Any]] = []     # [address, size, event] each
        self.turn = 0

    def upload(self, dst: int, src: int, nbytes: int) -> None:
        driver = self.device.driver
        if nbytes > UPLOAD_PINNED_MAX or not nbytes:
            driver.copy_h2d(dst, src, nbytes)
            return
        if len(self.buffers) < 2:
            size = max(nbytes, 1 << 16)
            self.buffers.append([driver.alloc_pinned(size), size, driver.event_create()])
        buf = self.buffers[self.turn % len(self.buffers)]
        self.turn += 1
        driver.event_synchronize(buf[2])       # the copy that last read it has finished
        if buf[1] < nbytes:
            driver.free_pinned(buf[0])
            buf[0], buf[1] = driver.alloc_pinned(nbytes), nbytes
        ctypes.memmove(buf[0], src, nbytes)
        driver.copy_h2d(dst, buf[0], nbytes)    # DMA from pinned memory
        driver.event_record(buf[2])

    def close(self) -> None:
        driver = self.device.driver
        for ptr, _, event in self.buffers:
            driver.event_synchronize(event)
            driver.free_pinned(ptr)
            driver.event_destroy(event)
        self.buffers.clear()


# one element read or written at Python scope (`x[i]`, `loss[None]`) moves through a ring of
# pinned memory; larger parts go as whole-array uploads do
ELEMENT_RING = 1 << 16
ELEMENT_ALIGN = 16


class ElementCopies:
    """The bytes of one element (or component) of an array, to or from its device copy, through
    a pinned ring in two halves: an upload's bytes stay in their slot until the copy has run,
    and a half is written again only after the event recorded when the ring last left it (a
    wait only after thousands of writes, for copies queued that long ago). A read is a copy
    into the ring and a synchronisation, after which the bytes are the device's."""

    def __init__(self, device: "GpuDevice") -> None:
        self.device = device
        self.ring = 0                  # pinned address, allocated at the first use
        self.events: list[Any] = []    # one per half
        self.pos = 0                   # the next free byte of the ring

    def slot(self, nbytes: int) -> int:
        """Pinned memory for `nbytes` (at most half the ring) that no queued copy reads."""
        driver, half = self.device.driver, ELEMENT_RING // 2
        if not self.ring:
            self.ring = driver.alloc_pinned(ELEMENT_RING)
            self.events = [driver.event_create(), driver.event_create()]
        start = -(-self.pos // ELEMENT_ALIGN) * ELEMENT_ALIGN
        if start % half + nbytes > half:               # never across the halves
            start = (start // half + 1) * half
        start %= ELEMENT_RING
        if self.pos and start // half != (self.pos - 1) // half:
            driver.event_record(self.events[(self.pos - 1) // half])   # leaving that half
            driver.event_synchronize(self.events[start // half])       # its copies have run
        self.pos = start + nbytes
        return self.ring + start

    def up(self, dst: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` host bytes at `src` to device address `dst`, on the stream; no
        waiting (the bytes are taken now)."""
        if not nbytes:
            return
        if nbytes > ELEMENT_RING // 2:
            self.device.uploads.upload(dst, src, nbytes)
            return
        pinned = self.slot(nbytes)
        ctypes.memmove(pinned, src, nbytes)
        self.device.driver.copy_h2d(dst, pinned, nbytes)

    def down(self, dst: int, src: int, nbytes: int) -> None:
        """Copy `nbytes` device bytes at `src` to host address `dst`: one small copy, then a
        synchronisation (which raises a fault a kernel recorded, as any host read does)."""
        device = self.device
        if not nbytes:
            return
        if nbytes > ELEMENT_RING // 2:
            device.copy_d2h(dst, src, nbytes)
            device.synchronize()
            return
        pinned = self.slot(nbytes)
        device.driver.copy_d2h(pinned, src, nbytes)
        try:
            device.synchronize()        # one wait for the element and the status block
        finally:
            ctypes.memmove(dst, pinned, nbytes)

    def close(self) -> None:
        driver = self.device.driver
        if self.ring:
            driver.synchronize()
            driver.free_pinned(self.ring)
            for event in self.events:
                driver.event_destroy(event)
            self.ring, self.events, self.pos = 0, [], 0
