"""AST -> IR for calls of Python's own functions in kernels: `all`/`any`/`len`/`sum`, the
functions of the `operator` module, `jr.func(f)` applied in the kernel, `"...".format(...)`
(`lower_format.py`). (`v.fill(s)` on a vector local or element is a statement:
`lower_stmt.fill_vector`.)

Stage: frontend (a helper of the call family, `lower_call.py`). `python_call(obj, node)` gives
the value of `obj(...)` or None when `obj` is none of these. Taichi accepts them in kernels:
`all(v == w)` reduces a vector of comparisons, `operator.add(a, b)` is `a + b` (test tables of
operators are written that way), `jr.func(f)(x)` inlines the plain function `f`. Nothing is
cached here.
"""
from __future__ import annotations

import ast
import builtins
import operator
from typing import Any

from .. import dtypes
from ..ir import nodes as n
from . import builtins as bi
from .context import LoweringHost, PyValue
from .lower_comprehension import describe_any
from .lower_expr import BINOPS, ShapeOf, Value, describe, is_number
from .vectors import TupleValue, VecValue, as_vector

# operator.f(a, b) -> the binary operator; the in-place forms give the same value (the
# operands of a call are values, never assigned through)
OPERATOR_BINARY: dict[Any, str] = {}
for _node_type, _symbol in BINOPS.items():
    _name = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "truediv",
             "FloorDiv": "floordiv", "Mod": "mod", "Pow": "pow", "BitAnd": "and_",
             "BitOr": "or_", "BitXor": "xor", "LShift": "lshift",
             "RShift": "rshift"}[_node_type.__name__]
    OPERATOR_BINARY[getattr(operator, _name)] = _symbol
    OPERATOR_BINARY[getattr(operator, "i" + _name.rstrip("_"))] = _symbol
OPERATOR_BINARY.update({operator.lt: "<", operator.le: "<=", operator.gt: ">",
                        operator.ge: ">=", operator.eq: "==", operator.ne: "!="})
OPERATOR_UNARY = {operator.neg: ast.USub, operator.pos: ast.UAdd, operator.not_: ast.Not,
                  operator.invert: ast.Invert, operator.inv: ast.Invert}
OPERATOR_MATMUL = (operator.matmul, operator.imatmul)
# Taichi's `ti.lang.ops` functions of Python's logic, spelled as the syntax they stand for
LOGIC_CALLS = {bi.logical_not: 1, bi.logical_and: 2, bi.logical_or: 2, bi.ifte: 3}


