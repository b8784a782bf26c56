"""Small vectors and matrices: `jr.Vector`, `jr.Matrix`, `jr.types.vector/matrix`, `jr.math.vec3`.

Stage: API (types) used by the frontend. A `VectorType`/`MatrixType` is an element type of a
fixed size and a scalar dtype. In kernels, vectors and matrices are compile-time aggregates of
scalar values (`frontend/vectors.py`): every operation unrolls into scalar IR, so they live in
registers and autodiff sees only scalars. In memory, a field or ndarray of vectors stores the
components as trailing dimensions: a `jr.Vector.field(3, jr.f32, shape=(N,))` (a
`data.MatrixField`) holds an (N, 3) array, which `to_numpy()` returns, while its `shape` is
(N,) (both as in Taichi); at Python scope `x[i]` of such a field is a `data.FieldElement`.
Also `rgb_to_hex`, Taichi's GUI colour helper.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .frozen import frozen
from . import dtypes
from .dtypes import DataType
from . import host_matrix
from .host_matrix import HostMatrix
from .data_struct import StructField
from .struct_host import HostStruct, make_struct


@frozen
class MatrixType:
    """n x m components of `dtype` (a vector type has m = 0: shape (n,)). A type made with
    the dtype `float` or none (`jr.math.vec3`) has `dtype` None and takes the program's
    `default_fp` where it is used; one made with `int` (`jr.math.ivec3`) has `default`
    "int" and takes `default_ip`; `jr.math.uvec3` has "uint": the unsigned type of
    `default_ip`'s width (Taichi's `default_up`)."""
    n: int
    m: int
    dtype: DataType | None
    default: str = "float"

    def scalar(self, default_fp: DataType, default_ip: DataType) -> DataType:
        """The component type, given the program's default float and integer types."""
        if self.dtype is not None:
            return self.dtype
        if self.default == "int":
            return default_ip
        if self.default == "uint":
            return dtypes.BY_NAME[f"u{default_ip.bits}"]
        return default_fp

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,) if self.m == 0 else (self.n, self.m)

    def __call__(self, *values: Any) -> Any:
        """Outside kernels: a `jr.Vector`/`jr.Matrix` of this shape and type (a type without
        one takes the program's default: `jr.math.vec3` default_fp, `jr.math.ivec3`
        default_ip, as in Taichi); inside, the frontend lowers it. One number fills every
        component; several pieces (numbers, lists, vectors) are laid end to end, as in
        Taichi (`jr.math.vec3(v.xy, 1)`)."""
        dt = self.scalar(dtypes.DEFAULT_FP[0], dtypes.DEFAULT_IP[0])
        if len(values) == 1:
            flat = np.asarray(values[0], dtype=dt.np)
        else:
            flat = np.concatenate([np.asarray(v, dtype=dt.np).ravel() for v in values])
        if flat.size == int(np.prod(self.shape)):
            flat = flat.reshape(self.shape)
        elif flat.size == 1:
            flat = np.full(self.shape, flat.reshape(()), dtype=dt.np)
        else:
            raise ValueError(f"{self!r} has {int(np.prod(self.shape))} components, got "
                             f"{flat.size} values")
        return (Vector if self.m == 0 else Matrix)(flat)

    def element_field(self, shape: Any = None, needs_grad: bool = False,
                      name: str | None = None, needs_dual: bool = False, offset: Any = None,
                      layout: Any = None, order: str | None = None) -> Any:
        """A field of this type (`jr.field(jr.math.vec3, shape=N)`)."""
        return _field(self, shape, needs_grad, name, needs_dual, offset, layout, order)

    def element_ndarray(self, shape: Any = (), needs_grad: bool = False,
                        name: str | None = None, needs_dual: bool = False) -> Any:
        return _ndarray(self, shape, needs_grad, name, needs_dual)

    field = element_field

    def __repr__(self) -> str:
        dt = self.dtype.name if self.dtype else "None" if self.default == "float" else \
            self.default
        if self.m == 0:
            return f"jr.types.vector({self.n}, {dt})"
        return f"jr.types.matrix({self.n}, {self.m}, {dt})"


VectorType = MatrixType


# The most components a vector or matrix type has. Kernels unroll a vector into one scalar
# per component (as Taichi does), so compile time grows with the count: a 1024-vector
# argument summed in a loop compiles in a few seconds. Taichi only warns past 32; past this
# limit jitrt refuses, pointing at fields and ndarrays, which hold any number of values.
MAX_COMPONENTS = 1024


def _check_size(k: Any, what: str) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise TypeError(f"{what} must be a positive int, got {k!r}")
    return k


