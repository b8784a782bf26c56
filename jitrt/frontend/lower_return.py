"""AST -> IR for the returns of an inlined `@jr.func`: its declared types and early returns.

Stage: frontend (part of the call family of the lowering visitor). A func's annotations
convert as Taichi's casts do: a by-value parameter annotated `jr.i32` (or `int`) given 1.5
holds 1, and a func annotated `-> jr.i32` returning 2.7 gives 2 (`returned`). A func whose
only `return` is its last statement gives that expression as the call's value (so loop bounds
stay traceable through it). A func with other returns (inside `if`, static or not, or inside
`jr.static(...)` loops) is lowered with a `FuncReturn`:
- a return reached at compile time (not inside a run-time `if`) ends the lowering of the body
  there, as in Taichi: what follows it is never compiled;
- a return inside a run-time `if` stores its value into a result local and sets a `done` flag
  local; every statement after that `if` runs under `if not done` (`guarded`);
- without a return annotation the first return fixes the result's type, as a local's first
  assignment does; with one, every return converts to it;
- a return inside a run-time loop is refused (Taichi refuses it too), and so is a func that
  returns a value on some paths and can reach its end on others.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from .. import dtypes
from ..errors import KernelSyntaxError
from ..ir import nodes as n
from ..linalg import MatrixType
from ..frozen import record
from .context import LocalVar, LoweringHost, NoValue, PyValue
from .lower_expr import Value, is_number
from .vectors import TupleValue, VecValue, VecVar


@record
class FuncReturn:
    """The return state of one inlined call of a func with early returns."""
    name: str                  # the func's name (for messages)
    declared: Any              # the resolved return annotation: DataType, MatrixType or None
    done: str                  # the IR name of the 0/1 local set by a run-time return
    depth_base: int            # the lowerer's depth and loop nesting at the func's entry
    loop_base: int
    value: Any = None          # the call's value: a compile-time return's value, or a local
    var: Any = None            # LocalVar | VecVar: where run-time returns store
    has_value: bool | None = None
    stopped: bool = False      # every path to this point has returned
    pending: bool = False      # a run-time return may have run: later statements are guarded
    kernel: bool = False       # a kernel's returns (compile-time ones only, as in Taichi)
    node: Any = None           # the last return statement met

    def take_stop(self) -> bool:
        stopped, self.stopped = self.stopped, False
        return stopped


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def has_early_return(body: list[ast.stmt]) -> bool:
    """Whether a func body returns anywhere but in its last statement. Only statements are
    walked (a `return` is never inside an expression): Genesis's funcs are mostly
    expressions, and walking every node of each took a sixth of its kernels' lowering."""
    last = body[-1] if body and isinstance(body[-1], ast.Return) else None
    stack: list[ast.AST] = [s for s in body if s is not last]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, _BLOCKS))
    return False


