"""Slices of vectors and matrices in kernels: `v[1:3]`, `m[i, :]`, `m[:, j]`, `m[0:2, 1:]`,
`x[i][1:]` of a field or ndarray of vectors, as Taichi reads them.

Stage: frontend (a helper of `vector_index.py`). A slice's bounds and step must be known at
compile time (the result's shape is part of its type); a plain index beside a slice may be a
run-time integer (`m[i, :]` in a loop over i: each component is then picked as `m[i, j]`
is). Axes indexed by a number are dropped, sliced axes kept (Python's and numpy's rule), and
the axes left unindexed are taken whole (`m[0:2]` is two rows). Stores through a slice follow
the same rules: `m[i, :] = row`, `v[a:b] += w` on a vector local (compile-time indices),
`x[i][1:3] = w` on an element of a field or ndarray of vectors. Caches nothing.
"""
from __future__ import annotations

import ast
import itertools
from typing import Any

from ..ir import nodes as n
from .. import dtypes
from .context import LoweringHost, PyValue
from .vector_index import flat_index
from .vectors import VecValue, VecVar


class VectorSlicing(LoweringHost):
    """The slicing part of the lowering visitor."""

    def static_int(self, node: ast.AST | None, what: str) -> int | None:
        if node is None:
            return None
        v = self.expr(node)
        if not (isinstance(v, PyValue) and isinstance(v.obj, int)
                and not isinstance(v.obj, bool)):
            raise self.err(node, f"a slice of a vector or matrix needs {what} known at compile "
                           "time (a constant or a jr.static value)")
        return v.obj

    def slice_axes(self, shape: tuple[int, ...], index_node: ast.AST
                   ) -> list[tuple[bool, list[int], Any]]:
        """Per axis of `shape`: (kept, positions, run-time index or None) for the index
        `index_node`; an axis with a run-time index lists all its positions."""
        items = list(index_node.elts) if isinstance(index_node, ast.Tuple) else [index_node]
        if len(items) > len(shape):
            raise self.err(index_node, f"too many indices for shape {shape}")
        axes: list[tuple[bool, list[int], Any]] = []
        for item, extent in zip(items, shape):
            if isinstance(item, ast.Slice):
                bounds = slice(self.static_int(item.lower, "its bounds"),
                               self.static_int(item.upper, "its bounds"),
                               self.static_int(item.step, "its step"))
                if bounds.step == 0:
                    raise self.err(item, "slice step cannot be zero")
                axes.append((True, list(range(*bounds.indices(extent))), None))
                continue
            k = self.vec_indices((extent,), item)[0]
            if isinstance(k, int):
                axes.append((False, [k], None))
            else:
                axes.append((False, list(range(extent)), k))
        axes += [(True, list(range(extent)), None) for extent in shape[len(items):]]
        return axes

    def vec_slice(self, v: VecValue, index_node: ast.AST) -> Any:
        """`v[a:b]`, `m[i, :]`, ... of a vector or matrix value."""
        axes = self.slice_axes(v.shape, index_node)
        shape = tuple(len(pos) for kept, pos, _ in axes if kept)
        if 0 in shape:
            raise self.err(index_node, f"the slice [{ast.unparse(index_node)}] of shape "
                           f"{v.shape} is empty")
        dynamic = [k for _, _, k in axes if k is not None]
        fixed = [pos if k is None else [None] for _, pos, k in axes]
        items = []
        for position in itertools.product(*fixed):
            lines = [pos if at is None else [at] for at, (_, pos, _) in zip(position, axes)]
            picks = [v.items[flat_index(p, v.shape)] for p in itertools.product(*lines)]
            if not dynamic:
                items.append(picks[0])
                continue
            candidates = VecValue(tuple(len(pos) for _, pos, k in axes if k is not None),
                                  tuple(picks))
            items.append(self.dynamic_part(candidates, dynamic, index_node))
        return VecValue(shape, tuple(items))

    def slice_shape(self, axes: list[tuple[bool, list[int], Any]],
                    index_node: ast.AST, shape: tuple[int, ...]) -> tuple[int, ...]:
        out = tuple(len(pos) for kept, pos, _ in axes if kept)
        if 0 in out:
            raise self.err(index_node, f"the slice [{ast.unparse(index_node)}] of shape "
                           f"{shape} is empty")
        return out

    def element_slice(self, outer: tuple, index_node: ast.AST
                      ) -> tuple[tuple[int, ...], list[tuple[n.Expr, ...]]]:
        """`element_part` for `x[i][a:b]`: (shape, index tuples) of the components the slice
        selects; a run-time index beside the slice is one more index of the access."""
        _, idx, element = outer
        loc = self.loc(index_node)
        axes = self.slice_axes(element, index_node)
        shape = self.slice_shape(axes, index_node, element)
        lines = [[k] if k is not None else [n.Const(p, dtypes.i32, loc) for p in pos]
                 for _, pos, k in axes]
        return shape, [idx + tuple(p) for p in itertools.product(*lines)]

    def assign_vec_slice(self, target: ast.Subscript, var: VecVar, v: Any, node: ast.AST,
                         op: str | None = None) -> None:
        """`m[i, :] = row`, `v[a:b] = w`, `v[a:b] += w` on a vector local."""
        axes = self.slice_axes(var.shape, target.slice)
        if any(k is not None for _, _, k in axes):
            raise self.err(target, "storing through a slice of a vector local needs every "
                           "index known at compile time")
        shape = self.slice_shape(axes, target.slice, var.shape)
        flats = [flat_index(p, var.shape) for p in itertools.product(*(p for _, p, _ in axes))]
        if op is not None:
            current = self.vec_local_value(var, target)
            v = self.binary(op, VecValue(shape, tuple(current.items[f] for f in flats)), v,
                            node)
        if isinstance(v, VecValue):
            if v.shape != shape and (len(v.items) != len(flats) or len(shape) != 1):
                raise self.err(node, f"cannot store a value of shape {v.shape} into the slice "
                               f"[{ast.unparse(target.slice)}] of shape {shape}")
            values = self.snapshot(v, node).items
        else:
            values = (v,) * len(flats)
        loc = self.loc(target)
        for f, x in zip(flats, values):
            c = var.components[f]
            self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, target), loc))
