"""AST -> kernel IR: the lowering visitor and the kernel entry point.

Stage: frontend. `lower_kernel(source, fn, params, template_values, ctx)` turns one kernel
specialization into a `KernelIR`. The visitor is split by node family: `lower_expr`
(expressions), `lower_call` (builtins and func inlining), `lower_stmt` (statements).
Nothing here is cached; the caller caches by specialization.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..errors import KernelSyntaxError
from ..linalg import MatrixType
from ..ir import nodes as n
from .context import RETURN_FIELD, CompileContext, PyValue, Scope, function_globals
from .lists import ListLowering
from .lower_assign import AssignLowering
from .lower_call import CallLowering
from .lower_comprehension import ComprehensionLowering
from .lower_expr import ExprLowering, describe
from .lower_format import FormatLowering
from .lower_logic import LogicLowering
from .lower_pycalls import PyCallLowering
from .lower_return import FuncReturn, ReturnLowering, has_early_return
from .lower_quadrants import QuadrantsLowering
from .lower_simt import SimtLowering
from .lower_tiles import TileLowering
from .lower_loops import LoopLowering
from .lower_stmt import StmtLowering
from .real_func import RealFuncLowering
from .struct_values import StructValueLowering
from .struct_args import compound_params, has_struct, return_items, return_leaves, struct_param
from .source import SourceInfo
from .structs import StructLowering
from .vector_index import VectorIndexing
from .vectors import TupleValue, VecValue, VectorLowering


class FunctionLowerer(LogicLowering, ExprLowering, CallLowering, PyCallLowering,
                      ComprehensionLowering, FormatLowering, ReturnLowering, AssignLowering,
                      StmtLowering, LoopLowering, VectorLowering, VectorIndexing, StructLowering,
                      QuadrantsLowering, RealFuncLowering, StructValueLowering, SimtLowering,
                      TileLowering, ListLowering):
    def __init__(self, src: SourceInfo, ctx: CompileContext, scope: Scope,
                 is_kernel_body: bool = False, depth: int = 0,
                 loops: list[str] | None = None) -> None:
        self.src, self.ctx, self.scope = src, ctx, scope
        self.block: list[n.Stmt] = []
        self.static_depth = 0
        self.depth = depth
        self.loops: list[str] = loops if loops is not None else []
        self.serialize_next = False
        self.block_dim_next = 0
        self.func_return: FuncReturn | None = None    # set while a func's early returns lower
        # names given a new local of another shape in the block being lowered (lower_stmt's
        # `is_new_local`), and the IR name of each such local
        self.rebound: set[str] = set()
        self.ir_names: dict[str, str] = {}
        self.real_ret = None          # in a jr.real_func's body: its signature (real_func.py)
        self.ref_params: list = []    # ... and its jr.ref parameters
        self.static_jump: str | None = None     # a break/continue of the jr.static loop
        self.static_depths: list[int] = []      # self.depth at each enclosing jr.static loop
        self.folded_ifs = 0           # > 0 inside a non-static `if` of a constant condition
        # the kernel's own statement list: a range loop emitted into it is outermost (a
        # parallel task), also when a func called there holds it, as in Taichi
        self.top_block: list[n.Stmt] | None = self.block if is_kernel_body else None

    def sub_lowerer(self, src: SourceInfo, scope: Scope) -> "FunctionLowerer":
        """A lowerer for an inlined func body that emits into this lowerer's current block.
        A func called in the kernel's outermost scope has its own outermost loops parallel,
        as in Taichi and Quadrants (their funcs inline into the caller's block); a pending
        `jr.loop_config` reaches the func's first loop, as it would in the caller."""
        sub = FunctionLowerer(src, self.ctx, scope, False, self.depth + 1, self.loops)
        sub.block, sub.top_block = self.block, self.top_block
        sub.folded_ifs = self.folded_ifs
        sub.serialize_next, sub.block_dim_next = self.serialize_next, self.block_dim_next
        return sub

    def at_outermost(self) -> bool:
        """Whether a statement lowered now is in the kernel's outermost scope."""
        return self.top_block is not None and self.block is self.top_block


def random_prologue(ctx: CompileContext, loc: n.Loc) -> list[n.Stmt]:
    """The start of a kernel calling jr.random(): this launch's value of the program-wide
    state (then advanced), and the call counter of code outside parallel loops."""
    from . import random as rnd
    state = ctx.field_ref(rnd.state_field(), n.RANDOM_STATE)
    u = dtypes.u64
    ctx.local_types[rnd.SEED_LOCAL] = u
    ctx.local_types["$rng_serial"] = u
    launch = n.Local(rnd.SEED_LOCAL, u, loc)
    return [n.Assign(rnd.SEED_LOCAL, n.Load(state, (), u, loc), loc),
            n.Store(state, (), n.Binary("+", launch, n.Const(1, u, loc), u, loc), loc),
            n.Assign("$rng_serial", n.Const(0, u, loc), loc)]


_RETURN_FIELDS: dict[tuple[Any, ...], Any] = {}


def return_field(ctx: CompileContext, fn: Any, kind: Any, index: int | None) -> Any:
    """The hidden field a kernel returns a vector/matrix (or element `index` of a tuple)
    through: `jr.return`, or `jr.return.<index>` (a 0-d field for a scalar element)."""
    from ..data import Field
    from ..linalg import element_type
    dt, shape = element_type(kind) if isinstance(kind, MatrixType) else (kind, ())
    name = RETURN_FIELD if index is None else f"{RETURN_FIELD}.{index}"
    key = (fn, dt, shape, index)
    found = _RETURN_FIELDS.get(key)
    if found is None:
        found = _RETURN_FIELDS[key] = Field(dt, shape, False, name, "field")
    return dt, shape, ctx.field_ref(found, name)


def store_tuple_return(lowerer: FunctionLowerer, kinds: tuple, node: ast.Return,
                       ctx: CompileContext, fn: Any, v: Any = None) -> None:
    """`return a, v` of a kernel annotated `-> (jr.f32, jr.math.vec3)`: each element goes to
    its own hidden field; the launcher returns a tuple of Python scalars and numpy arrays."""
    assert node.value is not None
    if v is None:
        v = lowerer.expr(node.value)
    items = v.items if isinstance(v, (TupleValue, VecValue)) and not (
        isinstance(v, VecValue) and len(v.shape) != 1) else None
    if isinstance(v, PyValue) and isinstance(v.obj, tuple):     # constants: `return 1.5, 2`
        items = tuple(PyValue(x) for x in v.obj)
    if items is None or len(items) != len(kinds):
        raise lowerer.err(node.value, f"the kernel is annotated to return {len(kinds)} values, "
                          f"got {describe(v)}")
    loc = lowerer.loc(node)
    for k, (kind, item) in enumerate(zip(kinds, items)):
        if isinstance(kind, MatrixType):
            store_vector_return(lowerer, kind, node, ctx, fn, item, k)
        else:
            _, _, ref = return_field(ctx, fn, kind, k)
            lowerer.emit(n.Store(ref, (), lowerer.typed(item, kind, node.value, "return"),
                                 loc))


def store_vector_return(lowerer: FunctionLowerer, kind: Any, node: ast.Return,
                        ctx: CompileContext, fn: Any, v: Any = None,
                        index: int | None = None) -> None:
    """`return v` of a kernel annotated `-> jr.math.vec3` (or a matrix type): the components
    go to a hidden field of that shape, which the launcher returns as a numpy array."""
    dt, shape, ref = return_field(ctx, fn, kind, index)
    assert node.value is not None
    value_node = node.value
    if v is None:
        v = lowerer.expr(value_node)
    if not isinstance(v, VecValue) or v.shape != shape:
        got = v.shape if isinstance(v, VecValue) else "a scalar"
        raise lowerer.err(value_node, f"the kernel is annotated to return shape {shape}, "
                          f"got {got}")
    loc = lowerer.loc(node)
    for flat, x in enumerate(v.items):
        idx = tuple(n.Const(k, dtypes.i32, loc) for k in
                    ((flat,) if len(shape) == 1 else divmod(flat, shape[1])))
        lowerer.emit(n.Store(ref, idx, lowerer.typed(x, dt, value_node, "return"), loc))


def vector_param(index: int, p: n.Param) -> VecValue:
    """A vector/matrix parameter in the kernel: one argument read per component (from the
    parameter's slots, row-major), so it lives in registers like any vector value."""
    assert p.dtype is not None               # concrete parameters of a specialization
    shape = p.element_shape
    names = [f"{p.name}[{k}]" for k in range(shape[0])] if len(shape) == 1 else \
        [f"{p.name}[{r}, {c}]" for r in range(shape[0]) for c in range(shape[1])]
    return VecValue(shape, tuple(n.Arg(index, name, p.dtype, component=k)
                                 for k, name in enumerate(names)))


def resolve_scalar_types(kind: Any, ctx: CompileContext) -> Any:
    """A return annotation with `int`/`float` (also inside a tuple) read as the program's
    `default_ip`/`default_fp`."""
    if isinstance(kind, tuple):
        return tuple(resolve_scalar_types(k, ctx) for k in kind)
    return ctx.default_ip if kind is int else ctx.default_fp if kind is float else kind


def kernel_bindings(params: tuple[n.Param, ...], template_values: dict[str, Any],
                    ctx: CompileContext) -> dict[str, Any]:
    """What each parameter's name means in the kernel's body: an argument, a vector of them,
    an ndarray, or a template parameter's Python value."""
    bindings: dict[str, Any] = {}
    for i, p in enumerate(params):
        if p.kind == "scalar":
            bindings[p.name] = n.Arg(i, p.name, p.dtype)  # type: ignore[arg-type]
        elif p.kind == "vector":
            bindings[p.name] = vector_param(i, p)
        elif p.kind == "ndarray":
            bindings[p.name] = n.ArrayRef(i, p.name, p.dtype, p.ndim,  # type: ignore[arg-type]
                                          large=p.large)
            if p.element_shape:
                ctx.array_elements[i] = p.element_shape
            if p.clamp:
                ctx.clamped_arrays.add(i)
        else:
            bindings[p.name] = PyValue(template_values[p.name])
    return bindings


def lower_kernel_body(lowerer: FunctionLowerer, src: SourceInfo,
                      ctx: CompileContext) -> tuple[ast.Return | None, Any]:
    """Lower the kernel's statements (its docstring skipped); the return statement still to
    lower (a final `return`, or the one the early returns stopped at) and the value the early
    returns gathered (None where there was none)."""
    body = list(src.tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    last = body[-1] if body else None
    ret_stmt = last if isinstance(last, ast.Return) else None
    value = None
    if has_early_return(body):           # returns under jr.static ifs and loops
        fr = lowerer.start_returns(ctx.kernel_name, None, src.tree)
        fr.kernel = True
        lowerer.stmts(body)
        if fr.has_value:
            value = lowerer.finish_returns(fr, src.tree)
        lowerer.func_return = None
        ret_stmt = fr.node if fr.stopped else None
    else:
        if ret_stmt is not None:
            body.pop()
        for stmt in body:
            lowerer.stmt(stmt)
    return ret_stmt, value


def lower_kernel_return(lowerer: FunctionLowerer, src: SourceInfo, ctx: CompileContext,
                        fn: Any, ret: Any, ret_stmt: ast.Return | None, value: Any) -> Any:
    """Emit the kernel's return (a scalar `Return`, or stores into the hidden return fields of
    a vector or tuple return); the return type the `KernelIR` keeps (None for those)."""
    if ret_stmt is not None:
        if ret_stmt.value is None or (isinstance(ret_stmt.value, ast.Constant)
                                      and ret_stmt.value.value is None and ret is None):
            pass                                                # return / return None
        elif ret is None:
            raise src.error(ret_stmt, "kernel returns a value but has no return annotation "
                            "(add -> jr.f32 or similar)")
        elif has_struct(ret):            # `-> S`: the tuple of its leaves (struct_args.py)
            v = lowerer.expr(ret_stmt.value) if value is None else value
            items = return_items(lowerer, ret, v, ret_stmt.value)
            store_tuple_return(lowerer, resolve_scalar_types(return_leaves(ret), ctx), ret_stmt,
                               ctx, fn, TupleValue(tuple(items)))
            ret = None
        elif isinstance(ret, MatrixType):
            store_vector_return(lowerer, ret, ret_stmt, ctx, fn, value)
            ret = None
        elif isinstance(ret, tuple):
            store_tuple_return(lowerer, ret, ret_stmt, ctx, fn, value)
            ret = None
        else:
            v = lowerer.expr(ret_stmt.value) if value is None else value
            e = lowerer.typed(v, ret, ret_stmt.value, "return")
            lowerer.emit(n.Return(e, src.loc(ret_stmt)))
    elif ret is not None:
        some = any(isinstance(x, ast.Return) and x.value is not None for x in ast.walk(src.tree))
        raise src.error(src.tree, ("" if some else "Kernel has a return type but does not have "
                                   "a return statement: ") + f"kernel is annotated to return "
                        f"{ret!r} but has no final return statement", KernelSyntaxError)
    return ret


def lower_kernel(src: SourceInfo, fn: Any, params: tuple[n.Param, ...],
                 template_values: dict[str, Any], ctx: CompileContext,
                 ret: Any) -> n.KernelIR:
    ret = resolve_scalar_types(ret, ctx)
    bindings = kernel_bindings(params, template_values, ctx)
    for name, kind in compound_params(fn).items():    # `a: S`: passed as its leaves
        bindings[name] = struct_param(kind, name, bindings)
    scope = Scope(bindings, function_globals(fn), "", frozenset(p.name for p in params))
    lowerer = FunctionLowerer(src, ctx, scope, is_kernel_body=True)
    ret_stmt, value = lower_kernel_body(lowerer, src, ctx)
    ret = lower_kernel_return(lowerer, src, ctx, fn, ret, ret_stmt, value)
    if ctx.random_used:
        lowerer.block[:0] = random_prologue(ctx, src.loc(src.tree))
    ir_body = lowerer.gradients_stopped(tuple(lowerer.block), ctx.stop_grads[0])  # stop_grad
    if ctx.validate:                       # jr.ad.Tape(validation=True): frontend/gdar.py
        from .gdar import with_checks
        ir_body = with_checks(ir_body, ctx)
    return n.KernelIR(ctx.kernel_name, params, tuple(ctx.field_refs.values()), ir_body, ret,
                      tuple(ctx.real_funcs))
