"""AST -> IR for `@jr.func` calls: the func's body inlined at the call site.

Stage: frontend (the inlining part of the call family, `lower_call.py`). The call's arguments
are bound to the func's parameters: parameters annotated `jr.template()` by reference (fields,
ndarrays, vector locals), the others copied into fresh locals converted to their annotation
(a struct by value, as a copy), under a per-call-site prefix; the body is lowered in a scope of
its own, and the expression of its final `return` becomes the call's value (so bounds stay
traceable through it); a func with other returns goes through `lower_return.py`. Caches
nothing.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any

from ..dtypes import DataType
from ..errors import KernelCompileError, KernelSyntaxError, KernelTypeError, call_mismatch
from ..ir import nodes as n
from ..linalg import MatrixType
from ..types import NdarrayType
from .context import function_globals, LocalVar, LoweringHost, NoValue, PyValue, Scope
from .lower_expr import Value, is_number
from .lower_return import has_early_return
from .vectors import VecValue, VecVar

MAX_INLINE_DEPTH = 24
NO_SELF = object()           # inline(): no object bound to the first parameter


class InlineLowering(LoweringHost):
    def inline(self, func: Any, node: ast.Call, bound_self: Any = NO_SELF) -> Value:
        if self.ctx.inline_depth >= MAX_INLINE_DEPTH:
            raise self.err(node, f"@jr.func '{func.name}' nests deeper than "
                           f"{MAX_INLINE_DEPTH} calls (recursion is not supported)")
        bindings, prefix = self.bind_call(func, node, bound_self)
        sub = self.sub_lowerer(func.source(), Scope(bindings, function_globals(func.fn), prefix))
        # a struct passed by value (a struct method's `self` too) is a copy, as in Taichi:
        # `s.x = v` in the func changes the copy only
        for name, v in list(bindings.items()):
            if type(v).__name__ == "StructValue":
                sub.assign_struct_local(ast.copy_location(
                    ast.Name(id=name, ctx=ast.Store()), node), v, node)
        src = func.source()
        self.ctx.used_funcs[func.key] = src.text
        self.ctx.origins[func.key] = src.place
        body = func.source().tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # docstring
        self.check_returns_value(func, sub, body, node)
        self.ctx.inline_depth += 1
        try:
            value = self.inline_body(func, sub, body, node)
        except KernelCompileError as exc:        # the call joins the error's excerpt
            exc.called_from(self.src.frame(node))
            raise
        finally:
            self.ctx.inline_depth -= 1
        # a loop_config the func left pending applies to the caller's next loop (Taichi's
        # loop settings belong to the kernel being built, not to one function)
        self.serialize_next, self.block_dim_next = sub.serialize_next, sub.block_dim_next
        return value

    def check_returns_value(self, func: Any, sub: Any, body: list[ast.stmt],
                            node: ast.Call) -> None:
        """A func annotated with a return type returns a value on its way out."""
        if func.return_type is None:
            return
        tree = func.source().tree
        if not any(isinstance(x, ast.Return) and x.value is not None for x in ast.walk(tree)):
            raise sub.err(tree, "Function has a return type but does not have a return "
                          f"statement: @jr.func '{func.name}' is annotated to return a value",
                          KernelSyntaxError)
        last = body[-1] if body else None
        if not has_early_return(body) and not (
                isinstance(last, ast.Return) and last.value is not None):
            raise self.err(node, f"Function has a return type but does not have a return "
                           f"statement: @jr.func '{func.name}' is annotated to return "
                           f"{func.return_type!r}")

    def bind_call(self, func: Any, node: ast.Call, bound_self: Any) -> tuple[dict[str, Any], str]:
        """The call's arguments (lowered here, in order) bound to the parameters of `func`
        (defaults applied); the bindings of the function's scope and its fresh prefix."""
        sig = inspect.signature(func.fn)
        first = bound_self if type(bound_self).__name__ in ("StructValue", "StructElement") \
            else PyValue(bound_self)                    # (a struct method's self: as it is)
        args = ([] if bound_self is NO_SELF else [first]) + [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            why = call_mismatch(sig, len(args), list(kwargs)) or str(exc)
            raise self.err(node, f"calling @jr.func '{func.name}': {why}") from None
        bound.apply_defaults()
        sources = sig.bind(*([None] if bound_self is not NO_SELF else []), *node.args,
                           **{k.arg: k.value for k in node.keywords if k.arg}).arguments
        prefix = self.ctx.fresh_prefix(func.name)
        bindings: dict[str, Any] = {}
        self_name = next(iter(sig.parameters)) if bound_self is not NO_SELF else None
        for name, v in bound.arguments.items():
            caller = self.scope.bindings.get(sources[name].id) if isinstance(
                sources.get(name), ast.Name) else None
            if type(v).__name__ == "StructValue":
                # a copy (below), or a struct local given to a template parameter: by reference
                if name in func.template_params and name != self_name and \
                        type(caller).__name__ == "StructVar":
                    self.share_struct_local(caller, name, bindings)  # type: ignore[attr-defined]
                else:
                    bindings[name] = v
                continue
            if type(v).__name__ == "StructElement":   # `x[i]` of a struct field: by
                bindings[name] = self.pinned_element(  # type: ignore[attr-defined]
                    v, bindings) if name in func.template_params and name != self_name else \
                    self.struct_element_value(v, node)  # type: ignore[attr-defined]
                continue                               # reference to a template, else a value
            if not isinstance(v, (PyValue, n.ArrayRef, n.Expr, VecValue)):
                v = PyValue(v)  # a default value
            if name in func.template_params and isinstance(caller, VecVar):
                bindings[name] = caller          # a vector local by reference
                continue
            bindings[name] = self.bind_func_param(func, name, v, prefix, node)
        return bindings, prefix

    def inline_body(self, func: Any, sub: Any, body: list[ast.stmt], node: ast.Call) -> Value:
        """The value of an inlined call of `func`: its `body` lowered by `sub`."""
        src = func.source()
        if has_early_return(body):          # lower_return.py
            fr = sub.start_returns(func.name, func.return_type, src.tree)
            sub.stmts(body)
            return sub.finish_returns(fr, src.tree)
        ret = body[-1] if body and isinstance(body[-1], ast.Return) else None
        for stmt in body[:-1] if ret else body:
            sub.stmt(stmt)
        if ret is None or ret.value is None:
            return PyValue(NoValue(func.name))
        return sub.returned(sub.expr(ret.value), func.return_type, ret.value, func.name)

    def check_array_param(self, kind: Any, name: str, ref: n.ArrayRef, node: ast.AST) -> None:
        """An ndarray given to a func parameter annotated `jr.types.ndarray(dtype=, ndim=)`
        must match it, as Taichi checks (a KernelTypeError with Taichi's phrase "Invalid
        value for argument"); `element_dim=` annotations are not checked."""
        if not isinstance(kind, NdarrayType) or kind.element_dim > 0:
            return
        element = self.element_shape(ref)
        wants = "an ndarray" + (f" of {kind.dtype.name}" if kind.dtype else "") + (
            f" with elements of shape {kind.element_shape}" if kind.element_shape else "")
        got = f"an ndarray of {ref.dtype.name}" + (
            f" with elements of shape {element}" if element else "")
        outer = ref.ndim - len(element)
        ndim = kind.ndim - len(kind.element_shape) if kind.ndim is not None else None
        if (kind.dtype is not None and kind.dtype != ref.dtype) or (
                kind.element_dim == 0 and kind.element_shape != element) or (
                ndim is not None and ndim != outer):
            dims = "" if ndim is None else f", ndim={ndim}"
            raise self.err(node, f"Invalid value for argument {name}: the parameter takes "
                           f"{wants}{dims}; got {got}, ndim={outer}", KernelTypeError)

    def bind_func_param(self, func: Any, name: str, v: Value, prefix: str, node: ast.AST) -> Any:
        """Fields, ndarrays and other compile-time objects are passed by reference; numbers by
        value (copied into a fresh local) unless the parameter is a template, where a local is
        passed by reference (writes reach the caller)."""
        if isinstance(v, n.ArrayRef):
            self.check_array_param(func.param_types.get(name), name, v, node)
            return v
        if isinstance(v, PyValue) and not is_number(v):
            return v
        if isinstance(v, VecValue):        # by value: a fresh local per component
            kind = func.param_types.get(name)
            if isinstance(kind, MatrixType) and kind.shape != v.shape:
                what = f"a Matrix with n {kind.n}" + (f", m {kind.m}" if kind.m else "")
                raise self.err(node, f"argument '{name}' of '{func.name}' is expected to be "
                               f"{what}, but got {v.shape[0]}" + (
                                   f" x {v.shape[1]}" if len(v.shape) == 2 else "") +
                               f" (its annotation is {kind!r})", KernelSyntaxError)
            if isinstance(kind, MatrixType):
                v = self.vec_cast(v, kind.scalar(self.ctx.default_fp, self.ctx.default_ip),
                                  node)
            return self.new_vec_var(prefix + name, v, node)
        if name in func.template_params:
            if isinstance(v, n.Local):
                return LocalVar(v.name, v.dtype)
            if isinstance(v, PyValue):
                return v
            raise self.err(node, f"template parameter '{name}' of '{func.name}' needs a "
                           "field, ndarray, local variable or constant")
        e = self.value(node, v)
        kind = self.resolve_kind(func.param_types.get(name))
        if isinstance(kind, DataType):       # an annotated parameter converts (Taichi's cast)
            e = self.cast(e, kind)
        var = LocalVar(prefix + name, e.dtype)
        self.ctx.local_types[var.ir_name] = e.dtype
        self.emit(n.Assign(var.ir_name, e, self.loc(node)))
        return var
