"""Python-scope struct values: what `jr.Struct(a=1, b=[0, 1])` and a struct type called outside
a kernel (`S(a=1, b=vec3(0))`, `@jr.dataclass` types too) give, as Taichi's `ti.Struct`.

Stage: API (values). A `Struct` holds its members by name, in order: numbers, Python-scope
vectors/matrices (`host_matrix.HostMatrix`) and nested structs. Members read and write as
attributes (`s.a`, `s.b = 2`) or items (`s["a"]`); a member's name wins over the class's own
attributes (a member named `keys` is read as `s.keys`), as in Taichi. A struct made by a struct
type remembers it (`s.kind`): its members are converted to the member types as Taichi converts
them (an integer member holds `int(v)`, a float member `float(v)`, a vector member a vector of
its dtype), and a `@jr.dataclass`'s methods are bound to it (`s.area()` runs the plain
function). Such values are passed to kernels taking the struct type (`kernel.py` flattens
them), returned by kernels annotated `-> S`, read by kernels as constants, and written into
struct fields (`x[i] = s`). No caches.
"""
from __future__ import annotations

from types import MethodType
from typing import Any, Iterator

import numpy as np

from . import dtypes
from .host_matrix import HostMatrix


class HostStruct:
    """A struct value at Python scope: `jr.Struct(a=1, b=2.5)` or `jr.Struct({"a": 1})`
    (members as given: lists become vectors, dicts structs), or a struct type called
    (`S(1, b=2)`: members converted to the type). `jr.Struct` (linalg.py) is this class with
    the field constructor `jr.Struct.field(...)` added."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            entries = dict(args[0])
        elif not args:
            entries = kwargs
        else:
            raise TypeError("jr.Struct takes a dict of its members or keyword arguments "
                            "(jr.Struct(a=1, b=2)); to make a struct of a type, call the type "
                            "(S(1, 2))")
        for k, v in entries.items():
            if not isinstance(k, str):
                raise TypeError(f"jr.Struct: member names are strings, got {k!r}")
            entries[k] = _untyped_member(type(self), v)
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_kind", None)

    @classmethod
    def typed(cls, kind: Any, entries: dict[str, Any]) -> "HostStruct":
        """A struct of type `kind` (a `linalg.StructType`) with already converted members."""
        s = cls.__new__(cls)
        object.__setattr__(s, "_entries", entries)
        object.__setattr__(s, "_kind", kind)
        return s

    # ---- members --------------------------------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            entries = object.__getattribute__(self, "_entries")
            if name in entries:
                return entries[name]
            kind = object.__getattribute__(self, "_kind")
            method = None if kind is None else dict(kind.methods).get(name)
            if method is not None:          # a @jr.dataclass's method, on this value
                return MethodType(method, self)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the struct has no member '{name}' (members: "
                             f"{', '.join(self._entries) or 'none'})")

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __getitem__(self, name: str) -> Any:
        if name not in self._entries:
            raise KeyError(f"the struct has no member {name!r} (members: "
                           f"{', '.join(self._entries) or 'none'})")
        return self._entries[name]

    def __setitem__(self, name: str, value: Any) -> None:
        """`s.a = v`: a vector or struct member is written in place (converted to its type);
        a number member takes the number (converted to the member's type, if it has one)."""
        old = self[name]
        if isinstance(old, HostStruct):
            old.assign(value)
        elif isinstance(old, np.ndarray):
            old[...] = np.asarray(value, dtype=old.dtype).reshape(old.shape) if np.ndim(
                value) else value
        else:
            if not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"struct member '{name}' is a number; got {value!r}")
            t = None if self._kind is None else dict(self._kind.members)[name]
            self._entries[name] = value if t is None else scalar_member(t, value)

    def assign(self, value: Any) -> None:
        """Every member from a struct or dict of the same member names."""
        other = value._entries if isinstance(value, HostStruct) else value
        if not isinstance(other, dict) or list(other) != list(self._entries):
            raise TypeError(f"a struct of members {list(self._entries)} is assigned a struct "
                            f"or dict of the same members, got {value!r}")
        for k, v in other.items():
            self[k] = v

    @property
    def keys(self) -> list[str]:
        """The member names, in order (a property, as Taichi's `Struct.keys`)."""
        return list(self._entries)

    @property
    def items(self) -> Any:
        return self._entries.items()

    @property
    def entries(self) -> dict[str, Any]:
        return self._entries

    @property
    def kind(self) -> Any:
        """The struct type this value was made by, or None (`jr.Struct(...)`)."""
        return self._kind

    @property
    def methods(self) -> dict[str, Any]:
        return {} if self._kind is None else dict(self._kind.methods)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries.values())

    def to_dict(self, include_methods: bool = False, include_ndim: bool = False) -> dict:
        """The members as a dict: nested structs as dicts, vectors/matrices as lists."""
        out: dict[str, Any] = {}
        for k, v in self._entries.items():
            out[k] = v.to_dict(include_methods, include_ndim) if isinstance(v, HostStruct) else \
                v.tolist() if isinstance(v, np.ndarray) else v
        if include_methods:
            out["__struct_methods"] = self.methods
        if include_ndim:
            out["__matrix_ndim"] = {k: v.ndim for k, v in self._entries.items()
                                    if isinstance(v, np.ndarray)}
        return out

    def __str__(self) -> str:
        return str(self.to_dict())

    def __repr__(self) -> str:
        return f"jr.Struct({self.to_dict()!r})"


