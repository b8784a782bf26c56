"""Offload: split a kernel body into tasks.

Stage: pass. Input `KernelIR`; output `TaskedKernel`. Each outermost `ParFor` becomes a
parallel task; each run of other statements between them becomes a serial task. A parallel
task captures by value the kernel-scope locals its body reads; the kernel-scope locals it
reduces (`s += x[i]`) go through hidden 0-d fields (`local_reductions.py`), which this pass
appends to the field table. An outermost loop that assigns a kernel-scope local otherwise
(or reads one it reduces) runs serially instead (`serialized`).
"""
from __future__ import annotations

from ..errors import KernelCompileError
from ..ir import nodes as n
from ..ir.walk import all_exprs, assigned_names


def serialized(loop: n.ParFor, why: KernelCompileError) -> n.Stmt:
    """An outermost loop that assigns a kernel-scope local otherwise than by a reduction, or
    reads one it reduces, run serially in order (nested `For`s, the last variable innermost):
    Taichi makes such a local one value shared by all threads, a data race unless the
    iterations write different parts of it; in order, the result is the one those programs
    expect. Logged as a warning, once per loop, with the reason."""
    from ..logger import logger
    key = (loop.loc.file, loop.loc.line, loop.loc.col)
    if key not in _SERIALIZED:
        _SERIALIZED.add(key)
        logger.warning("%s: this outermost loop runs serially, in order: %s", loop.loc,
                       why.reason)
    body = loop.body
    for var, begin, end in reversed(list(zip(loop.vars, loop.begins, loop.ends))):
        body = (n.For(var, begin, end, body, loop.loc),)
    return body[0]


_SERIALIZED: set[tuple[str, int, int]] = set()     # loops already warned about


def offload(kernel: n.KernelIR, local_types: dict) -> n.TaskedKernel:
    # imported here: the offload pass alone loads no other pass
    from .local_reductions import reduce_loop
    tasks: list[n.Task] = []
    serial: list[n.Stmt] = []
    kernel_scope: set[str] = set()

    def flush() -> None:
        if serial:
            tasks.append(n.Task("serial", tuple(serial)))
            kernel_scope.update(assigned_names(tuple(serial)))
            serial.clear()

    fields = list(kernel.fields)
    for stmt in kernel.body:
        if not isinstance(stmt, n.ParFor):
            serial.append(stmt)
            continue
        try:
            before, stmt, after, buffers = reduce_loop(stmt, kernel_scope | assigned_names(
                tuple(serial)), local_types, len(fields))
        except KernelCompileError as exc:    # a kernel-scope local assigned in the loop
            serial.append(serialized(stmt, exc))
            continue
        fields += buffers
        serial += before
        flush()
        reads = {e.name for e in all_exprs(stmt.body) if isinstance(e, n.Local)}
        captured = sorted((reads & kernel_scope) - set(stmt.vars))
        tasks.append(n.Task("parallel", stmt.body, stmt.vars, stmt.begins, stmt.ends,
                            tuple((name, local_types[name]) for name in captured), stmt.loc,
                            block_dim=stmt.block_dim))
        serial += after
    flush()
    return n.TaskedKernel(kernel.name, kernel.params, tuple(fields), tuple(tasks), kernel.ret,
                          kernel.funcs)
