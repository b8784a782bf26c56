"""Where a GPU launch's data lives: device mirrors of host buffers, foreign device arrays, the
adstack heap.

Stage: backend (helpers of `gpu.py`). Each field and ndarray a launch touches gets a
`DeviceMirror` (device memory of the same size). Host writes mark the host copy newer and the
next launch uploads it (`from_numpy` uploads at once); a launch, a device fill (driver
memsets) and a device-to-device `copy_from` mark the device copy newer, and host reads
(`to_numpy`, pickling, exports) download it; docs/gpu.md has the rule. One element read or
written at Python scope (`x[i]`, `loss[None] = v`) moves alone (`read_part`, `wrote_part`).
An ndarray over another library's device memory (a torch or CuPy array passed to a kernel)
gets a `ForeignMirror` over that memory (`ForeignArrays` wraps each live object once).
`GpuHeap` is the program's adstack heap in device memory. Caches: a mirror per buffer, a wrapper per
live foreign object, the heap per device (grow-only).
"""
from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dlpack, dtypes
from ..data import CURRENT_DEVICE, Ndarray
from .gpu_driver import handle_int

if TYPE_CHECKING:
    from .gpu import GpuDevice

NUMBERS = (int, float)     # the fill values whose prepared calls a mirror keeps (`fills`)
WHOLE_READ_BYTES = 1 << 20   # arrays a second element read downloads whole (`read_part`)
SMALL_READ_BYTES = 256       # arrays the first element read downloads whole (a 0-d vector)


def negative_zero(value: Any) -> bool:
    return not value and math.copysign(1.0, value) < 0


