"""Dense SNode layouts as in Taichi: `jr.root.dense(jr.ij, (N, M)).place(x, y)`.

Stage: API (data). A field created without a shape (`jr.field(jr.f32)`, `jr.Vector.field(3,
jr.f32)`) is a `PendingField` until a layout places it: `place` gives it the layout's shape
(and `place(x, offset=...)` its offset) and turns it into an ordinary
`ScalarField`/`MatrixField` in place, so every reference a program already holds sees the
placed field. Placing one component of a vector field (`v.get_scalar_field(i)`, Taichi's
structure-of-arrays placement) places the whole field; its other components must be placed
with the same shape and offset (else the next kernel to compile raises, as in Taichi).
`x.parent()` is the level holding x (`data.Cells`), a kernel loop's range. As in Taichi, each
`.dense(axes, extents)` level multiplies the extents of its axes (chained levels give the
product) and the field has one dimension per axis used, in axis order, unused axes dropped:
`dense(jr.k, 4).dense(jr.l, 3)` gives shape (4, 3), `dense(jr.l, 4).dense(jr.i, 3)` gives
(3, 4). Storage is row-major over that shape, one array per field (Taichi interleaves fields
placed together and blocks chained levels in memory: the logical indices and `to_numpy()`
are the same, only the memory order differs). A float field's gradient is placed with it
(`data_declare.PendingField`); `place(x.grad)` checks its shape and `lazy_grad()` marks
gradients asked for (and gives one to fields created with a shape and no gradient). Duals
are placed with their fields (`lazy_dual()` has nothing to do). Sparse layouts raise
NotImplementedError. `FieldsBuilder` is Taichi's builder of a separate tree (the same
levels, then `finalize()`). Caches nothing.
"""
from __future__ import annotations

from typing import Any

import weakref

import numpy as np

from . import data, data_placement
from .data_declare import PendingField
from .data_component import ComponentField
from .data_index import offset_of

i, j, k, l = (0,), (1,), (2,), (3,)      # noqa: E741  (the peers' axis names)
ij, ik, jk, ijk, ijkl = (0, 1), (0, 2), (1, 2), (0, 1, 2), (0, 1, 2, 3)


class SparseLevels:
    """The sparse and quantized layout levels of Taichi, each a NotImplementedError naming it
    (`jr.root` and a `jr.FieldsBuilder` both have them)."""

    def pointer(self, *args: Any, **kwargs: Any) -> Any:
        raise _sparse("pointer")

    def bitmasked(self, *args: Any, **kwargs: Any) -> Any:
        raise _sparse("bitmasked")

    def dynamic(self, *args: Any, **kwargs: Any) -> Any:
        raise _sparse("dynamic")

    def bit_struct(self, *args: Any, **kwargs: Any) -> Any:
        raise _sparse("bit_struct")


