"""`@frozen`: a frozen dataclass that costs little to define.

Stage: shared by every stage (below the IR). `@frozen` gives a class what
`@dataclass(frozen=True)` gives it: `dataclasses.fields()` and `replace()`, an `__init__` with
the fields as parameters (defaults and `field(compare=False, repr=False)` included), equality
and hashing over the compared fields, the same repr, `FrozenInstanceError` on assignment, and
the same pickles. What it leaves out is what made the standard decorator the largest part of
`import jitrt` (Python 3.10-3.12 compile six methods per class from generated source, about
0.4 ms per class on the development VM, for some 80 classes): equality, hashing and repr are
closures over the class's field names (no compilation), assignment raises from one shared
function, and `__init__`, the one method whose signature is the class's own, is compiled on the
class's 65th instantiation (the first 64 assign the fields in a loop), so a process compiles
only the constructors it uses often (one that loads kernels from the offline cache unpickles
most of its objects and constructs few). Nor does it call `dataclass` itself:
`_declare_fields` records the fields, `__dataclass_fields__` and the rest as
`dataclass(init=False, repr=False, eq=False)` would (~0.01 ms a class against ~0.13 for that
call on the development VM).
Not supported (a TypeError at decoration): `default_factory`, `init=False` fields,
`__post_init__`. Classes that define their own `__repr__`, `__eq__` or `__hash__` keep them, as
with `dataclass`. `@record` does the same for a mutable class (what `@dataclass` gives it,
`default_factory` and `__post_init__` included; its `__init__` a loop; no hash, as with
`eq=True`).
"""
from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(init=False, repr=False, eq=False)
class _Params:
    """Its `__dataclass_params__` are those `dataclass(init=False, repr=False, eq=False)`
    gives every class decorated here."""


_FIELD = getattr(dataclasses, "_FIELD")   # dataclasses' marker of a field (3.7-3.13)
_CLASSVAR = ("ClassVar", "typing.ClassVar", "t.ClassVar")   # as a string annotation starts


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.partition("[")[0].strip() in _CLASSVAR
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _declare_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """What `dataclass(cls, init=False, repr=False, eq=False)` records on `cls` (its fields,
    inherited ones first, `__dataclass_fields__`, `__dataclass_params__`, `__match_args__`,
    defaults as class attributes), without the general decorator's per-field work (~0.1 ms a
    class on the development VM, ~120 classes on a cold start's path). Annotations are
    strings here (`from __future__ import annotations`): `ClassVar[...]` ones are not fields;
    `InitVar` and `KW_ONLY` are not supported (a TypeError, as for `default_factory` in
    `@frozen`)."""
    found: dict[str, dataclasses.Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        found.update(getattr(base, "__dataclass_fields__", None) or {})
    own = cls.__dict__
    annotations = own.get("__annotations__", {})
    for name, annotation in annotations.items():
        if _is_classvar(annotation):
            continue
        if "InitVar" in str(annotation) or "KW_ONLY" in str(annotation):
            raise TypeError(f"{cls.__qualname__}.{name}: InitVar and KW_ONLY are not supported")
        value = own.get(name, dataclasses.MISSING)
        f: Any = value if isinstance(value, dataclasses.Field) else \
            dataclasses.field(default=value)
        f.name, f.type = name, annotation
        f._field_type = _FIELD   # as `dataclass` marks a field (not a ClassVar or InitVar)
        if getattr(f, "kw_only", False) is dataclasses.MISSING:
            f.kw_only = False
        if f.default is not dataclasses.MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not "
                             "allowed: use default_factory")
        if isinstance(value, dataclasses.Field):
            if f.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        found[name] = f
    for name, value in own.items():
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = found  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _Params.__dataclass_params__  # type: ignore[attr-defined]
    fields = tuple(f for f in found.values() if getattr(f, "_field_type", None) is _FIELD)
    if "__match_args__" not in own:
        setattr(cls, "__match_args__", tuple(f.name for f in fields if f.init))
    return fields


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The tuple of the compared fields (what `dataclass` compares and hashes)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        get = operator.attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()


def _eq_hash(key: Callable[[Any], tuple]) -> tuple[Callable, Callable]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(key(self))
    return __eq__, __hash__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({body})"
    return __repr__


def _compile_init(cls: type, fields: tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    env: dict[str, Any] = {"_set": object.__setattr__}
    params, body = [], []
    for k, f in enumerate(fields):
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            env[f"_d{k}"] = f.default
            params.append(f"{f.name}=_d{k}")
        body.append(f"    _set(self, {f.name!r}, {f.name})")
    source = (f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]))
    exec(compile(source, f"<jitrt frozen {cls.__qualname__}>", "exec"), env)  # noqa: S102
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init  # type: ignore[no-any-return]


# instantiations before a class's `__init__` is compiled. Compiling one costs what ~100-200
# instantiations through the loop cost more than through the compiled method (~0.3 ms against
# 1.5-3.5 us each on the development VM): compiling after 64 never pays more than about twice
# the better choice made in hindsight, and a cold start's first compile (the adstack pair:
# at most ~40 instantiations of a class) compiles none (it compiled five after 16)
COMPILE_AFTER = 64


