"""Which locals of an LLVM function need the zero their stack slot starts with.

Stage: codegen (used by `kernel_module.py` before a function's statements are emitted).
Input: the statements one LLVM function runs, in order, with the reads codegen itself makes
between them (a parallel task's box and captures, read by the CPU entry) as `Eval`s.
Output: the locals those statements assign on every path before any read:
`StmtEmitter.local_ptr` gives their stack slots no zero store. Every other local (read
before it is surely assigned, a loop's variable read after the loop, codegen's own locals)
keeps the zero, so that no read sees an undefined value. Caches nothing.

Why: a store in the function's first block defines the slot there for LLVM's promotion of
stack slots to registers (SROA and mem2reg, at -O0 and -O3 alike), whose placement of phi
nodes then walks the function's whole dominator tree once per slot. Genesis's collider kernel
with box-box contacts, on the CPU as one function of 12,161 locals over 32,426 blocks (its
funcs inlined), spent ~90% of a 22 s quick compile there.
"""
from __future__ import annotations

from typing import Iterable

from ..ir import nodes as n
from ..ir.walk import bodies_of, exprs_of, walk_expr


class _Scan:
    """One pass over the statements: the names assigned, and those read where not surely
    assigned yet."""

    def __init__(self) -> None:
        self.assigned: set[str] = set()
        self.early: set[str] = set()

    def read(self, e: n.Expr, sure: set[str]) -> None:
        for x in walk_expr(e):
            if isinstance(x, n.Local) and x.name not in sure:
                self.early.add(x.name)

    def body(self, body: n.Body, sure: set[str]) -> set[str]:
        """The names surely assigned after `body`, given those surely assigned before."""
        sure = set(sure)
        for s in body:
            for e in exprs_of(s):
                self.read(e, sure)
            if isinstance(s, n.Assign):
                sure.add(s.name)
                self.assigned.add(s.name)
            elif isinstance(s, n.Call):
                sure.update(s.outs)
                self.assigned.update(s.outs)
            elif isinstance(s, n.If):
                sure = self.body(s.body, sure) & self.body(s.orelse, sure)
            elif isinstance(s, (n.For, n.ReverseFor)):
                self.assigned.add(s.var)        # (not surely assigned after: zero trips)
                self.body(s.body, sure | {s.var})
            elif isinstance(s, n.ParFor):
                self.assigned.update(s.vars)
                self.body(s.body, sure | set(s.vars))
            else:                               # While and any other statement with bodies:
                for inner in bodies_of(s):      # what they assign is not sure after them
                    self.body(inner, sure)
        return sure


def assigned_before_read(body: n.Body) -> frozenset[str]:
    """The locals that `body` assigns before any read on every path (a loop's body counts as
    possibly run again, and possibly not at all)."""
    scan = _Scan()
    scan.body(body, set())
    return frozenset(scan.assigned - scan.early)


def entry_body(tasks: Iterable[n.Task]) -> n.Body:
    """What the CPU's fused entry runs, in order, as one statement list: serial tasks'
    statements, and for each parallel task the reads of its box and captures (as `Eval`s)."""
    body: list[n.Stmt] = []
    for task in tasks:
        if task.kind == "serial":
            body += task.body
        else:
            reads = (*task.begins, *task.ends,
                     *(n.Local(name, dt) for name, dt in task.captures))
            body += [n.Eval(e) for e in reads]
    return tuple(body)
