"""A static estimate of the work of one iteration of a task body.

Stage: pass (run by `pipeline.annotate_tasks`; codegen reads `Task.cost`). The CPU runtime splits a
parallel loop across worker threads only when `iterations * cost` exceeds the pool's grain, so a
16-element loop of stores runs on the calling thread while 1024 iterations of a transcendental
recurrence are split. Units are roughly "simple operations": arithmetic 1, memory 2, atomics 10,
math functions 20; an inner loop counts its body 8 times unless its trip count is a constant."""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.walk import exprs_of, walk_expr

MATH_COST = {"sqrt": 4, "abs": 1, "floor": 2, "ceil": 2, "popcnt": 1, "clz": 1, "ffs": 2}


def expr_cost(e: n.Expr) -> int:
    total = 0
    for x in walk_expr(e):
        if isinstance(x, n.Math):
            total += MATH_COST.get(x.fn, 20)
        elif isinstance(x, n.Atomic):
            total += 10
        elif isinstance(x, (n.Load, n.StackTop, n.StackTopAdj)):
            total += 2
        elif isinstance(x, (n.Binary, n.Unary, n.Select, n.Cast)):
            total += 1
    return total


def body_cost(body: n.Body) -> int:
    total = 0
    for s in body:
        own = sum(expr_cost(e) for e in exprs_of(s))
        if isinstance(s, (n.For, n.ReverseFor)):
            trips = 8
            if isinstance(s.begin, n.Const) and isinstance(s.end, n.Const):
                trips = max(int(s.end.value) - int(s.begin.value), 0)
            total += own + trips * body_cost(s.body)
        elif isinstance(s, n.While):
            total += own + 8 * body_cost(s.body)
        elif isinstance(s, n.If):
            total += own + max(body_cost(s.body), body_cost(s.orelse))
        else:
            total += own + (3 if isinstance(s, (n.StackPush, n.StackPop, n.StackAccAdj,
                                                n.StackInit, n.Store)) else 0)
    return total


def iteration_cost(body: n.Body) -> int:
    return max(1, body_cost(body))