def _check_count(n: int, m: int) -> tuple[int, int]:
    if n * max(m, 1) > MAX_COMPONENTS:
        shape = f"a {n} x {m} matrix" if m else f"a {n}-component vector"
        raise TypeError(f"{shape} is larger than jitrt's vectors and matrices, which have at "
                        f"most {MAX_COMPONENTS} components (kernels unroll every component, "
                        "so compile time grows with the count); keep more values in a field or "
                        "an ndarray")
    return n, m


@frozen
class AnyShape:
    """`jr.types.vector()` / `jr.types.matrix()` without a size (Taichi's type hints): an
    ndarray's element of any length, `dims` 1 (vectors) or 2 (matrices), known from the array
    passed; only as the dtype of `jr.types.ndarray(...)` (as `element_dim=dims`)."""
    dims: int
    dtype: DataType | None

    def __repr__(self) -> str:
        return f"jr.types.{'vector' if self.dims == 1 else 'matrix'}(dtype={self.dtype!r})"


def vector(n: int | None = None, dtype: Any = None) -> Any:
    """The type of an n-component vector: `jr.types.vector(3, jr.f32)`; without n, an
    ndarray's vector element of any length (`AnyShape`)."""
    if n is None:
        return AnyShape(1, None if dtype is None else dtypes.coerce(dtype))
    return MatrixType(*_check_count(_check_size(n, "vector size"), 0), *_late_bound(dtype))


def matrix(n: int | None = None, m: int | None = None, dtype: Any = None) -> Any:
    """The type of an n x m matrix: `jr.types.matrix(3, 3, jr.f32)`; without n and m, an
    ndarray's matrix element of any shape (`AnyShape`)."""
    if n is None and m is None:
        return AnyShape(2, None if dtype is None else dtypes.coerce(dtype))
    if n is None or m is None:
        raise TypeError("jr.types.matrix(n, m, dtype): give both n and m (or neither, for an "
                        "ndarray's matrix element of any shape)")
    return MatrixType(*_check_count(_check_size(n, "matrix rows"),
                                    _check_size(m, "matrix columns")), *_late_bound(dtype))


def _late_bound(dtype: Any) -> tuple[DataType | None, str]:
    """(dtype, default) of a vector/matrix type's dtype argument: `int`, `float` and None
    stay the program's defaults, resolved where the type is used."""
    if dtype is None or dtype is float:
        return None, "float"
    if dtype is int:
        return None, "int"
    return dtypes.coerce(dtype), "float"


def unsigned_vector(n: int) -> MatrixType:
    """`jr.math.uvec<n>`: the unsigned integer type of `default_ip`'s width."""
    return MatrixType(*_check_count(_check_size(n, "vector size"), 0), None, "uint")


def element_type(dtype: Any) -> tuple[DataType, tuple[int, ...]]:
    """(scalar dtype, element shape) of a dtype or a vector/matrix type (one without a dtype,
    such as `jr.math.vec3`, takes the current program's default float type; `jr.math.ivec3`
    its default integer type)."""
    if isinstance(dtype, MatrixType):
        return dtype.scalar(dtypes.DEFAULT_FP[0], dtypes.DEFAULT_IP[0]), dtype.shape
    return dtypes.coerce(dtype), ()


def _storage(kind: MatrixType, shape: Any, needs_grad: bool, name: str | None,
             ndarray: bool, needs_dual: bool = False, offset: Any = None,
             layout: Any = None, order: str | None = None) -> Any:
    """A field (or ndarray) of `kind`: the components as trailing dimensions (with either
    `jr.Layout`: docs/usage.md, "Component layouts"; `order` as `jr.field`'s)."""
    from .data import MatrixField, Ndarray, track
    from .data_declare import Layout, check_offset, pending
    from .data_index import order_of
    if layout is not None and not isinstance(layout, Layout):
        raise TypeError(f"layout must be jr.Layout.AOS or jr.Layout.SOA, got {layout!r}")
    dt, element = element_type(kind)
    if not ndarray:
        check_offset(shape, offset)
    perm = order_of(order, shape)
    if shape is None and not ndarray:        # placed later: jr.root.dense(...).place(x)
        return track(pending(dt, needs_grad, name, element, needs_dual))
    if ndarray:
        return Ndarray(dt, shape, needs_grad, name, "ndarray", needs_dual=needs_dual,
                       element_shape=element)
    out = MatrixField(dt, shape, needs_grad, name, "field", needs_dual=needs_dual,
                      element_shape=element, offset=offset)
    out.layout = perm
    return track(out)


def _field(kind: MatrixType, shape: Any, needs_grad: bool, name: str | None,
           needs_dual: bool = False, offset: Any = None, layout: Any = None,
           order: str | None = None) -> Any:
    return _storage(kind, shape, needs_grad, name, False, needs_dual, offset, layout, order)


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


