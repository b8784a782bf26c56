"""AST -> IR for Quadrants' own kernel functions: `raw_mod`, `outer`,
`math.isnan`/`isinf`, the bit counts `math.popcnt`/`clz`/`ffs`, and `graph.do_while`; and
Taichi's `raw_div` (C's integer division), `bit_shr` (a logical shift right) and `bit_cast`
(a value's bits read as another type of its width: a `bitcast` Unary).

Stage: frontend (a family of the call lowering; `lower_call.call_builtin` sends these here).
Each is spelled with existing IR: `raw_mod(a, b)` (C's remainder, the sign of `a`) from
Python's `%` corrected where the signs differ; `isnan(x)` as `x != x`; `isinf(x)` as
`abs(x) == inf`; `outer(a, b)` as the matrix of products; the bit counts as `Math` ops that
codegen maps to LLVM's ctpop/ctlz/cttz (an i32 result, as in Quadrants). Vectors are
element-wise. Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..errors import KernelTypeError
from ..ir import nodes as n
from . import builtins as bi
from .context import LoweringHost
from .vectors import VecValue, as_vector

_ARITY = {bi.raw_mod: (2, 2), bi.outer: (2, 2), bi.raw_div: (2, 2), bi.bit_shr: (2, 2),
          bi.graph_do_while: (1, 1), bi.bit_cast: (2, 2)}


class QuadrantsLowering(LoweringHost):
    def quadrants_call(self, fn: bi.Builtin, node: ast.Call) -> Any:
        lo, hi = _ARITY.get(fn, (1, 1))
        if node.keywords or not lo <= len(node.args) <= hi:
            takes = str(lo) if lo == hi else f"{lo} or {hi}"
            raise self.err(node, f"jr.{fn.name}() takes {takes} positional argument(s)")
        if fn is bi.graph_do_while:
            raise self.err(node, "jr.graph.do_while(flag) is the condition of a `while` "
                           "loop at the top level of a @jr.kernel(graph=True) kernel (or "
                           "directly inside another such loop), not elsewhere")
        args = [as_vector(self.expr(a)) for a in node.args]
        if fn is bi.bit_cast:
            return self.bit_cast(args[0], args[1], node)
        if fn is bi.outer:
            return self.outer(args[0], args[1], node)
        if any(isinstance(a, VecValue) for a in args):
            shape = next(a.shape for a in args if isinstance(a, VecValue))
            count = len(next(a.items for a in args if isinstance(a, VecValue)))
            columns = [a.items if isinstance(a, VecValue) else (a,) * count for a in args]
            if any(isinstance(a, VecValue) and a.shape != shape for a in args):
                raise self.err(node, f"jr.{fn.name}(): the shapes of the arguments differ")
            return VecValue(shape, tuple(self.quadrants_scalar(fn, list(p), node)
                                         for p in zip(*columns)))
        return self.quadrants_scalar(fn, args, node)

    def quadrants_scalar(self, fn: bi.Builtin, args: list[Any], node: ast.Call) -> n.Expr:
        loc = self.loc(node)
        if fn is bi.raw_mod:
            return self.raw_mod(args[0], args[1], node)
        if fn is bi.raw_div:
            return self.raw_div(args[0], args[1], node)
        if fn is bi.bit_shr:
            return self.bit_shr(args[0], args[1], node)
        x = self.value(node, args[0])
        if fn is bi.isnan or fn is bi.isinf:
            if not x.dtype.is_float:
                return self.const(0, node, dtypes.i32)
            if fn is bi.isnan:
                return n.Binary("!=", x, x, dtypes.i32, loc)
            inf = self.const(float("inf"), node, x.dtype)
            return n.Binary("==", n.Math("abs", (x,), x.dtype, loc), inf, dtypes.i32, loc)
        if not x.dtype.is_int:
            raise self.err(node, f"jr.math.{fn.name}() takes an integer, got {x.dtype.name}")
        return self.cast(n.Math(fn.name, (x,), x.dtype, loc), dtypes.i32)

    def raw_mod(self, a: Any, b: Any, node: ast.Call) -> n.Expr:
        """C's remainder: Python's `a % b`, minus b where that has the other sign than a."""
        ea, eb, dt = self.operands(a, b, node)
        loc = self.loc(node)
        r = self.binary("%", ea, eb, node)
        zero = self.const(0, node, dt)
        differs = n.Binary("!=", n.Binary("<", r, zero, dtypes.i32, loc),
                           n.Binary("<", ea, zero, dtypes.i32, loc), dtypes.i32, loc)
        fix = n.Binary("and", n.Binary("!=", r, zero, dtypes.i32, loc), differs, dtypes.i32,
                       loc)
        return n.Select(fix, n.Binary("-", r, eb, dt, loc), r, dt, loc)

    def bit_cast(self, x: Any, dt: Any, node: ast.Call) -> n.Expr:
        """Taichi's `bit_cast(x, dtype)`: x's bits read as `dtype`, which must have x's width
        (`bit_cast(1.0, jr.i32)` is 1065353216); of a scalar only, as in Taichi."""
        if isinstance(x, VecValue):
            raise self.err(node.args[0], "jr.bit_cast() takes a scalar (Cannot apply bit_cast "
                           "on Taichi classes): cast each component")
        target: Any = getattr(dt, "obj", None)
        if target is int or target is float:
            target = self.ctx.default_ip if target is int else self.ctx.default_fp
        if not isinstance(target, dtypes.DataType):
            raise self.err(node.args[1], "jr.bit_cast(x, dtype): dtype must be a jitrt dtype "
                           "such as jr.i32", KernelTypeError)
        e = self.value(node.args[0], x)
        if e.dtype.bits != target.bits:
            raise self.err(node, f"jr.bit_cast(x, {target.name}): x is {e.dtype.name}, "
                           f"{e.dtype.bits} bits; the target type must have as many",
                           KernelTypeError)
        return e if e.dtype == target else n.Unary("bitcast", e, target, self.loc(node))

    def raw_div(self, a: Any, b: Any, node: ast.Call) -> n.Expr:
        """Taichi's `raw_div`: C's division (truncated toward zero) of integers, `/` else."""
        ea, eb, dt = self.operands(a, b, node)
        if dt.is_float:
            return self.binary("/", ea, eb, node)
        loc = self.loc(node)
        q = self.binary("//", ea, eb, node)
        zero = self.const(0, node, dt)
        inexact = n.Binary("!=", self.binary("%", ea, eb, node), zero, dtypes.i32, loc)
        signs = n.Binary("!=", n.Binary("<", ea, zero, dtypes.i32, loc),
                         n.Binary("<", eb, zero, dtypes.i32, loc), dtypes.i32, loc)
        fix = n.Binary("and", inexact, signs, dtypes.i32, loc)
        return n.Select(fix, n.Binary("+", q, self.const(1, node, dt), dt, loc), q, dt, loc)

    def bit_shr(self, a: Any, b: Any, node: ast.Call) -> n.Expr:
        """Taichi's `bit_shr`: a logical shift right (zeros in from the left), in `a`'s
        type."""
        x = self.value(node, a)
        if not x.dtype.is_int or not self.value(node, b).dtype.is_int:
            raise self.err(node, "jr.bit_shr() takes integers")
        unsigned = dtypes.BY_NAME[f"u{x.dtype.bits}"]
        return self.cast(self.binary(">>", self.cast(x, unsigned), b, node), x.dtype)

    def outer(self, a: Any, b: Any, node: ast.Call) -> VecValue:
        """`jr.outer(a, b)`: the len(a) x len(b) matrix a[i] * b[j] of two vectors."""
        if not (isinstance(a, VecValue) and isinstance(b, VecValue) and len(a.shape) == 1
                and len(b.shape) == 1):
            raise self.err(node, "jr.outer(a, b) takes two vectors")
        items = tuple(self.binary("*", x, y, node) for x in a.items for y in b.items)
        return VecValue((a.shape[0], b.shape[0]), items)
