"""Vectors and matrices in kernels: compile-time aggregates of scalar values.

Stage: frontend (a mixin of the lowering visitor). A `VecValue` is a shape ((n,) or (n, m))
and its components, each a scalar IR expression or a compile-time number; every operation
on it (element-wise arithmetic with broadcasting of scalars, `@`, methods such as `.dot()`
and `.inverse()`, the math functions) unrolls into scalar IR here, so vectors live in
registers and the passes (autodiff included) see only scalars. A vector local is one scalar
local per component (`VecVar`). In memory a field or ndarray of vectors keeps the components
as trailing dimensions: `x[i]` of a vec3 field loads x[i, 0], x[i, 1], x[i, 2]. Indexing
(`v[k]`, `x[i][k]`, compile-time or run-time) is `vector_index.py`. Caches nothing.
"""
from __future__ import annotations

import ast
import itertools
from typing import Any

from ..errors import KernelSyntaxError, KernelTypeError
from ..frozen import frozen
from .. import dtypes
from ..ir import nodes as n
from ..ir.walk import walk_expr
from ..linalg import MatrixType
from .context import LocalVar, LoweringHost, PyValue, literal_dtype


@frozen
class VecValue:
    shape: tuple[int, ...]            # (n,) for a vector, (n, m) for a matrix
    items: tuple[Any, ...]            # row-major components: n.Expr or PyValue numbers
    # a list or tuple display (`[a, b]`, `(a, b)`) or a local assigned one: a Python
    # sequence, as in Taichi, where `+` of two concatenates and `*` by an int repeats
    # (`lists.py`); anything else (arithmetic with a vector or a scalar, a store, a call)
    # uses it as a vector
    is_list: bool = False

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1] if len(self.shape) == 2 else 0

    def at(self, i: int, j: int | None = None) -> Any:
        return self.items[i if j is None else i * self.shape[1] + j]

    def row(self, i: int) -> "VecValue":
        m = self.shape[1]
        return VecValue((m,), self.items[i * m:(i + 1) * m])


def reads_ref(v: "VecValue", ref: n.Ref) -> bool:
    """Whether a component of `v` loads from `ref` (the field or ndarray a store is about to
    write, at any index: an element may be read through another index expression)."""
    return any(isinstance(e, n.Load) and e.ref == ref for x in v.items if isinstance(x, n.Expr)
               for e in walk_expr(x))


@frozen
class VecVar:
    """A vector or matrix local: one scalar local per component."""
    shape: tuple[int, ...]
    components: tuple[LocalVar, ...]
    is_list: bool = False             # assigned a list: reads give a list (VecValue.is_list)


@frozen
class TupleValue:
    """A tuple of run-time values that is not a vector (`(U, P)`, `(v, s)`): unpacked by
    `a, b = t`, indexed by constants; what a func returns when it returns several values.
    `is_list`: a list or tuple display (`[k, x.shape]`, `(v3, s)`): a Python sequence, as in
    Taichi (`lists.py`)."""
    items: tuple[Any, ...]
    is_list: bool = False


@frozen
class VecMethod:
    """`v.norm` waiting for its call."""
    vec: VecValue
    name: str


@frozen
class ClassMethod:
    """`jr.Matrix.diag`, `jr.Matrix.cols`, `jr.Vector.normalized`... waiting for its call
    (`kind` is "Vector" or "Matrix"): the constructors Taichi has on its classes, and every
    method called through the class (`jr.Vector.normalized(v, 1e-6)`)."""
    kind: str
    name: str


METHODS = ("dot", "cross", "norm", "norm_sqr", "norm_inv", "normalized", "outer_product",
           "transpose", "trace", "determinant", "inverse", "sum", "max", "min", "any", "all",
           "cast")
CONSTRUCTORS = ("diag", "rows", "cols")
# (least, most) arguments of each method besides the vector; the others take none
METHOD_ARGS = {"dot": (1, 1), "cross": (1, 1), "outer_product": (1, 1), "cast": (1, 1),
               "norm": (0, 1), "norm_inv": (0, 1), "normalized": (0, 1)}
# numpy arrays (globals, closure values, jr.static loop items) up to this many numbers are
# constant vectors/matrices in kernels
MAX_CONSTANT_ARRAY = 64
SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3,
           "s": 0, "t": 1, "p": 2, "q": 3}     # xyzw, rgba and stpq, as in Taichi (GLSL's)


def swizzle_past_end(n: int, letters: str) -> str:
    """The message for a swizzle that reaches past an n-component vector: Taichi's words
    (`vec2 only has attributes=('x', 'y'), got=('z',)`), then jitrt's."""
    names = next((s for s in ("xyzw", "rgba", "stpq") if letters[0] in s), "xyzw")
    return (f"vec{n} only has attributes={tuple(names[:n])!r}, got={tuple(letters)!r}: a "
            f"{n}-component vector has no '{letters}'")


