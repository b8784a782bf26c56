"""Real functions (`jr.real_func`) -> LLVM functions of the kernel's module.

Stage: codegen. Input: the `RealFunc`s of a `TaskedKernel`. Each becomes an internal function
`<prefix>_rf_<name>(ctx, params...)` returning a literal struct of its results (void when it
returns nothing): it reaches fields and ndarrays through the launch context as a task does, so
nothing of the caller's frame is shared, and it may call itself. `Call` statements (emitted by
`StmtEmitter.stmt_Call`) pass the context on and store the results into the caller's locals.
A function whose end is reached without a return gives zeros. Caches nothing.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import nodes as n
from .emit_expr import I64, ll_type

I64P = I64.as_pointer()


def symbol(module: ir.Module, name: str) -> str:
    return f"{module.name}_rf_{name}"


def result_type(f: n.RealFunc) -> ir.Type:
    return ir.LiteralStructType([ll_type(dt) for dt in f.rets]) if f.rets else ir.VoidType()


def declare(module: ir.Module, funcs: tuple[n.RealFunc, ...]) -> None:
    """Every real function's declaration first, so that calls (recursive ones too) find it."""
    for f in funcs:
        ty = ir.FunctionType(result_type(f), [I64P] + [ll_type(dt) for _, dt in f.params])
        fn = ir.Function(module, ty, symbol(module, f.name))
        fn.linkage = "internal"


def ret_values(b: ir.IRBuilder, rets: tuple, values: list[ir.Value]) -> None:
    if not rets:
        b.ret_void()
        return
    agg: ir.Value = ir.Constant(ir.LiteralStructType([ll_type(dt) for dt in rets]),
                                 ir.Undefined)
    for k, v in enumerate(values):
        agg = b.insert_value(agg, v, k)
    b.ret(agg)
