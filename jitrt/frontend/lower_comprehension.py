"""AST -> IR for Python's collection syntax in kernels: comprehensions, dict displays and the
walrus operator.

Stage: frontend (a family of the lowering visitor). As in Taichi, a comprehension is unrolled
at compile time: it iterates over something whose length is known then (`range(n)` with a
compile-time n, a tuple or list constant, a vector's components, a matrix's rows, a dict's
keys), its `if` conditions must be known at compile time, and its elements may be run-time
values. A list (or generator, set) of numbers and scalars is a vector, of equal-length
vectors a matrix (so `jr.Matrix([[0.0] * 4 for _ in range(4)])` works), of compile-time values
only a Python list. A dict maps keys to any values (`DictValue`), indexed by a compile-time
key; a run-time key (`RunTimeKey`) equals only itself, and `keys()`, `values()`, `items()`
(`DictMethod`) and `len()` see every entry. `(a := v)` assigns `a` and is the value.
Nothing is cached here.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from ..frozen import frozen
from ..ir import nodes as n
from ..errors import KernelCompileError
from .context import LoweringHost, PyValue
from .lower_expr import Value, describe
from .lists import make_list
from .vectors import TupleValue, VecValue

_UNBOUND = object()
COMPREHENSION_SOURCES = ("a comprehension in a kernel is unrolled while compiling: it iterates "
                         "over something of a length known at compile time (range(n) of a "
                         "constant n, a tuple, a vector, a matrix's rows, jr.static(...))")


@frozen
class DictValue:
    """A dict built in a kernel whose values are not all known at compile time: its keys are
    compile-time values (in insertion order), its values any values."""
    keys: tuple[Any, ...]
    values: tuple[Any, ...]

    @property
    def description(self) -> str:
        return f"a dict with run-time values (keys {list(self.keys)!r})"[:100]

    def get(self, key: Any) -> Any:
        for k, v in zip(self.keys, self.values):
            if k == key:
                return v
        raise KeyError(key)


class RunTimeKey:
    """A dict key that is a run-time value (`{x[j]: ... for j in range(4)}`): as in Taichi,
    where such a key is an expression object, it equals only itself, so the dict keeps one
    entry per evaluation and only iterating it (`keys()`, `values()`, `items()`) finds it."""
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<run-time key>"


def key_value(k: Any) -> Any:
    """A dict key as a value in the kernel: the run-time value of a RunTimeKey, else the
    constant."""
    return k.value if isinstance(k, RunTimeKey) else PyValue(k)


@frozen
class DictMethod:
    """`d.keys`, `d.values` or `d.items` of a DictValue, waiting for its call."""
    dict: DictValue
    name: str

    def result(self) -> Any:
        d = self.dict
        if self.name == "keys":
            return make_list([key_value(k) for k in d.keys], False)
        if self.name == "values":
            return make_list(list(d.values), False)
        return make_list([make_list([key_value(k), v], False)
                          for k, v in zip(d.keys, d.values)], False)


class ComprehensionLowering(LoweringHost):
    def dict_of(self, pairs: list[tuple[Any, Any]], node: ast.expr) -> DictValue | PyValue:
        """The dict of (compile-time key, value) pairs, later keys replacing earlier ones: a
        Python dict when every value is known at compile time; run-time values are read
        here, once (as Python evaluates a dict display)."""
        merged: dict[Any, Any] = {}
        for k, v in pairs:
            merged[k] = v
        if all(isinstance(v, PyValue) for v in merged.values()) and not any(
                isinstance(k, RunTimeKey) for k in merged):
            return PyValue({k: v.obj for k, v in merged.items()})
        return DictValue(tuple(merged), tuple(self.snapshot(v, node) for v in merged.values()))

    def assign_local(self, target: ast.Name, v: Any, node: ast.AST,
                     declared: Any = None) -> None:
        """`d = {...}`: the name is the dict itself (its run-time values were read when it
        was built); anything else is assigned as `lower_stmt.py` does."""
        if isinstance(v, DictValue) and declared is None:
            self.scope.bindings[target.id] = v
            self.mark_assigned(target.id)
            return
        super().assign_local(target, v, node, declared)  # type: ignore[misc]

    def expr_ListComp(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> Value:
        items: list[Value] = []
        self.unroll_generators(node, node.generators, lambda: items.append(self.expr(node.elt)))
        return self.sequence_value(node.elt, items, set if isinstance(node, ast.SetComp)
                                   else list)

    expr_GeneratorExp = expr_SetComp = expr_ListComp

    def expr_DictComp(self, node: ast.DictComp) -> Any:
        pairs: list[tuple[Any, Any]] = []
        self.unroll_generators(node, node.generators, lambda: pairs.append(
            (self.dict_key(node.key), self.expr(node.value))))
        return self.dict_of(pairs, node)

    def expr_Dict(self, node: ast.Dict) -> Any:
        pairs: list[tuple[Any, Any]] = []
        for key, value in zip(node.keys, node.values):
            if key is None:                          # {**other, ...}
                other = self.expr(value)
                if isinstance(other, DictValue):
                    pairs += list(zip(other.keys, other.values))
                elif isinstance(other, PyValue) and isinstance(other.obj, dict):
                    pairs += [(k, PyValue(v)) for k, v in other.obj.items()]
                else:
                    raise self.err(value, f"** in a dict takes a dict, got {describe(other)}")
                continue
            pairs.append((self.dict_key(key), self.expr(value)))
        return self.dict_of(pairs, node)

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Value:
        """`(a := v)`: v assigned to the local `a` (as `a = v` would), then read back."""
        self.assign_target(node.target, self.expr(node.value), node)
        return self.expr(ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target))

    def repeated_display(self, node: ast.BinOp) -> Value | None:
        """`[a, b] * n` or `n * (a, b)` of a list or tuple display and a compile-time int:
        the display's items repeated n times, as Python (and Taichi) do (each item is read
        once); None when the other operand is not a compile-time int (then `*` multiplies
        element-wise, as for any vector)."""
        seq, count = (node.left, node.right) if isinstance(
            node.left, (ast.List, ast.Tuple)) else (node.right, node.left)
        assert isinstance(seq, (ast.List, ast.Tuple))
        if isinstance(count, (ast.List, ast.Tuple)):
            return None
        k = self.expr(count)
        if not (isinstance(k, PyValue) and isinstance(k.obj, int)
                and not isinstance(k.obj, bool)):
            return None
        if len(seq.elts) * max(k.obj, 0) > 4096:
            raise self.err(node, "constant sequence is too long (more than 4096 items)")
        items = [self.snapshot(self.expr(e), e) for e in seq.elts] * max(k.obj, 0)
        if all(isinstance(i, PyValue) for i in items):
            return PyValue(tuple(i.obj for i in items))  # type: ignore[union-attr]
        shown = type(seq)(elts=list(seq.elts) * max(k.obj, 0), ctx=ast.Load())
        return self.vec_literal(ast.copy_location(shown, seq), items)

    def dict_key(self, node: ast.expr) -> Any:
        key = self.expr(node)
        if isinstance(key, (n.Expr, VecValue)):   # Taichi's key is the expression object:
            return RunTimeKey(self.snapshot(key, node))        # it equals only itself
        if not isinstance(key, PyValue):
            raise self.err(node, f"a dict key must be a number or a compile-time value, got "
                           f"{describe_any(key)}")
        try:
            hash(key.obj)
        except TypeError:
            raise self.err(node, f"unhashable dict key {describe(key.obj)}") from None
        return key.obj

    def dict_method(self, d: DictValue, name: str) -> PyValue:
        """`d.keys`, `d.values`, `d.items` of a dict with run-time values, for its call."""
        return PyValue(DictMethod(d, name))

    def dict_item(self, d: DictValue | PyValue, node: ast.Subscript) -> Value:
        """`d[key]` of a dict (a DictValue, or a Python dict known at compile time), the key
        known at compile time."""
        key = self.expr(node.slice)
        if not isinstance(key, PyValue):
            raise self.err(node.slice, "a dict in a kernel is indexed by a key known at compile "
                           "time")
        try:
            return d.get(key.obj) if isinstance(d, DictValue) else PyValue(d.obj[key.obj])
        except (KeyError, TypeError):
            raise self.err(node.slice, f"key {key.obj!r} is not in the dict") from None

    def unroll_generators(self, node: ast.expr, generators: list[ast.comprehension],
                          body: Callable[[], None]) -> None:
        """`body()` once for each combination of the generators' items that passes their
        conditions, with the targets bound; the names are the comprehension's own (Python 3):
        afterwards they mean what they meant before."""
        if not generators:
            body()
            return
        gen, rest = generators[0], generators[1:]
        if gen.is_async:
            raise self.err(node, "async comprehensions are not supported in kernels")
        items = self.comprehension_items(gen.iter)
        names = [t.id for t in ast.walk(gen.target) if isinstance(t, ast.Name)]
        saved = {k: self.scope.bindings.get(k, _UNBOUND) for k in names}
        try:
            for item in items:
                self.bind_target(gen.target, item)
                if all(self.static_condition(c) for c in gen.ifs):
                    self.unroll_generators(node, rest, body)
        finally:
            for k, v in saved.items():
                if v is _UNBOUND:
                    self.scope.bindings.pop(k, None)
                else:
                    self.scope.bindings[k] = v

    def comprehension_items(self, it: ast.expr) -> list[Value]:
        """The items a comprehension's `for` iterates over, known in number at compile time."""
        try:
            v = self.compile_time(it)
        except KernelCompileError as exc:      # range(i) of a run-time i
            if "needs a value known at compile time" not in str(exc):
                raise
            raise self.err(it, COMPREHENSION_SOURCES + ", got a range or call of run-time "
                           "values") from None
        if isinstance(v, VecValue):
            return [v.row(k) if len(v.shape) == 2 else v.items[k] for k in range(v.shape[0])]
        if isinstance(v, TupleValue):
            return list(v.items)
        if isinstance(v, DictValue):
            return [key_value(k) for k in v.keys]
        if isinstance(v, PyValue) and not isinstance(v.obj, (str, bytes)):
            try:
                return [PyValue(x) for x in v.obj]
            except TypeError:
                pass
        raise self.err(it, f"{COMPREHENSION_SOURCES}, got {describe_any(v)}")

    def bind_target(self, target: ast.expr, item: Value) -> None:
        if isinstance(target, ast.Name):
            self.scope.bindings[target.id] = self.snapshot(item, target)
            return
        if not isinstance(target, (ast.Tuple, ast.List)):
            raise self.err(target, "a comprehension's target is a name or a tuple of names")
        parts: list[Any]
        if isinstance(item, PyValue) and isinstance(item.obj, (tuple, list)):
            parts = [PyValue(x) for x in item.obj]
        elif isinstance(item, (TupleValue, VecValue)) and len(getattr(item, "shape", (0,))) < 2:
            parts = list(item.items)
        else:
            raise self.err(target, f"cannot unpack {describe_any(item)}")
        if len(parts) != len(target.elts):
            raise self.err(target, f"cannot unpack {len(parts)} values into "
                           f"{len(target.elts)} targets")
        for t, part in zip(target.elts, parts):
            self.bind_target(t, part)

    def static_condition(self, cond: ast.expr) -> bool:
        v = self.expr(cond)
        if not isinstance(v, PyValue):
            raise self.err(cond, "a comprehension's `if` in a kernel must be known at compile "
                           "time (the comprehension is unrolled while compiling)")
        return bool(v.obj)

    def sequence_value(self, elt: ast.expr, items: list[Value], kind: type) -> Value:
        """The value of a comprehension's items: a Python list (set) of compile-time values,
        else a vector, a matrix or a tuple of values (as a list display of them is)."""
        if all(isinstance(i, PyValue) for i in items):
            return PyValue(kind(i.obj for i in items))  # type: ignore[union-attr]
        shown = ast.List(elts=[elt] * len(items), ctx=ast.Load())
        return self.vec_literal(ast.copy_location(shown, elt), items)


def describe_any(v: Any) -> str:
    if isinstance(v, PyValue):
        return describe(v.obj)
    if isinstance(v, n.Expr):
        return f"a run-time {v.dtype.name} value"
    return describe(v)
