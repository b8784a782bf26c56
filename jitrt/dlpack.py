"""DLPack export of jitrt's memory: a `dltensor` capsule over a field's or ndarray's data.

Stage: data (interop). `_Buffer.__dlpack__` makes one for GPU-resident data (the device
memory) and for host data on the CPU: a `DLManagedTensor` (DLPack 0.x layout, which numpy,
torch, CuPy and JAX accept) pointing at the memory, kept alive, with the object that owns the
memory, until the consumer calls its deleter (or the capsule is collected unconsumed).
Nothing is copied. `consume` is the other way: a producer's capsule read (a device tensor
imported by `jr.ndarray.from_dlpack`). A CPU export is writable, since consumers such as
torch write through a read-only one anyway: its deleter runs `on_release` (the owner's
generation bump), so the caches that observe the data by generation see the consumer's writes
once it lets go (docs/usage.md, "Arrays in and out without copies"). Caches: the live
exports, until deleted.
"""
from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, Callable

from .dtypes import DataType

KDL_CPU = 1
KDL_CUDA = 2
KDL_ROCM = 10
_CODES = {"int": 0, "uint": 1, "float": 2}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):     # DLPack 1.0: with flags (read-only...)
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", DELETER_V), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# managed tensor address -> (what it keeps alive..., what to run when the consumer releases it)
_live: dict[int, tuple[Any, ...]] = {}

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.Py_IncRef.argtypes = [ctypes.py_object]
_api.Py_DecRef.argtypes = [ctypes.py_object]


def _pin(obj: Any) -> Any:
    """One reference to `obj` that no Python object holds, so that tearing down modules at
    interpreter exit cannot free it: a consumer (a torch tensor in a reference cycle, say)
    may release its export during the last garbage collection, after jitrt's globals are
    gone, and its deleter then reads the managed tensor and calls the callback thunks."""
    _api.Py_IncRef(obj)
    return obj


def _delete(managed: Any) -> None:
    """The consumer's release: forget the export and run its `on_release`."""
    if _live is None or ctypes is None:   # interpreter shutdown: module globals are gone
        return                            # (what the export pinned stays: no free, no crash)
    kept = _live.pop(ctypes.addressof(managed.contents), None)
    if kept is None:
        return
    if kept[-1] is not None:
        try:
            kept[-1]()
        except Exception:  # noqa: BLE001 - a deleter must not raise (interpreter shutdown)
            pass
    _api.Py_DecRef(kept)                  # the consumer is done: unpin


def _capsule_gone(capsule: int) -> None:
    """The capsule is collected: if nobody consumed it (still named `dltensor` or
    `dltensor_versioned`), forget the export; nothing was written through it."""
    if _live is None or _api is None:     # interpreter shutdown
        return
    for name in (b"dltensor", b"dltensor_versioned"):
        if _api.PyCapsule_IsValid(capsule, name):
            kept = _live.pop(_api.PyCapsule_GetPointer(capsule, name), None)
            if kept is not None:
                _api.Py_DecRef(kept)


# the callback thunks live as long as the process: a consumer may call them at its very end
_DELETER = _pin(DELETER(_delete))
_DELETER_V = _pin(DELETER_V(_delete))
_DESTRUCTOR = _pin(CAPSULE_DESTRUCTOR(_capsule_gone))


def export(ptr: int, shape: tuple[int, ...], dtype: DataType, device_type: int,
           device_id: int, owner: Any, on_release: Callable[[], None] | None = None,
           versioned: bool = False) -> Any:
    """A capsule over `ptr` (C-contiguous, `dtype`, `shape`) on the device: `dltensor`, or
    with `versioned` (for consumers that ask for DLPack 1.0 with `max_version`)
    `dltensor_versioned` with no flags, so writable (numpy imports a `dltensor` read-only).
    `on_release` runs when the consumer releases it (not when it was never consumed)."""
    managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data, t.ndim, t.byte_offset = ptr, len(shape), 0
    t.device = DLDevice(device_type, device_id)
    kind = "float" if dtype.is_float else ("int" if dtype.is_signed else "uint")
    t.dtype = DLDataType(_CODES[kind], dtype.bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.POINTER(ctypes.c_int64)()       # NULL: C-contiguous
    if versioned:
        managed.version, managed.flags, managed.deleter = DLPackVersion(1, 0), 0, _DELETER_V
    else:
        managed.deleter = _DELETER
    address = ctypes.addressof(managed)
    _live[address] = _pin((managed, shape_arr, owner, on_release))   # unpinned on release
    return _api.PyCapsule_New(address, b"dltensor_versioned" if versioned else b"dltensor",
                              ctypes.cast(_DESTRUCTOR, ctypes.c_void_p))


_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))


@dataclasses.dataclass(frozen=True)
class Imported:
    """What a consumed capsule describes; `release` hands the tensor back to its producer."""
    ptr: int
    shape: tuple[int, ...]
    contiguous: bool
    code: int                  # DLPack's type code (0 int, 1 uint, 2 float)
    bits: int
    lanes: int
    device: tuple[int, int]    # (device type, device id)
    release: Callable[[], None]


def consume(capsule: Any) -> Imported:
    """Take a `dltensor` (or `dltensor_versioned`) capsule from its producer: the capsule is
    renamed `used_...` (DLPack's rule: nothing else may consume it) and the tensor is ours
    until `release()` calls the producer's deleter."""
    for name, kind in ((b"dltensor_versioned", DLManagedTensorVersioned),
                       (b"dltensor", DLManagedTensor)):
        if _is_valid(capsule, name):
            break
    else:
        raise TypeError("not a DLPack capsule (or one already consumed)")
    managed = kind.from_address(_get_pointer(capsule, name))
    _set_name(capsule, b"used_" + name)
    t = managed.dl_tensor
    shape = tuple(t.shape[k] for k in range(t.ndim))
    contiguous = True
    if t.strides:
        step = 1
        for k in reversed(range(t.ndim)):
            if shape[k] != 1 and t.strides[k] != step:
                contiguous = False
            step *= shape[k]

    def release() -> None:
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))
    return Imported(int(t.data or 0) + int(t.byte_offset), shape, contiguous, t.dtype.code,
                    t.dtype.bits, t.dtype.lanes, (t.device.device_type, t.device.device_id),
                    release)
