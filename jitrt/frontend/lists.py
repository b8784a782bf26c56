"""Lists and tuples in kernels are Python's, as in Taichi.

Stage: frontend (a mixin of the lowering visitor). A list or tuple display (`[a, b]`, `(a,
b)`, `[k, x.shape]`) and a local assigned one keep their list-ness (`VecValue.is_list`,
`TupleValue.is_list`, `VecVar.is_list`): `+` of two concatenates and `*` of one by a
compile-time int repeats, as Python does (Taichi builds a Python list or tuple of its
values); `len`, indexing with constants and iteration under `jr.static` are the same as a
vector's. Everywhere else (a list with a vector or a run-time scalar, `jr.Vector(lst)`, a
store into a vector field, a func parameter annotated as a vector, a return) it is the
vector of its items, as Taichi converts it; an unannotated func parameter keeps the list, as
Taichi's does. A name assigned a list of another length is a new local, as Python rebinds
it. Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .context import LoweringHost, PyValue
from .vectors import TupleValue, VecValue, is_scalar

MAX_ITEMS = 4096          # the longest list a concatenation or repetition may build


def is_list(v: Any) -> bool:
    return isinstance(v, (VecValue, TupleValue)) and v.is_list


def elements(v: Any) -> list[Any] | None:
    """The items of a list (a matrix's rows as lists) or of a compile-time sequence (a
    display of constants is one); None for anything else."""
    if isinstance(v, VecValue) and v.is_list:
        if len(v.shape) == 1:
            return list(v.items)
        return [VecValue((v.shape[1],), v.row(k).items, True) for k in range(v.shape[0])]
    if isinstance(v, TupleValue) and v.is_list:
        return list(v.items)
    if isinstance(v, PyValue) and isinstance(v.obj, (tuple, list)):
        return [PyValue(x) for x in v.obj]
    return None


def make_list(items: list[Any], is_list: bool = True) -> Any:
    """A list of `items` (`is_list` False: a sequence that is no list, such as a dict's
    values): a vector of scalars, a matrix of equal-length vectors, else a TupleValue; a
    constant when every item is one."""
    if all(isinstance(i, PyValue) for i in items):
        return PyValue(tuple(i.obj for i in items))
    if all(is_scalar(i) for i in items):
        return VecValue((len(items),), tuple(items), is_list)
    if all(isinstance(i, VecValue) and len(i.shape) == 1 for i in items) and len(
            {i.shape[0] for i in items}) == 1:
        return VecValue((len(items), items[0].shape[0]),
                        tuple(x for i in items for x in i.items), is_list)
    return TupleValue(tuple(items), is_list)


class ListLowering(LoweringHost):
    def list_binary(self, op: str, a: Any, b: Any, node: ast.AST) -> Any:
        """`a + b` of two lists (one may be a constant sequence) or `a * k`/`k * a` of a list
        and a compile-time int, as Python computes them; None for anything else."""
        if not (is_list(a) or is_list(b)):
            return None
        if op == "+":
            left, right = elements(a), elements(b)
            if left is None or right is None:
                return None
            return self.bounded(left + right, node)
        if op != "*":
            return None
        seq, k = (a, b) if is_list(a) else (b, a)
        if not (isinstance(k, PyValue) and isinstance(k.obj, int)
                and not isinstance(k.obj, bool)):
            return None
        items = elements(seq)
        assert items is not None
        if len(items) * max(k.obj, 0) > MAX_ITEMS:
            raise self.err(node, f"constant sequence is too long (more than {MAX_ITEMS} items)")
        items = [self.snapshot(x, node) for x in items]     # each item is read once
        return make_list(items * max(k.obj, 0))

    def bounded(self, items: list[Any], node: ast.AST) -> Any:
        if len(items) > MAX_ITEMS:
            raise self.err(node, f"constant sequence is too long (more than {MAX_ITEMS} items)")
        return make_list(items)