class PyCallLowering(LoweringHost):
    def python_call(self, obj: Any, node: ast.Call) -> Value | None:
        """`obj(...)` for Python's functions that kernels accept; None for any other `obj`."""
        try:
            binary = OPERATOR_BINARY.get(obj)
            unary = OPERATOR_UNARY.get(obj)
        except TypeError:                 # unhashable
            return None
        if binary is not None or obj in OPERATOR_MATMUL:
            a, b = self.positional(node, 2, describe(obj))
            if binary is None:
                return self.matmul(a, b, node)
            return self.binary(binary, a, b, node)
        if unary is not None:
            self.positional(node, 1, describe(obj))
            return self.expr(ast.copy_location(ast.UnaryOp(unary(), node.args[0]), node))
        if obj in LOGIC_CALLS:
            return self.logic_call(obj, node)
        if obj is builtins.all or obj is builtins.any:
            return self.all_any(obj.__name__, node)
        if obj is builtins.len:
            return self.length(node)
        if obj is builtins.sum:
            return self.total(node)
        if getattr(obj, "__name__", None) == "format" and isinstance(
                getattr(obj, "__self__", None), str):
            return self.str_format(obj.__self__, node)       # "...".format(...): lower_format
        if getattr(obj, "__module__", None) == "jitrt.kernel" and getattr(
                obj, "__name__", None) == "func":   # jr.func(f) in a kernel: f, inlined when called
            # (known by name: the frontend does not import the API module, jitrt/kernel.py)
            (f,) = self.positional(node, 1, "jr.func")
            if not isinstance(f, PyValue) or not callable(f.obj):
                raise self.err(node, f"jr.func() takes a function, got {describe(f)}")
            from .func import plain_func
            return PyValue(f.obj if hasattr(f.obj, "template_params") else plain_func(f.obj))
        return None

    def expand_starred(self, node: ast.Call) -> ast.Call:
        """`f(*v, x)`: the call with `*v` replaced by v's components (a vector's, a matrix's
        rows, a tuple's or a compile-time sequence's items), bound to hidden names the new call
        reads. Each `*v` is evaluated once, before the other arguments (which stay as written,
        so that `x[i]` still reaches a func by reference)."""
        args: list[ast.expr] = []
        for arg in node.args:
            if not isinstance(arg, ast.Starred):
                args.append(arg)
                continue
            v = as_vector(self.expr(arg.value))
            if isinstance(v, VecValue):
                items = [v.row(k) if len(v.shape) == 2 else v.items[k]
                         for k in range(v.shape[0])]
            elif isinstance(v, TupleValue):
                items = list(v.items)
            elif isinstance(v, PyValue) and isinstance(v.obj, (tuple, list, range)):
                items = [PyValue(x) for x in v.obj]
            else:
                raise self.err(arg, "*x in a call unpacks a vector, a matrix, a tuple or a "
                               f"sequence known at compile time, got "
                               f"{describe_any(v)}")
            args.extend(self.bind_hidden(item, arg) for item in items)
        return ast.copy_location(ast.Call(node.func, args, node.keywords), node)

    def bind_hidden(self, v: Value, node: ast.expr) -> ast.expr:
        """A name no user can write, bound to `v` (a run-time scalar copied to a local first,
        so that it is read as it is now)."""
        name = self.ctx.fresh_prefix("star") + "arg"
        self.scope.bindings[name] = self.snapshot(v, node)  # type: ignore[attr-defined]
        return ast.copy_location(ast.Name(name, ast.Load()), node)

    def logic_call(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """`logical_not(a)`, `logical_and(a, b)`, `logical_or(a, b)`, `ifte(c, a, b)` as
        `not a`, `a and b`, `a or b`, `a if c else b` (element-wise on vectors, as those)."""
        count = LOGIC_CALLS[fn]
        if node.keywords or len(node.args) != count:
            raise self.err(node, f"{fn.name}() takes {count} positional argument(s), got "
                           f"{len(node.args)}")
        args = node.args
        syntax: ast.expr
        if fn is bi.logical_not:
            syntax = ast.UnaryOp(ast.Not(), args[0])
        elif fn is bi.ifte:
            syntax = ast.IfExp(args[0], args[1], args[2])
        else:
            syntax = ast.BoolOp(ast.And() if fn is bi.logical_and else ast.Or(), list(args))
        return self.expr(ast.copy_location(syntax, node))

    def positional(self, node: ast.Call, count: int, what: str) -> list[Value]:
        if node.keywords or len(node.args) != count:
            raise self.err(node, f"{what}() takes {count} positional argument(s) in kernels, "
                           f"got {len(node.args)}")
        return [self.expr(a) for a in node.args]

    def all_any(self, name: str, node: ast.Call) -> Value:
        """`all(v)` / `any(v)` of a vector or matrix (every component / some component
        nonzero, an i32 0/1), of a number (its truth), or of a compile-time sequence (Python's
        own)."""
        (v,) = self.positional(node, 1, name)
        if isinstance(v, PyValue) and not is_number(v):
            try:
                return PyValue(int((builtins.all if name == "all" else builtins.any)(v.obj)))
            except TypeError:
                raise self.err(node.args[0], f"{name}() takes a vector, a matrix or a "
                               f"sequence, got {describe(v.obj)}") from None
        v = as_vector(v)
        items = v.items if isinstance(v, (VecValue, TupleValue)) else (v,)
        op = "and" if name == "all" else "or"
        loc = self.loc(node)
        truths: list[n.Expr] = []
        for item in items:
            if is_number(item):
                if bool(item.obj) == (op == "or"):  # type: ignore[union-attr]
                    return PyValue(int(op == "or"))
                continue
            truths.append(self.truth(self.value(node.args[0], item)))
        if not truths:
            return PyValue(int(op == "and"))
        return self.fold_chain(lambda a, b: n.Binary(op, a, b, dtypes.i32, loc), truths, node)

    def length(self, node: ast.Call) -> Value:
        """`len(v)`: a vector's size, a matrix's row count, a compile-time sequence's length,
        `len(a.shape)` an ndarray's index dimensions (known at compile time)."""
        (v,) = self.positional(node, 1, "len")
        if isinstance(v, ShapeOf):          # Quadrants': `qd.static(len(a.shape) == 3)`
            return PyValue(v.ref.ndim - len(self.element_shape(v.ref)))
        v = as_vector(v)
        if isinstance(v, VecValue):
            return PyValue(v.shape[0])
        if isinstance(v, TupleValue):
            return PyValue(len(v.items))
        if type(v).__name__ == "DictValue":             # lower_comprehension.py
            return PyValue(len(v.keys))  # type: ignore[attr-defined]
        if isinstance(v, PyValue):
            try:
                return PyValue(len(v.obj))
            except TypeError:
                pass
        raise self.err(node.args[0], f"len() takes a vector, a matrix or a sequence known at "
                       f"compile time, got {describe(v.obj if isinstance(v, PyValue) else v)}")

    def total(self, node: ast.Call) -> Value:
        """`sum(v)` of a vector's components or a matrix's elements (Python's `sum` of a
        compile-time sequence); `sum(v, start)` starts from `start`."""
        if node.keywords or not 1 <= len(node.args) <= 2:
            raise self.err(node, "sum() takes a vector and an optional start in kernels")
        v = as_vector(self.expr(node.args[0]))
        start: Value = self.expr(node.args[1]) if len(node.args) == 2 else PyValue(0)
        if isinstance(v, PyValue) and isinstance(start, PyValue):
            try:
                return PyValue(builtins.sum(v.obj, start.obj))
            except TypeError as exc:
                raise self.err(node, f"sum() fails: {exc}") from None
        if not isinstance(v, (VecValue, TupleValue)):
            raise self.err(node.args[0], "sum() in a kernel takes a vector, a matrix or a "
                           f"compile-time sequence, got {describe(v)}")
        return self.fold_chain(lambda a, b: self.binary("+", a, b, node), [start, *v.items],
                               node)