def continues(body: list[ast.stmt], jump: type = ast.Continue) -> bool:
    """Whether `body` has a `continue` (or a `jump`: ast.Break) of its own loop (not one of a
    loop nested in it)."""
    for stmt in body:
        if isinstance(stmt, jump):
            return True
        if isinstance(stmt, (ast.For, ast.While, ast.FunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "handlers", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and continues(inner, jump):
                return True
    return False


class ReturnLowering(LoweringHost):
    func_return: FuncReturn | None

    def resolve_kind(self, kind: Any) -> Any:
        """An annotation with `int`/`float` read as the program's default types, `bool` as
        `u1` (a byte here), as Taichi's `-> bool`."""
        if kind is bool:
            return dtypes.u8
        return self.ctx.default_ip if kind is int else self.ctx.default_fp if kind is float \
            else kind

    def returned(self, v: Value, kind: Any, node: ast.AST, func_name: str) -> Value:
        """`v` converted to a func's return annotation `kind` (None or a type jitrt does not
        convert to, such as a tuple: unchanged), as Taichi's cast: `-> jr.i32` truncates."""
        kind = self.resolve_kind(kind)
        # `return s[i]` of a struct field: the struct's value, read here (the indices are
        # the func's own names); a struct converted to a declared struct type of its members
        if type(v).__name__ == "StructElement":
            v = self.struct_element_value(v, node)  # type: ignore[attr-defined]
        if type(kind).__name__ == "StructType" and type(v).__name__ == "StructValue":
            return self.converted_struct(kind, v, node)  # type: ignore[attr-defined]
        if isinstance(kind, dtypes.DataType):
            if isinstance(v, VecValue):
                # Taichi casts what a func returns to its scalar annotation: a vector's
                # elements each (eulerfluid2d.py's `-> ti.f32` returning `vf[i, j]`)
                return self.vec_cast(v, kind, node)  # type: ignore[attr-defined]
            if isinstance(v, TupleValue):
                raise self.err(node, f"@jr.func '{func_name}' is annotated to return "
                               f"{kind.name}, got a tuple")
            if isinstance(v, PyValue) and is_number(v):
                return self.const(v.obj, node, kind)
            return self.cast(self.value(node, v), kind)
        if isinstance(kind, MatrixType):
            if not isinstance(v, VecValue) or v.shape != kind.shape:
                got = f"shape {v.shape}" if isinstance(v, VecValue) else "a scalar"
                raise self.err(node, f"@jr.func '{func_name}' is annotated to return shape "
                               f"{kind.shape}, got {got}")
            return self.vec_cast(v, kind.scalar(self.ctx.default_fp, self.ctx.default_ip), node)
        return v

    def start_returns(self, func_name: str, declared: Any, loc_node: ast.AST) -> FuncReturn:
        """The return state of a call of a func with early returns; its `done` flag starts 0."""
        done = self.ctx.fresh_prefix(func_name) + "done"
        self.ctx.local_types[done] = dtypes.i32
        loc = self.loc(loc_node)
        self.emit(n.Assign(done, n.Const(0, dtypes.i32, loc), loc))
        fr = FuncReturn(func_name, self.resolve_kind(declared), done, self.depth,
                        len(self.loops))
        self.func_return = fr
        return fr

    def finish_returns(self, fr: FuncReturn, node: ast.AST) -> Value:
        """The call's value once the body is lowered."""
        if fr.has_value and not fr.stopped:
            raise self.err(node, f"@jr.func '{fr.name}' returns a value on some paths but may "
                           "reach its end without a return; end it with a return")
        if not fr.has_value:
            return PyValue(NoValue(fr.name))
        if isinstance(fr.var, VecVar):
            return self.vec_local_value(fr.var, node)
        if isinstance(fr.var, LocalVar):
            return n.Local(fr.var.ir_name, fr.var.dtype, self.loc(node))
        return fr.value

    def stmt_Return(self, node: ast.Return) -> None:
        if getattr(self, "real_ret", None) is not None:   # in a jr.real_func (real_func.py)
            self.real_return(node)  # type: ignore[attr-defined]
            return
        fr = self.func_return
        if fr is None:
            nested = not any(node is s for s in self.src.tree.body)   # under an if or a loop
            raise self.err(node, ("Return inside non-static if/for is not supported: " if nested
                                  else "") + "return is only allowed as the last statement of "
                           "a kernel")
        if any(kind != "static" for kind in self.loops[fr.loop_base:]):
            raise self.err(node, "Return inside non-static if/for is not supported: a "
                           f"return inside a run-time loop of '{fr.name}' (as in Taichi); set a "
                           "flag and break, or unroll the loop with jr.static(range(...))",
                           KernelSyntaxError)
        if fr.kernel and self.depth > fr.depth_base:
            raise self.err(node, "Return inside non-static if/for is not supported: a "
                           "kernel returns only where that is known at compile time (its "
                           "body, jr.static ifs and loops), as in Taichi; store the value in "
                           "a local and return it at the end")
        fr.node = node
        has_value = node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None and fr.kernel)
        if fr.has_value is not None and fr.has_value != has_value:
            raise self.err(node, f"@jr.func '{fr.name}' returns a value in some returns and "
                           "none in others")
        fr.has_value = has_value
        dynamic = self.depth > fr.depth_base
        if has_value:
            assert node.value is not None
            v = self.returned(self.expr(node.value), fr.declared, node.value, fr.name)
            if fr.var is None and not dynamic and not fr.pending:
                fr.value = v                     # the one return that runs: no local needed
            else:
                self.store_result(fr, v, node.value)
        loc = self.loc(node)
        if dynamic:
            self.emit(n.Assign(fr.done, n.Const(1, dtypes.i32, loc), loc))
            fr.pending = True
        fr.stopped = True
        self.scope.assigned = None            # nothing after a return runs

    def store_result(self, fr: FuncReturn, v: Value, node: ast.AST) -> None:
        """A return's value stored into the call's result local (made by the first one)."""
        loc = self.loc(node)
        if isinstance(v, TupleValue) or (isinstance(v, PyValue) and not is_number(v)):
            raise self.err(node, f"@jr.func '{fr.name}' returns inside a run-time `if`, so "
                           "its result is a local: return one number or one vector/matrix")
        if fr.var is None:
            if isinstance(v, VecValue):
                fr.var = self.new_vec_var(self.ctx.fresh_prefix(fr.name) + "result", v, node)
                return
            e = self.value(node, v)
            fr.var = LocalVar(self.ctx.fresh_prefix(fr.name) + "result", e.dtype)
            self.ctx.local_types[fr.var.ir_name] = e.dtype
            self.emit(n.Assign(fr.var.ir_name, e, loc))
            return
        if isinstance(fr.var, VecVar) != isinstance(v, VecValue) or (
                isinstance(v, VecValue) and v.shape != fr.var.shape):
            raise self.err(node, f"the returns of @jr.func '{fr.name}' give values of "
                           "different shapes")
        if isinstance(v, VecValue):
            for c, x in zip(fr.var.components, v.items):
                self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, node, "return"), loc))
            return
        self.emit(n.Assign(fr.var.ir_name, self.typed(v, fr.var.dtype, node, "return"), loc))

    def guarded(self, lower: Callable[[], None], node: ast.AST) -> None:
        """What `lower()` emits, run only when no earlier run-time return did (`done` is 0)."""
        fr = self.func_return
        assert fr is not None
        fr.pending = False
        body = self.lower_with(lower)
        fr.pending = True
        loc = self.loc(node)
        if body:
            not_done = n.Binary("==", n.Local(fr.done, dtypes.i32, loc),
                                n.Const(0, dtypes.i32, loc), dtypes.i32, loc)
            self.emit(n.If(not_done, body, (), loc))
