"""AST -> IR for the targets of an assignment: one target from its value (`x = jr.static(v)`
binds a name to the compile-time value), and unpacking (`a, b = t`).

Stage: frontend (part of the statement family of the lowering visitor; `stmt_Assign` in
`lower_stmt.py` calls `assign_from` per target, or evaluates a chained assignment's value
once and calls `assign_value`). A tuple target unpacks a tuple of values, a vector (a matrix's
rows) or a compile-time sequence (`a, b = x.shape`, `u, w = jr.static(f, g)`); every part is
read before any target is assigned, as in Python. Nothing is cached here.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..errors import KernelSyntaxError
from ..ir import nodes as n
from .context import LocalVar, LoweringHost, PyValue
from .lower_expr import ShapeOf, Value, describe
from .vectors import TupleValue, VecValue


def describe_value(v: Any) -> str:
    if isinstance(v, PyValue):
        return describe(v.obj)
    return "a run-time number" if isinstance(v, n.Expr) else describe(v)


class AssignLowering(LoweringHost):
    def assign_from(self, target: ast.expr, value: ast.expr, node: ast.stmt) -> None:
        """`target = value` for one target."""
        if self.tile_assign(target, value, node):      # register tiles: lower_tiles.py
            return
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            if len(value.elts) != len(target.elts):
                raise self.err(node, f"cannot unpack {len(value.elts)} values into "
                               f"{len(target.elts)} targets")
            # evaluate every right side first
            temps = [self.snapshot(self.expr(v), v) for v in value.elts]
            self.unpack_into(target.elts, temps, node)
            return
        v = self.expr(value)
        static = isinstance(v, PyValue) and self.is_static_call(value)
        if static and isinstance(target, ast.Subscript):
            raise self.err(node, "Static assign cannot be used on elements in arrays: "
                           "x = jr.static(v) binds a name to a compile-time value; drop "
                           "jr.static to store one", KernelSyntaxError)
        if static and isinstance(target, ast.Name) and isinstance(
                self.scope.bindings.get(target.id), LocalVar):
            raise self.err(node, f"Recreating variables is not allowed: '{target.id}' is a "
                           "run-time local already, so x = jr.static(v) cannot bind it to a "
                           "compile-time value")
        if isinstance(target, ast.Name) and static and target.id not in self.scope.params:
            # `x = jr.static(v)`: the name is the compile-time value itself, numbers and bools
            # too (Taichi's static assignment), so `jr.static(x)` and template arguments see it
            self.scope.bindings[target.id] = v
            return
        self.assign_value(target, v, node)

    def assign_value(self, target: ast.expr, v: Value, node: ast.stmt) -> None:
        """`target = v` where v is already evaluated; a tuple target unpacks a tuple, a
        vector (components, or a matrix's rows) or a compile-time sequence (`a, b = x.shape`,
        `u, w = jr.static(f, g)`)."""
        if not isinstance(target, (ast.Tuple, ast.List)):
            self.assign_target(target, v, node)
            return
        count = len(target.elts)
        parts: list[Value]
        if isinstance(v, TupleValue):
            parts = list(v.items)
        elif isinstance(v, VecValue):
            parts = [v.row(k) if len(v.shape) == 2 else v.items[k] for k in range(v.shape[0])]
        elif isinstance(v, PyValue) and isinstance(v.obj, (tuple, list)):
            parts = [PyValue(x) for x in v.obj]
        elif isinstance(v, ShapeOf):       # `n, m = a.shape` of an ndarray: one run-time
            ndim = v.ref.ndim - len(self.element_shape(v.ref))     # extent per index axis
            parts = [n.Shape(v.ref, k, dtypes.i32, self.loc(node)) for k in range(ndim)]
        else:
            raise self.err(node, f"cannot unpack {describe_value(v)} into {count} targets")
        if len(parts) != count:
            raise self.err(node, f"cannot unpack {len(parts)} values into {count} targets")
        parts = [self.snapshot(p, node) for p in parts]    # every part read before assigning
        self.unpack_into(target.elts, parts, node)

    def unpack_into(self, targets: list[ast.expr], parts: list[Any], node: ast.stmt) -> None:
        """The parts assigned left to right, as in Python; a name that a later target of the
        same statement assigns again keeps only its last part (`v1, _, _ = f()`: the earlier
        assignments cannot be observed, so `_` may take parts of different shapes)."""
        last = {t.id: k for k, t in enumerate(targets) if isinstance(t, ast.Name)}
        for k, (t, part) in enumerate(zip(targets, parts)):
            if not isinstance(t, ast.Name) or last[t.id] == k:
                self.assign_value(t, part, node)