def size(shape: tuple[int, ...]) -> int:
    total = 1
    for s in shape:
        total *= s
    return total


def constant_vector(v: Any) -> VecValue | None:
    """A compile-time tuple/list of numbers (or of equal-length rows) as a VecValue."""
    if not isinstance(v, PyValue) or not isinstance(v.obj, (tuple, list)) or not v.obj:
        return None
    obj = v.obj
    number = (int, float)
    if all(isinstance(x, number) and not isinstance(x, bool) for x in obj):
        return VecValue((len(obj),), tuple(PyValue(x) for x in obj))
    if all(isinstance(r, (tuple, list)) and r and len(r) == len(obj[0]) and all(
            isinstance(x, number) and not isinstance(x, bool) for x in r) for r in obj):
        return VecValue((len(obj), len(obj[0])), tuple(PyValue(x) for r in obj for x in r))
    return None


def constant_array(obj: Any) -> VecValue | PyValue | None:
    """A small 1-D or 2-D numeric numpy array (`gravity = jr.Vector([0, -40])` at Python
    scope, an item of `jr.static(jr.grouped(jr.ndrange(...)))`) as a vector/matrix of
    compile-time numbers, which adapt to the other operand like literals do (alone, ints are
    default_ip and floats default_fp, as Taichi types a Python-scope vector); a numpy number as
    the Python number; else None."""
    import numpy as np
    if isinstance(obj, (np.generic, np.ndarray)) and obj.ndim == 0 and obj.dtype.kind in "iuf":
        return PyValue(obj.item())         # a numpy number (`for s in jr.static(a)`), or a
        # 0-d array of one (`np.int32(5).reshape(())`): the number, as Taichi reads it
    if not isinstance(obj, np.ndarray) or obj.ndim not in (1, 2) or not 0 < obj.size <= \
            MAX_CONSTANT_ARRAY or obj.dtype.kind not in "iuf":
        return None
    return VecValue(tuple(obj.shape), tuple(PyValue(x) for x in obj.ravel().tolist()))


# the longest chain a reduction over a vector's components builds before it keeps the running
# value in a local (`VectorLowering.fold_chain`)
FOLD_CHAIN = 32


def bools_as_ints(v: Any) -> Any:
    """A compile-time list/tuple of numbers (or of rows of them) with its bools as 0/1, so that
    `jr.Vector([True, False])` is the vector [1, 0] (a bool is an i32 0/1 in kernels)."""
    if not isinstance(v, PyValue) or not isinstance(v.obj, (tuple, list)):
        return v

    def ints(xs: Any) -> Any:
        if isinstance(xs, (tuple, list)):
            return type(xs)(ints(x) for x in xs)
        return int(xs) if isinstance(xs, bool) else xs
    return PyValue(ints(v.obj))


def is_scalar(v: Any) -> bool:
    """A run-time scalar or a compile-time number: what a vector's component may be."""
    return isinstance(v, n.Expr) or isinstance(v, PyValue) and isinstance(
        v.obj, (int, float)) and not isinstance(v.obj, type)


def as_vector(v: Any) -> Any:
    """`v` itself, or a VecValue when it is a constant tuple/list of numbers."""
    return constant_vector(v) or v