def _untyped_member(cls: type, v: Any) -> Any:
    """A member of `jr.Struct(...)`: lists and tuples become vectors/matrices, dicts structs."""
    if isinstance(v, HostStruct) or isinstance(v, np.ndarray) and v.ndim in (1, 2):
        return v
    if isinstance(v, dict):
        return cls(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return HostMatrix(v)
    if isinstance(v, (bool, int, float, np.integer, np.floating)):
        return v
    raise TypeError(f"a struct member is a number, a vector/matrix (list) or a struct (dict), "
                    f"got {type(v).__name__} {v!r}")


def scalar_member(t: Any, v: Any) -> Any:
    """A number converted to scalar member type `t` (a dtype, `int` or `float`), as Taichi
    converts at Python scope: an integer type takes `int(v)`, a float type `float(v)`."""
    if isinstance(v, (HostStruct, np.ndarray)) and np.ndim(v) != 0 or isinstance(
            v, (list, tuple, dict)):
        raise TypeError(f"a {getattr(t, 'name', t)} struct member takes a number, got {v!r}")
    is_int = t is int or isinstance(t, dtypes.DataType) and t.is_int
    return int(v) if is_int else float(v)


def make_struct(cls: type, kind: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`kind(*args, **kwargs)` at Python scope, a `cls` (`jr.Struct`): members by position,
    then by keyword, a member not given is 0; a struct or vector member given one number is
    made of it (`S(1)`: the first member 1, the others 0, as Taichi)."""
    names = [k for k, _ in kind.members]
    if len(args) > len(names):
        raise TypeError(f"{kind!r} has {len(names)} members, got {len(args)} positional "
                        "arguments")
    for k in kwargs:
        if k not in names:
            raise TypeError(f"{kind!r} has no member '{k}' (members: {', '.join(names)})")
        if names.index(k) < len(args):
            raise TypeError(f"member '{k}' of {kind!r} is given twice")
    entries = {k: member_value(cls, t, args[i] if i < len(args) else kwargs.get(k, 0))
               for i, (k, t) in enumerate(kind.members)}
    return cls.typed(kind, entries)  # type: ignore[attr-defined]


def member_value(cls: type, t: Any, v: Any) -> Any:
    """`v` converted to member type `t`: a struct type (`linalg.StructType`, which has
    `members`), a vector/matrix type (which converts what it is called with) or a scalar."""
    if hasattr(t, "members"):
        if isinstance(v, HostStruct):
            if list(v.entries) != [k for k, _ in t.members]:
                raise TypeError(f"expected a {t!r}, got a struct of members {v.keys}")
            return make_struct(cls, t, (), dict(v.entries))
        if isinstance(v, dict):
            return make_struct(cls, t, (), v)
        return make_struct(cls, t, (v,), {})
    if callable(t) and hasattr(t, "shape"):
        return t(v)
    if type(t).__name__ == "NdarrayType":      # an argument pack's array: as it is
        return v
    return scalar_member(t, v)
