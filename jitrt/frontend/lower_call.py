"""AST -> IR for calls: builtins (math, casts, min/max, atomics, static) and what a call names.

Stage: frontend (the call family of the lowering visitor). A call of a `@jr.func` (or a plain
Python function, a struct method) is inlined by `lower_inline.py`; a `@jr.real_func` becomes a
real call (`real_func.py`); Python callables with compile-time arguments run while compiling.
Caches nothing.
"""
from __future__ import annotations

import ast
import math
import sys
import types
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DataType
from ..errors import KernelCompileError, KernelSyntaxError, KernelTypeError
from ..ir import nodes as n
from ..linalg import MatrixType, Struct, StructType
from . import builtins as bi
from .context import PyValue
from .func import BoundFunc, Func, plain_func
from ..frozen import frozen
from .lower_expr import Value, describe, is_field, is_number
from .context import module_alias
from .lower_inline import InlineLowering
from .lower_simt import shared_handle
from .real_func import RealFuncDef
from .lists import elements, is_list
from .vectors import ClassMethod, TupleValue, VecMethod, VecValue, as_vector

NOT_KNOWN = object()
# `jr.static(enumerate((i_x, i_y)))`: these iterate over a tuple of run-time values at compile
# time, each item a RunTimeItem that the unrolled loop binds as a local
ITERATION_BUILTINS = (enumerate, zip, reversed, list, tuple)
# what jr.static(x) of a run-time x says (Taichi's words "must be compile-time constants" in it)
STATIC_NEEDS = ("jr.static() needs a value known at compile time: its inputs must be compile-time "
                "constants (Python values, fields, template parameters), not run-time values")


@frozen
class RunTimeItem:
    """A run-time value (or vector) inside a compile-time tuple of a jr.static loop."""
    value: Any


def run_time_items(v: Any) -> Any:
    """A tuple or vector of run-time values as a compile-time tuple of RunTimeItems (the
    numbers among them as themselves); anything else unchanged."""
    if isinstance(v, (TupleValue, VecValue)) and (isinstance(v, TupleValue) or len(v.shape) == 1):
        return PyValue(tuple(x.obj if isinstance(x, PyValue) else RunTimeItem(x)
                             for x in v.items))
    return v


def known_value(v: Any) -> Any:
    """The Python object of a value known at compile time (a constant of a type, such as
    `np.float32(math.pi)` in a kernel, as the numpy number of that type), else NOT_KNOWN."""
    if isinstance(v, PyValue):
        return v.obj
    if isinstance(v, n.Const):
        return v.dtype.np.type(v.value)
    return NOT_KNOWN



# the callables `call_library` lowers itself, which take no keyword arguments in kernels (any
# other Python callable runs at compile time, keywords and all: `np.array(3, dtype=np.int32)`)
KEYWORDLESS = (bi.PY_INT, bi.PY_FLOAT, bi.PY_ABS, bi.PY_MIN, bi.PY_MAX, bi.PY_RANGE, bi.ndrange,
               np.abs, np.minimum, np.maximum)