class Node(SparseLevels):
    """A level of a layout: the shape so far, per axis; `owner` is the `FieldsBuilder` whose
    tree it belongs to (None under `jr.root`)."""

    def __init__(self, extents: dict[int, int] | None = None,
                 owner: "FieldsBuilder | None" = None) -> None:
        self.extents = dict(extents or {})
        self.owner = owner

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.extents[a] for a in sorted(self.extents))

    def dense(self, axes: Any, shape: Any) -> "Node":
        """A level over `axes` (`jr.i`, `jr.ij`, or a tuple of them) of `shape` (one positive
        int for every axis, given as an int or a 1-tuple, or one per axis). An axis named
        twice in one level, an extent that is not an integer (`True`, `"4"`, 2.0) or not
        positive is refused, as in Taichi."""
        axes = _flat_axes(axes)
        where = f"dense({_axes_name(axes)}, {shape!r})"
        sizes = (shape,) * len(axes) if _is_int(shape) else _extents(shape, where)
        if len(sizes) == 1:
            sizes = sizes * len(axes)          # one extent for every axis, as in Taichi
        if len(sizes) != len(axes):
            raise ValueError(f"{where}: one extent per axis ({len(axes)} axes, "
                             f"{len(sizes)} extents)")
        grown = dict(self.extents)
        for a, s in zip(axes, sizes):
            if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < 8:
                raise ValueError(f"{where}: axes are jr.i, jr.j, jr.k, jr.l, jr.ij..., got "
                                 + repr(a))
            if axes.count(a) > 1:
                raise ValueError(f"{where}: axis {'ijklmnop'[a]} is named twice in one level "
                                 "(chain .dense calls to split an axis)")
            if not _is_int(s) or s <= 0:
                raise (TypeError if not _is_int(s) else ValueError)(
                    f"{where}: every extent must be a positive integer, got {s!r}")
            grown[a] = grown.get(a, 1) * int(s)
        return Node(grown, self.owner)

    def place(self, *fields: Any, offset: Any = None) -> "Node":
        """Give each field this level's shape, its indices starting at `offset` (an int or
        one per axis, as `jr.field`'s): fields declared without a shape, gradients, a struct
        field's members, or one component of a vector/matrix field
        (`v.get_scalar_field(i)`: the first places the whole field, the others must agree).
        A field placed already must have this shape and offset."""
        off = offset_of(offset, self.shape)
        if self.owner is not None:
            self.owner.placing(fields)
        for f in fields:
            data_placement.placed(f)
            if isinstance(f, ComponentField):
                self._place_component(f, off)
            elif isinstance(f, PendingField):
                f.place_with(self.shape, off)
                f.implicit = False                # placing a gradient asks for it
            elif isinstance(f, data.Field):
                if (f.shape, f.offset) != (self.shape, off):
                    what = "gradient" if f.implicit else "field"
                    raise ValueError(f"{what} '{f.name}' is already placed with shape "
                                     f"{_where(f.shape, f.offset)}, not "
                                     f"{_where(self.shape, off)}")
                f.implicit = False
            elif hasattr(f, "members"):          # a struct field: each member
                self.place(*f.members.values(), offset=offset)
            elif f is None:
                raise TypeError("place() takes fields, got None (a field created with a shape "
                                "has .grad only with needs_grad=True)")
            else:
                raise TypeError(f"place() takes fields, got {type(f).__name__}")
        return self

    def _place_component(self, c: ComponentField, off: tuple[int, ...]) -> None:
        parent = c.parent
        if isinstance(parent, PendingField):
            parent.place_with(self.shape, off)
        elif (parent.shape, parent.offset) != (self.shape, off):   # raised at the next
            data_placement.mismatched(parent,                         # kernel, as in Taichi
                f"Members of the following field have different shapes: '{parent.name}' is "
                f"placed with shape {_where(parent.shape, parent.offset)}, its component "
                f"{c.name} with {_where(self.shape, off)}; jitrt places every component "
                "alike")
        parent.implicit = False

    def lazy_grad(self) -> None:
        """Give every float field placed or created so far a gradient, as Taichi does for
        the fields placed before it: an implicit gradient (placed with its field) becomes
        one asked for, and a field created with a shape and no gradient gets one. Fields
        declared later are not affected (call it again)."""
        _ask_for("grad", data._grad_fields)
        data_placement.asked_for_all("grad")

    def lazy_dual(self) -> None:
        """Give every float field placed or created so far a dual (forward mode), as
        `lazy_grad` does gradients."""
        _ask_for("dual", data._dual_buffers)
        data_placement.asked_for_all("dual")


def _sparse(kind: str) -> NotImplementedError:
    """The error of a sparse or quantized layout level, whatever its arguments (Taichi's
    `dynamic(ti.i, n, chunk_size=32)` too): it names the level."""
    return NotImplementedError(f"sparse layouts ({kind}) are not supported: use dense")


root = Node()


