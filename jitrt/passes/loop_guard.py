"""A bound on every `while` loop, for finding the loop a hung kernel spins in.

Stage: pass, before the pipeline (kernel IR -> kernel IR), used only when the environment
variable `JITRT_LOOP_GUARD` is a positive integer N (a debugging aid: docs/usage.md,
"Debugging a kernel that never ends"). Each `while` loop counts its iterations in a local of
its own; the (N+1)-th records a fault naming the loop's source line and leaves the loop, so the
launch ends and the host raises KernelRuntimeError at its next check instead of waiting
forever (on a GPU a spinning kernel blocks every later synchronisation). Loops of `range` have
a bound already and are left alone, as are real functions' bodies. Applied right after the
frontend (`runtime/compiler.frontend`), so the counters are part of the frontend IR the
offline cache keys: a guarded kernel and an unguarded one never share an entry. Caches
nothing.
"""
from __future__ import annotations

import dataclasses
import os

from .. import dtypes
from ..ir import nodes as n

ENV = "JITRT_LOOP_GUARD"


def limit() -> int:
    """N from the environment, 0 (no guard) when unset; a value that is not a positive integer
    is refused by name."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"{ENV}={text!r}: expected a positive number of iterations")
    return int(text)


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
                   f"iterations ({ENV})")
        check = (n.Assign(name, n.Binary("+", count, n.Const(1, i32, s.loc), i32, s.loc),
                         s.loc),
                 n.Eval(n.Assertion(n.Unary("not", over, i32, s.loc), message, i32, s.loc),
                        s.loc),
                 n.If(over, (n.Break(s.loc),), (), s.loc))
        return [n.Assign(name, n.Const(0, i32, s.loc), s.loc),
                n.While(s.cond, check + body(s.body), s.loc)]

    return dataclasses.replace(kir, body=body(kir.body))
