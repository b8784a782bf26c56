"""Reverse-mode autodiff: the adjoint of a kernel, with loop-carried locals on adstacks.

Stage: pass (grad kernels only). Input: the primal `TaskedKernel`. Output: the grad
`TaskedKernel` whose tasks, for each primal task in reverse order, replay the serial code that
defines the kernel-scope locals it reads, then run its adjoint: a forward sweep without global
writes that pushes every loop-carried local onto an adstack, then the reverse sweep, which
recomputes the iteration-local ones.

Within a task body (after `normalize`, which stores every if-condition in a flag local and
every loop bound in a bound local):
- a local assigned once outside loops is a plain value; its adjoint is a local `adj$<name>`;
- constant loop bounds stay constants (nothing to record for the reverse sweep);
- a local assigned once inside a loop, before every read of it in the same pass through the
  body that assigns it, from values that cannot change meanwhile (loop indices, arguments,
  loads, other such locals: `ad_recompute.py`), is iteration-local: the reverse sweep
  recomputes it at the start of that body's reversed pass, with a plain adjoint reset there
  (a local a loop body assigns several times, reading it only after the first, is given a
  name per assignment first: `ad_recompute.version_iteration_locals`);
- every other local (loop-carried) is an adstack: assignments push, reads see the top, and in
  reverse an assignment reads its adjoint from the top, pops, and propagates into its
  right-hand side;
- flags and bounds assigned inside loops are integer adstacks unless iteration-local, so the
  reverse sweep follows the forward path exactly (branch flags, reversed loops with the
  recorded or recomputed bounds);
- global stores and `+=` propagate the adjoint of their target into their value (a store
  then resets that adjoint to 0: the old value was overwritten); loads add into the gradient
  of their source (atomically), except those wrapped in `stop_grad` (`jr.stop_grad`), which
  `without_stop_grad` unwraps after this pass, in every kernel.
- `jr.atomic_min/max` statements into a field with a gradient pass the element's adjoint to
  the contributions equal to its final value, split among ties: a count task before the
  task's adjoint and a clear task after it (`ad_atomics.py`); the used value of a float
  atomic that carries a derivative is refused there too.
Adjoint rules are the table in `adjoint_rules.py`. while/break/continue cannot be
differentiated; neither can `jr.random()` nor an access to an ndarray's `.grad` (as in
Taichi): each raises `NotDifferentiableError` (a `KernelCompileError`) at its location.
"""
from __future__ import annotations

from dataclasses import field, replace
from typing import Callable

from ..frozen import frozen, record
from .. import dtypes
from ..dtypes import DataType
from ..errors import error_at, not_differentiable_at
from ..ir import nodes as n
from . import ad_atomics
from .adjoint_rules import Build, has_zero_derivative, rule_for
from .ad_recompute import (TAPED, iteration_locals, recompute_prefix, version_iteration_locals,
                           versioned)
from ..ir.walk import assigned_names
from ..ir.walk import all_exprs, bodies_of, exprs_of, map_expr, map_stmt, walk_expr, walk_stmts


@record
class TaskAd:
    """Per-task state of the transformation."""
    local_types: dict[str, DataType]
    has_grad: Callable[[n.Ref], bool]
    stack_vars: dict[str, n.AdStack] = field(default_factory=dict)
    plain_vars: set[str] = field(default_factory=set)
    recomputed: set[str] = field(default_factory=set)   # iteration-local (`ad_recompute`)
    counter: int = 0
    scope_adjoints: dict[str, int] = field(default_factory=dict)  # kernel-scope float -> slot
    scratch: n.FieldRef | None = None    # where kernel-scope adjoints meet across tasks
    kernel: str = ""                     # the kernel's name, for errors
    # partials taped in the forward sweep (`tape_partials`): id of the assignment -> (stack,
    # value to push before it); partial stack name -> the stack whose capacity it takes
    taping: bool = False           # whether partials are taped (the CPU: `Target.tape`)
    tape: dict[int, list[tuple[n.AdStack, n.Expr]]] = field(default_factory=dict)
    partial_of: dict[str, str] = field(default_factory=dict)
    extrema: ad_atomics.Scratch = field(default_factory=dict)   # min/max destinations

    def fresh(self, base: str, dt: DataType) -> str:
        self.counter += 1
        name = f"${base}{self.counter}"
        self.local_types[name] = dt
        return name


