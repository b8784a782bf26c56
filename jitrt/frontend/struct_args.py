"""Struct and argument-pack kernel parameters, struct returns: the leaves they travel as.

Stage: frontend (its naming rule is shared with the API's `kernel_structs.py`). A kernel
parameter annotated with a struct type (`a: S`) or an argument pack (`p: jr.types.argpack(...)`)
is passed as its leaves, one kernel parameter each, named `a.member` (`a.inner.member` when
nested; no Python name holds a dot): scalars, vectors/matrices and, in argument packs,
ndarrays. `leaves(kind, prefix)` lists them in order; the kernel's Python entry splits a struct
value into them, and `struct_param` rebuilds the struct in the kernel body from the leaves'
values. A kernel annotated `-> S` (or `-> (jr.f32, S)`) returns the tuple of the leaves
(`return_leaves`), which the Python entry assembles back into a `jr.Struct`. Caches nothing.
"""
from __future__ import annotations

from typing import Any

from ..linalg import StructType
from .struct_values import StructValue


def is_compound(kind: Any) -> bool:
    """A struct type or an argument pack type (an annotation passed as its leaves)."""
    return isinstance(kind, StructType) or type(kind).__name__ == "ArgPackType"


def leaves(kind: Any, prefix: str) -> list[tuple[str, Any]]:
    """(name, type) of each leaf of struct or argument pack `kind`, named under `prefix`."""
    out: list[tuple[str, Any]] = []
    for k, t in kind.members:
        name = f"{prefix}.{k}"
        out += leaves(t, name) if is_compound(t) else [(name, t)]
    return out


def has_struct(ret: Any) -> bool:
    """Whether a return annotation (one type or a tuple of them) holds a struct type."""
    return any(isinstance(t, StructType) for t in (ret if isinstance(ret, tuple) else (ret,)))


def return_leaves(ret: Any) -> tuple[Any, ...]:
    """The types a struct return (or a tuple with structs) is returned as, in order."""
    out: list[Any] = []
    for t in ret if isinstance(ret, tuple) else (ret,):
        out += [leaf for _, leaf in leaves(t, "")] if isinstance(t, StructType) else [t]
    return tuple(out)


def struct_param(kind: Any, prefix: str, bindings: dict[str, Any]) -> StructValue:
    """The struct (or argument pack) parameter `prefix` in the kernel body: its members the
    values its leaves are bound to (an argument pack's ndarray member its array)."""
    return StructValue(kind, tuple(
        struct_param(t, f"{prefix}.{k}", bindings) if is_compound(t) else
        bindings[f"{prefix}.{k}"] for k, t in kind.members))


def compound_params(fn: Any) -> dict[str, Any]:
    """The parameters of kernel function `fn` annotated with a struct or argument pack type."""
    import inspect

    from .func import resolve_annotation
    out = {}
    for p in inspect.signature(fn).parameters.values():
        ann = resolve_annotation(fn, p.annotation)
        if is_compound(ann):
            out[p.name] = ann
    return out


def return_items(lowerer: Any, ret: Any, v: Any, node: Any) -> list[Any]:
    """The leaf values of what a kernel annotated `-> S` (or a tuple with structs) returns: a
    struct of exactly that type (a struct field's element too), as Taichi requires."""
    kinds = ret if isinstance(ret, tuple) else (ret,)
    values = [v]
    if isinstance(ret, tuple):
        values = list(getattr(v, "items", ()))
        if type(v).__name__ != "TupleValue" or len(values) != len(kinds):
            raise lowerer.err(node, f"the kernel is annotated to return {len(kinds)} values, "
                              f"got {v!r}")
    out: list[Any] = []
    for kind, x in zip(kinds, values):
        if not isinstance(kind, StructType):
            out.append(x)
            continue
        if type(x).__name__ == "StructElement":
            x = lowerer.struct_element_value(x, node)
        if not isinstance(x, StructValue) or x.kind != kind:
            got = repr(x.kind) if isinstance(x, StructValue) else "a value that is no struct"
            raise lowerer.err(node, f"the kernel is annotated to return {kind!r}, got {got}")
        out += _leaf_values(x)
    return out


def _leaf_values(v: StructValue) -> list[Any]:
    out: list[Any] = []
    for item in v.items:
        out += _leaf_values(item) if isinstance(item, StructValue) else [item]
    return out