class Matrix(HostMatrix):
    """`jr.Matrix([[a, b], [c, d]])`: in kernels a matrix value; at Python scope a numpy array
    with Taichi's methods (host_matrix.py). `jr.Matrix.field(n, m, dtype, shape=...)` and
    `jr.Matrix.ndarray(...)` make storage of matrices."""

    @staticmethod
    def field(n: int, m: int, dtype: Any, shape: Any = None, needs_grad: bool = False,
              name: str | None = None, needs_dual: bool = False, offset: Any = None,
              layout: Any = None, order: str | None = None) -> Any:
        """A `jr.MatrixField` of n x m matrices; `offset`, `layout` and `order` as
        `Vector.field`'s."""
        return _field(matrix(n, m, dtype), shape, needs_grad, name, needs_dual, offset,
                      layout, order)

    @staticmethod
    def zero(dtype: Any, n: int, m: int) -> tuple:
        return dtype, (n, m), 0, None

    @staticmethod
    def one(dtype: Any, n: int, m: int) -> tuple:  # type: ignore[override]
        return dtype, (n, m), 1, None

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
        from .quadrants.tensor import element_tensor
        return element_tensor("jr.Matrix.tensor", Matrix.field, Matrix.ndarray,
                              (n, m, dtype, shape), **kwargs)

    # at Python scope (in kernels the frontend builds these: frontend/vectors.py)
    @staticmethod
    def rows(rows: Any) -> Any:
        """The matrix whose rows are these vectors (or lists)."""
        return Matrix([np.asarray(r).tolist() for r in rows])

    @staticmethod
    def cols(cols: Any) -> Any:
        """The matrix whose columns are these vectors (or lists)."""
        return Matrix(np.array([np.asarray(c) for c in cols]).T)

    @staticmethod
    def diag(dim: int, val: Any) -> Any:
        """A dim x dim matrix with `val` on the diagonal."""
        return Matrix(np.diag([val] * dim))


class Vector(Matrix):
    """`jr.Vector([x, y, z])`: in kernels a vector value; at Python scope a numpy array with
    Taichi's methods (host_matrix.py). `jr.Vector.field(3, jr.f32, shape=N)` and
    `jr.Vector.ndarray(3, jr.f32, shape=N)` make storage of vectors."""

    @staticmethod
    def field(  # type: ignore[override]
            n: int, dtype: Any, shape: Any = None, needs_grad: bool = False,
            name: str | None = None, needs_dual: bool = False, offset: Any = None,
            layout: Any = None, order: str | None = None) -> Any:
        """A `jr.MatrixField` of n-vectors; `offset` as `jr.field`'s, `layout` is
        `jr.Layout.AOS` or `jr.Layout.SOA` (docs/usage.md, "Component layouts"), `order` as
        `jr.field`'s."""
        return _field(vector(n, dtype), shape, needs_grad, name, needs_dual, offset, layout,
                      order)

    # in kernels: constant vectors (the frontend calls these specs and builds the value)
    @staticmethod
    def zero(dtype: Any, n: int) -> tuple:  # type: ignore[override]
        return dtype, (n,), 0, None

    @staticmethod
    def one(dtype: Any, n: int) -> tuple:  # type: ignore[override]
        return dtype, (n,), 1, None

    @staticmethod
    def unit(n: int, i: int, dtype: Any = float) -> tuple:
        return dtype, (n,), 0, (lambda k: k == i)

    @staticmethod
    def ndarray(  # type: ignore[override]
            n: int, dtype: Any, shape: Any = (), needs_grad: bool = False,
            name: str | None = None, needs_dual: bool = False) -> Any:
        return _ndarray(vector(n, dtype), shape, needs_grad, name, needs_dual)

    @staticmethod
    def tensor(  # type: ignore[override]
            n: int, dtype: Any, shape: Any, **kwargs: Any) -> Any:
        """Quadrants' `qd.Vector.tensor(n, dtype, shape, backend=...)`: a field or ndarray of
        n-vectors (quadrants/tensor.py)."""
        from .quadrants.tensor import element_tensor
        return element_tensor("jr.Vector.tensor", Vector.field, Vector.ndarray,
                              (n, dtype, shape), **kwargs)


host_matrix.register(Vector, Matrix)