def _deferred_init(cls: type, fields: tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    """The first COMPILE_AFTER instantiations assign the fields in a loop (no compilation: a
    warm start constructs a few records of many classes, ~0.3 ms a compile on the development
    VM); then the class gets its compiled `__init__`. Anything but plain arguments (missing
    or unknown names, too many) compiles at once and lets that `__init__` raise."""
    names = tuple(f.name for f in fields)
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    uses = [0]

    def compiled() -> Callable[..., None]:
        init = _compile_init(cls, fields)
        if cls.__dict__.get("__init__") is __init__:
            cls.__init__ = init  # type: ignore[misc]
        return init

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        uses[0] += 1
        if uses[0] > COMPILE_AFTER or len(args) > len(names):
            return compiled()(self, *args, **kwargs)
        if not kwargs and len(args) == len(names):    # every field given by position
            for name, value in zip(names, args):
                object.__setattr__(self, name, value)
            return None
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names or name in values:
                return compiled()(self, *args, **kwargs)
            values[name] = value
        for name in names:
            if name not in values:
                if name not in defaults:
                    return compiled()(self, *args, **kwargs)
                values[name] = defaults[name]
            object.__setattr__(self, name, values[name])
    return __init__


def _frozen(cls: type) -> type:
    own = cls.__dict__
    if "__post_init__" in own:
        raise TypeError(f"@frozen {cls.__qualname__}: __post_init__ is not supported")
    if not cls.__doc__:   # what `dataclass` would derive through inspect.signature (slow)
        cls.__doc__ = f"{cls.__name__}({', '.join(own.get('__annotations__', {}))})"
    fields = _declare_fields(cls)
    seen_default = False
    for f in fields:
        if f.default_factory is not dataclasses.MISSING or not f.init:
            raise TypeError(f"@frozen {cls.__qualname__}.{f.name}: default_factory and "
                            "init=False are not supported")
        if f.default is not dataclasses.MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"@frozen {cls.__qualname__}: non-default argument {f.name!r} "
                            "follows default argument")
    cls.__init__ = _deferred_init(cls, fields)  # type: ignore[misc]
    cls.__setattr__ = _setattr  # type: ignore[method-assign,assignment]
    cls.__delattr__ = _delattr  # type: ignore[method-assign,assignment]
    if "__repr__" not in own:
        cls.__repr__ = _repr(tuple(f.name for f in fields if f.repr))  # type: ignore[method-assign,assignment]
    eq, hash_ = _eq_hash(_key(tuple(f.name for f in fields if f.compare)))
    if "__eq__" not in own:
        cls.__eq__ = eq  # type: ignore[method-assign,assignment]
    # as `dataclass(frozen=True)`: a hash over the fields unless the body set one (a body that
    # defines __eq__ gets __hash__ = None from Python, which does not count as setting one)
    class_hash = own.get("__hash__", dataclasses.MISSING)
    if class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own):
        cls.__hash__ = hash_  # type: ignore[method-assign,assignment]
    return cls


def _record_init(cls: type, fields: tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    """An `__init__` that assigns the fields in a loop: defaults, `default_factory` and
    `__post_init__` as `dataclass` has them, the same TypeErrors for bad arguments."""
    names = tuple(f.name for f in fields)
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    factories = {f.name: f.default_factory for f in fields
                 if f.default_factory is not dataclasses.MISSING}
    post_init = getattr(cls, "__post_init__", None)
    where = f"{cls.__qualname__}.__init__()"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{where} takes {len(names) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"{where} got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"{where} got multiple values for argument {name!r}")
            values[name] = value
        for name in names:
            if name in values:
                value = values[name]
            elif name in defaults:
                value = defaults[name]
            elif name in factories:
                value = factories[name]()
            else:
                raise TypeError(f"{where} missing 1 required positional argument: {name!r}")
            setattr(self, name, value)
        if post_init is not None:
            self.__post_init__()
    return __init__


def _record(cls: type) -> type:
    """What `@dataclass` gives a mutable class, for the cost of `@frozen` (no method compiled
    from generated source: ~0.4 ms a class at import, 8 of them on a cold start's path)."""
    own = cls.__dict__
    if not cls.__doc__:   # what `dataclass` would derive through inspect.signature (slow)
        cls.__doc__ = f"{cls.__name__}({', '.join(own.get('__annotations__', {}))})"
    fields = _declare_fields(cls)
    seen_default = False
    for f in fields:
        if not f.init:
            raise TypeError(f"@record {cls.__qualname__}.{f.name}: init=False is not supported")
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"@record {cls.__qualname__}: non-default argument {f.name!r} "
                            "follows default argument")
    cls.__init__ = _record_init(cls, fields)  # type: ignore[misc]
    if "__repr__" not in own:
        cls.__repr__ = _repr(tuple(f.name for f in fields if f.repr))  # type: ignore[method-assign,assignment]
    if "__eq__" not in own:
        eq, _ = _eq_hash(_key(tuple(f.name for f in fields if f.compare)))
        cls.__eq__ = eq  # type: ignore[method-assign,assignment]
        if "__hash__" not in own:
            cls.__hash__ = None  # type: ignore[assignment]   # as `dataclass(eq=True)`
    return cls


if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
    def frozen(cls: type[T], /) -> type[T]:
        """A frozen dataclass (see the module docstring)."""

    @dataclass_transform(field_specifiers=(dataclasses.field,))
    def record(cls: type[T], /) -> type[T]:
        """A mutable dataclass (`_record`)."""
else:
    frozen = _frozen
    record = _record
