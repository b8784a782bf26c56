"""AST -> IR for expressions (the expression family of the lowering visitor).

Stage: frontend. `ExprLowering.expr(node)` returns an IR expression or, for values known at
compile time (constants, modules, fields, builtins, funcs), a `PyValue`. Types are resolved
here: Python literals adapt to the other operand, ints promote to floats, `/` is true division,
comparisons give i32 0/1 (`and`, `or` and comparison chains: `lower_logic.py`). Operations on
two compile-time numbers fold in Python.
"""
from __future__ import annotations

import ast
import operator
from typing import Any

from ..data_component import ComponentField
from ..frozen import frozen
from .. import dtypes
from ..dtypes import DataType
from ..errors import KernelCompileError, KernelSyntaxError, KernelTypeError
from ..ir import nodes as n
from .context import (CompileContext, literal_dtype, LocalVar, LoweringHost, module_alias,
                      NoValue, PyValue, Scope)
from .source import SourceInfo
from .structs import StructElement
from .vectors import (CONSTRUCTORS, METHODS, ClassMethod, TupleValue, VecValue, VecVar,
                      as_vector, constant_array)
from .struct_values import StructValue, StructVar, struct_method
from .lower_simt import shared_handle
from ..struct_host import HostStruct

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
          ast.LShift: "<<", ast.RShift: ">>"}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
PY_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
             "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
             "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
             "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
             "==": operator.eq, "!=": operator.ne}
INT_ONLY_OPS = ("&", "|", "^", "<<", ">>")
# integer operators a debug build checks for wrap-around (Taichi's set), with their names
OVERFLOW_CHECKED = {"+": "Addition", "-": "Subtraction", "*": "Multiplication",
                    "<<": "Shift left"}


@frozen
class ShapeOf:
    """`a.shape` of an ndarray argument, waiting for its `[axis]`."""
    ref: n.ArrayRef


Value = n.Expr | PyValue | n.ArrayRef | ShapeOf | VecValue | StructElement | TupleValue


def is_number(v: Any) -> bool:
    return isinstance(v, PyValue) and isinstance(v.obj, (int, float)) and not isinstance(
        v.obj, type)