# ---- normalisation --------------------------------------------------------------------------

def normalize(body: n.Body, st: TaskAd) -> n.Body:
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, n.If):
            flag = st.fresh("flag", dtypes.i32)
            out.append(n.Assign(flag, s.cond, s.loc))
            out.append(n.If(n.Local(flag, dtypes.i32, s.loc), normalize(s.body, st),
                            normalize(s.orelse, st), s.loc))
        elif isinstance(s, n.For):
            dt = s.begin.dtype
            bounds: list[n.Expr] = []
            for part, value in (("begin", s.begin), ("end", s.end)):
                if isinstance(value, n.Const):   # a constant bound needs no record (no stack)
                    bounds.append(value)
                    continue
                name = st.fresh(part, dt)
                out.append(n.Assign(name, value, s.loc))
                bounds.append(n.Local(name, dt, s.loc))
            out.append(n.For(s.var, bounds[0], bounds[1], normalize(s.body, st), s.loc))
        elif isinstance(s, (n.While, n.Break, n.Continue)):
            raise not_differentiable_at(s.loc, st.kernel, INSTEAD[type(s)])
        elif isinstance(s, n.Return):
            continue
        else:
            out.append(s)
    return tuple(out)


# what a loop that cannot be differentiated says to write instead
INSTEAD = {
    n.While: "a while loop cannot be differentiated (its trip count is not recorded); write a "
             "for loop over range(n) with the trip count as its bound, or over range(max_steps)"
             " with a flag: `if not done: ...` around the body, setting done where the while "
             "condition would end it",
    n.Break: "break cannot be differentiated; keep a flag instead: `done = 0` before the loop,"
             " `if done == 0:` around the body, and `done = 1` where you would break (or make "
             "the remaining trip count the loop's bound)",
    n.Continue: "continue cannot be differentiated; put the rest of the loop body under an "
                "`if` instead (`if not cond: ...` where you wrote `if cond: continue`)",
}


def classify(body: n.Body, st: TaskAd) -> None:
    counts: dict[str, int] = {}
    in_loop: set[str] = set()

    def visit(b: n.Body, looped: bool) -> None:
        for s in b:
            if isinstance(s, n.Assign):
                counts[s.name] = counts.get(s.name, 0) + 1
                if looped:
                    in_loop.add(s.name)
            elif isinstance(s, n.If):
                visit(s.body, looped)
                visit(s.orelse, looped)
            elif isinstance(s, n.For):
                visit(s.body, True)

    visit(body, False)
    st.plain_vars = {name for name in counts if counts[name] == 1 and name not in in_loop}
    st.recomputed = iteration_locals(body, counts, st.plain_vars, set(st.scope_adjoints))
    for name in sorted(counts):
        if name not in st.plain_vars and name not in st.recomputed:
            st.stack_vars[name] = n.AdStack(len(st.stack_vars), name, st.local_types[name])


# ---- substitution of reads ------------------------------------------------------------------

def sub(e: n.Expr, st: TaskAd) -> n.Expr:
    """Reads of stack locals become stack-top reads; atomics used as values become loads."""
    def rewrite(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Local) and x.name in st.stack_vars:
            return n.StackTop(st.stack_vars[x.name], x.dtype, x.loc)
        return atomic_as_load(x)
    return map_expr(e, rewrite)


def atomic_as_load(x: n.Expr) -> n.Expr:
    return n.Load(x.ref, x.indices, x.dtype, x.loc) if isinstance(x, n.Atomic) else x


