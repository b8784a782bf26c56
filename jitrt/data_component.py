"""One component of a vector/matrix field as a scalar field: `v.get_scalar_field(i)`.

Stage: data (beside `data.py`). Taichi places the components of a vector field separately to
lay them out as a structure of arrays (`jr.root.dense(jr.i, n).place(v.get_scalar_field(0))`
for each component). jitrt keeps one buffer per field with the components as trailing
dimensions, so placing the first component places the whole field (`layout.Node.place`), and
each later component must be placed with the same shape and offset; only the memory order
differs from Taichi's. A `ComponentField` is a view: host access (`c[i]`, `to_numpy()`,
`from_numpy()`, `fill()`) reads and writes the parent's data, and in kernels `c[i]` is the
parent's `v[i][k]` (`frontend/lower_expr.py`). Caches nothing.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class ComponentField:
    """Component `index` ((k,) of a vector, (r, c) of a matrix) of the field `parent`."""

    __slots__ = ("parent", "index")

    def __init__(self, parent: Any, index: tuple[int, ...]) -> None:
        element = parent.element_shape
        if len(index) not in (1, len(element)) or len(index) > len(element) or any(
                isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < e
                for k, e in zip(index, element)):
            kind = "vector" if len(element) == 1 else "matrix"
            raise IndexError(f"get_scalar_field{tuple(index)!r}: '{parent.name}' is a field of "
                             f"{'x'.join(map(str, element))} {kind} elements: give "
                             f"{len(element)} index(es), each in 0..n-1")
        if len(index) < len(element):            # a vector of a matrix field: (i,) is (i, 0)
            index = tuple(index) + (0,) * (len(element) - len(index))
        self.parent, self.index = parent, tuple(int(k) for k in index)

    @property
    def name(self) -> str:
        return f"{self.parent.name}[{', '.join(map(str, self.index))}]"

    @property
    def dtype(self) -> Any:
        return self.parent.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.parent.shape  # type: ignore[no-any-return]

    @property
    def offset(self) -> tuple[int, ...]:
        return self.parent.offset  # type: ignore[no-any-return]

    @property
    def ndim(self) -> int:
        return len(self.parent.shape)

    @property
    def element_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def grad(self) -> "ComponentField | None":
        g = self.parent.grad
        return None if g is None else ComponentField(g, self.index)

    @property
    def dual(self) -> "ComponentField | None":
        d = self.parent.dual
        return None if d is None else ComponentField(d, self.index)

    def _full(self, key: Any) -> tuple[Any, ...]:
        key = () if key is None else key
        return (key if isinstance(key, tuple) else (key,)) + self.index

    def __getitem__(self, key: Any) -> Any:
        return self.parent[self._full(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.parent[self._full(key)] = value

    def to_numpy(self) -> np.ndarray:
        return self.parent.to_numpy()[(Ellipsis,) + self.index]  # type: ignore[no-any-return]

    def from_numpy(self, arr: Any) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.shape:
            raise ValueError(f"{self.name}.from_numpy: shape {arr.shape} does not match "
                             f"{self.shape}")
        with self.parent.writable() as data:
            np.copyto(data[(Ellipsis,) + self.index], arr, casting="same_kind")

    def fill(self, value: Any) -> None:
        with self.parent.writable() as data:
            data[(Ellipsis,) + self.index] = value

    def __repr__(self) -> str:
        return f"<ComponentField {self.name} of {self.parent!r}>"
