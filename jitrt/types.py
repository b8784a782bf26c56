"""Parameter annotations: `jr.types.ndarray(...)` and `jr.template()` (vector/matrix value
parameters are annotated with their types, `jr.types.vector(3, jr.f32)`: `linalg.py`)."""
from __future__ import annotations

from typing import Any

from .frozen import frozen
from . import dtypes
from .dtypes import DataType
from .linalg import AnyShape, MatrixType, StructType, matrix, struct, vector
from . import primitive_types  # noqa: F401 (Taichi's ti.types.primitive_types)
# the dtypes, under both spellings, as in Taichi's ti.types
from .dtypes import (f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, f32 as float32,  # noqa: F401
                     f64 as float64, i8 as int8, i16 as int16, i32 as int32, i64 as int64,
                     u8 as uint8, u16 as uint16, u32 as uint32, u64 as uint64)

__all__ = ["ArgPackType", "NdarrayType", "Template", "argpack", "matrix", "ndarray", "struct",
           "template", "vector"]


@frozen
class NdarrayType:
    dtype: DataType | None = None
    ndim: int | None = None              # element_dim 0: every dimension; else the others
    element_shape: tuple[int, ...] = ()  # vectors/matrices: the trailing component dims
    # where the element comes from (`ir.nodes.Param.element_dim`): 0 `element_shape`, -1 the
    # array passed (no dtype given), 1 or 2 the array's last dimensions (`element_dim=`)
    element_dim: int = 0
    needs_grad: bool | None = None
    boundary: str = "unsafe"             # "clamp": indices clamp into the array (Taichi's)

    def __repr__(self) -> str:
        extra = (f", element_dim={self.element_dim}" if self.element_dim > 0 else "") + (
            f", element_shape={self.element_shape}" if self.element_shape else "") + (
            "" if self.needs_grad is None else f", needs_grad={self.needs_grad}") + (
            "" if self.boundary == "unsafe" else f", boundary={self.boundary!r}")
        return f"jr.types.ndarray(dtype={self.dtype!r}, ndim={self.ndim}{extra})"


def ndarray(dtype: Any = None, ndim: int | None = None, element_dim: int | None = None,
            element_shape: Any = None, needs_grad: bool | None = None,
            field_dim: Any = None, boundary: str = "unsafe") -> NdarrayType:
    """The annotation of an array parameter: `a: jr.types.ndarray(dtype=jr.f32, ndim=1)`.

    Leaving out dtype or ndim makes them part of the specialization (one compile each).
    With a vector or matrix dtype (`dtype=jr.math.vec3, ndim=1`), `a[i]` is a vector and the
    array passed has the components as trailing dimensions (a numpy array of shape (N, 3)).
    `ndim` counts the array's dimensions without the element's, as in Taichi.
    Without a dtype, the element is the array's: a jitrt ndarray of vectors
    (`jr.ndarray(jr.math.vec2, N)`) gives `a[i]` a vec2 and a 1-D `for i in a`; a numpy array
    gives scalars. Taichi's older spellings: `element_dim=1` (vectors: the array's last
    dimension) or 2 (matrices: the last two), `element_shape=(3,)` or `(3, 3)` (fixed).
    `needs_grad=False`: the kernel's adjoint accumulates nothing into this argument's
    gradient; `needs_grad=True`: the argument must have one. `boundary="clamp"`: every index
    is clamped into the array (Taichi's rule: each array axis into 0..extent-1, and a run-time
    component index of a vector/matrix element as the element's flat position into
    0..components-1), so that no access is out of bounds; "unsafe" (the default): indices
    are checked, as everywhere in jitrt."""
    if boundary not in ("unsafe", "clamp"):
        raise ValueError(f"jr.types.ndarray: boundary must be 'unsafe' or 'clamp', got "
                         f"{boundary!r}")
    if field_dim is not None:
        raise ValueError("jr.types.ndarray: field_dim is Taichi's old name of ndim (deprecated "
                         "there too); use ndim")
    if ndim is not None and (not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0):
        raise TypeError(f"jr.types.ndarray: ndim must be an int >= 0, got {ndim!r}")
    if needs_grad is not None and not isinstance(needs_grad, bool):
        raise TypeError(f"jr.types.ndarray: needs_grad must be True, False or None, got "
                        f"{needs_grad!r}")
    if element_dim is not None or element_shape is not None:
        if isinstance(dtype, MatrixType):
            raise TypeError(f"jr.types.ndarray: a vector/matrix dtype ({dtype!r}) and "
                            "element_dim/element_shape at once; give one of them")
        shape = _element_shape(element_dim, element_shape)
        scalar = None if dtype is None else dtypes.coerce(dtype)
        if shape is None:            # element_dim=1 or 2: the length comes from the array
            return NdarrayType(scalar, ndim, (), element_dim or 0, needs_grad, boundary)
        if shape:
            return NdarrayType(scalar, None if ndim is None else ndim + len(shape), shape, 0,
                               needs_grad, boundary)
    if isinstance(dtype, AnyShape):          # jr.types.vector(): any length, from the array
        if element_dim is not None or element_shape is not None:
            raise TypeError(f"jr.types.ndarray: a dtype of any shape ({dtype!r}) and "
                            "element_dim/element_shape at once; give one of them")
        return NdarrayType(dtype.dtype, ndim, (), dtype.dims, needs_grad, boundary)
    if isinstance(dtype, MatrixType):
        element = dtype.shape
        return NdarrayType(dtype.dtype, None if ndim is None else ndim + len(element), element,
                           0, needs_grad, boundary)
    return NdarrayType(None if dtype is None else dtypes.coerce(dtype), ndim, (),
                       -1 if dtype is None else 0, needs_grad, boundary)


