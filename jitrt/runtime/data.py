"""Fields and ndarrays: host-visible data with generation counters.

Stage: runtime data. A `Field` is global data that kernels reach by closure; an `Ndarray` is
passed to kernels as an argument. Both own a C-contiguous numpy buffer whose address never
changes, and a generation counter `gen` bumped by every host write (`x[i] = v`, `from_numpy`,
`fill`) and by every launch of a kernel whose write set contains them. Caches observe data by
(identity, generation) and never re-read it.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DataType

_alloc_ids = itertools.count(1)
_grad_fields: "weakref.WeakSet[Field]" = weakref.WeakSet()


def live_grad_fields() -> list["Field"]:
    """Every field alive now that has a gradient (a Tape clears them on entry)."""
    return list(_grad_fields)


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative extent")
    return shape


def _host_index(key: Any) -> Any:
    if key is None:
        return ()
    return key


class _Buffer:
    """What Field and Ndarray share: the numpy buffer, host access and the generation."""

    __slots__ = ("_data", "dtype", "shape", "gen", "ptr", "alloc_id", "grad", "name",
                 "named", "__weakref__")

    def __init__(self, dtype: Any, shape: Any, needs_grad: bool, name: str | None,
                 kind: str) -> None:
        self.dtype: DataType = dtypes.coerce(dtype)
        self.shape = _shape(shape)
        self._data = np.zeros(self.shape, dtype=self.dtype.np)
        self.ptr: int = self._data.ctypes.data
        self.gen = 0
        self.alloc_id = next(_alloc_ids)
        self.name = name or f"{kind}{self.alloc_id}"
        self.named = name is not None   # else errors use the kernel's source name
        self.grad: Any = None
        if needs_grad:
            if not self.dtype.is_float:
                raise TypeError(f"needs_grad=True needs a float dtype, got {self.dtype!r}")
            self.grad = type(self)(self.dtype, self.shape, False, self.name + ".grad", kind)
            self.grad.named = self.named
            if kind == "field":
                _grad_fields.add(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def needs_grad(self) -> bool:
        return self.grad is not None

    def __getitem__(self, key: Any) -> Any:
        return self._data[_host_index(key)].item() if not isinstance(key, slice) else \
            self._data[key].copy()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[_host_index(key)] = value
        self.gen += 1

    def to_numpy(self) -> np.ndarray:
        return self._data.copy()

    def from_numpy(self, arr: Any) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.shape:
            raise ValueError(f"{self.name}.from_numpy: shape {arr.shape} does not match "
                             f"{self.shape}")
        np.copyto(self._data, arr, casting="same_kind")
        self.gen += 1

    def fill(self, value: Any) -> None:
        self._data.fill(value)
        self.gen += 1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.dtype!r} shape={self.shape}>"


class Field(_Buffer):
    """Global data referenced from kernels by closure: `x = jr.field(jr.f32, shape=(N,))`."""
    __slots__ = ()


class Ndarray(_Buffer):
    """Data passed to kernels as an argument: `a = jr.ndarray(jr.i32, shape=(N,))`."""
    __slots__ = ()


def field(dtype: Any, shape: Any = (), needs_grad: bool = False, name: str | None = None) -> Field:
    return Field(dtype, shape, needs_grad, name, "field")


def ndarray(dtype: Any, shape: Any, needs_grad: bool = False, name: str | None = None) -> Ndarray:
    return Ndarray(dtype, shape, needs_grad, name, "ndarray")