class ExprLowering(LoweringHost):
    src: SourceInfo
    ctx: CompileContext
    scope: Scope

    # ---- helpers ------------------------------------------------------------------------
    def err(self, node: ast.AST | None, message: str,
            kind: type[KernelCompileError] | None = None) -> Exception:
        """A located compile error; its class is `kind` or follows the message
        (`errors.compile_error_kind`)."""
        return self.src.error(node, message, kind)

    def loc(self, node: ast.AST) -> n.Loc:
        return self.src.loc(node)

    def const(self, value: Any, node: ast.AST, dtype: DataType | None = None) -> n.Const:
        dt = dtype or literal_dtype(value, self.ctx)
        if dt is None:
            raise self.err(node, f"{type(value).__name__} value {value!r} cannot be used in a "
                           "kernel")
        value = float(value) if dt.is_float else int(value)
        if dtype is None and dt.is_int and not isinstance(value, bool):
            lo, hi = dtypes.int_range(dt)
            if not lo <= value <= hi:        # Taichi refuses it too: no silent wrap-around
                raise self.err(node, f"Integer literal {value} exceeded the range of "
                               f"default_ip: {dt.name}; give it a type (jr.i64({value}), "
                               "jr.u64(...)) or choose another jr.init(default_ip=...)",
                               KernelTypeError)
        return n.Const(value, dt, self.loc(node))

    def value(self, node: ast.AST, v: Value | None = None) -> n.Expr:
        """Lower `node` (or take `v`) as a run-time value."""
        v = self.expr(node) if v is None else v
        if isinstance(v, n.Expr):
            return v
        if is_number(v):
            return self.const(v.obj, node)  # type: ignore[union-attr]
        if isinstance(v, VecValue):
            raise self.err(node, f"expected a number, got a vector/matrix of shape {v.shape}")
        if isinstance(v, TupleValue):
            raise self.err(node, f"expected a number, got a tuple of {len(v.items)} values")
        what = v.obj if isinstance(v, PyValue) else v
        import numpy as np
        if isinstance(what, np.ndarray):
            raise self.err(node, f"expected a number, got a numpy array of shape {what.shape} "
                           f"and dtype {what.dtype} (numeric arrays of 1 or 2 dimensions and up "
                           "to 64 numbers are constant vectors/matrices in kernels; pass a "
                           "larger one as an ndarray argument or copy it into a field)")
        raise self.err(node, f"expected a number, got {describe(what)}")

    def cast(self, e: n.Expr, dt: DataType) -> n.Expr:
        if e.dtype == dt:
            return e
        if isinstance(e, n.Const):
            return n.Const(float(e.value) if dt.is_float else int(e.value), dt, e.loc)
        return n.Cast(e, dt, e.loc)

    def truth(self, e: n.Expr) -> n.Expr:
        """0/1 i32 for any number (Python truthiness)."""
        if isinstance(e, n.Binary) and e.op in n.COMPARE_OPS + ("and", "or"):
            return e
        zero = n.Const(0.0 if e.dtype.is_float else 0, e.dtype, e.loc)
        return n.Binary("!=", e, zero, dtypes.i32, e.loc)

    def operands(self, a: Value, b: Value, node: ast.AST) -> tuple[n.Expr, n.Expr, DataType]:
        """Bring two operands to one type; a Python literal adapts to the other side."""
        ea: n.Expr
        eb: n.Expr
        if is_number(a) and not is_number(b):
            eb = self.value(node, b)
            ea = self.const(a.obj, node, adapt(a.obj, eb.dtype, self.ctx))  # type: ignore
        elif is_number(b) and not is_number(a):
            ea = self.value(node, a)
            eb = self.const(b.obj, node, adapt(b.obj, ea.dtype, self.ctx))  # type: ignore
        else:
            ea, eb = self.value(node, a), self.value(node, b)
        dt = dtypes.promote(ea.dtype, eb.dtype)
        return self.cast(ea, dt), self.cast(eb, dt), dt

    # ---- dispatch -----------------------------------------------------------------------
    def expr(self, node: ast.AST) -> Value:
        pre = self.__dict__.get("pre_evaluated")
        if pre and id(node) in pre:        # lowered once already (lower_call.evaluated_once)
            return pre.pop(id(node))
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            kind = type(node).__name__
            raise self.err(node, f'Unsupported node "{kind}": {kind} expressions are not '
                           "supported in kernels")
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Value:
        if node.value is None or isinstance(node.value, (bool, int, float, str)):
            return PyValue(node.value)
        raise self.err(node, f"constant {node.value!r} is not supported in kernels")

    def expr_Name(self, node: ast.Name) -> Value:
        found = self.scope.lookup(node.id)
        if found is None:
            import difflib   # a misspelt name only: not loaded by every compile
            close = difflib.get_close_matches(
                node.id, list(self.scope.bindings) + list(self.scope.globals), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise self.err(node, f'Name "{node.id}" is not defined{hint}')
        if isinstance(found, (LocalVar, VecVar)):
            if self.scope.assigned is not None and node.id not in self.scope.assigned:
                raise self.err(node, f"local '{node.id}' may be read before it is assigned: it "
                               "is assigned only in some branches or in a loop body that may "
                               "run zero times (Python would raise NameError); assign it "
                               "before the if/loop")
            if isinstance(found, VecVar):
                return self.vec_local_value(found, node)
            return n.Local(found.ir_name, found.dtype, self.loc(node))
        if isinstance(found, StructVar):
            return self.struct_local_value(found, node)  # type: ignore[attr-defined]
        if isinstance(found, PyValue) and node.id not in self.scope.bindings and isinstance(
                found.obj, (bool, int, float, tuple, str)):
            self.ctx.captured[node.id] = repr(found.obj)  # a key part of the offline cache
        if isinstance(found, PyValue) and isinstance(found.obj, HostStruct):   # a Python-scope
            return self.host_struct(found.obj, node)  # type: ignore[attr-defined]  # struct
        if isinstance(found, PyValue):
            return self.array_constant(found, node.id if node.id not in self.scope.bindings
                                       else None)
        return found

    def array_constant(self, v: PyValue, captured_as: str | None) -> Value:
        """A small numeric numpy array (a Python-scope `jr.Vector([0, -40])` read as a global
        or closure value, a `jr.static(jr.grouped(...))` loop item) as a constant vector or
        matrix: its numbers are part of the IR and so of the cache key (and recorded among the
        captured constants); other objects as they are."""
        vec = constant_array(v.obj)
        if vec is None:
            return v
        if captured_as is not None:
            self.ctx.captured[captured_as] = f"{v.obj.tolist()!r}:{v.obj.dtype}"
        return vec

    def expr_Tuple(self, node: ast.Tuple) -> Value:
        items = [self.expr(e) for e in node.elts]
        if all(isinstance(i, PyValue) for i in items):
            return PyValue(tuple(i.obj for i in items))  # type: ignore[union-attr]
        return self.vec_literal(node, items)   # [a, b, c]: a vector; [[..], [..]]: a matrix

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        base = self.expr(node.value)
        if isinstance(base, VecValue):
            return self.vec_attribute(base, node)
        if type(base).__name__ == "DictValue" and node.attr in ("keys", "values", "items"):
            return self.dict_method(base, node.attr)   # `d.values`: lower_comprehension.py
        if isinstance(base, StructElement):
            method = dict(base.field.kind.methods).get(node.attr)
            if method is not None and node.attr not in base.field.members:   # `s[i].area()`:
                return PyValue(struct_method(method, base))   # self is the element itself
            return self.load_member(base, node)
        if isinstance(base, StructValue):
            try:
                return base.member(node.attr)
            except KeyError:
                method = dict(base.kind.methods).get(node.attr)
                if method is not None:            # a @jr.dataclass's method: self = base
                    return PyValue(struct_method(method, base))
                raise self.err(node, f"{base.kind!r} has no member '{node.attr}'") from None
        if isinstance(base, PyValue):
            obj = base.obj
            if is_field(obj) and node.attr == "grad" and obj.grad is None:
                raise self.err(node, f"Gradient {obj.name}.grad has not been placed, check "
                               f"whether `needs_grad=True` (field {obj.name!r} has no gradient)")
            special = self.class_attribute(obj, node)
            if special is not None:
                return special
            try:
                attr = getattr(obj, node.attr)
                if isinstance(attr, HostStruct):          # a Python-scope struct: its values
                    return self.host_struct(attr, node)  # type: ignore[attr-defined]
                return self.array_constant(PyValue(attr), None)
            except AttributeError as exc:
                if type(exc).__name__ == "NotInJitrt":       # a peer's name, with advice
                    raise self.err(node, str(exc)) from None
                hint = str(exc).partition("; did you mean ")[2]     # jitrt's suggestion
                raise self.err(node, f"{describe(obj)} has no attribute '{node.attr}'" + (
                    f"; did you mean {hint}" if hint else "")) from None
        if isinstance(base, n.ArrayRef):
            if node.attr == "shape":
                return ShapeOf(base)
            if node.attr == "grad":
                if base.grad:
                    raise self.err(node, "a gradient has no gradient")
                return base.adjoint()
            raise self.err(node, f"ndarray argument '{base.name}' has no attribute '{node.attr}'")
        raise self.err(node, f"run-time values have no attribute '{node.attr}'")

    def class_attribute(self, obj: Any, node: ast.Attribute) -> Value | None:
        """What the frontend itself resolves on a compile-time object: `jr.Matrix.diag/rows/
        cols` and `jr.Vector.<method>` (ClassMethod, called by lower_call), and `x.n` / `x.m`
        of a field of vectors or matrices (the component counts, as in Taichi: a vector's m is
        1); None for everything else."""
        from ..linalg import Matrix, Vector
        if (obj is Vector or obj is Matrix) and node.attr in CONSTRUCTORS + METHODS:
            return PyValue(ClassMethod(obj.__name__, node.attr))
        if is_field(obj) and node.attr in ("n", "m"):
            element = tuple(getattr(obj, "element_shape", ()) or ())
            if not element:
                raise self.err(node, f"field {obj.name!r} has scalar elements: .{node.attr} is "
                               "the component count of a vector or matrix field")
            if node.attr == "n":
                return PyValue(element[0])
            return PyValue(element[1] if len(element) == 2 else 1)
        return None

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        part = self.element_component(node)   # x[i][k] of a field of vectors: from memory
        if part is not None:
            return part
        base = self.expr(node.value)
        if isinstance(base, VecValue):
            return self.vec_index(base, node.slice)
        handle = shared_handle(base)
        if handle is not None:                         # a block-shared array: lower_simt.py
            return self.shared_load(handle, node)
        if isinstance(base, TupleValue):
            return self.tuple_index(base, node.slice)
        if isinstance(base, PyValue) and type(base.obj).__name__ == "StructField":
            return StructElement(base.obj, node)          # s[i], waiting for .member
        if isinstance(base, ShapeOf):
            axis = self.expr(node.slice)
            if not (is_number(axis) and isinstance(axis.obj, int)):  # type: ignore[union-attr]
                raise self.err(node.slice, "shape index must be a constant integer")
            ndim = base.ref.ndim - len(self.element_shape(base.ref))
            if not 0 <= axis.obj < ndim:  # type: ignore[union-attr]
                raise self.err(node.slice, f"axis {axis.obj} out of range for a "  # type: ignore
                               f"{ndim}-d ndarray '{base.ref.name}'" + (
                                   " (a.shape leaves out the element's dimensions)"
                                   if ndim < base.ref.ndim else ""))
            return n.Shape(base.ref, axis.obj, dtypes.i32, self.loc(node))  # type: ignore
        if isinstance(base, PyValue) and isinstance(base.obj, dict) or type(
                base).__name__ == "DictValue":          # lower_comprehension.py
            return self.dict_item(base, node)
        if isinstance(base, PyValue) and isinstance(base.obj, (tuple, list)):
            idx = self.expr(node.slice)
            if isinstance(idx, n.Expr) and idx.dtype.is_int:
                return self.table_lookup(base.obj, idx, node)
            if not (is_number(idx) and isinstance(idx.obj, int)):  # type: ignore[union-attr]
                raise self.err(node.slice, "a compile-time tuple needs a constant index")
            try:           # an item that is a small numpy array is a constant vector
                return self.array_constant(PyValue(base.obj[idx.obj]), None)  # type: ignore
            except IndexError:
                raise self.err(node.slice, f"index {idx.obj} out of range") from None  # type: ignore
        if isinstance(base, PyValue) and is_container(base.obj):
            return self.python_item(base.obj, node)
        ref, indices, element = self.access(node, base)
        if element:                     # x[i] of a field of vectors: the whole vector
            return self.load_element((ref, indices, element), node)
        return n.Load(ref, indices, ref.dtype, self.loc(node))

    def python_item(self, obj: Any, node: ast.Subscript) -> Value:
        """`a[k]` of any other Python object with `__getitem__` (a user's container class)
        and an index known at compile time: Python's `a[k]`, taken while the kernel compiles
        (as Taichi does), a compile-time value."""
        idx = self.expr(node.slice)
        if not isinstance(idx, PyValue):
            raise self.err(node.slice, f"cannot index {describe(obj)} with a run-time value: "
                           "its items are taken while the kernel compiles (use jr.static)")
        try:
            item = obj[idx.obj]
        except Exception as exc:  # noqa: BLE001 - the user's __getitem__ failed: say where
            raise self.err(node, f"{describe(obj)}[{idx.obj!r}] raised {type(exc).__name__}: "
                           f"{exc}") from None
        return self.array_constant(PyValue(item), None)

    def table_lookup(self, table: Any, idx: n.Expr, node: ast.Subscript) -> Value:
        """`WEIGHTS[i]` of a compile-time tuple of numbers with a run-time `i`: a load from a
        hidden constant field holding the table (one per distinct table and type), so an
        index out of range is the usual bounds error naming the tuple; negative indices count
        from the end, as in Python."""
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in table)
        if not table or not numbers:
            raise self.err(node.slice, "a run-time index needs a compile-time tuple of "
                           "numbers; copy other tables into a field")
        floats = any(isinstance(x, float) for x in table)
        dt = self.ctx.default_fp if floats else (
            self.ctx.default_ip if all(dtypes.fits(int(x), self.ctx.default_ip) for x in table)
            else dtypes.i64)
        name = ast.unparse(node.value)
        ref = self.ctx.field_ref(constant_table(tuple(table), dt, name), name)
        loc, size = self.loc(node), len(table)
        i: n.Expr = self.cast(idx, dtypes.i64) if idx.dtype.bits == 64 else self.cast(
            idx, dtypes.i32)
        if i.dtype.is_signed:                       # Python's negative indices
            i = n.Select(n.Binary("<", i, n.Const(0, i.dtype, loc), dtypes.i32, loc),
                         n.Binary("+", i, n.Const(size, i.dtype, loc), i.dtype, loc), i,
                         i.dtype, loc)
        return n.Load(ref, (i,), dt, loc)

    def global_access(self, node: ast.Subscript, base: Value | None = None
                      ) -> tuple[n.Ref, tuple[n.Expr, ...]]:
        """The ref and index expressions of one element `x[i, j]` of a field or ndarray."""
        ref, indices, element = self.access(node, base)
        if element:
            raise self.err(node, f"'{ref.name}[...]' is a whole vector/matrix element here; "
                           "index one component (x[i][k] or x[i, k])")
        return ref, indices

    def access(self, node: ast.Subscript, base: Value | None = None
               ) -> tuple[n.Ref, tuple[n.Expr, ...], tuple[int, ...]]:
        """(ref, indices, element shape) of `x[i, j]` where x is a field or an ndarray: the
        element shape is () for one scalar element, and the component dimensions when the
        indices name a whole vector/matrix element (x[i] of a vec3 field). Each index
        expression is evaluated once. A field with an offset takes the user's indices: the
        offset is subtracted here, so the IR holds storage indices. One component of a vector
        field (`v.get_scalar_field(k)`) is the parent's access with the component's indices
        appended."""
        base = self.expr(node.value) if base is None else base
        component: tuple[int, ...] = ()
        if isinstance(base, PyValue) and isinstance(base.obj, ComponentField):
            component, base = base.obj.index, PyValue(base.obj.parent)
        ref = self.access_ref(node, base)
        ndim = ref.ndim - len(component)
        values = self.index_values(node.slice)
        element = () if component else self.element_shape(base)
        if element and len(values) == ndim - len(element):
            ndim = len(values)
        else:
            element = ()
        if len(values) != ndim:
            hint = " (use x[None] for a 0-d field)" if ndim == 0 else ""
            raise self.err(node, f"'{ref.name}' has {ndim} dimension(s) but {len(values)} "
                           f"index(es) were given{hint}")
        indices = []
        for axis, (item, v) in enumerate(values):
            e = self.value(item, v)
            if not e.dtype.is_int:
                raise self.err(item, f"index must be an integer, got {e.dtype.name} (indices "
                               "must be integers)")
            e = self.cast(e, dtypes.i64) if e.dtype.bits == 64 else self.cast(e, dtypes.i32)
            if isinstance(ref, n.FieldRef) and ref.offset and ref.offset[axis]:
                e = n.Binary("-", e, n.Const(ref.offset[axis], e.dtype, e.loc), e.dtype, e.loc)
            if isinstance(ref, n.ArrayRef) and ref.arg in self.ctx.clamped_arrays:
                e = self.clamped(e, n.Cast(n.Shape(ref, axis), e.dtype, e.loc))
            indices.append(e)
        loc = self.loc(node)
        return ref, tuple(indices) + tuple(n.Const(k, dtypes.i32, loc) for k in component), \
            element

    def clamped(self, e: n.Expr, extent: n.Expr) -> n.Expr:
        """`e` clamped into 0..extent-1 (an index into an ndarray(boundary="clamp"))."""
        one, zero = n.Const(1, e.dtype, e.loc), n.Const(0, e.dtype, e.loc)
        top = n.Binary("-", extent, one, e.dtype, e.loc)
        return n.Binary("max", n.Binary("min", e, top, e.dtype, e.loc), zero, e.dtype, e.loc)

    def access_ref(self, node: ast.Subscript, base: Value) -> n.Ref:
        """The ref of the field or ndarray `base` that `node` indexes."""
        if isinstance(base, PyValue) and is_field(base.obj):
            # an unnamed field is named as the kernel's source does (`x`, `x.grad`) in errors
            name = base.obj.name if base.obj.named else ast.unparse(node.value)
            return self.ctx.field_ref(base.obj, name)
        if isinstance(base, n.ArrayRef):
            return base
        what = base.obj if isinstance(base, PyValue) else base
        raise self.err(node.value, f"cannot index {describe(what)}")

    def index_values(self, sl: ast.AST) -> list[tuple[ast.AST, Value]]:
        """Each index of `x[sl]` with its source node (`x[None]` has none; an index vector,
        from `jr.grouped`, counts as its components: the empty one of
        `jr.static(jr.grouped(jr.ndrange()))` as none)."""
        if isinstance(sl, ast.Constant) and sl.value is None:
            items: list[ast.AST] = []
        elif isinstance(sl, ast.Tuple):
            items = list(sl.elts)
        else:
            items = [sl]
        values: list[tuple[ast.AST, Value]] = []
        import numpy as np
        for item in items:
            v = self.expr(item)
            if isinstance(v, PyValue) and isinstance(v.obj, (tuple, np.ndarray)) and \
                    np.size(v.obj) == 0:
                continue
            values += [(item, x) for x in v.items] if isinstance(v, VecValue) else [(item, v)]
        return values

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        if isinstance(node.op, ast.MatMult):
            return self.matmul(self.expr(node.left), self.expr(node.right), node)
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.err(node, f"operator {type(node.op).__name__} is not supported")
        if op == "*" and (isinstance(node.left, (ast.List, ast.Tuple)) or isinstance(
                node.right, (ast.List, ast.Tuple))):
            repeated = self.repeated_display(node)       # [x] * 4: lower_comprehension.py
            if repeated is not None:
                return repeated
        left = self.expr(node.left)
        if op == "%" and isinstance(left, PyValue) and isinstance(left.obj, str) and \
                isinstance(node.right, ast.Tuple):     # "x[%d] = %f" % (i, v): its values
            values = TupleValue(tuple(self.expr(e) for e in node.right.elts))
            return self.percent_format(left.obj, values, node)
        return self.binary(op, left, self.expr(node.right), node)

    def binary(self, op: str, a: Value, b: Value, node: ast.AST) -> Value:
        joined = self.list_binary(op, a, b, node)    # `[a] + [b]`, `[a] * 2`: lists.py
        if joined is not None:
            return joined
        if isinstance(a, VecValue) or isinstance(b, VecValue):
            return self.vec_binary(op, a, b, node)       # element-wise, scalars broadcast
        if isinstance(a, PyValue) and isinstance(b, PyValue) and not is_number(a) and \
                not is_number(b) and op in n.COMPARE_OPS and not isinstance(a.obj, NoValue) \
                and not isinstance(b.obj, NoValue):
            # compile-time Python values of any kind: jr.static(mode == "fast")
            try:
                return PyValue(int(bool(PY_BINOPS[op](a.obj, b.obj))))
            except TypeError as exc:
                raise self.err(node, f"compile-time comparison fails: {exc}") from None
        if is_number(a) and is_number(b):
            return PyValue(self.fold(op, a.obj, b.obj, node))  # type: ignore[union-attr]
        for side in (a, b):
            if isinstance(side, PyValue) and (is_field(side.obj) or isinstance(
                    side.obj, ComponentField)):
                raise self.err(node, f"unsupported operand type(s) for '{op}': "
                               f"{describe(side.obj)} is a field, not a value; index it "
                               "(x[None], x[i])", KernelTypeError)
        if isinstance(a, PyValue) and isinstance(a.obj, (str, tuple, list)) and op in (
                "+", "*", "%") and (isinstance(b, PyValue) or op == "%"):
            return self.sequence_op(op, a, b, node)  # (0.0,) * 4, "a" + "b", "%d" % (i,)
        if op == "**":
            return self.power(a, b, node)
        ea, eb, dt = self.operands(a, b, node)
        loc = self.loc(node)
        if op in INT_ONLY_OPS and dt.is_float:
            raise self.err(node, f"unsupported operand type(s) for '{op}': operator {op} needs "
                           f"integers, got {dt.name}", KernelTypeError)
        if op in ("<<", ">>") and is_number(b) and not 0 <= b.obj < dt.bits:  # type: ignore
            raise self.err(node, f"shift count {b.obj} is outside 0..{dt.bits - 1} for "  # type: ignore
                           f"{dt.name}")
        if op in n.COMPARE_OPS:
            return n.Binary(op, ea, eb, dtypes.i32, loc)
        if op == "/" and not dt.is_float:
            dt = self.ctx.default_fp
            ea, eb = self.cast(ea, dt), self.cast(eb, dt)
        if self.ctx.debug and op in OVERFLOW_CHECKED and not dt.is_float:
            return n.Binary(op, ea, eb, dt, loc, self.overflow_message(op, loc))
        return n.Binary(op, ea, eb, dt, loc)

    def overflow_message(self, op: str, loc: n.Loc) -> str:
        """What a debug build prints when `op` wraps: Taichi's first words, then the kernel,
        the place and the source line."""
        from ..errors import source_line
        line = source_line(loc, self.src.file_lines).strip()
        return (f"{OVERFLOW_CHECKED[op]} overflow detected in kernel {self.ctx.kernel_name} "
                f"at {loc}:\n    {line}\n")

    def sequence_op(self, op: str, a: PyValue, b: Value, node: ast.AST) -> Value:
        """`+`, `*` of compile-time strings, tuples and lists, and `%` formatting of a string
        (with run-time values: `lower_format.py`), as Python does."""
        if op == "%" and isinstance(a.obj, str):
            return self.percent_format(a.obj, b, node)
        if not isinstance(b, PyValue):
            raise self.err(node, f"operator {op} of {describe(a.obj)} needs a value known at "
                           "compile time")
        if op == "*" and isinstance(b.obj, int) and len(a.obj) * max(b.obj, 0) > 4096:
            raise self.err(node, "constant sequence is too long (more than 4096 items)")
        try:
            return PyValue(PY_BINOPS[op](a.obj, b.obj))
        except TypeError as exc:
            raise self.err(node, f"compile-time operation fails: {exc}") from None

    def fold(self, op: str, x: Any, y: Any, node: ast.AST) -> Any:
        """A constant expression, evaluated at compile time with Python's semantics (bounded:
        no constant may grow past 4096 bits)."""
        big = op == "<<" and isinstance(y, int) and y > 4096 or (
            op == "**" and isinstance(x, int) and isinstance(y, int) and abs(x) > 1
            and y * max(abs(x).bit_length(), 1) > 4096)
        if big:
            raise self.err(node, f"constant expression {x!r} {op} {y!r} is too large")
        try:
            return PY_BINOPS[op](x, y)
        except (ArithmeticError, ValueError) as exc:
            raise self.err(node, f"constant expression {x!r} {op} {y!r} fails: {exc}") from None

    def power(self, a: Value, b: Value, node: ast.AST) -> Value:
        if is_number(b) and isinstance(b.obj, int) and -8 <= b.obj <= 16:  # type: ignore
            base = self.value(node, a)
            k = abs(b.obj)  # type: ignore[union-attr]
            result: n.Expr = self.const(1, node, base.dtype)
            for _ in range(k):
                result = base if isinstance(result, n.Const) and result.value == 1 else \
                    n.Binary("*", result, base, base.dtype, self.loc(node))
            if b.obj < 0:  # type: ignore[union-attr]
                dt = base.dtype if base.dtype.is_float else self.ctx.default_fp
                return n.Binary("/", self.const(1.0, node, dt), self.cast(result, dt), dt,
                                self.loc(node))
            return result
        ea, eb, dt = self.operands(a, b, node)
        if dt.is_int and not is_number(b):   # exact integer power (see docs/usage.md)
            if self.ctx.debug:
                eb = self.nonnegative_exponent(eb, node)
            return n.Math("ipow", (ea, eb), dt, self.loc(node))
        if dt.is_int:                          # a negative constant exponent: a float, as Python
            dt = self.ctx.default_fp
        fdt = dt if dt.is_float else dtypes.f64
        out = n.Math("pow", (self.cast(ea, fdt), self.cast(eb, fdt)), fdt, self.loc(node))
        return self.cast(out, dt)

    def nonnegative_exponent(self, e: n.Expr, node: ast.AST) -> n.Expr:
        """With `debug=True`, an integer power's run-time exponent checked as Taichi's debug
        build checks it: a negative one records a fault (the launch raises
        KernelRuntimeError, in Taichi's words) and counts as 0."""
        loc = self.loc(node)
        if not isinstance(e, (n.Const, n.Local, n.Arg)):
            e = self.fresh_local(e, "exponent", loc)    # evaluated once
        fault = n.Assertion(n.Const(0, dtypes.i32, loc), "Negative exponent in pow(int, int) "
                            "is not allowed (a run-time exponent of an integer power)",
                            dtypes.i32, loc)
        ok = n.Binary(">=", e, n.Const(0, e.dtype, loc), dtypes.i32, loc)
        return n.Select(ok, e, self.cast(fault, e.dtype), e.dtype, loc)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        return self.unary(node.op, self.expr(node.operand), node)

    def unary(self, op: ast.unaryop, v: Value, node: ast.AST) -> Value:
        """`-v`, `+v`, `not v`, `~v`; element-wise on vectors and matrices."""
        if isinstance(v, VecValue) and isinstance(op, (ast.USub, ast.UAdd)):
            if isinstance(op, ast.UAdd):
                return v
            return self.vec_binary("*", v, PyValue(-1), node)
        if isinstance(v, VecValue):
            return VecValue(v.shape, tuple(self.unary(op, x, node) for x in v.items))
        if is_number(v):
            fold: Any = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                         ast.Invert: operator.invert}[type(op)]
            return PyValue(fold(v.obj))  # type: ignore[union-attr]
        e = self.value(node, v)
        loc = self.loc(node)
        if isinstance(op, ast.UAdd):
            return e
        if isinstance(op, ast.USub):
            return n.Unary("neg", e, e.dtype, loc)
        if e.dtype.is_float and isinstance(op, ast.Not):     # as Taichi: a float has no
            raise self.err(node, f"'not' takes integral inputs only, however '{e.dtype.name}' "
                           "is provided: compare it instead (x == 0)", KernelTypeError)
        if isinstance(op, ast.Not):
            return n.Unary("not", self.truth(e), dtypes.i32, loc)
        if e.dtype.is_float:
            raise self.err(node, f"'~' takes integral inputs only, however '{e.dtype.name}' is "
                           "provided: operator ~ needs an integer", KernelTypeError)
        return n.Unary("invert", e, e.dtype, loc)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        cond = self.expr(node.test)
        if isinstance(cond, PyValue):
            return self.expr(node.body if cond.obj else node.orelse)
        if isinstance(cond, VecValue):          # refused as in Taichi (an unsupported form)
            select = f"{module_alias(self.scope.globals)}.select"
            raise self.err(node.test, "an if-expression needs a scalar condition, got a "
                           f"vector/matrix of shape {cond.shape}; for one choice per component "
                           f'use {select}(cond, a, b). Please use "{select}" instead.',
                           KernelSyntaxError)
        body, orelse = as_vector(self.expr(node.body)), as_vector(self.expr(node.orelse))
        if isinstance(body, VecValue) or isinstance(orelse, VecValue):  # scalars broadcast
            shape = (body if isinstance(body, VecValue) else orelse).shape
            items = [x.items if isinstance(x, VecValue) else (x,) * len(
                (body if isinstance(body, VecValue) else orelse).items) for x in (body, orelse)]
            if any(isinstance(x, VecValue) and x.shape != shape for x in (body, orelse)):
                shapes = " and ".join(str(x.shape) for x in (body, orelse)
                                      if isinstance(x, VecValue))
                raise self.err(node, "Cannot broadcast tensor to tensor: the two sides of an "
                               f"if-expression have different shapes ({shapes})",
                               KernelTypeError)
            test = self.truth(self.value(node.test, cond))
            return VecValue(shape, tuple(self.select_one(test, a, b, node)
                                         for a, b in zip(*items)))
        return self.select_one(self.truth(cond), body, orelse, node)  # type: ignore[arg-type]

    def select_one(self, test: n.Expr, a: Value, b: Value, node: ast.AST) -> n.Expr:
        ea, eb, dt = self.operands(a, b, node)
        return n.Select(test, ea, eb, dt, self.loc(node))