# ---- forward sweep --------------------------------------------------------------------------

def forward(body: n.Body, st: TaskAd) -> n.Body:
    """The forward sweep: locals keep their values in registers (reads stay `Local`), and
    every assignment of a stack local also pushes the new value for the reverse sweep. Only
    atomics used as values become loads (the primal kernel already performed them)."""
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, n.Assign):
            value = strip_atomic(s.value)
            pushes: list[n.Stmt] = []
            for stack, partial in st.tape.get(id(s), ()):   # (beside the assignment: one
                tmp = st.fresh("p", stack.dtype)           # block, where LLVM pairs sin
                out.append(n.Assign(tmp, partial, s.loc))  # and cos into sincos)
                pushes.append(n.StackPush(stack, n.Local(tmp, stack.dtype, s.loc), s.loc))
            out.append(n.Assign(s.name, value, s.loc))
            if s.name in st.stack_vars:
                stack = st.stack_vars[s.name]
                out.append(n.StackPush(stack, n.Local(s.name, stack.dtype, s.loc), s.loc))
            out.extend(pushes)
        elif isinstance(s, n.If):
            out.append(n.If(strip_atomic(s.cond), forward(s.body, st), forward(s.orelse, st),
                            s.loc))
        elif isinstance(s, n.For):
            out.append(n.For(s.var, strip_atomic(s.begin), strip_atomic(s.end),
                             forward(s.body, st), s.loc))
        # stores, atomics and other side effects belong to the primal kernel: not replayed
    return tuple(out)


# ---- reverse sweep --------------------------------------------------------------------------

def backprop(e: n.Expr, g: n.Expr, st: TaskAd, out: list[n.Stmt]) -> None:
    """Emit statements adding adjoint `g` into everything `e` (already substituted) reads."""
    if not e.dtype.is_float:
        return
    if isinstance(e, n.Simt):        # a value from another lane or from shared memory
        raise not_differentiable_at(e.loc, st.kernel, f"jr.simt block-level code ({e.op}) "
                                    "is not differentiated: its float values carry no "
                                    "gradient; differentiate a kernel without it")
    if isinstance(e, n.StackTop):
        out.append(n.StackAccAdj(e.stack, g, e.loc))
        return
    if isinstance(e, n.Local):
        if e.name in st.plain_vars or e.name in st.recomputed:
            adj_name = "adj$" + e.name
            st.local_types[adj_name] = e.dtype
            acc = n.Local(adj_name, e.dtype, e.loc)
            out.append(n.Assign(adj_name, n.Binary("+", acc, g, e.dtype, e.loc), e.loc))
        elif e.name in st.scope_adjoints and st.scratch is not None:
            out.append(scope_accumulate(st, e.name, g, e.loc))
        return
    if isinstance(e, n.Load):
        if st.has_grad(e.ref) and not e.ref.grad:   # a gradient read is a constant here
            out.append(n.Eval(n.Atomic("add", e.ref.adjoint(), e.indices, g, e.dtype, e.loc),
                              e.loc))
        return
    if isinstance(e, n.Select):
        # `a if c else b` evaluated one side: its adjoint follows the same branch (the side
        # not taken may read out of bounds: `x[i] if i < n else 0.0`)
        if not isinstance(g, (n.Local, n.Const)):
            tmp = st.fresh("g", g.dtype)
            out.append(n.Assign(tmp, g, e.loc))
            g = n.Local(tmp, g.dtype, e.loc)
        taken: list[n.Stmt] = []
        other: list[n.Stmt] = []
        backprop(e.a, g, st, taken)
        backprop(e.b, g, st, other)
        if taken or other:
            out.append(n.If(e.cond, tuple(taken), tuple(other), e.loc))
        return
    rule = rule_for(e)
    if rule is None:
        if has_zero_derivative(e):
            return
        raise error_at(e.loc, f"cannot differentiate {type(e).__name__} "
                       f"'{getattr(e, 'op', getattr(e, 'fn', ''))}': no adjoint rule (a jitrt "
                       "bug: please report it)")
    if not isinstance(g, (n.Local, n.Const)):
        tmp = st.fresh("g", g.dtype)
        out.append(n.Assign(tmp, g, e.loc))
        g = n.Local(tmp, g.dtype, e.loc)
    for operand, adj in rule(e, g, Build(e.loc)):
        backprop(operand, adj, st, out)