class DeviceMirror:
    """The device copy of one field or ndarray (`data._Buffer._mirror`): which copy is newer,
    and the transfers that make the other one current."""
    __slots__ = ("device", "ptr", "nbytes", "host", "host_newer", "device_newer", "owner",
                 "shared", "host_ptr", "fills", "read_gen")

    def __init__(self, device: "GpuDevice", owner: Any) -> None:
        self.device, self.owner = device, weakref.ref(owner)
        self.host = owner._data
        self.host_ptr: int = self.host.ctypes.data
        self.nbytes = max(int(self.host.nbytes), 1)
        self.ptr = device.alloc(self.nbytes)
        self.host_newer, self.device_newer = True, False
        # a foreign view of the device memory outlives every call (`to_torch(copy=False)`):
        # the device copy is the data, so host reads download and host writes upload at once
        self.shared = False
        # a number filled, and an element's bytes filled -> the prepared call
        self.fills: dict[tuple[type, Any] | bytes, Any] = {}
        self.read_gen = -1        # the generation of the last element read (`read_part`)
        weakref.finalize(owner, self.owner_died)

    def owner_died(self) -> None:
        if self.ptr and not self.device.closed:
            self.device.free(self.ptr)
            self.device.mirrors.remove(self)
        self.ptr = 0

    def to_device(self) -> None:
        """Before a launch: upload the host copy if it changed since the last upload."""
        if self.host_newer:
            self.device.copy_h2d(self.ptr, self.host.ctypes.data, self.host.nbytes)
            self.host_newer = False

    def fill(self, pattern: bytes, value: Any = None) -> None:
        """Every element becomes `pattern` (one element's bytes) in device memory: one
        prepared driver call on the stream (`GpuDevice.fill_call`), no synchronisation; the
        host copy is stale from then on. The call is kept under `value` when that is a
        Python number, for `fill_again`, and under `pattern` (a vector's fill of the same
        element again is its prepared call too: only the value's conversion runs again)."""
        if pattern:                    # an element of no components: nothing to write
            call = self.fills.get(pattern)
            if call is None:
                call = self.device.fill_call(self.ptr, pattern, self.host.nbytes // len(pattern))
                if len(self.fills) < 16:
                    self.fills[pattern] = call
            call()
            if value.__class__ in NUMBERS and len(self.fills) < 16 and not negative_zero(value):
                self.fills[value.__class__, value] = call
        self.device_wrote()

    def fill_again(self, value: Any) -> bool:
        """A fill of a number this array was filled with before, on the device as then
        (`fill`): the same prepared call, no conversion of the value; False when there is
        none or the fill belongs on the host now (`GpuDevice.on_device`)."""
        if value.__class__ not in NUMBERS or self.host_newer or \
                self.device is not CURRENT_DEVICE[0]:
            return False
        call = self.fills.get((value.__class__, value))
        if call is None or not value and value.__class__ is float and negative_zero(value):
            return False
        call()
        self.device_newer = True            # `device_wrote`, inlined: a step fills often
        if self.shared:
            self.device.synchronize()
        return True

    def copy_from(self, source: "DeviceMirror") -> None:
        """The data of `source` (same size) copied in device memory, on the stream."""
        source.to_device()
        if source is not self:
            self.device.copy_d2d(self.ptr, source.ptr, self.host.nbytes)
        self.device_wrote()

    def device_wrote(self) -> None:
        """After a fill or copy on the stream: the device copy is the newer one; a foreign
        view of it (`shared`) sees the write when the call returns, as after a host write."""
        self.host_newer, self.device_newer = False, True
        if self.shared:
            self.device.synchronize()

    def upload_now(self) -> None:
        """After the host copy was overwritten whole: upload it now, through the device's
        pinned upload buffers (no wait for the stream)."""
        if self.host_newer:
            self.device.uploads.upload(self.ptr, self.host.ctypes.data, self.host.nbytes)
            self.host_newer = False

    def before_host_read(self) -> None:
        if self.device_newer or self.shared:
            self.device.copy_d2h(self.host.ctypes.data, self.ptr, self.host.nbytes)
            self.device.synchronize()
            self.device_newer = False

    def read_part(self, offset: int, nbytes: int, gen: int = -1) -> None:
        """Before a host read of bytes `offset`.. `offset + nbytes` of the host copy (one
        element or component) of the data at generation `gen`: if the device copy is newer,
        those bytes alone come down into the host copy (one small copy, a synchronisation);
        the rest stays stale (when there is no rest, a 0-d array's, the host copy is current
        again; an array of at most `SMALL_READ_BYTES`, a 0-d vector's, comes down whole at
        once). A second element read of the same generation downloads the whole array
        when it is at most `WHOLE_READ_BYTES` (one copy and one wait instead of one wait per
        element: a program that reads many elements between launches, as DiffTaichi's
        billiards draws its balls); later reads of it wait for nothing."""
        if self.device_newer or self.shared:
            if gen == self.read_gen and gen >= 0 and self.host.nbytes <= WHOLE_READ_BYTES:
                self.before_host_read()
                return
            self.read_gen = gen
            if self.host.nbytes <= SMALL_READ_BYTES:    # as cheap as one element: all of it
                offset, nbytes = 0, self.host.nbytes
            self.device.elements.down(self.host_ptr + offset, self.ptr + offset, nbytes)
            if nbytes == self.host.nbytes:
                self.device_newer = False

    def wrote_part(self, offset: int, nbytes: int) -> None:
        """After a host write of those bytes into the host copy: unless the host copy holds
        writes not uploaded yet (all of it goes up at the next launch), the bytes go up alone,
        on the stream, without waiting; which copy is newer does not change (both hold the
        element now)."""
        if self.host_newer:
            return
        self.device.elements.up(self.ptr + offset, self.host_ptr + offset, nbytes)
        if self.shared:
            self.device.synchronize()

    def after_host_write(self) -> None:
        self.host_newer = True
        if self.shared:
            self.to_device()
            self.device.synchronize()

    def release(self) -> None:
        """The device goes away: bring the data home and drop the device memory."""
        self.before_host_read()
        owner = self.owner()
        if owner is not None and owner._mirror is self:
            owner._mirror = None
        self.device.free(self.ptr)
        self.ptr = 0


class ForeignMirror(DeviceMirror):
    """The device side of an ndarray over another library's device memory (a torch or CuPy
    array passed to a kernel): that memory itself, never allocated or freed here; the data
    starts newer on the device."""
    __slots__ = ()

    def __init__(self, device: "GpuDevice", owner: Any, ptr: int) -> None:
        self.device, self.owner = device, weakref.ref(owner)
        self.host = owner._data
        self.host_ptr = self.host.ctypes.data
        self.nbytes = max(int(self.host.nbytes), 1)
        self.ptr = ptr
        self.host_newer, self.device_newer = False, True
        self.fills, self.read_gen = {}, -1

    def owner_died(self) -> None:
        self.ptr = 0

    def release(self) -> None:
        self.before_host_read()
        owner = self.owner()
        if owner is not None and owner._mirror is self:
            owner._mirror = None
        self.ptr = 0


def unique(mirrors: list[DeviceMirror]) -> list[DeviceMirror]:
    """`mirrors` without repeats, in order."""
    return list({id(m): m for m in mirrors}.values())


def cuda_array(obj: Any) -> tuple[int, tuple[int, ...], Any, bool] | None:
    """(pointer, shape, numpy dtype, read-only) of a C-contiguous `__cuda_array_interface__`
    object, or None when it is not one."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        return None
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expect, step = [], dtype.itemsize
        for s in reversed(shape):
            expect.append(step)
            step *= s
        if tuple(strides) != tuple(reversed(expect)) and 0 not in shape:
            return None
    ptr, readonly = cai["data"]
    return int(ptr), shape, dtype, bool(readonly)


class ForeignArrays:
    """jitrt ndarrays over other libraries' device arrays, one per live object."""

    def __init__(self, device: "GpuDevice") -> None:
        self.device = device
        self.wrapped: dict[int, tuple[Any, Any]] = {}  # id(object) -> (weak ref, ndarray)

    def wrap(self, obj: Any) -> Ndarray | None:
        """A jitrt ndarray over a torch/CuPy device array (no copy), the same one for the
        same live object; None if `obj` is not a C-contiguous device array of a jitrt
        dtype."""
        found = self.wrapped.get(id(obj))
        if found is not None and found[0]() is obj:
            return found[1]  # type: ignore[no-any-return]
        info = cuda_array(obj)
        if info is None or not self.same_device(obj):
            return None
        ptr, shape, np_dtype, readonly = info
        dt = dtypes.from_numpy(np_dtype)
        if dt is None:
            return None
        device = self.device
        wrapped = Ndarray._on_device(lambda nd: ForeignMirror(device, nd, ptr), shape, dt, obj)
        wrapped.readonly = readonly
        try:
            self.wrapped[id(obj)] = (weakref.ref(obj), wrapped)
        except TypeError:       # not weak-referenceable: wrapped again at each use
            pass
        return wrapped

    def import_dlpack(self, obj: Any) -> Ndarray:
        """`jr.ndarray.from_dlpack` of a device tensor of this device: its capsule consumed
        with this device's current stream as the consumer's (the producer orders its work
        before what jitrt queues there), an ndarray over its memory, the tensor handed back
        to its producer when that ndarray dies."""
        kind, index = (int(v) for v in obj.__dlpack_device__())
        device = self.device
        if kind != device.dlpack_device_type or index != device.device_id:
            raise ValueError(f"jr.ndarray.from_dlpack: the tensor is on DLPack device "
                             f"({kind}, {index}); this program's device is {device.arch}:"
                             f"{device.device_id} ({device.dlpack_device_type}, "
                             f"{device.device_id}): import it inside jr.device({index})")
        stream = handle_int(device.current_stream())
        imported = dlpack.consume(obj.__dlpack__(stream=stream or None))
        dt = dtypes.from_dlpack(imported.code, imported.bits) if imported.lanes == 1 else None
        problem = "it is not C-contiguous" if not imported.contiguous else \
            "its dtype has no jitrt type" if dt is None else None
        if problem is not None:
            imported.release()
            raise ValueError(f"jr.ndarray.from_dlpack: {problem}")
        assert dt is not None
        ptr = imported.ptr
        wrapped = Ndarray._on_device(lambda nd: ForeignMirror(device, nd, ptr), imported.shape,
                                     dt, obj)
        weakref.finalize(wrapped, imported.release)
        return wrapped

    def same_device(self, obj: Any) -> bool:
        """False when `obj` says (`__dlpack_device__`) that it lives on another device of
        this device's kind (a torch tensor of cuda:1 given to a launch on cuda:0)."""
        try:
            kind, index = obj.__dlpack_device__()
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return True
        device = self.device
        return int(kind) != device.dlpack_device_type or int(index) == device.device_id

    def close(self) -> None:
        """The device goes away: other libraries' memory is just let go."""
        for _, wrapped in self.wrapped.values():
            wrapped._mirror = None
        self.wrapped.clear()


class GpuHeap:
    """The program's adstack heap in device memory: grows by doubling, never per launch."""

    def __init__(self, device: "GpuDevice") -> None:
        self.device, self.size = device, 1 << 16
        self.ptr = device.alloc(self.size)

    def ensure(self, nbytes: int, who: str = "") -> int:
        if nbytes > self.size:
            size = self.size
            while size < nbytes:
                size *= 2
            self.device.synchronize()        # launches in flight may still use the old one
            self.device.free(self.ptr)
            self.ptr, self.size = self.device.alloc(size), size
            self.device.counters["allocations"] += 1
        return self.ptr