def adapt(value: int | float, other: DataType, ctx: CompileContext) -> DataType:
    """The type a Python literal takes next to a typed operand: the operand's own type when
    the literal fits in it (`u8_value + 1` stays u8), else the literal's default type, which
    then promotes with the operand (no silent wrap of `i8_value + 1000`)."""
    if isinstance(value, float) and not other.is_float:
        return ctx.default_fp
    if other.is_float or isinstance(value, bool):
        return other
    lo = -(1 << (other.bits - 1)) if other.is_signed else 0
    hi = (1 << (other.bits - 1)) - 1 if other.is_signed else (1 << other.bits) - 1
    if lo <= value <= hi:
        return other
    return ctx.default_ip if -(1 << 31) <= value < (1 << 31) else dtypes.i64


def is_container(obj: Any) -> bool:
    """A user's Python object with `__getitem__`, indexed at compile time (not jitrt's data, a
    numpy array or a component field, which kernels index at run time)."""
    import numpy as np
    return hasattr(type(obj), "__getitem__") and not is_field(obj) and not isinstance(
        obj, (np.ndarray, ComponentField, str, bytes))


def is_field(obj: Any) -> bool:
    """A global buffer the kernel reaches by reference: a field, or an ndarray reached through
    a compile-time object (a member of a dataclass or template argument, as Quadrants passes
    struct members; the kernel is compiled for that object, as for its fields)."""
    from ..data import Field, Ndarray
    return isinstance(obj, (Field, Ndarray))


def describe(obj: Any) -> str:
    if isinstance(obj, NoValue):
        return repr(obj)
    if isinstance(obj, n.ArrayRef):
        return f"ndarray '{obj.name}'"
    if isinstance(obj, type):
        return f"type {obj.__name__}"
    if isinstance(getattr(obj, "description", None), str):    # FormatValue, DictValue
        return str(obj.description)
    name = getattr(obj, "__name__", None)
    return f"{type(obj).__name__} {name}" if name else f"{type(obj).__name__} {obj!r}"[:80]


_TABLES: dict[tuple[Any, ...], Any] = {}


def constant_table(values: tuple[Any, ...], dt: DataType, name: str) -> Any:
    """The hidden field holding a compile-time tuple indexed at run time (made once per
    table, type and name)."""
    key = (values, dt, name)
    found = _TABLES.get(key)
    if found is None:
        import numpy as np

        from ..data import Field
        found = Field(dt, (len(values),), False, name, "field")
        found.from_numpy(np.array(values, dtype=dt.np))
        _TABLES[key] = found
    return found
