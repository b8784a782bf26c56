"""Dense SNode layouts as in Taichi: `jr.root.dense(jr.ij, (N, M)).place(x, y)`.

Stage: API (data). A field created without a shape (`jr.field(jr.f32)`,
`jr.Vector.field(3, jr.f32)`) is a `PendingField` until a layout places it: `place` gives it
the layout's shape (each `.dense(axes, extents)` level multiplies the extents of its axes, so
chained levels give the product, as in Taichi) and turns it into an ordinary `Field` in place,
so every reference a program already holds sees the placed field. Storage is row-major over
that shape, one array per field (Taichi interleaves fields placed together and blocks chained
levels in memory: the logical indices and `to_numpy()` are the same, only the memory order
differs). Gradients and duals are placed with their fields (`lazy_grad()` and `lazy_dual()`
have nothing to do). Sparse
layouts raise NotImplementedError. Caches nothing.
"""
from __future__ import annotations

from typing import Any

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
            grown[a] = grown.get(a, 1) * int(s)
        if sorted(grown) != list(range(len(grown))):
            raise ValueError(f"dense(): axes {sorted(grown)} leave a gap (use jr.i, jr.ij...)")
        return Node(grown)

    def place(self, *fields: Any) -> "Node":
        for f in fields:
            if isinstance(f, PendingField):
                f.place_with(self.shape)
            elif isinstance(f, data.Field):
                if f.shape[:len(f.shape) - len(f.element_shape)] != self.shape:
                    raise ValueError(f"field '{f.name}' is already placed with shape "
                                     f"{f.shape}")
            elif hasattr(f, "members"):          # a struct field: each member
                self.place(*f.members.values())
            else:
                raise TypeError(f"place() takes fields, got {type(f).__name__}")
        return self

    def lazy_grad(self) -> None:
        """Gradients are placed with their fields: nothing to do."""

    def lazy_dual(self) -> None:
        """Duals (`needs_dual=True`) are placed with their fields: nothing to do."""

    def pointer(self, *args: Any) -> Any:
        raise NotImplementedError("sparse layouts (pointer) are not supported: use dense")

    bitmasked = dynamic = bit_struct = pointer


root = Node()