def scope_slot(st: TaskAd, name: str, loc: n.Loc) -> tuple[n.FieldRef, tuple[n.Expr, ...]]:
    assert st.scratch is not None
    return st.scratch, (n.Const(st.scope_adjoints[name], dtypes.i32, loc),)


def scope_accumulate(st: TaskAd, name: str, g: n.Expr, loc: n.Loc) -> n.Stmt:
    """The adjoint of a kernel-scope float read by this task (computed by another task) goes
    to the kernel's scratch field, where the defining task picks it up."""
    ref, idx = scope_slot(st, name, loc)
    value = g if g.dtype == ref.dtype else n.Cast(g, ref.dtype, loc)
    return n.Eval(n.Atomic("add", ref, idx, value, ref.dtype, loc), loc)


def scope_seed(st: TaskAd, name: str, dt: DataType, loc: n.Loc) -> n.Expr:
    """What later tasks accumulated for a kernel-scope float this task defines."""
    ref, idx = scope_slot(st, name, loc)
    load: n.Expr = n.Load(ref, idx, ref.dtype, loc)
    return load if dt == ref.dtype else n.Cast(load, dt, loc)


def reverse(body: n.Body, st: TaskAd) -> n.Body:
    out: list[n.Stmt] = []
    for s in reversed(body):
        if isinstance(s, n.Assign):
            if s.name in st.stack_vars:
                stack = st.stack_vars[s.name]
                if stack.dtype.is_float:
                    g = st.fresh("g", stack.dtype)
                    out.append(n.Assign(g, n.StackTopAdj(stack, stack.dtype, s.loc), s.loc))
                    out.append(n.StackPop(stack, s.loc))
                    own: list[n.Stmt] = []
                    backprop(sub(s.value, st), n.Local(g, stack.dtype, s.loc), st, own)
                    out.extend(tape_partials(s, own, st))
                else:
                    out.append(n.StackPop(stack, s.loc))
            elif s.value.dtype.is_float:
                st.local_types["adj$" + s.name] = s.value.dtype
                backprop(sub(s.value, st), n.Local("adj$" + s.name, s.value.dtype, s.loc), st,
                         out)
        elif isinstance(s, n.Store):
            target_adjoint(s.ref, s.indices, s.value, False, s.loc, st, out, overwrite=True)
        elif isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic) and \
                s.expr.op in ("add", "sub"):
            a = s.expr
            target_adjoint(a.ref, a.indices, a.value, a.op == "sub", s.loc, st, out)
        elif isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic) and s.expr.ref in st.extrema:
            extremum_adjoint(s.expr, st, out)
        elif isinstance(s, n.If):
            out.append(n.If(sub(s.cond, st), reverse(s.body, st), reverse(s.orelse, st), s.loc))
        elif isinstance(s, n.For):
            out.append(n.ReverseFor(s.var, sub(s.begin, st), sub(s.end, st),
                                    reverse(s.body, st), s.loc))
    prefix = recompute_prefix(body, out, st.recomputed, lambda e: sub(e, st))
    for assign in prefix:
        st.local_types.setdefault(assign.name, assign.value.dtype)
    return tuple(prefix) + tuple(out)


