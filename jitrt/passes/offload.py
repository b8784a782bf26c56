"""Offload: split a kernel body into tasks.

Stage: pass. Input `KernelIR`; output `TaskedKernel`. Each outermost `ParFor` becomes a
parallel task; each run of other statements between them becomes a serial task. A parallel
task captures by value the kernel-scope locals its body reads.
"""
from __future__ import annotations

from ..ir import nodes as n
from ..errors import error_at
from .walk import all_exprs, walk_stmts


def assigned_names(body: n.Body) -> set[str]:
    out: set[str] = set()
    for s in walk_stmts(body):
        if isinstance(s, n.Assign):
            out.add(s.name)
        elif isinstance(s, n.For):
            out.add(s.var)
    return out


def check_no_scope_writes(body: n.Body, kernel_scope: set[str]) -> None:
    """A parallel loop must not assign kernel-scope locals: each thread has its own copy, so
    the assignment would be lost (Python would see it). Reject it instead of losing it."""
    for s in walk_stmts(body):
        if isinstance(s, n.Assign) and s.name in kernel_scope:
            name = s.name.split(".")[-1]
            raise error_at(s.loc, f"'{name}' is a kernel-scope variable assigned inside the "
                           "outermost (parallel) loop, where every thread has its own copy; "
                           "accumulate into a field or ndarray (+= is atomic), or put "
                           "jr.loop_config(serialize=True) before the loop to run it serially")


def offload(kernel: n.KernelIR, local_types: dict) -> n.TaskedKernel:
    tasks: list[n.Task] = []
    serial: list[n.Stmt] = []
    kernel_scope: set[str] = set()

    def flush() -> None:
        if serial:
            tasks.append(n.Task("serial", tuple(serial)))
            kernel_scope.update(assigned_names(tuple(serial)))
            serial.clear()

    for stmt in kernel.body:
        if not isinstance(stmt, n.ParFor):
            serial.append(stmt)
            continue
        flush()
        reads = {e.name for e in all_exprs(stmt.body) if isinstance(e, n.Local)}
        captured = sorted((reads & kernel_scope) - set(stmt.vars))
        check_no_scope_writes(stmt.body, kernel_scope)
        tasks.append(n.Task("parallel", stmt.body, stmt.vars, stmt.begins, stmt.ends,
                            tuple((name, local_types[name]) for name in captured), stmt.loc,
                            block_dim=stmt.block_dim))
    flush()
    return n.TaskedKernel(kernel.name, kernel.params, kernel.fields, tuple(tasks), kernel.ret)