class VectorLowering(LoweringHost):
    """The vector and matrix part of the lowering visitor."""

    # ---- building ---------------------------------------------------------------------
    def vec_literal(self, node: ast.List | ast.Tuple, items: list[Any]) -> Any:
        """`[a, b, c]` (a vector) or `[[a, b], [c, d]]` (a matrix; rows may be vectors); a
        tuple of anything else (matrices, vectors and scalars mixed) is a TupleValue. A row of
        constants next to vector rows (`[[c, s, 0.0], [0.0, 0.0, 1.0]]`) is a vector too."""
        is_list = isinstance(node, (ast.List, ast.Tuple))    # a Python sequence: lists.py
        if any(isinstance(i, VecValue) for i in items):
            items = [as_vector(i) for i in items]
        if all(isinstance(i, VecValue) and len(i.shape) == 1 for i in items):
            widths = {i.shape[0] for i in items}
            if len(widths) == 1:
                return VecValue((len(items), widths.pop()),
                                tuple(x for i in items for x in i.items), is_list)
        if any(isinstance(i, (VecValue, TupleValue)) or type(i).__name__ in (
                "StructValue", "StructElement") for i in items):      # (structs: a tuple)
            return TupleValue(tuple(items), is_list)
        if is_list and not all(is_scalar(i) for i in items):   # `[k, x.shape]`: a list
            return TupleValue(tuple(items), True)
        for item, src in zip(items, node.elts):
            self.scalar_component(item, src)
        return VecValue((len(items),), tuple(items), is_list)

    def scalar_component(self, v: Any, node: ast.AST) -> Any:
        if isinstance(v, VecValue):
            raise self.err(node, "a vector component must be a scalar (nested vectors make a "
                           "matrix only when every row is a vector of the same length)")
        if isinstance(v, n.Expr):
            return v
        if isinstance(v, PyValue) and isinstance(v.obj, (int, float)) and not isinstance(
                v.obj, type):
            return v
        raise self.err(node, "a vector component must be a number")

    def construct(self, kind: Any, node: ast.Call) -> VecValue:
        """`jr.Vector([...])`, `jr.Matrix([[...]])`, `jr.math.vec3(x, y, z)`, `vec3(s)`,
        `vec3(v2, z)` (vector arguments are flattened, as in Taichi)."""
        from ..linalg import Matrix, Vector
        args = [as_vector(bools_as_ints(self.expr(a))) for a in node.args]
        dtype = None
        for kw in node.keywords:
            if kw.arg not in ("dtype", "dt"):          # dt=: Quadrants' spelling
                raise self.err(node, f"unexpected keyword argument '{kw.arg}'")
            dt = self.expr(kw.value)
            dtype = dt.obj if isinstance(dt, PyValue) else None
        if kind is Vector or kind is Matrix:
            if len(args) == 2 and dtype is None:         # jr.Matrix([[...]], jr.f32)
                dt = args.pop()
                dtype = dt.obj if isinstance(dt, PyValue) else None
                dtype = self.ctx.default_ip if dtype is int else (
                    self.ctx.default_fp if dtype is float else dtype)
                if not isinstance(dtype, dtypes.DataType):
                    raise self.err(node.args[1], f"jr.{kind.__name__}(values, dtype): dtype "
                                   "must be a jitrt dtype such as jr.f32")
            if len(args) == 1 and isinstance(args[0], TupleValue) and args[0].is_list:
                raise self.err(node, "a list of vectors of different lengths or mixed with "
                               "scalars is neither a vector nor a matrix")
            if len(args) != 1 or not isinstance(args[0], VecValue):
                what = "a list of components" if kind is Vector else "a list of rows"
                raise self.err(node, f"jr.{kind.__name__}() takes {what}")
            v = VecValue(args[0].shape, args[0].items)     # a vector, no longer a list
            if kind is not Matrix and len(v.shape) == 2:   # jr.Matrix([a, b, c]): a vector,
                raise self.err(node, "jr.Vector() takes a flat list (jr.Matrix() a list of "
                               "rows)")                    # as at Python scope and in Taichi
            return self.vec_cast(v, dtype, node) if dtype is not None else v
        assert isinstance(kind, MatrixType)
        flat: list[Any] = []
        for a, src in zip(args, node.args):
            flat += list(a.items) if isinstance(a, VecValue) else [self.scalar_component(a, src)]
        want = size(kind.shape)
        if len(flat) == 1 and want > 1:
            flat = flat * want
        if len(flat) != want:
            raise self.err(node, f"{kind!r} needs {want} components, got {len(flat)}")
        dt = kind.scalar(self.ctx.default_fp, self.ctx.default_ip)
        return self.vec_cast(VecValue(kind.shape, tuple(flat)), dt, node)

    def filled(self, kind: Any, node: ast.Call) -> VecValue:
        """`jr.Vector.zero(dtype, n)`, `jr.Vector.one(dtype, n)`, `jr.Matrix.zero(dtype, n, m)`,
        `jr.Matrix.identity(dtype, n)`, `jr.Vector.unit(n, k, dtype)`."""
        args = [self.expr(a) for a in node.args]
        named: dict[str, Any] = {"dtype" if k.arg == "dt" else k.arg: self.expr(k.value)
                                 for k in node.keywords if k.arg}   # Quadrants' dt=
        if not all(isinstance(a, PyValue) for a in args + list(named.values())):
            raise self.err(node, "the arguments must be known at compile time")
        vals = [a.obj for a in args]
        try:
            dt_arg, shape, fill, diagonal = kind(*vals, **{
                k: v.obj for k, v in named.items()})  # type: ignore[union-attr]
        except TypeError as exc:
            raise self.err(node, str(exc)) from None
        dt = {int: self.ctx.default_ip, float: self.ctx.default_fp}.get(dt_arg, dt_arg)
        if not isinstance(dt, dtypes.DataType):
            raise self.err(node, "the dtype must be a jitrt dtype (or int/float)")
        count = size(shape)
        items = []
        for k in range(count):
            value = fill
            if diagonal is not None:
                value = 1 if (diagonal(k)) else 0
            items.append(n.Const(float(value) if dt.is_float else int(value), dt,
                                 self.loc(node)))
        return VecValue(shape, tuple(items))

    def vec_cast(self, v: VecValue, dt: Any, node: ast.AST) -> VecValue:
        if not isinstance(dt, dtypes.DataType):
            raise self.err(node, "dtype must be a jitrt dtype such as jr.f32")
        return VecValue(v.shape, tuple(self.cast(self.value(node, x), dt) for x in v.items))

    # ---- element-wise ------------------------------------------------------------------
    def vec_binary(self, op: str, a: Any, b: Any, node: ast.AST) -> VecValue:
        a, b = as_vector(a), as_vector(b)
        va, vb = isinstance(a, VecValue), isinstance(b, VecValue)
        if va and vb and a.shape != b.shape:
            raise self.err(node, f"shapes {a.shape} and {b.shape} do not match for {op}")
        shape = a.shape if va else b.shape
        count = size(shape)
        xs = a.items if va else (a,) * count
        ys = b.items if vb else (b,) * count
        return VecValue(shape, tuple(self.binary(op, x, y, node) for x, y in zip(xs, ys)))

    def vec_map(self, v: VecValue, fn: Any) -> VecValue:
        return VecValue(v.shape, tuple(fn(x) for x in v.items))

    def matmul(self, a: Any, b: Any, node: ast.AST) -> Any:
        a, b = as_vector(a), as_vector(b)
        if not (isinstance(a, VecValue) and isinstance(b, VecValue)):
            raise self.err(node, "@ needs two vectors or matrices")
        if len(a.shape) == 1 and len(b.shape) == 1:
            return self.vec_dot(a, b, node)
        left = a if len(a.shape) == 2 else VecValue((1, a.rows), a.items)
        right = b if len(b.shape) == 2 else VecValue((b.rows, 1), b.items)
        if left.cols != right.rows:
            raise self.err(node, f"@ of shapes {a.shape} and {b.shape} does not match")
        out = []
        for i in range(left.rows):
            for j in range(right.cols):
                out.append(self.sum_of([self.binary("*", left.at(i, k), right.at(k, j), node)
                                        for k in range(left.cols)], node))
        if len(a.shape) == 1:
            return VecValue((right.cols,), tuple(out))
        if len(b.shape) == 1:
            return VecValue((left.rows,), tuple(out))
        return VecValue((left.rows, right.cols), tuple(out))

    def sum_of(self, values: list[Any], node: ast.AST) -> Any:
        return self.fold_chain(lambda a, b: self.binary("+", a, b, node), values, node)

    def fold_chain(self, combine: Any, values: list[Any], node: ast.AST) -> Any:
        """`combine` over `values` left to right (Taichi's order, so a float sum rounds as
        Taichi's does); every FOLD_CHAIN items the running value is kept in a local, so that
        the expression of a 1024-component reduction is not 1024 levels deep (every pass
        walks expressions recursively)."""
        out = values[0]
        for k, v in enumerate(values[1:], 1):
            if k % FOLD_CHAIN == 0 and isinstance(out, n.Expr) and not isinstance(
                    out, (n.Const, n.Local, n.Arg)):
                out = self.fresh_local(out, "fold", self.loc(node))
            out = combine(out, v)
        return out

    def vec_dot(self, a: VecValue, b: VecValue, node: ast.AST) -> Any:
        if a.shape != b.shape or len(a.shape) != 1:
            raise self.err(node, f"dot needs two vectors of one length, got {a.shape} and "
                           f"{b.shape}")
        return self.sum_of([self.binary("*", x, y, node) for x, y in zip(a.items, b.items)],
                           node)

    # ---- methods ------------------------------------------------------------------------
    def vec_attribute(self, v: VecValue, node: ast.Attribute) -> Any:
        name = node.attr
        if name in METHODS:
            return PyValue(VecMethod(v, name))
        if name == "T":
            return self.transpose(v, node)
        if name in ("n", "m"):
            return PyValue(v.shape[0] if name == "n" else (v.shape[1] if v.cols else 1))
        if len(v.shape) == 1 and name and all(c in SWIZZLE for c in name):
            picks = [SWIZZLE[c] for c in name]
            if max(picks) >= v.rows:
                raise self.err(node, swizzle_past_end(v.rows, name), KernelSyntaxError)
            if len(picks) == 1:
                return v.items[picks[0]]
            return VecValue((len(picks),), tuple(v.items[k] for k in picks))
        raise self.err(node, f"vectors and matrices have no attribute '{name}'")

    def call_vec_method(self, m: VecMethod, node: ast.Call) -> Any:
        args = [as_vector(self.expr(a)) for a in node.args]
        return self.vec_function(m.name, [m.vec, *args], node)

    def vec_function(self, name: str, args: list[Any], node: ast.Call) -> Any:
        v = args[0]
        if not isinstance(v, VecValue):
            raise self.err(node, f"{name}() needs a vector or matrix")
        least, most = METHOD_ARGS.get(name, (0, 0))
        if not least <= len(args) - 1 <= most:
            takes = str(least) if least == most else f"{least} to {most}"
            raise self.err(node, f".{name}() takes {takes} argument(s), got {len(args) - 1}")
        if name in ("norm", "norm_inv", "normalized"):
            return self.vec_norms(name, v, args[1] if len(args) > 1 else None, node)
        other = args[1] if least else None
        if name == "cast":
            dt = other.obj if isinstance(other, PyValue) else None
            dt = {int: self.ctx.default_ip, float: self.ctx.default_fp}.get(dt, dt)  # type: ignore
            return self.vec_cast(v, dt, node)
        if least and not isinstance(other, VecValue):
            raise self.err(node, f".{name}() needs a vector argument")
        assert other is None or isinstance(other, VecValue)
        if name == "dot" and other is not None:
            return self.vec_dot(v, other, node)
        if name == "cross" and other is not None:
            return self.cross(v, other, node)
        if name == "outer_product" and other is not None:
            return VecValue((v.rows, other.rows),
                            tuple(self.binary("*", x, y, node)
                                  for x, y in itertools.product(v.items, other.items)))
        if name == "norm_sqr":
            return self.sum_of([self.binary("*", x, x, node) for x in v.items], node)
        if name in ("sum", "max", "min"):
            return self.fold_chain(lambda a, b: self.binary("+", a, b, node) if name == "sum" else
                             self.pairwise(name, a, b, node), list(v.items), node)
        if name in ("any", "all"):
            truths = [self.truth(self.value(node, x)) for x in v.items]
            return self.fold_chain(lambda a, b: n.Binary("or" if name == "any" else "and", a, b,
                                                   dtypes.i32, self.loc(node)), truths, node)
        if name == "transpose":
            return self.transpose(v, node)
        if len(v.shape) != 2 or v.rows != v.cols:
            raise self.err(node, f".{name}(): expected a square matrix, got shape {v.shape}")
        if name == "trace":
            return self.sum_of([v.at(i, i) for i in range(v.rows)], node)
        if name == "determinant":
            return self.determinant(v, node)
        return self.inverse(v, node)

    def vec_norms(self, name: str, v: VecValue, eps: Any, node: ast.Call) -> Any:
        """`.norm(eps)` = sqrt(|v|^2 + eps), `.norm_inv(eps)` = 1 / sqrt(|v|^2 + eps) and
        `.normalized(eps)` = v * (1 / (|v| + eps)), Taichi's formulas (eps defaults to 0)."""
        if isinstance(eps, (VecValue, TupleValue)):
            raise self.err(node, f".{name}(eps): eps must be a scalar")
        if name == "normalized":
            length = self.vec_norms("norm", v, None, node)
            if eps is not None:
                length = self.binary("+", length, eps, node)
            return self.vec_binary("*", v, self.binary("/", PyValue(1.0), length, node), node)
        square = self.vec_function("norm_sqr", [v], node)
        if eps is not None:
            square = self.binary("+", square, eps, node)
        root = self.math("sqrt", square, node)
        return root if name == "norm" else self.binary("/", PyValue(1.0), root, node)

    def class_call(self, m: ClassMethod, node: ast.Call) -> Any:
        """`jr.Matrix.diag(dim, val)`, `jr.Matrix.rows([a, b])`, `jr.Matrix.cols([a, b])`
        (vectors or lists as rows/columns) and `jr.Vector.<method>(v, *args)`."""
        where = f"jr.{m.kind}.{m.name}"
        if m.name == "diag":
            return self.diag(where, node)
        if node.keywords:
            raise self.err(node, f"{where}() takes no keyword arguments")
        if m.name in ("rows", "cols"):
            if len(node.args) != 1:
                raise self.err(node, f"{where}() takes one list of vectors")
            v = as_vector(self.expr(node.args[0]))
            if not isinstance(v, VecValue) or len(v.shape) != 2:
                raise self.err(node, f"{where}() takes a list of vectors (or of lists) of one "
                               "length")
            return v if m.name == "rows" else self.transpose(v, node)
        if not node.args:
            raise self.err(node, f"{where}() needs the vector or matrix as its first argument")
        args = [as_vector(self.expr(a)) for a in node.args]
        return self.vec_function(m.name, args, node)

    def diag(self, where: str, node: ast.Call) -> VecValue:
        """`jr.Matrix.diag(dim, val)` (or `dim=`, `val=`): `val` on the diagonal, 0 elsewhere;
        `dim` must be known at compile time."""
        given: dict[str, ast.AST] = dict(zip(("dim", "val"), node.args))
        for kw in node.keywords:
            if kw.arg not in ("dim", "val") or kw.arg in given:
                raise self.err(node, f"{where}(dim, val): unexpected or repeated argument "
                               f"'{kw.arg}'")
            given[kw.arg] = kw.value
        if len(node.args) > 2 or len(given) != 2:
            raise self.err(node, f"{where}(dim, val) takes 2 arguments")
        dim = self.expr(given["dim"])
        if not (isinstance(dim, PyValue) and isinstance(dim.obj, int) and
                not isinstance(dim.obj, bool) and 1 <= dim.obj <= 32):
            raise self.err(given["dim"], f"{where}(dim, val): dim must be an integer from 1 "
                           "to 32 known at compile time")
        val = self.expr(given["val"])
        if isinstance(val, (VecValue, TupleValue)):
            raise self.err(given["val"], f"{where}(dim, val): val must be a scalar")
        k = dim.obj
        zero = PyValue(0)
        return VecValue((k, k), tuple(val if i == j else zero for i in range(k)
                                      for j in range(k)))

    def atomic_element(self, op: str, ref: Any, idxs: list[tuple[n.Expr, ...]],
                       element: tuple[int, ...], v: Any, node: ast.Call,
                       statement: bool) -> VecValue:
        """`jr.atomic_add(x[i], v)` (sub/min/max likewise) on a whole vector/matrix element
        (or a row, `m[i][r]`), whose components are at `idxs`: one atomic per component (a
        scalar `v` is broadcast); the old element is the value. As a statement each atomic is
        an `Eval`, so add/sub differentiate as `x[i] += v` does; used as a value, each old
        component is kept in a fresh local."""
        loc = self.loc(node)
        v = as_vector(v)
        if isinstance(v, TupleValue) or isinstance(v, VecValue) and v.shape != element:
            got = v.shape if isinstance(v, VecValue) else "a tuple"
            raise self.err(node, f"jr.atomic_{op}(): the value of shape {got} does not match "
                           f"the element's shape {element}")
        values = v.items if isinstance(v, VecValue) else (v,) * len(idxs)
        olds: list[n.Expr] = []
        for idx, x in zip(idxs, values):
            atomic = n.Atomic(op, ref, idx, self.typed(x, ref.dtype, node), ref.dtype, loc)
            if statement:
                self.emit(n.Eval(atomic, loc))
                olds.append(n.Load(ref, idx, ref.dtype, loc))   # never evaluated: discarded
            else:
                olds.append(self.fresh_local(atomic, "atomic", loc))
        return VecValue(element, tuple(olds))

    def pairwise(self, op: str, a: Any, b: Any, node: ast.AST) -> Any:
        ea, eb, dt = self.operands(a, b, node)
        return n.Binary(op, ea, eb, dt, self.loc(node))

    def math(self, fn: str, x: Any, node: ast.AST) -> n.Expr:
        e = self.real_operand(fn, self.value(node, x), node)
        return n.Math(fn, (e,), e.dtype, self.loc(node))

    def real_operand(self, fn: str, e: n.Expr, node: ast.AST) -> n.Expr:
        """The operand of math function `fn` as a float: an integer converted to default_fp,
        except that rounding an integer (`floor`, `ceil`, `round` of an i32 value) is a
        KernelTypeError, as in Taichi (it would only convert it); a constant is converted
        (Taichi rounds a Python number in Python)."""
        if e.dtype.is_float:
            return e
        if fn in ("floor", "ceil", "round") and not isinstance(e, n.Const):
            raise self.err(node, f"'{fn}' takes real inputs only, however '{e.dtype.name}' is "
                           "provided (an integer is already whole; convert it with "
                           "jr.f32(...) or float(...) if a float is meant)", KernelTypeError)
        return self.cast(e, self.ctx.default_fp)

    def transpose(self, v: VecValue, node: ast.AST) -> VecValue:
        if len(v.shape) != 2:
            raise self.err(node, "`transpose()` cannot apply to a vector. If you want something "
                           "like `a @ b.transpose()`, write `a.outer_product(b)` instead.",
                           KernelTypeError)
        return VecValue((v.cols, v.rows), tuple(v.at(i, j) for j in range(v.cols)
                                                for i in range(v.rows)))

    def cross(self, a: VecValue, b: VecValue, node: ast.AST) -> Any:
        if a.shape != b.shape or a.shape not in ((2,), (3,)):
            raise self.err(node, f"cross needs two 2- or 3-component vectors, got {a.shape} "
                           f"and {b.shape}")
        mul, sub = (lambda x, y: self.binary("*", x, y, node)), (
            lambda x, y: self.binary("-", x, y, node))
        x, y = a.items, b.items
        if a.shape == (2,):
            return sub(mul(x[0], y[1]), mul(x[1], y[0]))
        return VecValue((3,), (sub(mul(x[1], y[2]), mul(x[2], y[1])),
                               sub(mul(x[2], y[0]), mul(x[0], y[2])),
                               sub(mul(x[0], y[1]), mul(x[1], y[0]))))

    def determinant(self, v: VecValue, node: ast.AST) -> Any:
        """Laplace expansion along the first row (unrolled; sizes up to 4)."""
        if v.rows > 4:
            raise self.err(node, "determinant() is supported up to 4x4")
        if v.rows == 1:
            return v.at(0, 0)
        terms = []
        for j in range(v.rows):
            minor = VecValue((v.rows - 1, v.rows - 1),
                             tuple(v.at(i, k) for i in range(1, v.rows) for k in range(v.rows)
                                   if k != j))
            term = self.binary("*", v.at(0, j), self.determinant(minor, node), node)
            terms.append(term if j % 2 == 0 else self.binary("*", PyValue(-1), term, node))
        return self.sum_of(terms, node)

    def inverse(self, v: VecValue, node: ast.AST) -> VecValue:
        """The adjugate over the determinant (sizes up to 4; no pivoting: a singular matrix
        gives inf/nan, as in the peers)."""
        if v.rows > 4:
            raise self.err(node, "inverse() is supported up to 4x4")
        det = self.determinant(v, node)
        inv_det = self.binary("/", PyValue(1.0), det, node)
        if v.rows == 1:
            return VecValue((1, 1), (inv_det,))
        out = []
        for i in range(v.rows):
            for j in range(v.rows):      # adj[i][j] = cofactor[j][i]
                minor = VecValue((v.rows - 1, v.rows - 1),
                                 tuple(v.at(r, c) for r in range(v.rows) if r != j
                                       for c in range(v.rows) if c != i))
                cof = self.determinant(minor, node)
                if (i + j) % 2:
                    cof = self.binary("*", PyValue(-1), cof, node)
                out.append(self.binary("*", cof, inv_det, node))
        return VecValue(v.shape, tuple(out))

    # ---- indexing ------------------------------------------------------------------------
    def tuple_index(self, t: TupleValue, index_node: ast.AST) -> Any:
        k = self.expr(index_node)
        if not (isinstance(k, PyValue) and isinstance(k.obj, int)):
            raise self.err(index_node, "a tuple index must be known at compile time")
        if not -len(t.items) <= k.obj < len(t.items):
            raise self.err(index_node, f"index {k.obj} out of range for a tuple of "
                           f"{len(t.items)}")
        return t.items[k.obj]

    def element_shape(self, base: Any) -> tuple[int, ...]:
        """The trailing component dimensions of a field or ndarray of vectors, else ()."""
        if isinstance(base, PyValue):
            return tuple(getattr(base.obj, "element_shape", ()))
        if isinstance(base, n.ArrayRef):
            return self.ctx.array_elements.get(base.arg, ())
        return ()

    def whole_element(self, node: ast.Subscript, base: Any) -> tuple[Any, tuple, tuple] | None:
        """(ref, outer indices, element shape) when `node` names a whole vector element of a
        field or ndarray of vectors (`x[i]` of a vec3 field), else None (nothing evaluated
        when `base` holds no vectors)."""
        if not self.element_shape(base):
            return None
        ref, indices, element = self.access(node, base)
        return (ref, indices, element) if element else None

    def element_refs(self, ref: Any, outer: tuple, element: tuple[int, ...], loc: n.Loc
                     ) -> list[tuple[n.Expr, ...]]:
        return [outer + tuple(n.Const(k, dtypes.i32, loc) for k in ks)
                for ks in itertools.product(*(range(e) for e in element))]

    def load_element(self, found: tuple, node: ast.AST) -> VecValue:
        ref, outer, element = found
        loc = self.loc(node)
        return VecValue(element, tuple(n.Load(ref, idx, ref.dtype, loc)
                                       for idx in self.element_refs(ref, outer, element, loc)))

    def store_element(self, found: tuple, v: Any, node: ast.AST, op: str | None = None
                      ) -> None:
        """`x[i] = v` (or `x[i] += v` with op "+"/"-": atomic per component) for a whole
        vector element; a scalar `v` is broadcast."""
        ref, outer, element = found
        loc = self.loc(node)
        v = as_vector(v)
        if isinstance(v, VecValue) and v.shape != element:
            got = next((x.dtype for x in v.items if isinstance(x, n.Expr)), None) or \
                literal_dtype(getattr(v.items[0], "obj", 0.0), self.ctx)
            raise self.err(node, f"cannot assign '{tensor_text(v.shape, got)}' to "
                           f"'{tensor_text(element, ref.dtype)}': cannot store a value of shape "
                           f"{v.shape} into an element of shape {element}")
        idxs = self.element_refs(ref, outer, element, loc)
        if isinstance(v, VecValue) and reads_ref(v, ref):
            v = self.snapshot(v, node)   # `F[i] = F[i] @ F[i]`: read all of it before writing
        values = v.items if isinstance(v, VecValue) else (v,) * len(idxs)
        for idx, x in zip(idxs, values):
            if op is None:
                self.emit(n.Store(ref, idx, self.typed(x, ref.dtype, node), loc))
            elif op in ("+", "-"):
                atomic = n.Atomic("add" if op == "+" else "sub", ref, idx,
                                  self.typed(x, ref.dtype, node), ref.dtype, loc)
                self.emit(n.Eval(atomic, loc))
            else:
                new = self.binary(op, n.Load(ref, idx, ref.dtype, loc), x, node)
                self.emit(n.Store(ref, idx, self.typed(new, ref.dtype, node), loc))

    # ---- locals ------------------------------------------------------------------------
    def vec_local_value(self, var: VecVar, node: ast.AST) -> VecValue:
        loc = self.loc(node)
        return VecValue(var.shape, tuple(n.Local(c.ir_name, c.dtype, loc)
                                         for c in var.components), var.is_list)

    def assign_vec_local(self, name: str, v: Any, node: ast.AST) -> None:
        binding = self.scope.bindings.get(name)
        loc = self.loc(node)
        if isinstance(binding, VecVar):
            if not isinstance(v, VecValue) or v.shape != binding.shape:
                got = v.shape if isinstance(v, VecValue) else "a scalar"
                raise self.err(node, f"'{name}' is a vector/matrix of shape {binding.shape}; "
                               f"cannot assign {got}")
            mine = {c.ir_name for c in binding.components}
            if any(isinstance(e, n.Local) and e.name in mine for x in v.items
                   if isinstance(x, n.Expr) for e in walk_expr(x)):
                v = self.snapshot(v, node)   # `S = J.T @ S @ J`: read all of S before writing
            for c, x in zip(binding.components, v.items):
                self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, node), loc))
            if v.is_list != binding.is_list:     # a list now, or a vector: as Python rebinds
                self.scope.bindings[name] = VecVar(binding.shape, binding.components, v.is_list)
            return
        if binding is not None and not isinstance(binding, PyValue):
            raise self.err(node, f"'{name}' is a scalar local; cannot assign a vector to it")
        self.scope.bindings[name] = self.new_vec_var(self.local_ir_name(name), v, node)

    def new_vec_var(self, ir_name: str, v: VecValue, node: ast.AST) -> VecVar:
        """A new vector local `ir_name$k` per component, assigned `v` here. All components
        have one type, as a Taichi matrix has: the promotion of the typed components' types
        (Python number constants adapt, as in arithmetic), so that `J = [[c, 0.0], ...]` with
        an f64 `c` is an f64 matrix and a later f64 assignment to J[0, 1] is not rounded."""
        values = [self.value(node, x) for x in v.items]
        typed = [e.dtype for x, e in zip(v.items, values) if not isinstance(x, PyValue)]
        dt = (typed or [e.dtype for e in values])[0]
        for other in typed or [e.dtype for e in values]:
            dt = dtypes.promote(dt, other)
        components = []
        for k, x in enumerate(v.items):
            e = self.typed(x, dt, node)
            var = LocalVar(f"{ir_name}${k}", e.dtype)
            self.ctx.local_types[var.ir_name] = e.dtype
            self.emit(n.Assign(var.ir_name, e, self.loc(node)))
            components.append(var)
        return VecVar(v.shape, tuple(components), v.is_list)


def tensor_text(shape: tuple[int, ...], dt: "dtypes.DataType | None") -> str:
    """A vector/matrix type as Taichi's messages write it: `[Tensor (3) i32]`."""
    return f"[Tensor ({', '.join(map(str, shape))}) {dt.name if dt else '?'}]"
