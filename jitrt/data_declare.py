"""Declaring fields and ndarrays: `jr.field`, `jr.ndarray`, `jr.Layout`, and the fields
declared without a shape that `jr.root....place(x)` places later (`PendingField`).

Stage: data (above `data.py`, whose `Field`/`Ndarray` classes these make; below every other
layer). A float field declared without a shape always gets a gradient (and a dual) declared
with it, marked `implicit` until the program asks for it (`data.py`'s docstring). Caches
nothing; the fields it makes are tracked by `data.track`.
"""
from __future__ import annotations

import enum
from typing import Any

from . import data, data_placement, dtypes
from .data import Field, MatrixField, Ndarray, ScalarField, track
from .data_index import FieldDeclarationError, order_of, shape_of
from .errors import InvalidShapeError


class PendingField(Field):
    """A field declared without a shape, waiting for `jr.root....place(x)`: an instance of
    `PendingScalarField` or `PendingMatrixField` (so that `isinstance(x, jr.ScalarField)`
    holds before placement too), which placing turns into a `ScalarField`/`MatrixField`. A
    float one has a gradient from the start (pending too): `needs_grad=True` asks for it;
    otherwise it is `implicit` until `place(x.grad)` or `jr.root.lazy_grad()` (see the module
    docstring)."""
    __slots__ = ()
    pending = True           # read by data_placement.check (which does not import this module)

    def __init__(self, dtype: Any, needs_grad: bool, name: str | None,
                 element_shape: tuple[int, ...] = (), needs_dual: bool = False,
                 derived: bool = False) -> None:
        self._dtype = dtypes.coerce(dtype)
        self.name = name or "field"
        self.named = name is not None
        self._element = tuple(element_shape)
        self.grad = self.dual = None
        self.implicit = False
        if needs_grad:
            data.check_float(self.dtype, "needs_grad", "field", name)
        if not derived and (needs_grad or self.dtype.is_float):
            self.grad = pending(self.dtype, False, self.name + ".grad", element_shape,
                                derived=True)
            self.grad.named = self.named
            self.grad.implicit = not needs_grad
        if needs_dual:
            data.check_float(self.dtype, "needs_dual", "field", name)
        if not derived and (needs_dual or self.dtype.is_float):   # as the gradient above
            self.dual = pending(self.dtype, False, self.name + ".dual", element_shape,
                                derived=True)
            self.dual.named = self.named
            self.dual.implicit = not needs_dual

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        raise TypeError(f"field '{self.name}' has no shape yet: place it "
                        f"(jr.root.dense(jr.i, n).place({self.name})) before copying or "
                        "pickling it")

    def __getattr__(self, attr: str) -> Any:
        raise RuntimeError(f"field '{self.name}' has no shape yet: give it one with "
                           f"jr.root.dense(jr.i, n).place({self.name}) (or create it with "
                           "shape=...)")

    def place_with(self, shape: tuple[int, ...], offset: Any = None) -> None:
        """Become an ordinary field of `shape` (plus the element's component dimensions),
        starting at `offset`; a gradient not placed yet is placed with it, one placed already
        must match."""
        grad, dual, element = self.grad, self.dual, self.element_shape
        implicit = self.implicit
        Field.__init__(self, self.dtype, shape, False, self.name if self.named else None,
                       "field", element_shape=element, offset=offset)
        self.__class__ = MatrixField if element else ScalarField  # type: ignore[assignment]
        self.implicit = implicit
        if isinstance(grad, PendingField):
            grad.place_with(shape, offset)
        if grad is not None:
            if (grad.shape, grad.offset) != (self.shape, self.offset):
                raise ValueError(f"field '{self.name}' gets shape {self.shape} (offset "
                                 f"{self.offset}) but its gradient was placed with shape "
                                 f"{grad.shape} (offset {grad.offset}): place both alike"
                                 if any(self.offset) or any(grad.offset) else
                                 f"field '{self.name}' gets shape {self.shape} but its "
                                 f"gradient was placed with shape {grad.shape}: place both "
                                 "alike")
            self.grad = grad
            data.has_companions(self, grad=True, dual=False)
        if isinstance(dual, PendingField):
            dual.place_with(shape, offset)
            self.dual = dual
            data.has_companions(self, grad=False, dual=True)


class PendingScalarField(PendingField, ScalarField):
    __slots__ = ()


class PendingMatrixField(PendingField, MatrixField):
    __slots__ = ()

    def get_scalar_field(self, *indices: int) -> Any:
        from .data_component import ComponentField
        return ComponentField(self, tuple(indices))


def pending(dtype: Any, needs_grad: bool, name: str | None,
            element_shape: tuple[int, ...] = (), needs_dual: bool = False,
            derived: bool = False) -> PendingField:
    """A field without a shape yet, of the class its element asks for."""
    cls = PendingMatrixField if element_shape else PendingScalarField
    out = cls(dtype, needs_grad, name, element_shape, needs_dual, derived)
    if not derived:         # Taichi's materialization checks (data_placement.py)
        data_placement.declared(out)
        for kind, asked in (("grad", needs_grad), ("dual", needs_dual)):
            if asked:
                data_placement.awaiting(out, kind)
    return out


