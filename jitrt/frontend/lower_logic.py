"""AST -> IR for `and`, `or` and comparisons, with Python's evaluation order.

Stage: frontend (part of the expression family of the lowering visitor). Python evaluates each
operand of a chained comparison once (`0 <= jr.atomic_add(c[0], 1) < n` adds once) and stops
at the first operand that decides an `and`/`or` chain, whose value (an operand, not a bool) is
the result: `2 and 3` is 3, `0 or 2.5` is 2.5. Here:
- a compile-time first operand decides at compile time; the rest is then not lowered at all
  (`jr.static(x is None or x.n > 2)`);
- a run-time `a and b` is `b if a else a` (`Select`, whose arms run only when chosen), or the
  0/1 `and` itself when both sides are truth values; `a` is copied into a local first when it
  would otherwise be evaluated twice;
- when lowering `b` emitted statements (an inlined func, the copy of a middle comparison
  operand), they run inside an `if` on `a`, and the result is a local.
"""
from __future__ import annotations

import ast
import functools
from typing import Callable

from .. import dtypes
from ..errors import KernelSyntaxError
from ..ir import nodes as n
from .context import LoweringHost, NoValue, PyValue, module_alias
from .lower_expr import CMPOPS, Value, adapt, is_number
from .vectors import VecValue, as_vector

CHEAP = (n.Const, n.Local, n.Arg)      # read twice at no cost and with no effect


def is_truth_value(e: n.Expr) -> bool:
    """A 0/1 i32: a comparison, `not`, or a 0/1 `and`/`or`."""
    return (isinstance(e, n.Binary) and e.op in n.COMPARE_OPS + ("and", "or")) or (
        isinstance(e, n.Unary) and e.op == "not")


class LogicLowering(LoweringHost):
    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.expr(node.values[0])
        for item in node.values[1:]:
            if isinstance(as_vector(result), VecValue):
                result = self.vector_logic(op, result, self.expr(item), item)
            else:
                result = self.short_circuit(op, result, self.lower_later(item), item)
        return result

    def vector_logic(self, op: str, a: Value, b: Value, node: ast.AST) -> VecValue:
        """`a and b` / `a or b` where either is a vector or matrix: per component, the 0/1 of
        the components' truths (a scalar broadcasts), both sides evaluated, as Taichi has it
        (`[2, 0] or [1, 1]` is [1, 1])."""
        a, b = as_vector(a), as_vector(b)
        shape = (a if isinstance(a, VecValue) else b).shape  # type: ignore[union-attr]
        if isinstance(b, VecValue) and b.shape != shape:
            raise self.err(node, f"'{op}' of a vector/matrix of shape {shape} and one of "
                           f"shape {b.shape}")
        count = len((a if isinstance(a, VecValue) else b).items)  # type: ignore[union-attr]
        cols = [v.items if isinstance(v, VecValue) else (v,) * count for v in (a, b)]
        loc = self.loc(node)
        return VecValue(shape, tuple(
            n.Binary(op, self.truth(self.value(node, x)), self.truth(self.value(node, y)),
                     dtypes.i32, loc) for x, y in zip(*cols)))

    def lower_later(self, node: ast.AST) -> Callable[[], Value]:
        return lambda: self.expr(node)

    def expr_Compare(self, node: ast.Compare) -> Value:
        left = self.expr(node.left)
        last = len(node.ops) - 1

        def part(k: int) -> Value:
            nonlocal left
            op_node, right_node = node.ops[k], node.comparators[k]
            right = self.expr(right_node)
            if isinstance(op_node, (ast.In, ast.NotIn, ast.Is, ast.IsNot)):
                value = self.membership(op_node, left, right, node)
            else:
                op = CMPOPS.get(type(op_node))
                if op is None:
                    raise self.err(node, f"comparison {type(op_node).__name__} is not supported")
                if k < last and isinstance(right, n.Expr) and not isinstance(right, CHEAP):
                    right = self.snapshot(right, right_node)   # a middle operand: read once
                value = self.binary(op, left, right, node)
            left = right
            return value

        result = part(0)
        for k in range(1, last + 1):
            result = self.short_circuit("and", result, functools.partial(part, k), node)
        return result

    def membership(self, op: ast.cmpop, a: Value, b: Value, node: ast.AST) -> Value:
        """`in`, `not in`, `is`, `is not` of compile-time values (as 0/1), inside jr.static()
        only, as Taichi has it for `in`: the test runs once, while the kernel compiles."""
        if not self.static_depth:
            static = f"{module_alias(self.scope.globals)}.static"
            word = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}[
                type(op)]
            raise self.err(node, f'"{type(op).__name__}" is only supported inside `{static}`: '
                           f"'{word}' is tested once, at compile time; write {static}(a {word} "
                           "b)", KernelSyntaxError)
        if not (isinstance(a, PyValue) and isinstance(b, PyValue)):
            raise self.err(node, f"'{type(op).__name__}' compares values known at compile "
                           "time only")
        try:
            found = {ast.In: lambda: a.obj in b.obj, ast.NotIn: lambda: a.obj not in b.obj,
                     ast.Is: lambda: a.obj is b.obj,
                     ast.IsNot: lambda: a.obj is not b.obj}[type(op)]()
        except TypeError as exc:
            raise self.err(node, f"compile-time comparison fails: {exc}") from None
        return PyValue(int(found))

    def short_circuit(self, op: str, a: Value, lower_b: Callable[[], Value],
                      node: ast.AST) -> Value:
        """Python's `a and b` / `a or b`; `lower_b()` lowers b, only where b is evaluated."""
        if isinstance(a, PyValue) and not isinstance(a.obj, NoValue):
            try:
                decided = bool(a.obj)
            except (TypeError, ValueError) as exc:
                raise self.err(node, f"the truth value of {a.obj!r} is not defined: "
                               f"{exc}") from None
            return a if decided == (op == "or") else lower_b()
        ea = self.value(node, a)
        saved, self.block = self.block, []
        try:
            b = lower_b()
        finally:
            pre, self.block = self.block, saved
        if isinstance(as_vector(b), VecValue):             # no short circuit: as Taichi's
            for stmt in pre:
                self.emit(stmt)
            return self.vector_logic(op, ea, b, node)
        if isinstance(b, PyValue) and is_number(b):      # a literal adapts to the other side
            eb: n.Expr = self.const(b.obj, node, adapt(b.obj, ea.dtype, self.ctx))
        else:
            eb = self.value(node, b)
        if not pre and is_truth_value(ea) and is_truth_value(eb):
            return n.Binary(op, ea, eb, dtypes.i32, self.loc(node))   # evaluated lazily
        dt = dtypes.promote(ea.dtype, eb.dtype)
        loc = self.loc(node)
        if not pre:
            if not isinstance(ea, CHEAP):
                ea = self.fresh_local(ea, "cond", loc)
            ea, eb = self.cast(ea, dt), self.cast(eb, dt)
            if op == "and":
                return n.Select(self.truth(ea), eb, ea, dt, loc)
            return n.Select(self.truth(ea), ea, eb, dt, loc)
        r = self.fresh_local(self.cast(ea, dt), "cond", loc)
        test: n.Expr = self.truth(r) if op == "and" else n.Unary("not", self.truth(r),
                                                                  dtypes.i32, loc)
        self.emit(n.If(test, tuple(pre) + (n.Assign(r.name, self.cast(eb, dt), loc),), (),
                       loc))
        return r
