"""Generic traversal of IR: child expressions and bodies of any node.

Stage: IR (shared by the frontend, the passes, codegen and the runtime). `exprs_of(stmt)`
yields a statement's own expressions, `bodies_of` its nested bodies, `walk_expr` every
sub-expression, `walk_stmts` every statement of a body; `map_expr` rebuilds an expression
bottom-up through a node rewrite, `map_stmt` a statement (its expressions and nested bodies)
through one; `assigned_names` the locals a body assigns, `written_refs` the data it
stores to or updates atomically.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from . import nodes as n


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
        elif isinstance(value, tuple) and name in ("indices", "begins", "ends", "args",
                                                     "values"):
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


def map_expr(e: n.Expr, fn: Callable[[n.Expr], n.Expr]) -> n.Expr:
    """`fn` applied bottom-up: to every child (rebuilt first), then to the node itself."""
    changes: dict = {}
    for name, v in vars(e).items():
        if isinstance(v, n.Expr):
            changes[name] = map_expr(v, fn)
        elif isinstance(v, tuple) and v and isinstance(v[0], n.Expr):
            changes[name] = tuple(map_expr(x, fn) for x in v)
    return fn(replace(e, **changes) if changes else e)


def map_stmt(s: n.Stmt, fn: Callable[[n.Expr], n.Expr]) -> n.Stmt:
    """`s` with `map_expr(e, fn)` applied to each of its expressions, nested bodies included."""
    changes: dict = {}
    for name, v in vars(s).items():
        if isinstance(v, n.Expr):
            changes[name] = map_expr(v, fn)
        elif isinstance(v, tuple) and name in ("indices", "begins", "ends", "args", "values"):
            changes[name] = tuple(map_expr(x, fn) for x in v)
        elif isinstance(v, tuple) and name in ("body", "orelse"):
            changes[name] = tuple(map_stmt(x, fn) for x in v)
    return replace(s, **changes) if changes else s


def assigned_names(body: n.Body) -> set[str]:
    """The locals `body` assigns, loop variables included."""
    out: set[str] = set()
    for s in walk_stmts(body):
        if isinstance(s, n.Assign):
            out.add(s.name)
        elif isinstance(s, n.For):
            out.add(s.var)
        elif isinstance(s, n.Call):         # a real function's results (jr.real_func)
            out.update(s.outs)
    return out


def written_refs(body: n.Body) -> set[n.Ref]:
    """The fields and ndarrays `body` stores to or updates atomically (not through the real
    functions it calls)."""
    return ({s.ref for s in walk_stmts(body) if isinstance(s, n.Store)}
            | {e.ref for e in all_exprs(body) if isinstance(e, n.Atomic)})
