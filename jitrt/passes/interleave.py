"""Interleave a parallel task's iterations: one pass of the body runs `lanes` consecutive
indices, statement by statement, so that their independent chains overlap in the CPU.

Stage: a rewrite codegen asks for (`kernel_module.emit_task`, the CPU's loop copy without
bounds checks). Input: a one-variable parallel `Task` and a lane count K. Output: the body for
the indices i, i + 1, ..., i + K - 1 (`interleaved`), or None where interleaving does not
apply; nothing is cached. A body whose iterations run an inner loop (a recurrence such as
`for _ in range(n[i]): v = sin(v) * 1.1 + 0.1`, or the replay and reverse loops of its
adjoint) is bound by the latency of that chain: K chains in flight take little longer than
one.

How: lane k's copy of the body reads the task variable as `i + k`, its own copy of every
local the body assigns (`v@k`) and its own copy of every adstack (`AdStack.lane`, placed
after lane k - 1's entries by codegen; the heap holds `Target.lanes` copies). Straight-line
statements are emitted for lane 0, 1, ... in turn; an `if` or a serial loop whose condition
or bounds are the same in every lane (constants, arguments, shapes, locals the body does not
assign) is kept once around the interleaved body; a loop whose bounds differ per lane runs
from the least begin to the greatest end, each lane's body guarded by its own range, so lanes
still step in the same order as alone; an `if` whose condition differs runs each lane's copy
in turn. Parallel loops promise no order between iterations, so any interleaving keeps a
kernel's meaning; codegen uses this body only where the body cannot fault (every access
proven in bounds), so the first fault is reported as before. Not interleaved: bodies with
`while`, `break`, `continue`, `return`, `print` or `assert`, bodies without an inner loop
(LLVM vectorizes those already) and bodies larger than MAX_NODES.
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes
from ..ir import nodes as n
from ..ir.walk import all_exprs, map_expr, walk_expr, walk_stmts

MAX_NODES = 400        # statements and expressions in the body: K copies of it are compiled
LANE = "@"             # `v@2`: lane 2's copy of the local `v`

_NOT_INTERLEAVED = (n.While, n.Break, n.Continue, n.Return)
_PURE = (n.Const, n.Arg, n.Shape, n.Local, n.Binary, n.Unary, n.Select, n.Cast, n.Math)


def lane_name(name: str, lane: int) -> str:
    return f"{name}{LANE}{lane}"


class Lanes:
    """The renaming of one task's body for each lane."""

    def __init__(self, task: n.Task, count: int) -> None:
        self.var, self.count = task.vars[0], count
        self.renamed = {s.name for s in walk_stmts(task.body) if isinstance(s, n.Assign)}
        self.renamed |= {s.var for s in walk_stmts(task.body)
                         if isinstance(s, (n.For, n.ReverseFor))}
        self.fresh = 0
        # each lane copy of an `Eval` (a `+=` among them) -> (the copy, its lane): codegen
        # puts a float reduction's lane k into the sum of index i + k (codegen/reduction_lanes)
        self.evals: dict[int, tuple[n.Eval, int]] = {}

    def expr(self, e: n.Expr, lane: int) -> n.Expr:
        """`e` as lane `lane` computes it."""
        def one(x: n.Expr) -> n.Expr:
            if isinstance(x, n.Local):
                if x.name == self.var:
                    return x if lane == 0 else n.Binary("+", x, n.Const(lane, x.dtype), x.dtype)
                if x.name in self.renamed:
                    return replace(x, name=lane_name(x.name, lane))
            elif isinstance(x, (n.StackTop, n.StackTopAdj)):
                return replace(x, stack=replace(x.stack, lane=lane))
            return x
        return map_expr(e, one)

    def key(self, ref: n.Ref, indices: tuple[n.Expr, ...], lane: int
            ) -> tuple[n.Ref, tuple[n.Expr, ...]]:
        """The access `ref[indices]` as lane `lane`'s copy of the body writes it."""
        return ref, tuple(self.expr(i, lane) for i in indices)

    def invariant(self, e: n.Expr) -> bool:
        """The same value in every lane: no task variable, local of the body or memory."""
        return all(isinstance(x, _PURE) and not (isinstance(x, n.Local) and
                                                  (x.name == self.var or x.name in self.renamed))
                   for x in walk_expr(e))

    # ---- one lane's copy ----------------------------------------------------------------
    def stmt(self, s: n.Stmt, lane: int) -> n.Stmt:
        if isinstance(s, (n.For, n.ReverseFor)):
            return replace(s, var=lane_name(s.var, lane), begin=self.expr(s.begin, lane),
                           end=self.expr(s.end, lane), body=self.body(s.body, lane))
        if isinstance(s, n.If):
            return replace(s, cond=self.expr(s.cond, lane), body=self.body(s.body, lane),
                           orelse=self.body(s.orelse, lane))
        if isinstance(s, n.Assign):
            return replace(s, name=lane_name(s.name, lane), value=self.expr(s.value, lane))
        if isinstance(s, n.Store):
            return replace(s, indices=tuple(self.expr(i, lane) for i in s.indices),
                           value=self.expr(s.value, lane))
        if isinstance(s, n.Eval):
            copy = replace(s, expr=self.expr(s.expr, lane))
            self.evals[id(copy)] = (copy, lane)
            return copy
        if isinstance(s, (n.StackInit, n.StackPush, n.StackAccAdj)):
            return replace(s, stack=replace(s.stack, lane=lane), value=self.expr(s.value, lane))
        if isinstance(s, n.StackPop):
            return replace(s, stack=replace(s.stack, lane=lane))
        raise AssertionError(f"interleave: {type(s).__name__}")   # excluded by `interleaved`

    def body(self, body: n.Body, lane: int) -> n.Body:
        return tuple(self.stmt(s, lane) for s in body)

    # ---- every lane -----------------------------------------------------------------------
    def jam(self, body: n.Body) -> n.Body:
        out: list[n.Stmt] = []
        for s in body:
            if isinstance(s, (n.For, n.ReverseFor)):
                out.extend(self.loop(s))
            elif isinstance(s, n.If) and self.invariant(s.cond):
                out.append(replace(s, body=self.jam(s.body), orelse=self.jam(s.orelse)))
            else:
                out.extend(self.stmt(s, k) for k in range(self.count))
        return tuple(out)

    def loop(self, s: n.For | n.ReverseFor) -> list[n.Stmt]:
        lanes = range(self.count)
        if self.invariant(s.begin) and self.invariant(s.end):
            first = lane_name(s.var, 0)
            copies = tuple(n.Assign(lane_name(s.var, k), n.Local(first, s.begin.dtype), s.loc)
                           for k in lanes if k)
            return [replace(s, var=first, body=copies + self.jam(s.body))]
        self.fresh += 1
        dt, tag = s.begin.dtype, f"$lanes{self.fresh}"
        out: list[n.Stmt] = []
        begins = [self.expr(s.begin, k) for k in lanes]
        ends = [self.expr(s.end, k) for k in lanes]
        if not self.invariant(s.begin):
            out += [n.Assign(lane_name(f"{tag}b", k), begins[k], s.loc) for k in lanes]
            begins = [n.Local(lane_name(f"{tag}b", k), dt) for k in lanes]
        out += [n.Assign(lane_name(f"{tag}e", k), ends[k], s.loc) for k in lanes]
        ends = [n.Local(lane_name(f"{tag}e", k), dt) for k in lanes]
        step = n.Local(f"{tag}j", dt)
        guarded: list[n.Stmt] = []
        for k in lanes:
            inside: n.Expr = n.Binary("<", step, ends[k], dtypes.i32)
            if not self.invariant(s.begin):
                inside = n.Binary("and", n.Binary(">=", step, begins[k], dtypes.i32), inside,
                                  dtypes.i32)
            own = (n.Assign(lane_name(s.var, k), step, s.loc),) + self.body(s.body, k)
            guarded.append(n.If(inside, own, (), s.loc))
        low = begins[0]
        if not self.invariant(s.begin):
            for b in begins[1:]:
                low = n.Binary("min", low, b, dt)
        high: n.Expr = ends[0]
        for e in ends[1:]:
            high = n.Binary("max", high, e, dt)
        out.append(replace(s, var=step.name, begin=low, end=high, body=tuple(guarded)))
        return out


def candidate(task: n.Task) -> bool:
    """Whether `task`'s statements allow interleaving (codegen also needs every access proven
    in bounds); a kernel with no candidate compiles the same with or without lanes."""
    if task.kind != "parallel" or len(task.vars) != 1:
        return False
    stmts = list(walk_stmts(task.body))
    if not any(isinstance(s, (n.For, n.ReverseFor)) for s in stmts) or \
            any(isinstance(s, _NOT_INTERLEAVED) for s in stmts):
        return False
    exprs = list(all_exprs(task.body))
    return len(stmts) + len(exprs) <= MAX_NODES and \
        not any(isinstance(e, (n.Print, n.Assertion, n.Simt)) for e in exprs)


def interleaved(task: n.Task, lanes: int) -> tuple[Lanes, n.Body] | None:
    """The body running indices i .. i + lanes - 1 of `task` in one pass, with the renaming
    that made it, or None (see the module docstring for when)."""
    if lanes < 2 or not candidate(task) or n.has_call(task.body):
        return None
    plan = Lanes(task, lanes)
    if task.vars[0] in plan.renamed or plan.renamed & {name for name, _ in task.captures}:
        return None
    return plan, plan.jam(task.body)
