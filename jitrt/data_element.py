"""Python-scope views of one vector/matrix element of a field or ndarray (`x[i]`).

Stage: data (beside `data.py`, whose `_Buffer.__getitem__` makes them). A `FieldElement` reads
and writes through to its buffer; comparing one gives an `ElementComparison`, a numpy bool
array whose truth value is defined (`host_matrix.py`, as a `jr.Vector`'s comparison). Caches
nothing.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .host_matrix import ElementComparison, HostMatrix


class FieldElement:
    """One vector/matrix element of a field or ndarray at Python scope (`x[i]`, `s[None]`).

    A view, not a copy: reading it reads the field now (on a GPU, the element's bytes alone
    come down when the device copy is newer, as for `x[i, k]`) and `e[k] = v`, `e[r, c] =
    v`, `e.x = v`, `e[k] -= v` write through it (the field's generation moves, as with
    `x[i, k] = v`; on a GPU the written bytes go up alone). An index that leaves dimensions
    (`m[i][r]` of a matrix) gives a view of that part. Arithmetic, `np.asarray(e)`,
    `print(e)` use its current value as a numpy array (`e.to_numpy()`)."""

    __slots__ = ("_buf", "_index")

    def __init__(self, buf: Any, index: tuple[int, ...]) -> None:
        self._buf, self._index = buf, tuple(int(i) for i in index)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._buf.storage_shape[len(self._index):])

    @property
    def n(self) -> int:
        return self.shape[0]

    @property
    def m(self) -> int:
        return self.shape[1] if len(self.shape) > 1 else 1

    def _key(self, key: Any) -> tuple[Any, ...]:
        key = key if isinstance(key, tuple) else (key,)
        shape = self.shape
        if len(key) > len(shape):
            raise IndexError(f"{self._buf.name}{list(self._index)}: an element of shape "
                             f"{shape} takes at most {len(shape)} index(es), got {key!r}")
        for k, (i, n) in enumerate(zip(key, shape)):
            if isinstance(i, slice):
                continue
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
                raise IndexError(f"component index {i!r} is not an integer")
            if not -n <= i < n:
                raise IndexError(f"component index {i} is out of range for an element of "
                                 f"shape {shape}")
        return self._index + tuple(i if isinstance(i, slice) or i >= 0 else i + n
                                   for i, n in zip(key, shape))

    def __getitem__(self, key: Any) -> Any:
        full = self._key(key)
        if any(isinstance(i, slice) for i in full):
            return self._buf._read(self._index)[full[len(self._index):]].copy()
        if len(full) < len(self._buf.storage_shape):
            return FieldElement(self._buf, full)
        return self._buf._read(full).item()

    def __setitem__(self, key: Any, value: Any) -> None:
        full = self._key(key)
        arr = np.asarray(value)
        part = np.shape(self._buf._data[full])      # a shape only: no data read
        if arr.shape not in ((), part):
            raise ValueError(f"{self._buf.name}: a part of shape {part} cannot take a value "
                             f"of shape {arr.shape}")
        if any(isinstance(i, slice) for i in full):  # some components: the element is written
            element = np.array(self._buf._read(self._index))
            element[full[len(self._index):]] = arr
            self._buf._write(self._index, element)
            return
        self._buf._write(full, arr)

    def to_numpy(self) -> np.ndarray:
        return np.array(self._buf._read(self._index))

    def to_list(self) -> list:
        return self.to_numpy().tolist()  # type: ignore[no-any-return]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        return repr(self.to_numpy())

    def __str__(self) -> str:
        return str(self.to_numpy())

    def __eq__(self, other: Any) -> Any:
        return ElementComparison.of(self.to_numpy() == np.asarray(other), "all")

    def __ne__(self, other: Any) -> Any:
        return ElementComparison.of(self.to_numpy() != np.asarray(other), "any")

    __hash__ = None  # type: ignore[assignment]

    def value(self) -> Any:
        """The element's current value as a `jr.Vector`/`jr.Matrix` (a copy)."""
        return HostMatrix(self.to_numpy())

    def __getattr__(self, name: str) -> Any:
        if name in _VALUE_METHODS:      # Taichi's Matrix methods, on the current value
            return getattr(self.value(), name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


# the Python-scope Matrix methods an element offers (host_matrix.HostMatrix)
_VALUE_METHODS = frozenset((
    "norm", "norm_sqr", "norm_inv", "normalized", "dot", "cross", "outer_product", "transpose",
    "trace", "determinant", "inverse", "cast", "sum", "max", "min", "any", "all", "get_shape"))


def _component(k: int) -> property:
    def get(e: FieldElement) -> Any:
        return e[k]

    def put(e: FieldElement, value: Any) -> None:
        e[k] = value
    return property(get, put)


def _numpy_op(name: str) -> Any:
    op = getattr(np.ndarray, name)
    compare = name in ("__lt__", "__le__", "__gt__", "__ge__")

    def method(self: FieldElement, *other: Any) -> Any:
        # on the current value, a jr.Vector/jr.Matrix: so is the result (as in Taichi)
        result = op(self.value(), *(np.asarray(o) for o in other))
        return ElementComparison.of(result, "all") if compare else result
    method.__name__ = name
    return method


for _k, _c in enumerate("xyzw"):
    setattr(FieldElement, _c, _component(_k))
for _op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
            "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "neg", "pos", "abs",
            "lt", "le", "gt", "ge"):
    setattr(FieldElement, f"__{_op}__", _numpy_op(f"__{_op}__"))
