"""Generic traversal of IR: child expressions and bodies of any node.

Stage: shared by passes. `exprs_of(stmt)` yields a statement's own expressions, `bodies_of`
its nested bodies, `walk_expr` every sub-expression, `walk_stmts` every statement of a body.
"""
from __future__ import annotations

from typing import Iterator

from ..ir import nodes as n


def sub_exprs(e: n.Expr) -> Iterator[n.Expr]:
    for value in vars(e).values():
        if isinstance(value, n.Expr):
            yield value
        elif isinstance(value, tuple):
            yield from (x for x in value if isinstance(x, n.Expr))


def walk_expr(e: n.Expr) -> Iterator[n.Expr]:
    yield e
    for child in sub_exprs(e):
        yield from walk_expr(child)


def exprs_of(s: n.Stmt) -> Iterator[n.Expr]:
    for name, value in vars(s).items():
        if isinstance(value, n.Expr):
            yield value
        elif isinstance(value, tuple) and name in ("indices", "begins", "ends"):
            yield from value


def bodies_of(s: n.Stmt) -> Iterator[n.Body]:
    for name in ("body", "orelse"):
        value = getattr(s, name, None)
        if isinstance(value, tuple):
            yield value


def walk_stmts(body: n.Body) -> Iterator[n.Stmt]:
    for s in body:
        yield s
        for inner in bodies_of(s):
            yield from walk_stmts(inner)


def all_exprs(body: n.Body) -> Iterator[n.Expr]:
    for s in walk_stmts(body):
        for e in exprs_of(s):
            yield from walk_expr(e)