def extremum_adjoint(a: n.Atomic, st: TaskAd, out: list[n.Stmt]) -> None:
    """`jr.atomic_min/max(ref[indices], value)`: a contribution equal to the element's final
    value gets its share of the element's adjoint (`ad_atomics`: the count task moved it)."""
    value = sub(a.value, st)
    cond, g = ad_atomics.share(a, value, tuple(sub(i, st) for i in a.indices), st.extrema)
    inner: list[n.Stmt] = []
    backprop(value, g, st, inner)
    if inner:
        out.append(n.If(cond, tuple(inner), (), a.loc))


def tape_partials(s: n.Assign, adjoint: list[n.Stmt], st: TaskAd) -> list[n.Stmt]:
    """The reverse sweep's statements `adjoint` for the assignment `s` of a stack local, with
    each math call of primal values only (`v = sin(v) * 1.1` -> `cos(top(v))`) read from a
    stack of its own instead, onto which the forward sweep pushes it just before `s`: the
    forward sweep already computes the same function's sibling of the same operand there
    (`sin(v)`, which LLVM turns into one `sincos` call with it), and the reverse sweep is
    left with products. The value is the same: just before `s` the forward sweep's locals
    hold what the stack tops hold after `s`'s pop in the reverse sweep. A partial's stack
    takes the capacity of `s`'s own (`partial_of`): it is pushed and popped as often."""
    if not st.taping:
        return adjoint
    found: list[n.Math] = []
    for e in all_exprs(tuple(adjoint)):
        if isinstance(e, n.Math) and e.fn in TAPED and e not in found and primal_only(e, st):
            found.append(e)
    if not found:
        return adjoint
    locals_of = {stack.id: name for name, stack in st.stack_vars.items()}
    stacks: dict[n.Math, n.AdStack] = {}
    tape = st.tape.setdefault(id(s), [])
    for e in found:
        name = f"{s.name}$partial{len(st.partial_of)}"
        stack = n.AdStack(len(st.stack_vars), name, e.dtype)
        st.stack_vars[name] = stack
        st.partial_of[name] = s.name
        stacks[e] = stack

        def as_forward(x: n.Expr) -> n.Expr:
            if isinstance(x, n.StackTop):
                return n.Local(locals_of[x.stack.id], x.dtype, x.loc)
            return x
        tape.append((stack, map_expr(e, as_forward)))

    def read_tape(x: n.Expr) -> n.Expr:
        stack = stacks.get(x) if isinstance(x, n.Math) else None
        return x if stack is None else n.StackTop(stack, x.dtype, x.loc)
    out = [map_stmt(a, read_tape) for a in adjoint]
    return out + [n.StackPop(stacks[e], s.loc) for e in found]


def primal_only(e: n.Expr, st: TaskAd) -> bool:
    """Whether `e` reads stack tops and plain values only (no adjoint, no memory: it may be
    evaluated where the reverse sweep would not, and it never faults)."""
    tops = False
    for x in walk_expr(e):
        if isinstance(x, n.StackTop):
            tops = True
        elif isinstance(x, n.Local):
            if x.name in st.recomputed:      # (per iteration, like a stack top)
                tops = True
            elif x.name not in st.plain_vars:
                return False
        elif isinstance(x, n.Binary):
            if x.op in ("/", "//", "%") and not x.dtype.is_float:
                return False
        elif not isinstance(x, (n.Const, n.Arg, n.Shape, n.Unary, n.Select, n.Cast, n.Math)):
            return False
    return tops