def _element_shape(element_dim: Any, element_shape: Any) -> tuple[int, ...] | None:
    """The fixed element shape `element_dim`/`element_shape` give (() for scalars), or None
    when only element_dim (1 or 2) is given."""
    if element_dim is not None and (not isinstance(element_dim, int) or isinstance(
            element_dim, bool) or element_dim not in (0, 1, 2)):
        raise ValueError(f"jr.types.ndarray: element_dim must be 0 (scalars), 1 (vectors) or "
                         f"2 (matrices), got {element_dim!r}")
    if element_shape is None:
        return None if element_dim else ()
    shape = tuple(element_shape) if isinstance(element_shape, (tuple, list)) else None
    if shape is None or len(shape) > 2 or not all(
            isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in shape):
        raise ValueError(f"jr.types.ndarray: element_shape must be (), (n,) or (n, m) with "
                         f"positive ints, got {element_shape!r}")
    if element_dim is not None and len(shape) != element_dim:
        raise ValueError(f"jr.types.ndarray: element_shape {shape} has {len(shape)} "
                         f"dimension(s) but element_dim is {element_dim}")
    return shape


@frozen
class ArgPackType:
    """`jr.types.argpack(a=jr.i32, v=jr.math.vec3, arr=jr.types.ndarray(...), s=S)`: a kernel
    parameter that bundles others (scalars, vectors/matrices, structs, ndarrays, argument
    packs), passed as one argument (`k(pack_type(a=1, ...))`) and read as `p.a` in the
    kernel, as Taichi's. Only a kernel parameter: not a struct member, field element or
    return type. Called at Python scope, it makes the value (a `jr.Struct` of this kind)."""
    members: tuple[tuple[str, Any], ...]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .linalg import Struct
        from .struct_host import make_struct
        return make_struct(Struct, self, args, kwargs)

    @property
    def methods(self) -> tuple[tuple[str, Any], ...]:
        return ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.members)
        return f"jr.types.argpack({inner})"


def argpack(**members: Any) -> ArgPackType:
    """The type of an argument pack (Taichi's `ti.types.argpack`): `pack = jr.types.argpack(
    a=jr.i32, arr=jr.types.ndarray(dtype=jr.f32, ndim=1))`, a kernel parameter annotation
    (`def k(p: pack)`), called to make a value (`k(pack(a=1, arr=x))`). A `bool` member is an
    i32 0 or 1."""
    out = []
    for k, v in members.items():
        if v is bool:
            v = dtypes.i32
        elif not isinstance(v, (MatrixType, NdarrayType, ArgPackType, StructType)) and \
                v is not int and v is not float:
            try:
                dtypes.coerce(v)
            except TypeError as exc:
                raise TypeError(f"jr.types.argpack: member '{k}': {exc}") from None
        out.append((k, v))
    return ArgPackType(tuple(out))


@frozen
class Template:
    def __repr__(self) -> str:
        return "jr.template()"


def template() -> Template:
    """The annotation of a compile-time parameter (`f: jr.template()`): a field or a Python
    constant, compiled into the kernel (one specialization per field or value); in a
    `@jr.func`, a parameter passed by reference."""
    return Template()


@frozen
class RefType:
    """`jr.ref(dt)`: a `jr.real_func` parameter passed by reference (a caller's local)."""
    dtype: Any

    def __repr__(self) -> str:
        return f"jr.ref({self.dtype!r})"


def ref(dtype: Any) -> RefType:
    """The annotation of a `jr.real_func` parameter the function may assign: the caller's
    local (of type `dtype`) takes the parameter's value when the call returns."""
    return RefType(dtype)


def _dtype_of(dt: Any, who: str) -> DataType:
    try:
        return dtypes.coerce(dt)
    except TypeError:
        raise TypeError(f"jr.types.{who}(dt): dt must be a jitrt dtype such as jr.f32, "
                        f"got {dt!r}") from None


def is_integral(dt: Any) -> bool:
    """Whether `dt` is an integer dtype (Taichi's `ti.types.is_integral`)."""
    return _dtype_of(dt, "is_integral").is_int


def is_real(dt: Any) -> bool:
    """Whether `dt` is a floating-point dtype."""
    return _dtype_of(dt, "is_real").is_float


def is_signed(dt: Any) -> bool:
    """Whether `dt` is a signed dtype (every float is)."""
    return _dtype_of(dt, "is_signed").is_signed


def is_tensor(dt: Any) -> bool:
    """Whether `dt` is a vector or matrix type (`jr.types.vector(3, jr.f32)`, `jr.math.vec3`)."""
    return isinstance(dt, MatrixType)


def __getattr__(name: str) -> object:
    """A name of Taichi's ti.types jitrt lacks: an AttributeError that says what to use."""
    from .peer_names import missing
    raise missing("jitrt.types", name)