class _NoShape:
    """The default of `jr.field`'s shape: none given, the field is placed later
    (`jr.root.dense(...).place(x)`); its repr is what `help(jr.field)` shows."""

    def __repr__(self) -> str:
        return "<placed later>"


_NO_SHAPE: Any = _NoShape()


class Layout(enum.Enum):
    """Taichi's `ti.Layout` for `jr.Vector.field(..., layout=)`: accepted; jitrt stores the
    components of each element together either way (docs/usage.md, "Component layouts")."""
    AOS = "aos"
    SOA = "soa"


def field(dtype: Any, shape: Any = _NO_SHAPE, needs_grad: bool = False,
          name: str | None = None, needs_dual: bool = False, offset: Any = None,
          order: str | None = None) -> Any:
    """A global array kernels reach by name (a module global or a closure variable).

    Args:
        dtype: a jitrt dtype (`jr.f32`...), a numpy dtype, or `int`/`float`.
        shape: an int or a tuple of ints; `()` for a scalar field, read and written as
            `x[None]`.
        needs_grad: also allocate `x.grad` (float dtypes only), for reverse-mode autodiff.
        name: the name used in error messages (default: the name the kernel source uses).
        needs_dual: also allocate `x.dual` (float dtypes only), for forward-mode autodiff
            (`jr.ad.FwdMode`).
        offset: the first index on each axis (an int or one per axis; default 0), as in
            Taichi: `offset=(-4, 0)` with `shape=(8, 3)` takes `x[-4, 0]` to `x[3, 2]`, in
            kernels and at Python scope.
        order: Taichi's memory order of the axes, outermost first (`"ji"`): checked as
            Taichi checks it and kept in `x.layout`; storage stays row-major, so indices,
            values and `to_numpy()` are the same either way (docs/porting.md).

    Returns:
        A `jr.ScalarField` (a `jr.MatrixField` for a vector or matrix dtype, a
        `jr.StructField` for a struct type).

    Raises:
        TypeError: no shape, a non-integer extent, or a dtype jitrt does not know;
            `needs_grad`/`needs_dual` with an integer dtype (`jr.FloatDtypeError`, also a
            RuntimeError as in Taichi).
        ValueError: a negative extent or more than 2**40 elements; an offset with another
            number of axes than the shape, or an offset without a shape.

    Example::

        x = jr.field(jr.f32, shape=(1024,), needs_grad=True)
        x.fill(1.0); x[3] = 2.0; x.to_numpy()
    """
    if shape is _NO_SHAPE:
        shape = None                              # placed later: jr.root.dense(...).place(x)
    check_offset(shape, offset)
    if hasattr(dtype, "element_field"):           # jr.field(jr.math.vec3, shape=N)
        if order is not None:
            return dtype.element_field(shape, needs_grad, name, needs_dual=needs_dual,
                                       offset=offset, order=order)
        return dtype.element_field(shape, needs_grad, name, needs_dual=needs_dual,
                                   offset=offset)
    perm = order_of(order, shape)
    if shape is None:
        return track(pending(dtype, needs_grad, name, needs_dual=needs_dual))
    out = ScalarField(dtype, shape, needs_grad, name, "field", needs_dual=needs_dual,
                      offset=offset)
    out.layout = perm
    return track(out)


def check_offset(shape: Any, offset: Any) -> None:
    """Taichi's refusal of an offset for a field placed later (give it to `place`)."""
    if offset is not None and shape is None:
        raise FieldDeclarationError("shape cannot be None when offset is set (a field placed "
                                    "later takes its offset from place(x, offset=...))")


def ndarray(dtype: Any, shape: Any, needs_grad: bool = False, name: str | None = None,
            needs_dual: bool = False) -> Ndarray:
    """An array passed to kernels as an argument (`jr.types.ndarray(...)` parameters).

    Same arguments as `jr.field`. A plain numpy array may be passed where a kernel takes an
    ndarray; a jitrt ndarray adds a generation counter (exact adstack-sizing caches), `.grad`
    with `needs_grad=True`, `.dual` with `needs_dual=True`, and the cheapest launches.
    `jr.ndarray.from_dlpack(obj)` wraps another library's array without copying.

    Example::

        a = jr.ndarray(jr.i32, shape=(N,)); a.from_numpy(np.arange(N, dtype=np.int32))
    """
    _no_zero_extent(shape)
    if hasattr(dtype, "element_ndarray"):     # jr.ndarray(jr.math.vec3, shape=N)
        return dtype.element_ndarray(shape, needs_grad, name,  # type: ignore[no-any-return]
                                     needs_dual=needs_dual)
    return Ndarray(dtype, shape, needs_grad, name, "ndarray", needs_dual=needs_dual)


ndarray.from_dlpack = Ndarray.from_dlpack  # type: ignore[attr-defined]


def _no_zero_extent(shape: Any) -> None:
    """`jr.ndarray` takes extents from 1, as Taichi's `ti.ndarray` does (a zero extent there
    is a `TaichiRuntimeError`); an empty numpy array may still be passed to a kernel."""
    dims = shape_of(shape, "ndarray")
    if 0 in dims:
        raise InvalidShapeError(f"{shape!r} is not a valid shape for ndarray: jr.ndarray takes "
                                "extents from 1 (as Taichi's ti.ndarray); pass an empty numpy "
                                "array where a kernel should see no elements")