def target_adjoint(ref: n.Ref, indices: tuple[n.Expr, ...], value: n.Expr, negate: bool,
                   loc: n.Loc, st: TaskAd, out: list[n.Stmt], overwrite: bool = False) -> None:
    """The adjoint of `ref[indices] = value` (overwrite) or `+= value`: the target's
    gradient flows into the value. A plain store overwrote the old value, so the gradient it
    held is used up here and reset to 0 (as Taichi and Quadrants do): earlier writes of the
    same element, and reads of it before the store, then see only what they contributed."""
    if not (ref.dtype.is_float and st.has_grad(ref)):
        return
    g = st.fresh("g", ref.dtype)
    idx = tuple(sub(i, st) for i in indices)
    out.append(n.Assign(g, n.Load(ref.adjoint(), idx, ref.dtype, loc), loc))
    if overwrite:
        out.append(n.Store(ref.adjoint(), idx, n.Const(0.0, ref.dtype, loc), loc))
    adj: n.Expr = n.Local(g, ref.dtype, loc)
    if negate:
        adj = n.Unary("neg", adj, ref.dtype, loc)
    backprop(sub(value, st), adj, st, out)


# ---- whole tasks and kernels ----------------------------------------------------------------

@frozen
class AdjointTask:
    task: n.Task               # the grad task (forward sweep + reverse sweep)
    normalized: n.Body         # the normalized primal body (for sizing)
    stack_vars: dict           # name -> AdStack
    primal_index: int = -1     # index of the primal task it differentiates
    partial_of: tuple[tuple[str, str], ...] = ()   # a partial's stack -> whose capacity


def rename_straight_line(body: n.Body, local_types: dict[str, DataType]) -> n.Body:
    """A parallel task's body with each assignment of a local that is assigned more than once,
    always at the top level of the body (straight-line code: what a `jr.static` loop unrolls
    to, `v += ...` repeated), given a name of its own, and the reads after it renamed: every
    version is then assigned once and is a plain value in the adjoint instead of an adstack."""
    top: dict[str, int] = {}
    for s in body:
        if isinstance(s, n.Assign):
            top[s.name] = top.get(s.name, 0) + 1
    nested = set().union(*(assigned_names(inner) for s in body for inner in bodies_of(s)))
    names = {name for name, count in top.items() if count > 1 and name not in nested}
    if not names:
        return body
    return versioned(body, names, local_types, "v")


def adjoint_task(task: n.Task, st: TaskAd) -> AdjointTask:
    local_types, loc = st.local_types, task.loc
    body = task.body
    if task.kind == "parallel":
        body = rename_straight_line(body, local_types)
    body = version_iteration_locals(normalize(body, st), local_types, set(st.scope_adjoints))
    classify(body, st)
    rev = reverse(body, st)        # (first: it tapes partials the forward sweep pushes)
    fwd = forward(body, st)
    inits = tuple(n.StackInit(stack, n.Const(0.0, stack.dtype, loc) if name in st.partial_of
                              else n.Local(name, stack.dtype, loc), loc)
                  for name, stack in st.stack_vars.items())
    adj_init: list[n.Stmt] = []
    for name in sorted(st.plain_vars):
        dt = local_types[name]
        if dt.is_float and ("adj$" + name in local_types or name in st.scope_adjoints):
            local_types["adj$" + name] = dt
            seed = scope_seed(st, name, dt, loc) if name in st.scope_adjoints else \
                n.Const(0.0, dt, loc)
            adj_init.append(n.Assign("adj$" + name, seed, loc))
    for name, stack in st.stack_vars.items():
        if stack.dtype.is_float and name in st.scope_adjoints:
            adj_init.append(n.StackAccAdj(stack, scope_seed(st, name, stack.dtype, loc), loc))
    new_body = inits + fwd + tuple(adj_init) + rev
    stacks = tuple(st.stack_vars.values())
    return AdjointTask(replace(task, body=new_body, stacks=stacks), body, dict(st.stack_vars),
                       partial_of=tuple(st.partial_of.items()))


def strip_writes(body: n.Body) -> n.Body:
    """A serial body without global side effects (replayed to recompute kernel-scope locals)."""
    out: list[n.Stmt] = []
    for s in body:
        if isinstance(s, (n.Store, n.Eval, n.Return)):
            continue
        if isinstance(s, n.If):
            s = replace(s, body=strip_writes(s.body), orelse=strip_writes(s.orelse))
        elif isinstance(s, (n.For, n.While)):
            s = replace(s, body=strip_writes(s.body))
        elif isinstance(s, n.Assign) and any(isinstance(e, n.Atomic) for e in all_exprs((s,))):
            s = n.Assign(s.name, strip_atomic(s.value), s.loc)
        out.append(s)
    return tuple(out)


