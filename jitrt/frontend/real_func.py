"""`jr.real_func`: functions compiled once per kernel as functions of their own (not inlined).

Stage: frontend (a mixin of the lowering visitor). A real function's parameters are typed:
a dtype or vector/matrix type is passed by value (converted, as Taichi converts), `jr.ref(dt)`
by value and copied back into the caller's local when the call returns, and a field, ndarray
(`jr.types.ndarray(...)`, which must be the kernel's own ndarray argument) or other
`jr.template()` value is compiled in. Each distinct set of compile-time arguments and value
types is one instance, an `n.RealFunc` of the kernel whose body is lowered once (serial code:
its loops never become tasks; `return` may appear anywhere, inside loops too). A call is an
`n.Call` statement whose results land in fresh locals; a call of an instance being lowered
(recursion) refers to it by name, so recursion compiles to a recursive LLVM function
(`codegen/real_funcs.py`). The results: one scalar per dtype of the return annotation (a
dtype, a vector/matrix type, a struct type, or a tuple of those); a struct parameter is passed
as its flattened members and read as a struct in the body. Caches nothing beyond the compile
context.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any, Callable

from .. import dtypes
from ..dtypes import DataType
from ..errors import KernelSyntaxError, KernelTypeError
from ..ir import nodes as n
from ..linalg import MatrixType, StructType
from ..types import NdarrayType, RefType
from ..frozen import record
from .context import LocalVar, LoweringHost, NoValue, PyValue, Scope, function_globals
from .func import Func
from .lower_expr import Value, describe, is_number
from .struct_values import StructValue, flatten_struct, struct_dtypes, unflatten_struct
from .vectors import TupleValue, VecValue, VecVar


class RealFuncDef(Func):
    """A `@jr.real_func`: every parameter is annotated (Taichi's rule), checked here, but a
    method's first parameter `self` (a `@jr.data_oriented` class's real function, as in
    Taichi): that one is compile-time, as if annotated `jr.template()`."""

    def __init__(self, fn: Callable) -> None:
        super().__init__(fn)
        names = list(inspect.signature(fn).parameters)
        if names and names[0] == "self" and "self" not in self.param_types and \
                "." in fn.__qualname__:
            self.template_params = self.template_params | {"self"}
        for name in names:
            if name not in self.param_types and name not in self.template_params:
                code = fn.__code__
                raise KernelSyntaxError(
                    f"@jr.real_func {fn.__qualname__}: parameter '{name}' must be type "
                    "annotated (a dtype, a vector/matrix type, jr.ref(dt), "
                    "jr.types.ndarray(...) or jr.template())", code.co_filename,
                    code.co_firstlineno)

    def __repr__(self) -> str:
        return f"<jitrt real_func {self.fn.__qualname__}>"


@record
class RealSig:
    """One instance of a real function: its IR name, return kinds and result types."""
    name: str
    kinds: tuple[Any, ...]          # the resolved return annotation, flattened to a tuple
    rets: tuple[DataType, ...]
    is_tuple: bool


class RealFuncLowering(LoweringHost):
    real_ret: RealSig | None
    ref_params: list[LocalVar]
    resolve_kind: Callable[[Any], Any]          # (lower_return.py)

    def call_real(self, func: RealFuncDef, node: ast.Call, bound_self: Any) -> Value:
        sig = inspect.signature(func.fn)
        args = ([PyValue(bound_self)] if bound_self is not None else []) + \
            [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.err(node, f"calling @jr.real_func '{func.name}': {exc}") from None
        bound.apply_defaults()
        sources = sig.bind(*([None] if bound_self is not None else []), *node.args,
                           **{k.arg: k.value for k in node.keywords if k.arg}).arguments
        key: list[Any] = [func]
        values: list[n.Expr] = []
        plan: list[tuple[str, Any, Any]] = []      # (name, how, binding info)
        refs: list[LocalVar] = []
        for name, v in bound.arguments.items():
            if not isinstance(v, (PyValue, n.ArrayRef, n.Expr, VecValue, StructValue)) and \
                    type(v).__name__ != "StructElement":
                v = PyValue(v)
            how, info = self.real_param(func, name, v, sources.get(name), node)
            if how == "value":
                values += info
                key.append((name, tuple(e.dtype for e in info)))
                if isinstance(v, StructValue) or type(v).__name__ == "StructElement":
                    kind = self.resolve_kind(func.param_types.get(name))
                    plan.append((name, "struct", (kind, tuple(e.dtype for e in info))))
                elif isinstance(v, VecValue):
                    plan.append((name, "vector", (v.shape, tuple(e.dtype for e in info))))
                else:
                    plan.append((name, "scalar", info[0].dtype))
            elif how == "ref":
                values.append(n.Local(info.ir_name, info.dtype, self.loc(node)))
                refs.append(info)
                key.append((name, "ref", info.dtype))
                plan.append((name, "ref", info.dtype))
            else:
                key.append((name, compile_time_key(info)))
                plan.append((name, "static", info))
        instance = self.ctx.real_sigs.get(tuple(key))
        if instance is None:
            instance = self.lower_real(func, tuple(key), plan, len(refs), node)
        return self.emit_call(instance, values, refs, node)

    def real_param(self, func: RealFuncDef, name: str, v: Value, source: Any,
                   node: ast.Call) -> tuple[str, Any]:
        """How argument `v` of parameter `name` is passed: ("value", [exprs]), ("ref",
        caller's LocalVar) or ("static", the compile-time value)."""
        kind = self.resolve_kind(func.param_types.get(name))
        where = f"argument '{name}' of @jr.real_func '{func.name}'"
        if isinstance(kind, NdarrayType):
            if not isinstance(v, n.ArrayRef):
                raise self.err(node, f"Expected ndarray in the kernel argument for argument "
                               f"{name} of @jr.real_func '{func.name}' (an ndarray parameter "
                               f"of the kernel), got {describe(v)}", KernelTypeError)
            return "static", v
        if isinstance(kind, RefType):
            binding = self.scope.bindings.get(source.id) if isinstance(source, ast.Name) \
                else None
            if not isinstance(binding, LocalVar):
                raise self.err(node, f"{where} is a jr.ref: pass a scalar local variable")
            return "ref", binding
        if isinstance(kind, DataType):
            if isinstance(v, VecValue) or not (is_number(v) or isinstance(v, n.Expr)):
                raise self.err(node, f"{where} is a {kind.name}, got {describe(v)}",
                               KernelTypeError)
            return "value", [self.cast(self.value(node, v), kind)]
        if isinstance(kind, MatrixType):
            if not isinstance(v, VecValue) or v.shape != kind.shape:
                raise self.err(node, f"{where} is a {kind!r}, got {describe(v)}",
                               KernelTypeError)
            dt = kind.scalar(self.ctx.default_fp, self.ctx.default_ip)
            return "value", [self.cast(self.value(node, x), dt) for x in v.items]
        if isinstance(kind, StructType):
            if type(v).__name__ == "StructElement":
                v = self.struct_element_value(v, node)  # type: ignore[attr-defined]
            if not isinstance(v, StructValue) or v.kind != kind:
                raise self.err(node, f"{where} is a {kind!r}, got {describe(v)}",
                               KernelTypeError)
            dts = struct_dtypes(kind, self.ctx)
            return "value", [self.cast(self.value(node, x), dt)
                             for x, dt in zip(flatten_struct(v), dts)]
        if isinstance(v, (n.Expr, VecValue)):
            raise self.err(node, f"{where} is compiled in (jr.template()): it takes a field, "
                           f"an ndarray or a constant, got a run-time {describe(v)}")
        return "static", v

    def lower_real(self, func: RealFuncDef, key: tuple, plan: list[tuple[str, Any, Any]],
                   n_refs: int, node: ast.Call) -> RealSig:
        """Lower a new instance's body into an `n.RealFunc` (registered first: recursion)."""
        kinds, is_tuple = self.return_kinds(func, node)
        rets = tuple(dt for k in kinds for dt in kind_dtypes(k, self.ctx))
        ir_name = f"{func.name}_{len(self.ctx.real_sigs)}"
        instance = RealSig(ir_name, kinds, rets, is_tuple)
        self.ctx.real_sigs[key] = instance
        prefix = self.ctx.fresh_prefix(func.name)
        params: list[tuple[str, DataType]] = []
        bindings: dict[str, Any] = {}
        ref_vars: list[LocalVar] = []
        struct_params: list[str] = []
        for name, how, info in plan:
            if how == "static":
                bindings[name] = info
                continue
            if how == "vector":
                shape, dts = info
                comps = tuple(LocalVar(f"{prefix}{name}${k}", dt) for k, dt in enumerate(dts))
                bindings[name] = VecVar(shape, comps)
            elif how == "struct":      # the struct of its parameters, copied to a local below
                kind, dts = info
                struct_params.append(name)
                comps = tuple(LocalVar(f"{prefix}{name}${k}", dt) for k, dt in enumerate(dts))
                bindings[name] = unflatten_struct(kind, [n.Local(c.ir_name, c.dtype)
                                                         for c in comps])
            else:
                var = LocalVar(prefix + name, info)
                bindings[name] = var
                comps = (var,)
                if how == "ref":
                    ref_vars.append(var)
            for c in comps:
                self.ctx.local_types[c.ir_name] = c.dtype
                params.append((c.ir_name, c.dtype))
        src = func.source()
        self.ctx.used_funcs[func.key] = src.text
        self.ctx.origins[func.key] = src.place
        sub = self.body_lowerer(src, Scope(bindings, function_globals(func.fn), prefix,
                                           frozenset()))
        sub.real_ret, sub.ref_params = instance, ref_vars
        body = src.tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        self.ctx.inline_depth += 1
        try:
            for name in struct_params:    # a struct parameter is a local: `ray.color = c`
                target = ast.copy_location(ast.Name(id=name, ctx=ast.Store()), src.tree)
                sub.assign_struct_local(target, bindings[name], src.tree)
            sub.stmts(body)
        finally:
            self.ctx.inline_depth -= 1
        loc = self.loc(src.tree)
        zeros = tuple(n.Const(0.0 if dt.is_float else 0, dt, loc) for dt in rets)
        sub.emit(n.FuncRet(zeros + tuple(n.Local(v.ir_name, v.dtype, loc) for v in ref_vars),
                           loc))
        self.ctx.real_funcs.append(n.RealFunc(ir_name, tuple(params), rets + tuple(
            v.dtype for v in ref_vars), tuple(sub.block), loc))
        return instance

    def body_lowerer(self, src: Any, scope: Scope) -> Any:
        """A lowerer for a real function's body: its own block, serial loops."""
        return type(self)(src, self.ctx, scope, False, 0, [])  # type: ignore[call-arg]

    def return_kinds(self, func: RealFuncDef, node: ast.AST) -> tuple[tuple[Any, ...], bool]:
        kind = func.return_type
        if kind is None:
            return (), False
        kinds: tuple[Any, ...] = (kind,)
        is_tuple = isinstance(kind, (tuple, list)) or getattr(kind, "__origin__", None) is tuple
        if is_tuple:
            kinds = tuple(kind) if isinstance(kind, (tuple, list)) else kind.__args__
        resolved = tuple(self.resolve_kind(k) for k in kinds)
        for k in resolved:
            if not isinstance(k, (DataType, MatrixType, StructType)):
                raise self.err(node, f"@jr.real_func '{func.name}' returns {k!r}: a real "
                               "function returns dtypes, vector/matrix types and structs (or "
                               "a tuple of them)")
        return resolved, is_tuple

    def emit_call(self, sig: RealSig, values: list[n.Expr], refs: list[LocalVar],
                  node: ast.Call) -> Value:
        loc = self.loc(node)
        prefix = self.ctx.fresh_prefix(sig.name)
        types = sig.rets + tuple(v.dtype for v in refs)
        outs = tuple(f"{prefix}ret{k}" for k in range(len(types)))
        for name, dt in zip(outs, types):
            self.ctx.local_types[name] = dt
        self.emit(n.Call(sig.name, tuple(values), outs, types, loc))
        for var, out in zip(refs, outs[len(sig.rets):]):
            self.emit(n.Assign(var.ir_name, n.Local(out, var.dtype, loc), loc))
        items: list[Any] = []
        k = 0
        for kind in sig.kinds:
            count = len(kind_dtypes(kind, self.ctx))
            locs = [n.Local(outs[k + j], types[k + j], loc) for j in range(count)]
            items.append(VecValue(kind.shape, tuple(locs)) if isinstance(kind, MatrixType)
                         else unflatten_struct(kind, list(locs)) if isinstance(
                             kind, StructType) else locs[0])
            k += count
        if not sig.kinds:
            return PyValue(NoValue(sig.name))
        return TupleValue(tuple(items)) if sig.is_tuple else items[0]

    def real_return(self, node: ast.Return) -> None:
        """`return v` in a real function's body: converted to the annotation, anywhere."""
        sig = self.real_ret
        assert sig is not None
        loc = self.loc(node)
        values: list[n.Expr] = []
        if node.value is not None:
            if not sig.kinds:
                raise self.err(node, f"@jr.real_func '{sig.name.rsplit('_', 1)[0]}': its "
                               "return value must be annotated (e.g. -> jr.f32)")
            v = self.expr(node.value)
            parts = v.items if sig.is_tuple and isinstance(v, (TupleValue, VecValue)) else \
                tuple(PyValue(x) for x in v.obj) if sig.is_tuple and isinstance(
                    v, PyValue) and isinstance(v.obj, tuple) else (v,)
            if len(parts) != len(sig.kinds):
                raise self.err(node.value, f"returns {len(parts)} value(s), annotated "
                               f"{len(sig.kinds)}")
            for kind, part in zip(sig.kinds, parts):
                values += self.flatten_return(kind, part, node.value)
        elif sig.kinds:
            raise self.err(node, "a real function annotated with a return type must return "
                           "a value")
        values += [n.Local(v.ir_name, v.dtype, loc) for v in self.ref_params]
        self.emit(n.FuncRet(tuple(values), loc))
        self.scope.assigned = None            # nothing after a return runs

    def flatten_return(self, kind: Any, v: Value, node: ast.AST) -> list[n.Expr]:
        if isinstance(kind, StructType):
            if type(v).__name__ == "StructElement":
                v = self.struct_element_value(v, node)  # type: ignore[attr-defined]
            if not isinstance(v, StructValue) or v.kind != kind:
                raise self.err(node, f"returns {describe(v)}, annotated {kind!r}",
                               KernelTypeError)
            return [self.typed(x, dt, node, "return") for x, dt in
                    zip(flatten_struct(v), struct_dtypes(kind, self.ctx))]
        if isinstance(kind, DataType):
            if isinstance(v, (VecValue, TupleValue)):
                raise self.err(node, f"returns {describe(v)}, annotated {kind.name}",
                               KernelTypeError)
            return [self.typed(v, kind, node, "return")]
        if not isinstance(v, VecValue) or v.shape != kind.shape:
            raise self.err(node, f"returns {describe(v)}, annotated {kind!r}", KernelTypeError)
        dt = kind.scalar(self.ctx.default_fp, self.ctx.default_ip)
        return [self.typed(x, dt, node, "return") for x in v.items]


def kind_dtypes(kind: Any, ctx: Any) -> tuple[DataType, ...]:
    if isinstance(kind, DataType):
        return (kind,)
    if isinstance(kind, StructType):
        return struct_dtypes(kind, ctx)
    count = 1
    for d in kind.shape:
        count *= d
    return (kind.scalar(ctx.default_fp, ctx.default_ip),) * count


def compile_time_key(v: Any) -> Any:
    """What identifies a compile-time argument in an instance's key."""
    if isinstance(v, n.ArrayRef):
        return ("ndarray", v.arg, v.grad)
    obj = v.obj if isinstance(v, PyValue) else v
    if isinstance(obj, (int, float, bool, str)) or obj is None:
        return ("const", type(obj).__name__, repr(obj))
    return ("object", id(obj))


__all__ = ["RealFuncDef", "RealFuncLowering", "dtypes"]
