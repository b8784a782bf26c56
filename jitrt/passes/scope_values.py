"""Kernel-scope values: locals that only name a value known at launch are inlined.

Stage: pass, before offload. Input and output: a `KernelIR`. A kernel-scope local assigned
once in the whole kernel, by a statement of the kernel's top level, to an integer computed
from constants, integer arguments and ndarray shapes (`_B = x.shape[1]`, `n = 6`,
`m = n * _B`: what a func inlined at the kernel's top level typically starts with) is
replaced by that expression wherever it is read, and its assignment goes. Offload then has
no serial task for such code: on a GPU each serial task is a launch of its own (Genesis's
solver kernels launched four one-thread kernels a step that only stored a few such
numbers), and a parallel task no longer captures the local. Reads before the assignment
(the local's zero) keep the local, as does a local assigned again anywhere, a loop
variable's name, and an expression of more than `MAX_NODES` nodes or one that could record
a fault (`overflow` checks). Integers only: they carry no adjoint or tangent, so the AD
passes that follow see the same kernel either way. What the values make constant is folded
as they are substituted (`simplify.fold_node`). Caches nothing.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..dtypes import DataType
from ..ir import nodes as n
from ..ir.walk import all_exprs, map_stmt, walk_expr, walk_stmts
from .simplify import fold_expr, fold_node

PURE = (n.Const, n.Arg, n.Shape, n.Unary, n.Binary, n.Select, n.Cast)
UNARY = ("neg", "not", "invert")
MAX_NODES = 24     # a value read in a loop body is computed there: keep it small


def inline_scope_values(kernel: n.KernelIR, local_types: dict[str, DataType]) -> n.KernelIR:
    assigned: Counter[str] = Counter()
    loop_vars: set[str] = set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, n.Assign):
            assigned[s.name] += 1
        elif isinstance(s, n.For):
            assigned[s.var] += 1
        elif isinstance(s, n.Call):
            assigned.update(s.outs)
        elif isinstance(s, n.ParFor):
            loop_vars.update(s.vars)
    values: dict[str, n.Expr] = {}
    read: set[str] = set()       # locals the statements so far read (before any assignment)

    def substitute(e: n.Expr) -> n.Expr:     # (bottom-up: what a value makes constant folds)
        return values.get(e.name, e) if isinstance(e, n.Local) else fold_node(e)

    body = []
    for s in kernel.body:
        if values:
            s = map_stmt(s, substitute)
        if isinstance(s, n.Assign) and not s.reduce and assigned[s.name] == 1 and \
                s.name not in read and s.name not in loop_vars and \
                s.value.dtype == local_types.get(s.name) and launch_value(s.value):
            values[s.name] = fold_expr(s.value)
            continue
        read.update(e.name for e in all_exprs((s,)) if isinstance(e, n.Local))
        body.append(s)
    if not values:
        return kernel
    return replace(kernel, body=tuple(body))


def launch_value(e: n.Expr) -> bool:
    """Whether `e` is a small integer expression of constants, arguments and shapes alone."""
    nodes = list(walk_expr(e))
    return len(nodes) <= MAX_NODES and all(
        isinstance(x, PURE) and x.dtype.is_int and
        not (isinstance(x, n.Binary) and x.overflow) and
        not (isinstance(x, n.Unary) and x.op not in UNARY) for x in nodes)
