"""Fields of structs at Python scope: `jr.Struct.field(...)` and one struct element `s[i]`.

Stage: data (beside `data.py`). A `StructField` is one field per member (structure of arrays),
reached as `s.pos` (a field); kernels index it as `s[i].pos` (frontend/structs.py). At Python
scope `s[i]` is a `StructElement`: a live view whose members read and write the member
fields at that index (`s[i].a = 1`, `s[i].b[0]`, `s[i]["a"]`), as Taichi's host struct
elements do. `copy_from`, `fill`, `to_numpy`, `from_numpy`, `to_torch` and `from_torch` act
member by member (the last four with a dict of arrays or tensors). Caches nothing.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class StructField:
    """A field of structs (`jr.Struct.field({...}, shape=N)`): one field per member, reached as
    `s.pos` (a field) or `s[i].pos`. `to_numpy()` is a dict of arrays."""

    def __init__(self, kind: Any, shape: Any, needs_grad: bool,
                 name: str | None, needs_dual: bool = False, offset: Any = None) -> None:
        from .data_declare import check_offset, field
        from .data_index import offset_of, shape_of
        check_offset(shape, offset)
        if shape is not None:        # else every member waits for jr.root...place(s)
            offset_of(offset, shape_of(shape))
        self.kind = kind
        self.members = {k: field(t, shape, needs_grad,
                                 None if name is None else f"{name}.{k}", needs_dual,
                                 offset=offset)
                        for k, t in kind.members}
        self.element_shape = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The members' shape (a RuntimeError before a struct field declared without one is
        placed)."""
        return next(iter(self.members.values())).shape  # type: ignore[no-any-return]

    @shape.setter
    def shape(self, value: Any) -> None:
        raise AttributeError(f"the shape of a struct field cannot be changed (it is "
                             f"{self.shape}): create a new field instead")

    @property
    def offset(self) -> tuple[int, ...]:
        return next(iter(self.members.values())).offset  # type: ignore[no-any-return]

    def keys(self) -> list[str]:
        """The member names, in declaration order."""
        return list(self.members)

    def __getattr__(self, name: str) -> Any:
        members = self.__dict__.get("members", {})
        if name in members:
            return members[name]
        raise AttributeError(f"struct field has no member '{name}'")

    def __getitem__(self, key: Any) -> "StructElement":
        """`s[i]` (`s[None]` for a 0-d field): the struct at index `i`, a live view."""
        return StructElement(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """`s[i] = {"a": 1, "b": (0, 1)}` (or another element): every member at `i`."""
        StructElement(self, key).assign(value)

    def to_numpy(self) -> dict[str, np.ndarray]:
        return {k: f.to_numpy() for k, f in self.members.items()}

    def from_numpy(self, arrays: dict[str, Any]) -> None:
        unknown = set(arrays) - set(self.members)
        if unknown:
            raise KeyError(f"struct field has no member(s) {sorted(unknown)}")
        for k, a in arrays.items():
            self.members[k].from_numpy(a)

    def to_torch(self, device: Any = None) -> dict[str, Any]:
        """A dict of torch tensors, one copy per member (Taichi's and Quadrants'; Genesis's
        path planner reads its tree this way), on `device` (default: the CPU)."""
        return {k: f.to_torch(device=device) for k, f in self.members.items()}

    def from_torch(self, tensors: dict[str, Any]) -> None:
        """Each member from a torch tensor of its shape (moved to the CPU)."""
        self.from_numpy({k: t.detach().cpu().numpy() for k, t in tensors.items()})

    def fill(self, value: Any) -> None:
        for f in self.members.values():
            f.fill(value)

    def copy_from(self, other: Any) -> None:
        """Copy every member of `other`, a struct field of the same members and shape."""
        if not isinstance(other, StructField):
            raise TypeError(f"copy_from: a struct field copies from another struct field, "
                            f"got {type(other).__name__}")
        if other.keys() != self.keys():
            raise ValueError(f"copy_from: the members differ: {self.keys()} and "
                             f"{other.keys()}")
        for k, f in self.members.items():
            f.copy_from(other.members[k])


class StructElement:
    """One struct of a `StructField` at Python scope (`s[i]`): `e.a` reads member `a` at that
    index now (a number, or a live vector/matrix element); `e.a = v` writes it."""

    __slots__ = ("_field", "_key")

    def __init__(self, field: StructField, key: Any) -> None:
        object.__setattr__(self, "_field", field)
        object.__setattr__(self, "_key", key)

    def keys(self) -> list[str]:
        return self._field.keys()

    def _member(self, name: str) -> Any:
        members = self._field.members
        if name not in members:
            raise AttributeError(f"struct has no member '{name}' (members: "
                                 f"{', '.join(members)})")
        return members[name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._member(name)[self._key]

    def __setattr__(self, name: str, value: Any) -> None:
        self._member(name)[self._key] = value

    def __getitem__(self, name: str) -> Any:
        return self._member(name)[self._key]

    def __setitem__(self, name: str, value: Any) -> None:
        self._member(name)[self._key] = value

    def assign(self, value: Any) -> None:
        """Write every member from a dict (or another struct element) of the same members."""
        from .struct_host import HostStruct
        if isinstance(value, HostStruct):
            value = value.entries
        names = value.keys() if isinstance(value, (dict, StructElement)) else None
        if names is None or set(names) != set(self.keys()):
            raise TypeError(f"a struct element takes a struct or dict of its members "
                            f"{self.keys()}, got {value!r}")
        for k in self.keys():
            self[k] = value[k]

    def to_dict(self) -> dict[str, Any]:
        """The current values: numbers, numpy arrays for vector/matrix members, dicts for
        nested structs."""
        out = {}
        for k in self.keys():
            v = self[k]
            out[k] = v.to_dict() if isinstance(v, StructElement) else \
                v.to_numpy() if hasattr(v, "to_numpy") else v
        return out

    def __repr__(self) -> str:
        return f"StructElement({self.to_dict()!r})"
