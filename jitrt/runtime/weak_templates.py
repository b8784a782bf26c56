"""Template objects held weakly by the launch handles compiled for them.

Stage: runtime (between `arguments.py`, whose `template_key` keys a `@jr.data_oriented` object
or a dataclass by its identity, and `launcher.py`, which builds the handle). A kernel method
launched on a fresh object each time (`X().run()`) gets one specialization per object; were the
handle to hold its object, every object would live as long as the program. Instead the handle
holds a `HeldWeakly` (a weak reference and the object's id), and a weak reference callback
`retire`s the handle when the object dies: it leaves the kernel's handles, the program's list
(its launch count kept in the program's counters) and the kernel's fast path (the next call
takes the slow path, which installs a fast path over the remaining handles), and the native
launch table stops matching the id. CPython runs the callback before the object's memory can be
reused, so a later object at the same address never meets the dead one's specialization; the
generated launchers also compare with the live referent (`a is ref()`), not with the id, so no
window between the death and the callback can match either. An object that cannot be weakly
referenced (a class with `__slots__` and no `__weakref__`) is held strongly, as before: it lives
as long as the handle. Caches nothing.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Protocol

from ..host_matrix import HostMatrix
from ..launch_plan import LaunchPlan
from ..native import launch_table as nl


class Retirable(Protocol):
    """What `retire` needs of a `launcher.LaunchHandle` (a later launch module)."""
    kernel: Any
    program: Any
    plan: LaunchPlan
    native_table: Any
    launch_count: Any


class HeldWeakly:
    """A template value a handle holds weakly: `ref()` is the object (None once dead)."""
    __slots__ = ("ref", "ident", "__weakref__")

    def __init__(self, obj: Any) -> None:
        self.ref = weakref.ref(obj)
        self.ident = id(obj)

    def __repr__(self) -> str:
        return f"<held weakly: {self.ref()!r}>"


def identity_keyed(key_part: Any) -> bool:
    """Whether a template's key part names its value by identity (`arguments.template_key`:
    a data-oriented object or a dataclass), the templates held weakly."""
    return isinstance(key_part, tuple) and len(key_part) == 2 and key_part[0] == "object"


def hold(values: dict[int, Any], key: tuple[Any, ...]) -> dict[int, Any]:
    """The template values a new handle keeps: each identity-keyed object that can be weakly
    referenced as a `HeldWeakly`, a vector/matrix (keyed by its values, which the user may
    change in place) as a read-only copy, everything else as it is."""
    out = {}
    for i, v in values.items():
        if isinstance(v, HostMatrix):
            out[i] = v.copy()
            out[i].flags.writeable = False
            continue
        try:
            out[i] = HeldWeakly(v) if identity_keyed(key[i]) else v
        except TypeError:          # not weakly referenceable: held strongly
            out[i] = v
    return out


def watch(handle: Retirable, key: tuple[Any, ...], first_call: Callable[..., Any]
          ) -> list[Any]:
    """Weak references to the handle's weakly held objects whose callbacks retire it; the
    handle keeps the list (a handle gone first takes its callbacks with it)."""
    handle_ref = weakref.ref(handle)

    def dead(_: Any) -> None:
        h = handle_ref()
        if h is not None:
            retire(h, key, first_call)
    return [weakref.ref(p.template.ref(), dead) for p in handle.plan.params
            if isinstance(p.template, HeldWeakly) and p.template.ref() is not None]


def retire(handle: Retirable, key: tuple[Any, ...], first_call: Callable[..., Any]) -> None:
    """Drop every route to `handle`, whose template object died (see the module docstring)."""
    kernel, program = handle.kernel, handle.program
    if kernel.handles.get(key) is handle:
        del kernel.handles[key]
    if handle in program.handles:
        program.handles.remove(handle)
        program.count("launches", handle.launch_count[0])
    if handle.native_table is not None:
        for p in handle.plan.params:
            if isinstance(p.template, HeldWeakly):   # no object has address 0
                handle.native_table[nl.HEADER_WORDS + nl.RECORD_WORDS * p.index + 2] = 0
    setattr(type(kernel), "__call__", first_call)