def strip_atomic(e: n.Expr) -> n.Expr:
    """`e` with atomics used as values replaced by loads of their target."""
    return map_expr(e, atomic_as_load)


def reads_kernel_scope(task: n.Task, kernel_scope: set[str]) -> bool:
    """Whether a task (its body or its bounds) reads a local assigned by an earlier task."""
    return bool((local_reads(task) - assigned_names(task.body)) & kernel_scope)


def local_reads(task: n.Task) -> set[str]:
    exprs = list(all_exprs(task.body))
    for e in task.begins + task.ends:
        exprs += list(walk_expr(e))
    return {e.name for e in exprs if isinstance(e, n.Local)}


def scope_adjoint_slots(kernel: n.TaskedKernel, local_types: dict[str, DataType]
                        ) -> dict[str, int]:
    """Kernel-scope float locals that one task defines and a later task reads: their adjoints
    must cross task boundaries (each task runs in its own function, on its own threads)."""
    slots: dict[str, int] = {}
    defined: set[str] = set()
    for task in kernel.tasks:
        for name in sorted(local_reads(task) - assigned_names(task.body)):
            if name in defined and local_types[name].is_float:
                slots.setdefault(name, len(slots))
        if task.kind == "serial":
            defined |= assigned_names(task.body)
    return slots


def refuse_random(kernel: n.TaskedKernel) -> None:
    """A kernel that calls jr.random() cannot be differentiated: its adjoint launch reads the
    random state later and would draw other numbers than the forward launch did (a silently
    wrong gradient). Taichi refuses it too, with a RuntimeError that says "RandStmt not
    supported", which ported code may look for: the message keeps those words. The error is
    at the first call (each call reads the local the prologue loads the state into), else at
    the prologue."""
    seeds = {s.name for t in kernel.tasks for s in walk_stmts(t.body)
             if isinstance(s, n.Assign) and isinstance(s.value, n.Load)
             and isinstance(s.value.ref, n.FieldRef) and s.value.ref.name == n.RANDOM_STATE}
    calls: list[n.Loc] = []
    prologue: list[n.Loc] = []
    for task in kernel.tasks:
        for s in walk_stmts(task.body):
            if isinstance(s, n.Store) and isinstance(s.ref, n.FieldRef) and \
                    s.ref.name == n.RANDOM_STATE:
                prologue.append(s.loc)          # advances the state: not a call
                continue
            calls += [e.loc for root in exprs_of(s) for e in walk_expr(root)
                      if isinstance(e, n.Local) and e.name in seeds]
    if calls or prologue:
        first = min(calls, key=lambda c: (c.line, c.col)) if calls else prologue[0]
        raise not_differentiable_at(
            first, kernel.name, "jr.random() and jr.randn() cannot be differentiated (Taichi: "
            "RandStmt not supported in autodiff): the adjoint would draw other numbers than "
            "the forward launch; draw them in another kernel into a field and read that "
            "field here")