class CallLowering(InlineLowering):
    def expr_Call(self, node: ast.Call) -> Value:
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            node = self.expand_starred(node)  # type: ignore[attr-defined]   # lower_pycalls
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err(kw.value, "**kwargs in calls are not supported in kernels")
        callee = self.expr(node.func)
        if not isinstance(callee, PyValue):
            raise self.err(node.func, "only functions known at compile time can be called")
        obj = callee.obj
        try:
            obj = bi.PYTHON_EQUIVALENTS.get(obj, obj)
        except TypeError:  # unhashable
            pass
        called = self.call_function(obj, node)
        if called is not None:
            return called
        try:
            vector_call = self.vector_call(obj, node)
            if vector_call is None:
                vector_call = self.python_call(obj, node)    # all, len, ... (lower_pycalls)
            if vector_call is not None:
                return vector_call
            if getattr(type(obj), "is_jitrt_kernel", False):
                raise self.err(node, f"kernel '{obj.name}' cannot be called from a kernel; "
                               "make it a @jr.func")
            return self.call_library(obj, node)
        finally:
            pre = self.__dict__.get("pre_evaluated")
            if pre:
                for arg in node.args:
                    pre.pop(id(arg), None)

    def evaluated_once(self, arg: ast.AST) -> Value:
        """`arg` lowered to look at its kind (a vector or not) and kept: the scalar path that
        lowers it again gets this value (lower_expr.expr), so a call in it (`jr.sqrt(f())`
        of a func with side effects) runs once."""
        v = self.expr(arg)
        if not isinstance(v, VecValue):
            self.__dict__.setdefault("pre_evaluated", {})[id(arg)] = v
        return v

    def call_function(self, obj: Any, node: ast.Call) -> Value | None:
        """A call of a jitrt func, a real function, a method or a plain Python function
        (inlined), else None."""
        if isinstance(obj, RealFuncDef):                  # a function of its own
            return self.call_real(obj, node, None)  # type: ignore[attr-defined]
        if isinstance(obj, BoundFunc) and isinstance(obj.func, RealFuncDef):
            return self.call_real(obj.func, node, obj.obj)  # type: ignore[attr-defined]
        if isinstance(obj, Func):
            return self.inline(obj, node)
        if isinstance(obj, BoundFunc):                    # self.f(...) of a @jr.func method
            return self.inline(obj.func, node, obj.obj)
        if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
            from ..data import Field
            from ..data_kernel import COMPILE_TIME_METHODS, HOST_ONLY_METHODS, KERNEL_METHODS
            if isinstance(obj.__self__, Field) and obj.__name__ in COMPILE_TIME_METHODS:
                return None                               # run in Python: call_library
            if isinstance(obj.__self__, Field) and obj.__name__ in KERNEL_METHODS:
                return self.inline(KERNEL_METHODS[obj.__name__], node, obj.__self__)  # x.fill
            if isinstance(obj.__self__, Field) and obj.__name__ in HOST_ONLY_METHODS:
                raise self.err(node, f"{obj.__name__}() of a field runs at Python scope only "
                               "(outside kernels); in kernels fields have "
                               f"{', '.join(sorted(KERNEL_METHODS))}()")
            return self.inline(plain_func(obj.__func__), node, obj.__self__)
        if isinstance(obj, types.FunctionType) and \
                not (getattr(obj, "__module__", None) or "").startswith(("numpy", "math",
                                                                        "jitrt")):
            return self.inline(plain_func(obj), node)     # a plain function or lambda: inlined
        return None

    def call_library(self, obj: Any, node: ast.Call) -> Value:
        """A call of jitrt's builtins, a type, numpy's and Python's functions; any other
        Python callable runs at compile time (`call_in_python`)."""
        if obj is bi.PY_PRINT:
            return self.print_call(node)
        if obj is bi.random:
            return self.random_call(node)
        if obj is bi.randn:
            return self.randn_call(node)
        if isinstance(obj, StructType):                   # struct_values.py
            return self.struct_construct(obj, node)  # type: ignore[attr-defined]
        if obj is Struct:                                 # jr.Struct(a=..., b=...)
            return self.untyped_struct(node)  # type: ignore[attr-defined]
        if isinstance(obj, dtypes.DataType):
            return self.dtype_call(obj, node)
        if getattr(obj, "jitrt_shared_array", False):     # simt.block.SharedArray
            return self.shared_array(node)                # lower_simt.py
        np_dt = dtypes.from_numpy(np.dtype(obj)) if isinstance(obj, type) and issubclass(
            obj, np.generic) else None
        if node.keywords and obj is not bi.cast and (np_dt is not None or isinstance(
                obj, bi.Builtin) or any(obj is f for f in KEYWORDLESS)):
            raise self.err(node, f"keyword arguments are not supported for {describe(obj)}")
        if np_dt is not None:
            return self.cast(self.one_value(node), np_dt)  # np.float32(x)
        if obj is np.abs or obj is bi.abs_:
            obj = bi.PY_ABS
        elif obj is np.minimum or obj is np.maximum:
            obj = bi.PY_MIN if obj is np.minimum else bi.PY_MAX
        if obj is bi.static:
            return self.static_value(node)
        if isinstance(obj, bi.Builtin):
            return self.call_builtin(obj, node)
        if obj is bi.PY_INT or obj is bi.PY_FLOAT:
            return self.int_or_float(obj, node)
        if obj is bool:
            return self.bool_value(node)
        if obj is bi.PY_ABS:
            return self.abs_value(self.one_value(node), node)
        if obj is bi.PY_MIN or obj is bi.PY_MAX:
            return self.min_max("min" if obj is bi.PY_MIN else "max", node, "")
        if obj is bi.PY_RANGE or obj is bi.ndrange:
            raise self.err(node, f"{describe(obj)}() can only be the iterable of a for loop")
        if callable(obj):
            return self.call_in_python(obj, node)
        raise self.err(node, f"calling {describe(obj)} is not supported in kernels")

    def int_or_float(self, obj: Any, node: ast.Call) -> Value:
        """`int(x)` / `float(x)`: a number known at compile time stays one (so that
        `jr.static(float(np.float32(math.pi)))` is a compile-time value, as in Python);
        a run-time value is cast to default_ip / default_fp."""
        if len(node.args) != 1:
            raise self.err(node, f"expected 1 argument, got {len(node.args)}")
        v = self.expr(node.args[0])
        known = known_value(v)
        if isinstance(known, (int, float, np.number)) and not isinstance(known, bool):
            return PyValue(obj(known))
        dt = self.ctx.default_ip if obj is bi.PY_INT else self.ctx.default_fp
        return self.cast(self.value(node.args[0], v), dt)

    def bool_value(self, node: ast.Call) -> Value:
        """`bool(x)`: Python's truth of a compile-time value; of a run-time number its 0/1
        (an i32, jitrt's bool), per component of a vector or matrix."""
        if len(node.args) != 1 or node.keywords:
            raise self.err(node, f"bool() takes 1 argument in kernels, got {len(node.args)}")
        v = as_vector(self.expr(node.args[0]))
        if isinstance(v, VecValue):
            return VecValue(v.shape, tuple(self.truth(self.value(node, x)) for x in v.items))
        if isinstance(v, PyValue):
            try:
                return PyValue(bool(v.obj))
            except (TypeError, ValueError) as exc:
                raise self.err(node, f"bool() of {describe(v.obj)} fails: {exc}") from None
        return self.truth(self.value(node, v))

    def call_in_python(self, obj: Any, node: ast.Call) -> Value:
        """Any other Python callable whose arguments are all known at compile time runs in
        Python while the kernel compiles, and its result is a compile-time value (Taichi runs
        Python functions in kernels the same way): `impl.get_runtime().default_fp`,
        `math.comb(n, 2)`, a helper computing a table."""
        args = [known_value(self.expr(a)) for a in node.args]
        kwargs = {str(kw.arg): known_value(self.expr(kw.value)) for kw in node.keywords}
        if any(v is NOT_KNOWN for v in [*args, *kwargs.values()]):
            raise self.err(node, f"calling {describe(obj)} is not supported in kernels with "
                           "run-time arguments (a Python function runs while the kernel "
                           "compiles, so its arguments must be known at compile time)")
        try:
            result = obj(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's function failed: say where
            raise self.err(node, f"calling {describe(obj)} at compile time raised "
                           f"{type(exc).__name__}: {exc}") from exc
        if isinstance(result, (np.generic, np.ndarray)) and result.ndim == 0 and \
                result.dtype.kind in "iuf":
            result = result.item()     # a numpy number (or 0-d array) as the Python number
        return PyValue(result)

    def vector_call(self, obj: Any, node: ast.Call) -> Value | None:
        """Constructors (`jr.Vector`, `jr.math.vec3`...), methods (`v.norm()`), `jr.math.dot`
        and friends, and math functions of a vector (element-wise); None for other calls."""
        from ..linalg import Matrix, Vector
        # jr.math's functions exist once it is loaded (on first use of `jr.math`)
        glsl = sys.modules.get("jitrt.math")
        vector_functions: dict[Any, str] = getattr(glsl, "VECTOR_FUNCTIONS", {})
        if isinstance(obj, VecMethod):
            return self.call_vec_method(obj, node)
        if type(obj).__name__ == "DictMethod":     # `d.values()` of a dict with run-time
            if node.args or node.keywords:         # values: lower_comprehension.py
                raise self.err(node, f"dict.{obj.name}() takes no arguments")
            return obj.result()
        if isinstance(obj, bi.Builtin) and obj.name in bi.ROUNDING and obj is bi.MATH.get(
                obj.name) and (len(node.args) == 2 or node.keywords):
            return self.rounded_to(obj, node)
        if isinstance(obj, ClassMethod):
            return self.class_call(obj, node)
        if obj is bi.min_ or obj is bi.max_:      # jr.min / jr.max: element-wise, as min/max
            return self.min_max(obj.name, node, "jr.")
        if obj in (Vector.zero, Vector.one, Vector.unit, Matrix.zero, Matrix.one,
                   Matrix.identity):
            return self.filled(obj, node)
        if obj is Vector or obj is Matrix or isinstance(obj, MatrixType):
            return self.construct(obj, node)
        if isinstance(obj, bi.Builtin) and obj in bi.DECOMPOSITIONS:
            return self.decomposition(obj, node)
        if isinstance(obj, bi.Builtin) and obj in vector_functions:
            return self.vec_function(vector_functions[obj],
                                     [as_vector(self.expr(a)) for a in node.args], node)
        if isinstance(obj, bi.Builtin) and obj.name in bi.MATH and len(node.args) == 1:
            v = self.evaluated_once(node.args[0])
            if isinstance(v, VecValue):
                return self.vec_map(v, lambda x: self.math(obj.name, x, node))
        if (obj is bi.PY_ABS or obj is bi.abs_) and len(node.args) == 1:
            v = self.evaluated_once(node.args[0])
            if isinstance(v, VecValue):       # of integers stays integer, as the scalar one
                return self.vec_map(v, lambda x: self.abs_value(self.value(node, x), node))
        if (obj is bi.PY_INT or obj is bi.PY_FLOAT or isinstance(obj, DataType)) and \
                len(node.args) == 1 and not node.keywords:
            v = self.evaluated_once(node.args[0])        # int(v): element-wise, as in Taichi
            if isinstance(v, VecValue):
                dt: Any = self.ctx.default_ip if obj is bi.PY_INT else (
                    self.ctx.default_fp if obj is bi.PY_FLOAT else obj)
                return self.vec_cast(v, dt, node)
        return None

    def rounded_to(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """Taichi's `floor(x, dtype)` (`ceil`, `round`; or `dtype=`): the rounded value (each
        component of a vector) converted to `dtype`, as `jr.cast(jr.floor(x), dtype)`."""
        given = {**dict(zip(("x", "dtype"), node.args)), **{str(k.arg): k.value
                                                             for k in node.keywords}}
        if len(node.args) > 2 or set(given) != {"x", "dtype"}:
            raise self.err(node, f"jr.{fn.name}(x, dtype=None) takes x and a dtype")
        dt = self.expr(given["dtype"])
        target = getattr(dt, "obj", None)
        if target is int or target is float:
            target = self.ctx.default_ip if target is int else self.ctx.default_fp
        if not isinstance(target, dtypes.DataType):
            raise self.err(given["dtype"], f"jr.{fn.name}(x, dtype): dtype must be a jitrt "
                           "dtype such as jr.i32")
        plain = ast.copy_location(ast.Call(node.func, [given["x"]], []), node)
        v = as_vector(self.expr(plain))
        if isinstance(v, VecValue):
            return self.vec_cast(v, target, node)
        return self.cast(self.value(node, v), target)

    def decomposition(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """`jr.polar_decompose/svd/sym_eig(A)`: the 2x2 or 3x3 funcs of
        jitrt/matrix_functions.py."""
        from .. import matrix_functions
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "dt"]
        if len(args) not in (1, 2) or any(k.arg != "dt" for k in node.keywords):
            raise self.err(node, f"jr.{fn.name}(A, dt=None) takes one matrix and an optional "
                           "dtype")
        if len(args) == 2:      # Taichi's `dt`: accepted; the results have A's dtype
            dt = self.expr(args[1])
            if not (isinstance(dt, PyValue) and (isinstance(dt.obj, DataType)
                                                 or dt.obj in (float, None))):
                raise self.err(args[1], f"jr.{fn.name}(A, dt): dt must be a dtype")
        a = self.expr(args[0])
        sizes = ((2, 2),) if fn is bi.eig else ((2, 2), (3, 3))
        if not isinstance(a, VecValue) or a.shape not in sizes:
            shape = a.shape if isinstance(a, VecValue) else "a scalar"
            what = "2x2 matrices (as Taichi's)" if fn is bi.eig else "2x2 and 3x3 matrices"
            taichi = {"polar_decompose": "Polar decomposition only supports 2D and 3D matrices. ",
                      "svd": "SVD only supports 2D and 3D matrices. ",
                      "sym_eig": "Symmetric eigen solver only supports 2D and 3D matrices. ",
                      "eig": "Eigen solver only supports 2D matrices. "}.get(fn.name, "")
            raise self.err(node, f"{taichi}jr.{fn.name}() supports {what}, got {shape}")
        name = bi.DECOMPOSITIONS[fn]
        if a.shape == (3, 3):
            name = name.replace("2x2", "3x3").replace("2d", "3d")
        call = ast.Call(func=node.func, args=[args[0]], keywords=[])
        return self.inline(getattr(matrix_functions, name), ast.copy_location(call, node))

    def abs_value(self, e: n.Expr, node: ast.AST) -> n.Expr:
        return n.Math("abs", (e,), e.dtype, self.loc(node))

    def dtype_call(self, dt: DataType, node: ast.Call) -> Value:
        """`jr.f32(x)`: x converted to dt. A number known at compile time is typed rather than
        converted, as in Taichi: it must lie within dt's range (`jr.u16(-1)` and
        `jr.i32(2**40)` are errors, `jr.u64(2**64 - 1)` is not), and a literal written in
        the call must be of dt's kind (`jr.f32(0)` is an error; `jr.f32(n)` of an int n
        converts it)."""
        if len(node.args) != 1 or node.keywords:
            raise self.err(node, f"A primitive type can only decorate a single expression: "
                           f"{ast.unparse(node.func)}(x) takes one value", KernelSyntaxError)
        arg = node.args[0]
        lit = arg.operand if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub) \
            else arg
        if isinstance(lit, ast.Constant) and type(lit.value) in (int, float):
            cast = f"`{module_alias(self.scope.globals)}.cast`"
            if isinstance(lit.value, float) and not dt.is_float:
                raise self.err(node, "Floating-point literals must be annotated with a "
                               f"floating-point type. For type casting, use {cast}.",
                               KernelTypeError)
            if isinstance(lit.value, int) and dt.is_float:  # (Taichi's words: "a integer")
                raise self.err(node, "Integer literals must be annotated with a integer type. "
                               f"For type casting, use {cast}.", KernelTypeError)
        v = self.expr(arg)
        if not (is_number(v) and type(v.obj) is int):  # type: ignore[union-attr]
            return self.cast(self.value(arg, v), dt)
        number = v.obj  # type: ignore[union-attr]
        lo, hi = dtypes.int_range(dt) if dt.is_int else (-math.inf, math.inf)
        if not lo <= number <= hi:
            raise self.err(node, f"Integer literal {number} exceeded the range of specified "
                           f"dtype: {dt.name} ({lo} to {hi})", KernelTypeError)
        return self.const(number, node, dt)

    def one_value(self, node: ast.Call) -> n.Expr:
        if len(node.args) != 1:
            raise self.err(node, f"expected 1 argument, got {len(node.args)}")
        return self.value(node.args[0])

    def static_value(self, node: ast.Call) -> Value:
        """`jr.static(x)`: x, which must be known at compile time; `jr.static(a, b)` the tuple
        `(a, b)` (as Taichi's)."""
        if not node.args or node.keywords:
            raise self.err(node, "jr.static() takes one or more positional arguments")
        values = []
        self.static_depth += 1
        try:
            for arg in node.args:
                v = self.compile_time(arg)
                if is_list(v):                  # a Python list, as in Taichi: its items
                    v = PyValue(tuple(x.obj if isinstance(x, PyValue) else RunTimeItem(x)
                                      for x in elements(v) or ()))
                if not isinstance(v, PyValue):
                    raise self.err(arg, STATIC_NEEDS)
                values.append(v)
        finally:
            self.static_depth -= 1
        return values[0] if len(values) == 1 else PyValue(tuple(v.obj for v in values))

    def compile_time(self, node: ast.AST) -> Value:
        """Inside `jr.static(...)`: a call whose callee and arguments are all known at compile
        time runs in Python (`range(3)`, `enumerate(fields)`); a name of a numpy array is the
        array itself (`jr.static(a.shape)`), not the constant vector it is elsewhere; anything
        else lowers as usual."""
        if isinstance(node, ast.Name):
            found = self.scope.lookup(node.id)
            if isinstance(found, PyValue) and isinstance(found.obj, np.ndarray):
                return found
        if isinstance(node, ast.Subscript):        # jr.static(a.shape[0]) of a numpy array
            base = self.compile_time(node.value)
            if isinstance(base, PyValue) and isinstance(base.obj, (tuple, np.ndarray)):
                index = self.compile_time(node.slice)
                if not isinstance(index, PyValue):
                    raise self.err(node.slice, STATIC_NEEDS)
                try:
                    return PyValue(base.obj[index.obj])
                except (IndexError, TypeError) as exc:
                    raise self.err(node, f"jr.static(): indexing fails: {exc}") from None
            return self.expr(node)
        if isinstance(node, ast.Attribute):
            base = self.compile_time(node.value)
            if isinstance(base, PyValue) and isinstance(base.obj, np.ndarray):
                try:
                    return PyValue(getattr(base.obj, node.attr))
                except AttributeError:
                    raise self.err(node, f"a numpy array has no attribute '{node.attr}'"
                                   ) from None
        if not isinstance(node, ast.Call):
            return self.expr(node)
        if any(isinstance(arg, ast.Starred) for arg in node.args):    # jr.ndrange(*shape)
            expanded: ast.Call = self.expand_starred(node)  # type: ignore[attr-defined]
            node = expanded                                                # lower_pycalls
        parts = [self.compile_time(x) for x in [node.func, *node.args]]
        if isinstance(parts[0], PyValue) and type(parts[0].obj).__name__ == "DictMethod":
            return self.expr(node)                 # `d.items()`: its (run-time) items
        if isinstance(parts[0], PyValue) and parts[0].obj in ITERATION_BUILTINS:
            parts[1:] = [run_time_items(p) for p in parts[1:]]
        kwargs = {k.arg: self.compile_time(k.value) for k in node.keywords}
        if None in kwargs or not all(isinstance(p, PyValue) for p in
                                     parts + list(kwargs.values())):
            raise self.err(node, STATIC_NEEDS)
        fn, *args = (p.obj for p in parts)  # type: ignore[union-attr]
        try:
            return PyValue(fn(*args, **{k: v.obj for k, v in kwargs.items()}))  # type: ignore
        except Exception as exc:  # noqa: BLE001 - the user's own compile-time expression
            raise self.err(node, f"jr.static(): evaluating this call failed: {exc}",
                           KernelTypeError if isinstance(exc, TypeError) else None) from None

    def min_max(self, op: str, node: ast.Call, prefix: str) -> Value:
        """`min(a, b, ...)` / `jr.min(a, b, ...)` (max likewise) of two or more arguments:
        element-wise on vectors and matrices of one shape, scalars broadcast (Taichi's
        ti.min/ti.max); two constants fold."""
        if node.keywords:
            raise self.err(node, f"{prefix}{op}() takes no keyword arguments")
        if len(node.args) < 2:
            raise self.err(node, f"{prefix}{op}() in a kernel needs at least 2 arguments (the "
                           f"smallest/largest component of a vector is v.{op}())")
        result: Value = as_vector(self.expr(node.args[0]))
        for arg in node.args[1:]:
            other = as_vector(self.expr(arg))
            if isinstance(result, TupleValue) or isinstance(other, TupleValue):
                raise self.err(node, f"{prefix}{op}() takes numbers, vectors or matrices")
            if isinstance(result, VecValue) or isinstance(other, VecValue):
                shape = result.shape if isinstance(result, VecValue) else other.shape  # type: ignore[union-attr]
                for v in (result, other):
                    if isinstance(v, VecValue) and v.shape != shape:
                        raise self.err(node, f"{prefix}{op}(): shapes {shape} and {v.shape} "
                                       "differ")
                count = len(next(v.items for v in (result, other) if isinstance(v, VecValue)))
                xs = result.items if isinstance(result, VecValue) else (result,) * count
                ys = other.items if isinstance(other, VecValue) else (other,) * count
                result = VecValue(shape, tuple(self.min_max_pair(op, x, y, node)
                                               for x, y in zip(xs, ys)))
            else:
                result = self.min_max_pair(op, result, other, node)
        return result

    def min_max_pair(self, op: str, a: Value, b: Value, node: ast.Call) -> Value:
        if is_number(a) and is_number(b):
            return PyValue((min if op == "min" else max)(a.obj, b.obj))  # type: ignore
        return self.pairwise(op, a, b, node)

    def call_builtin(self, fn: bi.Builtin, node: ast.Call) -> Value:
        loc = self.loc(node)
        if fn.name in bi.MATH:
            e = self.real_operand(fn.name, self.one_value(node), node)
            return n.Math(fn.name, (e,), e.dtype, loc)
        if fn is bi.pow_:
            if len(node.args) != 2:
                raise self.err(node, "jr.pow() takes 2 arguments")
            base, exponent = self.expr(node.args[0]), self.expr(node.args[1])
            if isinstance(as_vector(base), VecValue) or isinstance(as_vector(exponent), VecValue):
                return self.binary("**", base, exponent, node)     # element-wise, as Taichi
            return self.power(base, exponent, node)
        if fn is bi.atan2:
            if len(node.args) != 2:
                raise self.err(node, "jr.atan2(y, x) takes 2 arguments")
            ys, xs = as_vector(self.expr(node.args[0])), as_vector(self.expr(node.args[1]))
            if isinstance(ys, VecValue) or isinstance(xs, VecValue):    # element-wise
                return self.vec_elementwise2(lambda y, x: self.atan2(y, x, node), ys, xs, node)
            return self.atan2(ys, xs, node)
        if fn in bi.DERIVED:
            return self.derived_math(fn, node)
        if fn is bi.cast:
            return self.cast_call(node)
        if fn in bi.ATOMICS:
            return self.atomic(bi.ATOMICS[fn], node)
        if fn is bi.stop_grad or fn is bi.block_local:
            return self.field_statement(fn, node)
        if fn is bi.static_assert or fn is bi.static_print:
            return self.compile_time_statement(fn, node)
        if fn in bi.QUADRANTS:
            return self.quadrants_call(fn, node)    # lower_quadrants.py
        if fn.name.startswith("simt."):
            return self.simt_call(fn, node)         # lower_simt.py
        raise self.err(node, f"jr.{fn.name}() is not supported here")

    def compile_time_statement(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """`jr.static_assert(cond, msg)`: a compile error when cond, known at compile time, is
        false; `jr.static_print(...)` prints its arguments while the kernel compiles (a
        run-time value as its description). Neither emits code."""
        args = [self.expr(a) for a in node.args]
        if fn is bi.static_print:
            print(*(a.obj if isinstance(a, PyValue) else f"<a run-time {a.dtype.name} value>"
                    if isinstance(getattr(a, "dtype", None), DataType) else describe(a)
                    for a in args))
            return PyValue(None)
        if not 1 <= len(args) <= 2:
            raise self.err(node, "jr.static_assert(cond, msg=None) takes 1 or 2 arguments")
        if not isinstance(args[0], PyValue):
            raise self.err(node.args[0], "Static assert with non-static condition: the "
                           "condition of jr.static_assert() is not known at compile time; for "
                           "a run-time one use assert (checked with jr.init(debug=True))",
                           KernelTypeError)
        if not args[0].obj:
            msg = args[1].obj if len(args) == 2 and isinstance(args[1], PyValue) else None
            raise self.err(node, "static assertion failed" + (f": {msg}" if msg else ""),
                           KernelCompileError)
        return PyValue(None)

    def field_statement(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """`jr.stop_grad(x)`: no gradient flows into x (a field, or an ndarray parameter)
        from its reads in the enclosing block (lower_stmt.gradients_stopped).
        `jr.block_local(x, ...)`: Taichi's hint to cache fields in GPU shared memory; jitrt
        has no such cache, so after checking that the arguments are fields it emits nothing.
        Both are statements."""
        where = f"jr.{fn.name}()"
        if getattr(self, "statement_call", None) is not node:
            raise self.err(node, f"{where} is a statement: it has no value")
        if fn is bi.stop_grad and len(node.args) != 1:
            raise self.err(node, f"{where} takes one field or ndarray, got {len(node.args)} "
                           "arguments")
        for arg in node.args:
            v = self.expr(arg)
            obj = v.obj if isinstance(v, PyValue) else v
            if is_field(obj):
                data: list[Any] = [obj]
            elif type(obj).__name__ == "StructField":
                data = list(obj.members.values())
            elif isinstance(obj, n.ArrayRef) and fn is bi.stop_grad:
                data = [obj.arg]
            else:
                takes = "a field or an ndarray" if fn is bi.stop_grad else "fields"
                raise self.err(arg, f"{where} takes {takes}, got {describe(obj)}")
            if fn is bi.stop_grad:
                self.ctx.stop_grads[-1].extend(data)
        return PyValue(None)

    def atan2(self, y: Value, x: Value, node: ast.Call) -> n.Expr:
        ey, ex, dt = self.operands(y, x, node)
        if not dt.is_float:
            dt = self.ctx.default_fp
        return n.Math("atan2", (self.cast(ey, dt), self.cast(ex, dt)), dt, self.loc(node))

    def vec_elementwise2(self, fn: Any, a: Value, b: Value, node: ast.AST) -> VecValue:
        """`fn` per component of two vectors/matrices of one shape (a scalar broadcasts)."""
        shape = (a if isinstance(a, VecValue) else b).shape       # type: ignore[union-attr]
        if any(isinstance(v, VecValue) and v.shape != shape for v in (a, b)):
            raise self.err(node, "the arguments' shapes differ")
        count = len((a if isinstance(a, VecValue) else b).items)  # type: ignore[union-attr]
        cols = [v.items if isinstance(v, VecValue) else (v,) * count for v in (a, b)]
        return VecValue(shape, tuple(fn(p, q) for p, q in zip(*cols)))

    def derived_math(self, fn: bi.Builtin, node: ast.Call) -> Value:
        """Functions spelled with the others: rsqrt, log2, exp2 (as pow(2, x)), sign, clamp
        and select (element-wise on vectors)."""
        wants = {"clamp": 3, "select": 3}.get(fn.name, 1)
        if len(node.args) != wants:
            raise self.err(node, f"jr.{fn.name}() takes {wants} argument(s)")
        args = [self.expr(a) for a in node.args]
        if any(isinstance(a, VecValue) for a in args):
            return self.vec_elementwise(fn, args, node)
        return self.derived_scalar(fn, args, node)

    def vec_elementwise(self, fn: bi.Builtin, args: list[Any], node: ast.Call) -> Value:
        shape = next(a.shape for a in args if isinstance(a, VecValue))
        count = len(next(a.items for a in args if isinstance(a, VecValue)))
        columns = []
        for a in args:
            if isinstance(a, VecValue) and a.shape != shape:
                raise self.err(node, f"jr.{fn.name}(): shapes {a.shape} and {shape} differ")
            columns.append(a.items if isinstance(a, VecValue) else (a,) * count)
        return VecValue(shape, tuple(self.derived_scalar(fn, list(parts), node)
                                     for parts in zip(*columns)))

    def derived_scalar(self, fn: bi.Builtin, args: list[Any], node: ast.Call) -> Value:
        loc = self.loc(node)
        if fn is bi.rsqrt:
            return self.binary("/", PyValue(1.0), self.math("sqrt", args[0], node), node)
        if fn is bi.log2:
            return self.binary("*", self.math("log", args[0], node),
                               PyValue(1.0 / math.log(2.0)), node)
        if fn is bi.exp2:
            x = self.value(node, args[0])
            return self.power(PyValue(2.0), x if x.dtype.is_float else
                              self.cast(x, self.ctx.default_fp), node)
        if fn is bi.sign:
            x = self.value(node, args[0])
            one, zero = self.const(1, node, x.dtype), self.const(0, node, x.dtype)
            minus = self.const(-1, node, x.dtype) if x.dtype.is_signed or x.dtype.is_float \
                else zero
            positive = n.Binary(">", x, zero, dtypes.i32, loc)
            negative = n.Binary("<", x, zero, dtypes.i32, loc)
            return n.Select(positive, one, n.Select(negative, minus, zero, x.dtype, loc),
                            x.dtype, loc)
        if fn is bi.detached or fn is bi.tangent_only:
            x = self.value(node, args[0])
            op = n.STOP_GRAD if fn is bi.detached else n.TANGENT_ONLY
            return n.Unary(op, x, x.dtype, loc) if x.dtype.is_float else x
        if fn is bi.clamp:
            lo = self.pairwise("max", args[0], args[1], node)
            return self.pairwise("min", lo, args[2], node)
        cond = self.truth(self.value(node, args[0]))         # select(cond, a, b)
        a, b, dt = self.operands(args[1], args[2], node)
        return n.Select(cond, a, b, dt, loc)

    def random_call(self, node: ast.Call) -> Value:
        """`jr.random()` (the default float, uniform in [0, 1)), `jr.random(jr.f64)`,
        `jr.random(jr.i32)` (all bits): see frontend/random.py."""
        from . import random as rnd
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]
        if len(args) > 1 or any(k.arg != "dtype" for k in node.keywords):
            raise self.err(node, "jr.random() takes at most a dtype")
        dt: Any = self.ctx.default_fp
        if args:
            want = getattr(self.expr(args[0]), "obj", None)
            dt = self.ctx.default_fp if want is float else (
                self.ctx.default_ip if want is int else want)
            if not isinstance(dt, DataType):
                raise self.err(args[0], "jr.random(dtype) needs a jitrt dtype such as jr.f32")
        loc, u = self.loc(node), dtypes.u64
        self.ctx.random_used = True
        scope = self.ctx.random_scopes[-1] if self.ctx.random_scopes else ("$rng_serial", ())
        counter, loop_vars = scope
        self.ctx.local_types[counter] = u
        # this call's number, kept in a fresh local: the value is used later in the
        # expression, after other calls may have advanced the counter
        calls = n.Local(counter, u, loc)
        mine = self.fresh_local(n.Binary("+", calls, n.Const(1, u, loc), u, loc), "rng", loc)
        self.emit(n.Assign(counter, mine, loc))
        h = rnd.mix(n.Local(rnd.SEED_LOCAL, u, loc), loc)
        for var in loop_vars:
            index = n.Cast(n.Local(var, self.ctx.local_types[var], loc), u, loc)
            h = rnd.mix(n.Binary("^", h, index, u, loc), loc)
        bits = self.fresh_local(rnd.mix(n.Binary("^", h, mine, u, loc), loc), "rng", loc)
        return rnd.value(bits, dt, loc)

    def randn_call(self, node: ast.Call) -> Value:
        """`jr.randn()`: a standard normal float (Box-Muller from two jr.random() values)."""
        u1, u2 = self.random_call(node), self.random_call(node)
        if not isinstance(u1, n.Expr) or not u1.dtype.is_float:
            raise self.err(node, "jr.randn(dtype) needs a float dtype")
        radius = self.math("sqrt", self.binary("*", PyValue(-2.0), self.math(
            "log", self.binary("-", PyValue(1.0), u1, node), node), node), node)
        angle = self.binary("*", PyValue(2.0 * math.pi), u2, node)
        return self.binary("*", radius, self.math("cos", angle, node), node)

    def print_call(self, node: ast.Call) -> Value:
        """`print(a, "text", v, sep=..., end=...)`: compile-time values become text, numbers
        are printed by the device (CPU: printf; CUDA: vprintf), vectors as [x, y, z];
        formatted strings (f-strings, str.format) give each value its printf spec."""
        options = {"sep": " ", "end": "\n"}
        for kw in node.keywords:
            value = self.expr(kw.value)
            if kw.arg not in options or not (isinstance(value, PyValue) and
                                             isinstance(value.obj, str)):
                raise self.err(kw.value, "print() takes sep= and end= strings only")
            options[kw.arg] = value.obj
        pieces: list[str] = [""]           # print_parts: lower_format.py
        args: list[n.Expr] = []
        formats: list[str] = []
        for k, a in enumerate(node.args):
            if k:
                pieces[-1] += options["sep"]
            self.print_parts(self.expr(a), None, a, pieces, args, formats)
        pieces[-1] += options["end"]
        return n.Print(tuple(pieces), tuple(args), dtypes.i32, self.loc(node),
                       tuple(formats) if any(formats) else ())

    def cast_call(self, node: ast.Call) -> Value:
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]
        if len(args) != 2:
            raise self.err(node, "jr.cast(value, dtype) takes 2 arguments")
        target = self.expr(args[1])
        dt = self.resolve_kind(target.obj) if isinstance(target, PyValue) else None
        if not isinstance(dt, DataType):      # jr.cast(x, float): default_fp, as Taichi's
            raise self.err(args[1], "jr.cast() needs a jitrt dtype such as jr.f32 (or int, "
                           "float)")
        value = self.expr(args[0])
        if isinstance(value, VecValue):        # element-wise, as Taichi's ti.cast
            return self.vec_cast(value, dt, node)
        if is_number(value) and isinstance(value.obj, int) and not isinstance(  # type: ignore
                value.obj, bool) and -2**63 <= value.obj < 2**64:    # type: ignore
            # an integer constant cast to a type: typed wide enough first (no default_ip limit)
            wide = dtypes.i64 if value.obj < 2**63 else dtypes.u64   # type: ignore
            return self.cast(self.const(value.obj, args[0], wide), dt)  # type: ignore
        return self.cast(self.value(args[0], value), dt)

    def atomic(self, op: str, node: ast.Call) -> Value:
        """`jr.atomic_add(x[i], v)` and friends: the element's old value. On a whole
        vector/matrix element (`v[i]` of a vector field) one atomic per component."""
        name = f"jr.atomic_{'exchange' if op == 'xchg' else op}"
        if len(node.args) == 2 and isinstance(node.args[0], ast.Name):
            if op == "xchg":
                raise self.err(node, f"{name}() takes a field or ndarray element (x[i]); on "
                               "a local variable, assign instead (s = v)")
            return self.atomic_local(op, node)          # a local: lower_stmt.py
        if len(node.args) != 2:
            raise self.err(node, f"{name}(x[i], value) takes a field or ndarray element (or a "
                           f"local) and a value, got {len(node.args)} argument(s)")
        if not isinstance(node.args[0], ast.Subscript):   # a value: nothing to write to
            raise self.err(node.args[0], "cannot use a non-writable target as the first "
                           f"operand of '{name}': it takes a field or ndarray element (x[i]) "
                           "or a local variable", KernelSyntaxError)
        target = node.args[0]
        handle = shared_handle(self.expr(target.value)) if isinstance(target.value,
                                                                      ast.Name) else None
        if handle is not None:                   # a block-shared array: lower_simt.py
            return self.shared_atomic(handle, target, op, self.expr(node.args[1]), node)
        statement = getattr(self, "statement_call", None) is node
        outer = self.vector_element_of(target)     # x[i][k]: a component (or a row)
        if outer is not None:
            element, idxs = self.element_part(outer, target.slice)
            ref = outer[0]
        else:
            ref, indices, element = self.access(target)
            idxs = self.element_refs(ref, indices, element, self.loc(node))
        value = self.expr(node.args[1])
        if element:
            return self.atomic_element(op, ref, idxs, element, value, node, statement)
        indices = idxs[0]
        if isinstance(as_vector(value), (VecValue, TupleValue)):
            raise self.err(node.args[1], f"jr.atomic_{op}(): a vector value needs a whole "
                           "vector element (x[i] of a vector field), not one component")
        if op in bi.BITWISE_ATOMICS and not ref.dtype.is_int:
            raise self.err(node, f"jr.atomic_{op}() needs an integer element, got "
                           f"{ref.dtype.name}", KernelTypeError)
        value = self.typed(value, ref.dtype, node.args[1])  # as for `+=`
        if op in ("or", "and", "xor") and ref.dtype.is_float:
            raise self.err(node, f"{name}() needs an integer element, got {ref.dtype.name}")
        return n.Atomic(op, ref, indices, value, ref.dtype, self.loc(node))

    # ---- @jr.func inlining --------------------------------------------------------------
