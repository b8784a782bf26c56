"""DLPack export of device memory: a `dltensor` capsule for data that lives on a GPU.

Stage: data (interop). numpy makes the capsules of host data; this module makes them for a
GPU-resident field or ndarray (`_Buffer.__dlpack__` on a GPU program): a `DLManagedTensor`
(DLPack 0.x layout, which torch, CuPy and JAX accept) pointing at the device memory, kept
alive, with the object that owns the memory, until the consumer calls its deleter (or the
capsule is collected unconsumed). Nothing is copied. Caches: the live exports, until deleted.
"""
from __future__ import annotations

import ctypes
from typing import Any

from .dtypes import DataType

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
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_live: dict[int, tuple[Any, ...]] = {}    # managed tensor address -> what it keeps alive

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


def _delete(managed: Any) -> None:
    _live.pop(ctypes.addressof(managed.contents), None)


def _capsule_gone(capsule: int) -> None:
    """The capsule is collected: if nobody consumed it (still named `dltensor`), release."""
    if _api.PyCapsule_IsValid(capsule, b"dltensor"):
        _live.pop(_api.PyCapsule_GetPointer(capsule, b"dltensor"), None)


_DELETER = DELETER(_delete)
_DESTRUCTOR = CAPSULE_DESTRUCTOR(_capsule_gone)


def export(ptr: int, shape: tuple[int, ...], dtype: DataType, device_type: int,
           device_id: int, owner: Any) -> Any:
    """A `dltensor` capsule over `ptr` (C-contiguous, `dtype`, `shape`) on a GPU."""
    managed = DLManagedTensor()
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data, t.ndim, t.byte_offset = ptr, len(shape), 0
    t.device = DLDevice(device_type, device_id)
    kind = "float" if dtype.is_float else ("int" if dtype.is_signed else "uint")
    t.dtype = DLDataType(_CODES[kind], dtype.bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.POINTER(ctypes.c_int64)()       # NULL: C-contiguous
    managed.deleter = _DELETER
    address = ctypes.addressof(managed)
    _live[address] = (managed, shape_arr, owner)
    return _api.PyCapsule_New(address, b"dltensor", ctypes.cast(_DESTRUCTOR, ctypes.c_void_p))
