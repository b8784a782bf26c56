"""IR verifier: checks the typing invariants codegen relies on.

Stage: run first in the pass pipeline (and in tests). Raises `AssertionError`-like
`IRVerifyError` naming the offending node: operand types equal to the result type (comparisons:
equal operand types, i32 result), integer indices, locals read with their declared type,
break/continue only inside serial loops.
"""
from __future__ import annotations

from ..dtypes import DataType, i32
from . import nodes as n
from .printer import expr_text


class IRVerifyError(Exception):
    pass


def _check_expr(e: n.Expr, local_types: dict[str, DataType]) -> None:
    def fail(msg: str) -> None:
        raise IRVerifyError(f"{e.loc}: {msg}: {expr_text(e)}")

    if isinstance(e, n.Binary):
        if e.a.dtype != e.b.dtype:
            fail("operand types differ")
        if e.op in n.COMPARE_OPS + ("and", "or"):
            if e.dtype != i32:
                fail("comparison must give i32")
        elif e.dtype != e.a.dtype:
            fail("result type differs from operands")
    elif isinstance(e, n.Select) and not (e.a.dtype == e.b.dtype == e.dtype):
        fail("select arms differ")
    elif isinstance(e, n.Local) and local_types.get(e.name, e.dtype) != e.dtype:
        fail(f"local read as {e.dtype.name}, declared {local_types[e.name].name}")
    elif isinstance(e, (n.Load, n.Atomic)):
        if any(not i.dtype.is_int for i in e.indices):
            fail("non-integer index")
        if isinstance(e, n.Atomic) and e.value.dtype != e.dtype:
            fail("atomic value type differs")
    elif isinstance(e, n.Math) and any(a.dtype != e.dtype for a in e.args):
        fail("math argument type differs")
    for v in vars(e).values():
        if isinstance(v, n.Expr):
            _check_expr(v, local_types)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, n.Expr):
                    _check_expr(x, local_types)


def _check_body(body: n.Body, local_types: dict[str, DataType], in_loop: bool) -> None:
    for s in body:
        if isinstance(s, (n.Break, n.Continue)) and not in_loop:
            raise IRVerifyError(f"{s.loc}: break/continue outside a serial loop")
        if isinstance(s, n.Assign) and local_types.get(s.name, s.value.dtype) != s.value.dtype:
            raise IRVerifyError(f"{s.loc}: assigning {s.value.dtype.name} to {s.name}")
        if isinstance(s, n.Store) and s.value.dtype != s.ref.dtype:
            raise IRVerifyError(f"{s.loc}: storing {s.value.dtype.name} into {s.ref.name}")
        for name in ("value", "cond", "expr", "begin", "end"):
            v = getattr(s, name, None)
            if isinstance(v, n.Expr):
                _check_expr(v, local_types)
        for v in getattr(s, "indices", ()) + getattr(s, "begins", ()) + getattr(s, "ends", ()) \
                + getattr(s, "args", ()) + getattr(s, "values", ()):
            _check_expr(v, local_types)
        loop = isinstance(s, (n.For, n.While))
        parallel = isinstance(s, n.ParFor)
        for attr in ("body", "orelse"):
            inner = getattr(s, attr, None)
            if isinstance(inner, tuple):
                _check_body(inner, local_types, (in_loop or loop) and not parallel)


def verify(kernel: n.KernelIR, local_types: dict[str, DataType]) -> None:
    _check_body(kernel.body, local_types, False)
    funcs = {f.name: f for f in kernel.funcs}
    for f in kernel.funcs:
        _check_body(f.body, local_types, False)
    for s in _all_stmts(kernel.body + sum((f.body for f in kernel.funcs), ())):
        if isinstance(s, n.Call):
            callee = funcs.get(s.func)
            if callee is None or len(s.args) != len(callee.params) or \
                    len(s.outs) != len(callee.rets):
                raise IRVerifyError(f"{s.loc}: call of {s.func} does not match its definition")
            if any(a.dtype != dt for a, (_, dt) in zip(s.args, callee.params)):
                raise IRVerifyError(f"{s.loc}: argument types of {s.func} differ")


def _all_stmts(body: n.Body) -> list[n.Stmt]:
    out: list[n.Stmt] = []
    for s in body:
        out.append(s)
        for attr in ("body", "orelse"):
            inner = getattr(s, attr, None)
            if isinstance(inner, tuple):
                out += _all_stmts(inner)
    return out