@frozen
class StructType:
    """Named members, each a dtype or a vector/matrix type: `jr.types.struct(pos=vec3, m=f32)`.
    Stored as one field (or ndarray) per member (structure of arrays). `methods`: a
    `@jr.dataclass`'s functions, called on struct values in kernels (inlined, `self` the
    struct); not part of the type's identity."""
    members: tuple[tuple[str, Any], ...]
    methods: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), compare=False,
                                                             repr=False)

    def field(self, shape: Any = None, needs_grad: bool = False,
              name: str | None = None, needs_dual: bool = False,
              offset: Any = None, layout: Any = None) -> "StructField":
        """A field of these structs; without a shape, placed later (`jr.root...place(s)`),
        as in Taichi. `layout=jr.Layout.SOA` or `AOS` (Quadrants') is accepted: jitrt
        stores one field per member either way."""
        from .data_declare import Layout
        if not self.members:
            raise TypeError(f"{self!r} has no members: a field of it holds nothing")
        if layout is not None and not isinstance(layout, Layout):
            raise TypeError(f"layout must be jr.Layout.SOA or jr.Layout.AOS, got {layout!r}")
        return StructField(self, shape, needs_grad, name, needs_dual, offset)

    element_field = field

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Outside kernels: a `jr.Struct` value of this type, members by position then by
        keyword, each converted to its type; a member not given is 0 (`S(1)`: the first member
        1, the others 0, as Taichi). Inside, the frontend lowers it (struct_values.py)."""
        return make_struct(Struct, self, args, kwargs)

    def __instancecheck__(self, value: Any) -> bool:
        """`isinstance(s, S)`: `s` is a Python-scope struct made by this type (or a
        `jr.Struct(...)` of the same member names) or an element of a field of it, as
        Taichi's check."""
        from .data_struct import StructElement
        if isinstance(value, StructElement):          # `x[i]` of a field of this type
            return value._field.kind == self         # type: ignore[no-any-return]
        return isinstance(value, HostStruct) and (
            value.kind == self if value.kind is not None else
            value.keys == [k for k, _ in self.members])

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.members)
        return f"jr.types.struct({inner})"


def struct(**members: Any) -> StructType:
    """The type of a struct with these members: `jr.types.struct(pos=jr.math.vec3, m=jr.f32)`.
    A `bool` member is an i32 holding 0 or 1 (as jitrt's `bool` parameters)."""
    if not members:
        raise TypeError("a struct needs at least one member")
    return StructType(struct_members(members, "jr.types.struct"))


def struct_members(members: dict[str, Any], who: str) -> tuple[tuple[str, Any], ...]:
    """The checked (name, type) pairs of a struct type (`bool` made i32)."""
    out = []
    for k, v in members.items():
        if v is bool:
            v = dtypes.i32
        elif type(v).__name__ == "ArgPackType":
            raise ValueError(f"{who}: member '{k}': invalid data type {v!r}: an argument pack "
                             "is not a struct member (it is only a kernel parameter)")
        elif not isinstance(v, (MatrixType, StructType)) and v is not int and v is not float:
            try:                    # (a struct member: nested)
                dtypes.coerce(v)
            except TypeError as exc:
                raise TypeError(f"{who}: member '{k}': {exc}") from None
        out.append((k, v))
    return tuple(out)


class Struct(HostStruct):
    """A struct value at Python scope (Taichi's `ti.Struct`: struct_host.py): `jr.Struct(a=1,
    b=[0, 1])`; `jr.Struct.field({"pos": jr.math.vec3, "mass": jr.f32}, shape=N)` makes a
    field of structs."""

    @staticmethod
    def field(members: dict[str, Any], methods: Any = None, shape: Any = None,
              name: str | None = None, offset: Any = None, needs_grad: bool = False,
              needs_dual: bool = False, layout: Any = None) -> StructField:
        """A field of structs of these members, Taichi's parameters in Taichi's order:
        `methods` (a dict) are called on the field's elements in kernels, as a
        `@jr.dataclass`'s; a shape given second (jitrt's older order) is the shape."""
        if methods is not None and not isinstance(methods, dict):
            if shape is not None:
                raise TypeError(f"jr.Struct.field: methods must be a dict of functions, got "
                                f"{methods!r}")
            shape, methods = methods, None
        kind = struct(**members)
        if methods:
            kind = StructType(kind.members, tuple(methods.items()))
        return kind.field(shape, needs_grad, name, needs_dual, offset, layout)


def __getattr__(name: str) -> Any:
    """Taichi's `ti.linalg` solvers (matrix_free.py, an API-level module built from kernels),
    loaded by name on first use: this module is below the kernel API (the frontend reads its
    matrix types), so it holds no import of it, lazy or not (tests/test_layers.py)."""
    if name in ("LinearOperator", "MatrixFreeCG", "MatrixFreeBICGSTAB"):
        import importlib
        return getattr(importlib.import_module("jitrt.matrix_free"), name)
    from .peer_names import missing      # Taichi's sparse matrices: what to use instead
    raise missing("jitrt.linalg", name, globals())

