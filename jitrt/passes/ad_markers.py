"""The AD passes' markers, removed from every kernel once they have been read.

Stage: pass (`pipeline.py` runs `without_stop_grad` after autodiff, on every kernel: primal,
grad and forward mode). Input and output: a `TaskedKernel`. `stop_grad(x)` (the reads
`jr.stop_grad` named, and the values matrix functions detach) becomes `x`; `tangent_only(x)`
(a zero term carrying x's derivative, jitrt/matrix_functions.py) becomes its value: in
`y + tangent_only(x)` the sum becomes `y`, elsewhere the term becomes -0.0; then the
assignments of locals that only fed such terms (the derivative code a primal kernel does not
need) are dropped when nothing reads them any more and their values have no side effect.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Iterable, Iterator

from ..ir import nodes as n
from ..ir.walk import all_exprs, map_expr, map_stmt, walk_expr, walk_stmts


def without_stop_grad(kernel: n.TaskedKernel) -> n.TaskedKernel:
    """`kernel` with every `stop_grad(x)` (the reads `jr.stop_grad` named, and the values
    matrix functions detach) replaced by `x`, and every `tangent_only(x)` by its value:
    `y + tangent_only(x)` becomes `y` (so the code computing x is dead; LLVM does not fold
    `y + -0.0` under the flush-to-zero float mode), any other by -0.0. Run on every kernel
    after the AD passes have read the markers (codegen has no such ops). A kernel without
    markers is returned as it is."""
    def is_marker(e: n.Expr) -> bool:
        return isinstance(e, n.Unary) and e.op in (n.STOP_GRAD, n.TANGENT_ONLY)

    def plain_sum(e: n.Expr) -> n.Expr:
        if isinstance(e, n.Binary) and e.op == "+":
            for keep, drop in ((e.a, e.b), (e.b, e.a)):
                if isinstance(drop, n.Unary) and drop.op == n.TANGENT_ONLY and \
                        keep.dtype == e.dtype:
                    return keep
        return e

    def bare(e: n.Expr) -> n.Expr:
        if isinstance(e, n.Unary) and e.op == n.TANGENT_ONLY:
            return n.Const(-0.0, e.dtype, e.loc)
        return e.x if isinstance(e, n.Unary) and e.op == n.STOP_GRAD else e

    def strip(e: n.Expr) -> n.Expr:
        return map_expr(map_expr(e, plain_sum), bare)
    if not any(is_marker(e) for t in kernel.tasks for e in
               [*all_exprs(t.body), *(x for b in t.begins + t.ends for x in walk_expr(b))]):
        return kernel
    feeding = tangent_locals(kernel)
    tasks = tuple(replace(t, body=tuple(map_stmt(map_stmt(s, plain_sum), bare) for s in t.body),
                          begins=tuple(strip(b) for b in t.begins),
                          ends=tuple(strip(e) for e in t.ends))
                  for t in kernel.tasks)
    return drop_unread(replace(kernel, tasks=tasks), feeding)


def tangent_locals(kernel: n.TaskedKernel) -> set[str]:
    """The locals read inside tangent_only terms, and those their values read, transitively."""
    values: dict[str, list[n.Expr]] = {}
    found: set[str] = set()
    for t in kernel.tasks:
        for s in walk_stmts(t.body):
            if isinstance(s, n.Assign):
                values.setdefault(s.name, []).append(s.value)
        for e in all_exprs(t.body):
            if isinstance(e, n.Unary) and e.op == n.TANGENT_ONLY:
                found |= {x.name for x in walk_expr(e.x) if isinstance(x, n.Local)}
    work = list(found)
    while work:
        for value in values.get(work.pop(), ()):
            for x in walk_expr(value):
                if isinstance(x, n.Local) and x.name not in found:
                    found.add(x.name)
                    work.append(x.name)
    return found


def drop_unread(kernel: n.TaskedKernel, names: set[str]) -> n.TaskedKernel:
    """`kernel` without the assignments of locals in `names` that nothing reads, whose values
    read no memory and have no other effect, transitively: dropping such an assignment drops
    its reads, which may leave another of `names` unread. One walk counts every read; the
    counts then fall as assignments go (re-walking the kernel after each round of drops
    made this pass quadratic: most of the compile of a 3x3 matrix function's kernel)."""
    def effect_free(e: n.Expr) -> bool:
        return not any(isinstance(x, (n.Load, n.Atomic, n.Print, n.Assertion, n.Simt))
                       for x in walk_expr(e))

    def local_reads(exprs: Iterable[n.Expr]) -> Iterator[str]:
        return (x.name for x in exprs if isinstance(x, n.Local))
    reads: Counter[str] = Counter()
    droppable: dict[str, list[n.Expr]] = {}    # per name: the values of its droppable Assigns
    for t in kernel.tasks:
        reads.update(local_reads(all_exprs(t.body)))
        reads.update(local_reads(y for b in t.begins + t.ends for y in walk_expr(b)))
        for s in walk_stmts(t.body):
            if isinstance(s, n.Assign) and s.name in names and effect_free(s.value):
                droppable.setdefault(s.name, []).append(s.value)
    dead: set[str] = set()
    work = [x for x in names if not reads[x]]
    while work:
        name = work.pop()
        if name in dead:
            continue
        dead.add(name)
        for value in droppable.get(name, ()):
            for read in local_reads(walk_expr(value)):
                reads[read] -= 1
                if not reads[read] and read in names and read not in dead:
                    work.append(read)

    def kept(body: n.Body) -> n.Body:
        out: list[n.Stmt] = []
        for s in body:
            if isinstance(s, n.Assign) and s.name in dead and effect_free(s.value):
                continue
            changes = {k: kept(getattr(s, k)) for k in ("body", "orelse")
                       if isinstance(getattr(s, k, None), tuple)}
            out.append(replace(s, **changes) if changes else s)
        return tuple(out)
    if not dead:
        return kernel
    return replace(kernel, tasks=tuple(replace(t, body=kept(t.body)) for t in kernel.tasks))