def refuse_array_grads(kernel: n.TaskedKernel, has_grad: Callable[[n.Ref], bool]) -> None:
    """An ndarray's `.grad` read or written in a kernel being differentiated: its adjoint
    would treat the gradient buffer as data and add into it at the same time, so Taichi
    refuses it, and so does jitrt. Not refused: a field's `.grad` (a field of its own, read
    as a constant, as in Taichi); an ndarray without a gradient has no `.grad` to read."""
    def bad(ref: n.Ref) -> bool:
        return isinstance(ref, n.ArrayRef) and ref.grad and has_grad(replace(ref, grad=False))
    for task in kernel.tasks:
        for s in walk_stmts(task.body):
            if isinstance(s, n.Store) and bad(s.ref):
                what = f"writes {s.ref.name}.grad"
                loc = s.loc
            else:
                hit = next((e for e in all_exprs((s,)) if isinstance(e, (n.Load, n.Atomic))
                            and bad(e.ref)), None)
                if hit is None:
                    continue
                what = f"{'reads' if isinstance(hit, n.Load) else 'updates'} {hit.ref.name}.grad"
                loc = hit.loc
            raise not_differentiable_at(
                loc, kernel.name, f"the kernel {what}, the gradient of an ndarray argument, "
                "and cannot be differentiated (in Taichi's words: Cannot automatically "
                "differentiate through a grad tensor): pass the gradient as an argument of its "
                "own (an ndarray without needs_grad)")


def differentiate(kernel: n.TaskedKernel, local_types: dict[str, DataType],
                  has_grad: Callable[[n.Ref], bool], tape: bool = False
                  ) -> tuple[n.TaskedKernel, list[AdjointTask | None]]:
    """The grad kernel. Returns it with, per grad task index, its AdjointTask (or None).

    A kernel-scope float defined in serial code and read by later tasks gets a slot in a
    hidden f64 field appended to the field table (`$scope_adjoints`, zeroed by a first serial
    task): readers add their adjoint there atomically; the defining task seeds its own adjoint
    of that local from it."""
    refuse_random(kernel)
    refuse_array_grads(kernel, has_grad)
    ad_atomics.refuse_atomic_values(kernel, has_grad)
    tasks: list[n.Task] = []
    infos: list[AdjointTask | None] = []
    fields = kernel.fields
    slots = scope_adjoint_slots(kernel, local_types)
    scratch = None
    if slots:
        scratch = n.FieldRef(len(fields), "$scope_adjoints", dtypes.f64, (len(slots),))
        fields = fields + (scratch,)
        zero = tuple(n.Store(scratch, (n.Const(k, dtypes.i32),), n.Const(0.0, dtypes.f64))
                     for k in range(len(slots)))
        tasks.append(n.Task("serial", zero))
        infos.append(None)
    fields, extrema = ad_atomics.scratch_fields(fields, kernel, has_grad)
    counter = 0
    for k in reversed(range(len(kernel.tasks))):
        task = kernel.tasks[k]
        prefix = kernel.tasks[:k]
        scope = set().union(*(assigned_names(t.body) for t in prefix if t.kind == "serial")) \
            if prefix else set()
        if scope and reads_kernel_scope(task, scope):
            for t in prefix:
                if t.kind == "serial":
                    replay = strip_writes(t.body)
                    if replay:
                        tasks.append(n.Task("serial", replay, loc=t.loc))
                        infos.append(None)
        st = TaskAd(local_types, has_grad, counter=counter, scope_adjoints=slots,
                    scratch=scratch, kernel=kernel.name, taping=tape, extrema=extrema)
        reduces = bool(ad_atomics.extrema(task.body, has_grad))
        if reduces:         # min/max reductions: count the ties first (ad_atomics)
            tasks.append(replace(task, body=ad_atomics.replay(
                task.body, has_grad, lambda a, loc: ad_atomics.count_statements(
                    a, loc, extrema, st.fresh))))
            infos.append(None)
        adj = replace(adjoint_task(task, st), primal_index=k)
        counter = st.counter   # fresh names stay unique across tasks (they share the entry)
        tasks.append(adj.task)
        infos.append(adj)
        if reduces:         # ... and clear the scratch after the adjoint
            tasks.append(replace(task, body=ad_atomics.replay(
                task.body, has_grad, lambda a, loc: ad_atomics.clear_statements(
                    a, loc, extrema))))
            infos.append(None)
    grad = n.TaskedKernel(kernel.name, kernel.params, fields, tuple(tasks), None)
    return grad, infos
