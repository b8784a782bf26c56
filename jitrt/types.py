"""Parameter annotations: `jr.types.ndarray(dtype, ndim)` and `jr.template()`."""
from __future__ import annotations

from typing import Any

from .frozen import frozen
from . import dtypes
from .dtypes import DataType
from .linalg import MatrixType, matrix, struct, vector

__all__ = ["NdarrayType", "Template", "matrix", "ndarray", "struct", "template", "vector"]


@frozen
class NdarrayType:
    dtype: DataType | None = None
    ndim: int | None = None              # of the array in memory (component dims included)
    element_shape: tuple[int, ...] = ()  # vectors/matrices: the trailing component dims

    def __repr__(self) -> str:
        return f"jr.types.ndarray(dtype={self.dtype!r}, ndim={self.ndim})"


def ndarray(dtype: Any = None, ndim: int | None = None) -> NdarrayType:
    """The annotation of an array parameter: `a: jr.types.ndarray(dtype=jr.f32, ndim=1)`.
    Leaving out dtype or ndim makes them part of the specialization (one compile each).
    With a vector or matrix dtype (`dtype=jr.math.vec3, ndim=1`), `a[i]` is a vector and the
    array passed has the components as trailing dimensions (a numpy array of shape (N, 3))."""
    if isinstance(dtype, MatrixType):
        element = dtype.shape
        return NdarrayType(dtype.dtype, None if ndim is None else ndim + len(element), element)
    return NdarrayType(None if dtype is None else dtypes.coerce(dtype), ndim)


@frozen
class Template:
    def __repr__(self) -> str:
        return "jr.template()"


def template() -> Template:
    """The annotation of a compile-time parameter (`f: jr.template()`): a field or a Python
    constant, compiled into the kernel (one specialization per field or value); in a
    `@jr.func`, a parameter passed by reference."""
    return Template()
