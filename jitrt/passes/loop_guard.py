"""A bound on every `while` loop, for finding the loop a hung kernel spins in.

Stage: pass, right after the frontend (kernel IR -> kernel IR), run only when the option
`loop_guard` is set to a positive N (`jr.init(loop_guard=N)` or `JITRT_LOOP_GUARD=N`; a
debugging aid: docs/usage.md, "A kernel that never ends"). Each `while` loop counts its
iterations in a local of its own; the (N+1)-th records a fault naming the loop's source line
and leaves the loop, so the launch ends and the host raises KernelAssertionError at its next
check instead of waiting forever (on a GPU a spinning kernel blocks every later
synchronisation). Loops of `range` have a bound already and are left alone, as are real
functions' bodies. The counters are part of the frontend IR the offline cache keys, so a
guarded and an unguarded kernel never share an entry. Caches nothing.
"""
from __future__ import annotations

import dataclasses

from .. import dtypes
from ..ir import nodes as n


def guard_loops(kir: n.KernelIR, local_types: dict[str, dtypes.DataType],
                bound: int) -> n.KernelIR:
    """`kir` with every `while` loop of its body counted (`local_types` gains the counters)."""
    counter = [0]

    def body(stmts: n.Body) -> n.Body:
        out: list[n.Stmt] = []
        for s in stmts:
            if isinstance(s, n.While):
                out.extend(guarded(s))
                continue
            changes = {name: body(v) for name, v in vars(s).items()
                       if name in ("body", "orelse") and isinstance(v, tuple)}
            out.append(dataclasses.replace(s, **changes) if changes else s)
        return tuple(out)

    def guarded(s: n.While) -> list[n.Stmt]:
        name = f"$loop_guard{counter[0]}"
        counter[0] += 1
        i32 = dtypes.i32
        local_types[name] = i32
        count = n.Local(name, i32, s.loc)
        over = n.Binary(">", count, n.Const(bound, i32, s.loc), i32, s.loc)
        message = (f"a while loop at {s.loc.file}:{s.loc.line} ran more than {bound} "
                   "iterations (JITRT_LOOP_GUARD)")
        failed = n.Eval(n.Assertion(n.Const(0, i32, s.loc), message, i32, s.loc), s.loc)
        check = (n.Assign(name, n.Binary("+", count, n.Const(1, i32, s.loc), i32, s.loc),
                          s.loc),
                 n.If(over, (failed, n.Break(s.loc)), (), s.loc))
        return [n.Assign(name, n.Const(0, i32, s.loc), s.loc),
                n.While(s.cond, check + body(s.body), s.loc)]

    return dataclasses.replace(kir, body=body(kir.body))
