"""Simplification: constant folding of pure integer/float arithmetic on constants.

Stage: pass. Input and output: a `KernelIR` body. Folds `Binary`/`Unary`/`Cast` whose operands
are constants (with the same semantics the code generator implements), so that bounds such as
`n - 1` with a constant `n` become constants that the adstack sizing can use at compile time.
"""
from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

from ..ir import nodes as n
from ..ir.walk import map_expr

_FOLD = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
         "min": min, "max": max}


def wrap(value: int | float, dt) -> int | float:
    if dt.is_float:
        return float(value)
    value = int(value) & ((1 << dt.bits) - 1)
    if dt.is_signed and value >= 1 << (dt.bits - 1):
        value -= 1 << dt.bits
    return value


def fold_expr(e: n.Expr) -> n.Expr:
    return map_expr(e, fold_node)


def fold_node(e: n.Expr) -> n.Expr:
    """Fold one node whose operands are already folded."""
    if isinstance(e, n.Binary) and e.op in _FOLD and isinstance(e.a, n.Const) and \
            isinstance(e.b, n.Const) and e.a.dtype == e.dtype:
        fold: Any = _FOLD[e.op]
        return n.Const(wrap(fold(e.a.value, e.b.value), e.dtype), e.dtype, e.loc)
    if isinstance(e, n.Cast) and isinstance(e.x, n.Const):
        v = e.x.value
        if e.dtype.is_int and isinstance(v, float):
            if math.isnan(v):
                v = 0
            elif math.isinf(v):
                v = -(1 << 127) if v < 0 else 1 << 127
            else:
                v = math.trunc(v)
            lo = -(1 << (e.dtype.bits - 1)) if e.dtype.is_signed else 0
            hi = (1 << (e.dtype.bits - 1)) - 1 if e.dtype.is_signed else (1 << e.dtype.bits) - 1
            v = min(max(v, lo), hi)  # saturating, as the generated code
        return n.Const(wrap(v, e.dtype), e.dtype, e.loc)
    if isinstance(e, n.Unary) and e.op == "neg" and isinstance(e.x, n.Const):
        return n.Const(wrap(-e.x.value, e.dtype), e.dtype, e.loc)
    return e


def fold_body(body: n.Body) -> n.Body:
    out = []
    for s in body:
        changes: dict[str, object] = {}
        for f in fields(s):
            v = getattr(s, f.name)
            if isinstance(v, n.Expr):
                changes[f.name] = fold_expr(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], n.Expr):
                changes[f.name] = tuple(fold_expr(x) for x in v)
            elif f.name in ("body", "orelse"):
                changes[f.name] = fold_body(v)
        out.append(replace(s, **changes) if changes else s)  # type: ignore[arg-type]
    return tuple(out)


def simplify(kernel: n.KernelIR) -> n.KernelIR:
    return replace(kernel, body=fold_body(kernel.body),
                   funcs=tuple(replace(f, body=fold_body(f.body)) for f in kernel.funcs))
