"""Small vectors and matrices: `jr.Vector`, `jr.Matrix`, `jr.types.vector/matrix`, `jr.math.vec3`.

Stage: API (types) used by the frontend. A `VectorType`/`MatrixType` is an element type of a
fixed size and a scalar dtype. In kernels, vectors and matrices are compile-time aggregates of
scalar values (`frontend/vectors.py`): every operation unrolls into scalar IR, so they live in
registers and autodiff sees only scalars. In memory, a field or ndarray of vectors stores the
components as trailing dimensions: a `jr.Vector.field(3, jr.f32, shape=(N,))` holds an (N, 3)
array, and `to_numpy()` returns that shape (as Taichi does); at Python scope `x[i]` of such a
field is a `data.FieldElement`. Also `rgb_to_hex`, Taichi's GUI colour helper.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .frozen import frozen
from . import dtypes
from .dtypes import DataType


@frozen
class MatrixType:
    """n x m components of `dtype` (a vector type has m = 0: shape (n,))."""
    n: int
    m: int
    dtype: DataType | None

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,) if self.m == 0 else (self.n, self.m)

    def __call__(self, *values: Any) -> Any:
        """Outside kernels: a numpy array of this shape (inside, the frontend lowers it)."""
        flat = np.asarray(values[0] if len(values) == 1 else values,
                          dtype=None if self.dtype is None else self.dtype.np)
        return flat.reshape(self.shape) if flat.size == int(np.prod(self.shape)) else \
            np.full(self.shape, flat, dtype=flat.dtype)

    def element_field(self, shape: Any = None, needs_grad: bool = False,
                      name: str | None = None, needs_dual: bool = False) -> Any:
        """A field of this type (`jr.field(jr.math.vec3, shape=N)`)."""
        return _field(self, shape, needs_grad, name, needs_dual)

    def element_ndarray(self, shape: Any = (), needs_grad: bool = False,
                        name: str | None = None, needs_dual: bool = False) -> Any:
        return _ndarray(self, shape, needs_grad, name, needs_dual)

    field = element_field

    def __repr__(self) -> str:
        dt = self.dtype.name if self.dtype else "None"
        if self.m == 0:
            return f"jr.types.vector({self.n}, {dt})"
        return f"jr.types.matrix({self.n}, {self.m}, {dt})"


VectorType = MatrixType


def _check_size(k: Any, what: str) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 32:
        raise TypeError(f"{what} must be an int from 1 to 32, got {k!r}")
    return k


def vector(n: int, dtype: Any = None) -> MatrixType:
    """The type of an n-component vector: `jr.types.vector(3, jr.f32)`."""
    return MatrixType(_check_size(n, "vector size"), 0, None if dtype is None
                      else dtypes.coerce(dtype))


def matrix(n: int, m: int, dtype: Any = None) -> MatrixType:
    """The type of an n x m matrix: `jr.types.matrix(3, 3, jr.f32)`."""
    return MatrixType(_check_size(n, "matrix rows"), _check_size(m, "matrix columns"),
                      None if dtype is None else dtypes.coerce(dtype))


def element_type(dtype: Any) -> tuple[DataType, tuple[int, ...]]:
    """(scalar dtype, element shape) of a dtype or a vector/matrix type (one without a dtype,
    such as `jr.math.vec3`, takes the current program's default float type)."""
    if isinstance(dtype, MatrixType):
        return dtype.dtype or dtypes.DEFAULT_FP[0], dtype.shape
    return dtypes.coerce(dtype), ()


def _storage(kind: MatrixType, shape: Any, needs_grad: bool, name: str | None,
             ndarray: bool, needs_dual: bool = False) -> Any:
    """A field (or ndarray) of `kind`: the components as trailing dimensions."""
    from .data import Field, Ndarray, PendingField, _shape, track
    dt, element = element_type(kind)
    if shape is None and not ndarray:        # placed later: jr.root.dense(...).place(x)
        return track(PendingField(dt, needs_grad, name, element, needs_dual))
    cls = Ndarray if ndarray else Field
    out = cls(dt, _shape(shape) + element, needs_grad, name, "ndarray" if ndarray else "field",
              needs_dual=needs_dual)
    out.element_shape = element
    for derived in (out.grad, out.dual):
        if derived is not None:
            derived.element_shape = element
    return out if isinstance(out, Ndarray) else track(out)


def _field(kind: MatrixType, shape: Any, needs_grad: bool, name: str | None,
           needs_dual: bool = False) -> Any:
    return _storage(kind, shape, needs_grad, name, False, needs_dual)


def _ndarray(kind: MatrixType, shape: Any, needs_grad: bool, name: str | None,
             needs_dual: bool = False) -> Any:
    return _storage(kind, shape, needs_grad, name, True, needs_dual)


def rgb_to_hex(c: Any) -> Any:
    """A colour as 0xRRGGBB, as Taichi's `ti.rgb_to_hex` (GUI colours): `c` holds red, green
    and blue in [0, 1] along its first axis (a 3-vector gives an int; an array of shape (3, N)
    gives N of them, as numpy int64). Each channel is scaled by 255, truncated and clipped."""
    arr = np.asarray(c, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[0] != 3:
        raise ValueError(f"rgb_to_hex: expected red, green and blue along the first axis "
                         f"(a 3-vector or a (3, N) array), got shape {arr.shape}")
    with np.errstate(invalid="ignore"):
        rgb = np.clip(np.trunc(arr * 255), 0, 255).astype(np.int64)
    out = (rgb[0] << 16) + (rgb[1] << 8) + rgb[2]
    return int(out) if out.ndim == 0 else out


class Vector:
    """`jr.Vector([x, y, z])` in kernels (a vector value); `jr.Vector.field(3, jr.f32,
    shape=N)` and `jr.Vector.ndarray(3, jr.f32, shape=N)` make storage of vectors."""

    def __new__(cls, values: Any, dtype: Any = None, dt: Any = None  # type: ignore[misc]
                ) -> Any:
        dtype = dt if dtype is None else dtype             # dt=: Quadrants' spelling
        return np.asarray(values, dtype=None if dtype is None else dtypes.coerce(dtype).np)

    @staticmethod
    def field(n: int, dtype: Any, shape: Any = None, needs_grad: bool = False,
              name: str | None = None, needs_dual: bool = False) -> Any:
        return _field(vector(n, dtype), shape, needs_grad, name, needs_dual)

    # in kernels: constant vectors (the frontend calls these specs and builds the value)
    @staticmethod
    def zero(dtype: Any, n: int) -> tuple:
        return dtype, (n,), 0, None

    @staticmethod
    def one(dtype: Any, n: int) -> tuple:
        return dtype, (n,), 1, None

    @staticmethod
    def unit(n: int, i: int, dtype: Any = float) -> tuple:
        return dtype, (n,), 0, (lambda k: k == i)

    @staticmethod
    def ndarray(n: int, dtype: Any, shape: Any = (), needs_grad: bool = False,
                name: str | None = None, needs_dual: bool = False) -> Any:
        return _ndarray(vector(n, dtype), shape, needs_grad, name, needs_dual)

    @staticmethod
    def tensor(n: int, dtype: Any, shape: Any, **kwargs: Any) -> Any:
        """Quadrants' `qd.Vector.tensor(n, dtype, shape, backend=...)`: a field or ndarray of
        n-vectors (quadrants/tensor.py)."""
        from .quadrants.tensor import vector_tensor
        return vector_tensor(n, dtype, shape, **kwargs)


class Matrix:
    """`jr.Matrix([[a, b], [c, d]])` in kernels; `jr.Matrix.field(n, m, dtype, shape=...)`
    and `jr.Matrix.ndarray(...)` make storage of matrices."""

    def __new__(cls, values: Any, dtype: Any = None, dt: Any = None  # type: ignore[misc]
                ) -> Any:
        dtype = dt if dtype is None else dtype             # dt=: Quadrants' spelling
        return np.asarray(values, dtype=None if dtype is None else dtypes.coerce(dtype).np)

    @staticmethod
    def field(n: int, m: int, dtype: Any, shape: Any = None, needs_grad: bool = False,
              name: str | None = None, needs_dual: bool = False) -> Any:
        return _field(matrix(n, m, dtype), shape, needs_grad, name, needs_dual)

    @staticmethod
    def zero(dtype: Any, n: int, m: int) -> tuple:
        return dtype, (n, m), 0, None

    @staticmethod
    def identity(dtype: Any, n: int) -> tuple:
        return dtype, (n, n), 0, (lambda k: k % (n + 1) == 0)

    @staticmethod
    def ndarray(n: int, m: int, dtype: Any, shape: Any = (), needs_grad: bool = False,
                name: str | None = None, needs_dual: bool = False) -> Any:
        return _ndarray(matrix(n, m, dtype), shape, needs_grad, name, needs_dual)

    @staticmethod
    def tensor(n: int, m: int, dtype: Any, shape: Any, **kwargs: Any) -> Any:
        """Quadrants' `qd.Matrix.tensor(n, m, dtype, shape, backend=...)` (quadrants/tensor.py)."""
        from .quadrants.tensor import matrix_tensor
        return matrix_tensor(n, m, dtype, shape, **kwargs)


@frozen
class StructType:
    """Named members, each a dtype or a vector/matrix type: `jr.types.struct(pos=vec3, m=f32)`.
    Stored as one field (or ndarray) per member (structure of arrays)."""
    members: tuple[tuple[str, Any], ...]

    def field(self, shape: Any = (), needs_grad: bool = False,
              name: str | None = None, layout: Any = None) -> "StructField":
        """A field of these structs. Quadrants' `layout=jr.Layout.SOA` or `AOS` is accepted:
        jitrt stores one field per member either way (quadrants/tensor.py)."""
        from .quadrants.tensor import Layout
        if layout is not None and not isinstance(layout, Layout):
            raise TypeError(f"layout must be jr.Layout.SOA or jr.Layout.AOS, got {layout!r}")
        return StructField(self, shape, needs_grad, name)

    element_field = field

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.members)
        return f"jr.types.struct({inner})"


def struct(**members: Any) -> StructType:
    """The type of a struct with these members: `jr.types.struct(pos=jr.math.vec3, m=jr.f32)`."""
    if not members:
        raise TypeError("a struct needs at least one member")
    for k, v in members.items():
        if not isinstance(v, MatrixType):
            dtypes.coerce(v)        # raises TypeError for what is not a dtype
    return StructType(tuple(members.items()))


class StructField:
    """A field of structs (`jr.Struct.field({...}, shape=N)`): one field per member, reached as
    `s.pos` (a field) or, in kernels, `s[i].pos`. `to_numpy()` is a dict of arrays."""

    def __init__(self, kind: StructType, shape: Any, needs_grad: bool,
                 name: str | None) -> None:
        from .data import _shape, field
        self.kind, self.shape = kind, _shape(shape)
        self.members = {k: field(t, self.shape, needs_grad,
                                 None if name is None else f"{name}.{k}")
                        for k, t in kind.members}
        self.element_shape = ()

    def __getattr__(self, name: str) -> Any:
        members = self.__dict__.get("members", {})
        if name in members:
            return members[name]
        raise AttributeError(f"struct field has no member '{name}'")

    def to_numpy(self) -> dict[str, np.ndarray]:
        return {k: f.to_numpy() for k, f in self.members.items()}

    def from_numpy(self, arrays: dict[str, Any]) -> None:
        unknown = set(arrays) - set(self.members)
        if unknown:
            raise KeyError(f"struct field has no member(s) {sorted(unknown)}")
        for k, a in arrays.items():
            self.members[k].from_numpy(a)

    def fill(self, value: Any) -> None:
        for f in self.members.values():
            f.fill(value)


class Struct:
    """`jr.Struct.field({"pos": jr.math.vec3, "mass": jr.f32}, shape=N)`."""

    @staticmethod
    def field(members: dict[str, Any], shape: Any = (), needs_grad: bool = False,
              name: str | None = None) -> StructField:
        return struct(**members).field(shape, needs_grad, name)