class FieldsBuilder(SparseLevels):
    """Taichi's `ti.FieldsBuilder`: a layout tree of its own, `fb.dense(jr.i, n).place(x)`
    (and `fb.place(s)` for 0-d fields) as under `jr.root`, closed by `fb.finalize()`, which
    returns an `SNodeTree`. Placing through a finalized builder, or finalizing twice, is a
    RuntimeError. Every field owns its memory in jitrt, so finalizing allocates nothing
    new and `SNodeTree.destroy()` frees nothing itself (memory is freed when the fields are
    dropped); sparse levels raise NotImplementedError as under `jr.root`."""

    def __init__(self) -> None:
        self._root = Node(owner=self)
        self.finalized = False
        self.fields: list[Any] = []

    def placing(self, fields: tuple[Any, ...]) -> None:
        """Called by this tree's nodes before they place `fields`."""
        if self.finalized:
            raise RuntimeError("this FieldsBuilder is finalized: place fields through a new "
                               "jr.FieldsBuilder()")
        self.fields.extend(fields)

    def dense(self, axes: Any, shape: Any) -> Node:
        return self._root.dense(axes, shape)

    def place(self, *fields: Any, offset: Any = None) -> Node:
        return self._root.place(*fields, offset=offset)

    def lazy_grad(self) -> None:
        root.lazy_grad()

    def lazy_dual(self) -> None:
        root.lazy_dual()

    def finalize(self, raise_warning: bool = True) -> "SNodeTree":
        """Close the tree: no more placing through it."""
        if self.finalized:
            raise RuntimeError("this FieldsBuilder is finalized already")
        self.finalized = True
        return SNodeTree(tuple(self.fields))


class SNodeTree:
    """What `FieldsBuilder.finalize()` returns: `destroy()` ends it (once; a second call is
    a `jr.TaichiRuntimeError`, as in Taichi). As Taichi's, `destroy()` makes every kernel
compile again at its next launch, so that kernels of a data-oriented object whose fields
were declared anew see the new fields."""

    def __init__(self, fields: tuple[Any, ...]) -> None:
        self.fields = fields
        self.destroyed = False

    def destroy(self) -> None:
        from .errors import KernelRuntimeError
        from .kernel import clear_compiled_kernels
        if self.destroyed:
            raise KernelRuntimeError("this SNodeTree is destroyed already")
        self.destroyed = True
        clear_compiled_kernels()     # as Taichi: kernels read their fields afresh


def _where(shape: tuple[int, ...], offset: tuple[int, ...]) -> str:
    """A shape in a message, with its offset when it has one."""
    return f"{shape}" + (f" (offset {offset})" if any(offset) else "")


def _is_int(v: Any) -> bool:
    """A Python or numpy integer that is not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _flat_axes(axes: Any) -> tuple[Any, ...]:
    """`jr.ij`, `(jr.i, jr.j)` and `jr.i` as a flat tuple of axis numbers."""
    out: list[Any] = []
    for a in axes if isinstance(axes, (tuple, list)) else (axes,):
        out += list(a) if isinstance(a, (tuple, list)) else [a]
    return tuple(out)


def _axes_name(axes: tuple[Any, ...]) -> str:
    """`jr.ij` for (0, 1); the tuple itself when it holds something that is not an axis."""
    if all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < 8 for a in axes):
        return "jr." + "".join("ijklmnop"[a] for a in axes)
    return repr(axes)


def _extents(shape: Any, where: str) -> tuple[Any, ...]:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"{where}: the extents must be a positive integer or a tuple of them, "
                        f"got {shape!r}")
    return tuple(shape)


def _ask_for(kind: str, registry: list) -> None:
    """`lazy_grad`/`lazy_dual`: every live float field's `kind` ("grad" or "dual") made or
    marked asked for (`registry`: the weak list that tracks fields having one)."""
    for f in data.live_user_fields():
        if isinstance(f, PendingField) or not f.dtype.is_float:
            continue
        companion = getattr(f, kind)
        if companion is None:
            companion = f._companion(f".{kind}", "field")
            setattr(f, kind, companion)
            registry.append(weakref.ref(f))
        companion.implicit = False
