"""Dense SNode layouts as in Taichi: `jr.root.dense(jr.ij, (N, M)).place(x, y)`.

Stage: API (data). A field created without a shape (`jr.field(jr.f32)`,
`jr.Vector.field(3, jr.f32)`) is a `PendingField` until a layout places it: `place` gives it
the layout's shape and turns it into an ordinary `Field` in place, so every reference a
program already holds sees the placed field. As in Taichi, each `.dense(axes, extents)` level
multiplies the extents of its axes (chained levels give the product) and the field has one
dimension per axis used, in axis order, unused axes dropped: `dense(jr.k, 4).dense(jr.l, 3)`
gives shape (4, 3), `dense(jr.l, 4).dense(jr.i, 3)` gives (3, 4). Storage is row-major over
that shape, one array per field (Taichi interleaves fields placed together and blocks chained
levels in memory: the logical indices and `to_numpy()` are the same, only the memory order
differs). A float field's gradient is placed with it (`data.PendingField`); `place(x.grad)`
checks its shape and `lazy_grad()` marks gradients asked for (and gives one to fields created
with a shape and no gradient). Duals are placed with their fields (`lazy_dual()` has nothing
to do). Sparse layouts raise NotImplementedError. Caches nothing.
"""
from __future__ import annotations

from typing import Any

import weakref

from . import data
from .data import PendingField

i, j, k, l = (0,), (1,), (2,), (3,)      # noqa: E741  (the peers' axis names)
ij, ik, jk, ijk, ijkl = (0, 1), (0, 2), (1, 2), (0, 1, 2), (0, 1, 2, 3)


class Node:
    """A level of a layout: the shape so far, per axis."""

    def __init__(self, extents: dict[int, int] | None = None) -> None:
        self.extents = dict(extents or {})

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.extents[a] for a in sorted(self.extents))

    def dense(self, axes: Any, shape: Any) -> "Node":
        axes = tuple(axes) if isinstance(axes, tuple) else (axes,)
        sizes = (shape,) * len(axes) if isinstance(shape, int) else tuple(shape)
        if len(sizes) != len(axes):
            raise ValueError(f"dense({axes}, {shape}): one extent per axis")
        grown = dict(self.extents)
        for a, s in zip(axes, sizes):
            if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < 8:
                raise ValueError(f"dense({axes}, {shape}): axes are jr.i, jr.j, jr.k, jr.l, "
                                 "jr.ij..., got " + repr(a))
            grown[a] = grown.get(a, 1) * int(s)
        return Node(grown)

    def place(self, *fields: Any) -> "Node":
        for f in fields:
            if isinstance(f, PendingField):
                f.place_with(self.shape)
                f.implicit = False                # placing a gradient asks for it
            elif isinstance(f, data.Field):
                outer = f.shape[:len(f.shape) - len(f.element_shape)]
                if outer != self.shape:
                    what = "gradient" if f.implicit else "field"
                    raise ValueError(f"{what} '{f.name}' is already placed with shape "
                                     f"{outer}, not {self.shape}")
                f.implicit = False
            elif hasattr(f, "members"):          # a struct field: each member
                self.place(*f.members.values())
            elif f is None:
                raise TypeError("place() takes fields, got None (a field created with a shape "
                                "has .grad only with needs_grad=True)")
            else:
                raise TypeError(f"place() takes fields, got {type(f).__name__}")
        return self

    def lazy_grad(self) -> None:
        """Give every float field placed or created so far a gradient, as Taichi does for
        the fields placed before it: an implicit gradient (placed with its field) becomes
        one asked for, and a field created with a shape and no gradient gets one. Fields
        declared later are not affected (call it again)."""
        _ask_for("grad", data._grad_fields)

    def lazy_dual(self) -> None:
        """Give every float field placed or created so far a dual (forward mode), as
        `lazy_grad` does gradients."""
        _ask_for("dual", data._dual_buffers)

    def pointer(self, *args: Any) -> Any:
        raise NotImplementedError("sparse layouts (pointer) are not supported: use dense")

    bitmasked = dynamic = bit_struct = pointer


root = Node()


def _ask_for(kind: str, registry: list) -> None:
    """`lazy_grad`/`lazy_dual`: every live float field's `kind` ("grad" or "dual") made or
    marked asked for (`registry`: the weak list that tracks fields having one)."""
    for f in data.live_user_fields():
        if isinstance(f, PendingField) or not f.dtype.is_float:
            continue
        companion = getattr(f, kind)
        if companion is None:
            companion = data.Field(f.dtype, f.shape, False, f"{f.name}.{kind}", "field")
            companion.named, companion.element_shape = f.named, f.element_shape
            setattr(f, kind, companion)
            registry.append(weakref.ref(f))
        companion.implicit = False
