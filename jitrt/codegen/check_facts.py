"""Bounds checks a GPU thread has already made: an access that repeats one is not checked
again (CUDA) or not recorded again (AMDGPU).

Stage: codegen (targets with a `status_block`: CUDA, AMDGPU). When an access repeats a check
an earlier access of the same thread made (the same extents, the same index values), the
earlier check decided it: on CUDA a failing check ends its thread
(`TargetTraits.fault_ends_thread`), so a thread that reaches the later access passed it and
the access runs unchecked; on AMDGPU the later access still skips its load or store when it
fails, but its call of the recorder could only lose the compare-and-swap of the launch's
fault record (`emit_expr.fault_recorder`) and is left out. So a fact must hold on every path
to the access that uses it (it is a memory-safety fact on CUDA), which the rules below give.
Genesis's big kernels index dozens of fields of one shape with the same `[i_l, i_b]`.

A fact is a check's key: the extents (constants for fields, else the array) and the index
expressions, made only of locals, arguments, shapes, constants and arithmetic (no loads), with
the locals they read. Facts follow the structured code (`StmtEmitter.body`): a statement list
sees its enclosing lists' facts and adds its own, dropped when it ends; a statement that
assigns a local drops the facts that read it (after the statement, so a nested list's
assignments count too), and a loop drops the facts of the locals its body assigns before its
first iteration. An access evaluated only under a condition inside an expression (an arm of
`a if c else b`, the right side of `and`/`or`, an assertion's message values) adds none.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ..ir import nodes as n
from ..ir.walk import walk_expr

Facts = dict[Any, frozenset[str]]        # key -> the locals its index expressions read
PURE = (n.Const, n.Arg, n.Local, n.Unary, n.Binary, n.Cast, n.Shape)


def key(ref: n.Ref, extents: list[ir.Value], indices: tuple[n.Expr, ...]
        ) -> tuple[Any, frozenset[str]] | None:
    """(the check's key, the locals it reads), or None where an index is not a pure
    expression of locals (a load, a call, ...)."""
    names = set()
    for index in indices:
        for e in walk_expr(index):
            if not isinstance(e, PURE):
                return None
            if isinstance(e, n.Local):
                names.add(e.name)
    if all(isinstance(x, ir.Constant) for x in extents):
        where: Any = tuple(int(x.constant) for x in extents)   # fields: their shape
    else:
        where = ref
    return (where, indices), frozenset(names)


def forget(facts: Facts, names: set[str]) -> None:
    """Drop the facts that read any of `names` (assigned since)."""
    if facts and names:
        for k in [k for k, used in facts.items() if used & names]:
            del facts[k]
