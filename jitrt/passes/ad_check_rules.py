"""Accesses a reverse pass cannot replay: refused when a grad kernel is built.

Stage: pass, run by the pipeline on grad kernels after `differentiate`. Input: the primal
`TaskedKernel` and its grad kernel. Output: nothing, or a `NotDifferentiableError` (a
`KernelCompileError`) at the offending write. Caches nothing.

The grad kernel runs after the primal kernel and reads globals again: a read is *repeated*
when the grad kernel loads the same source location and uses the value (the forward sweep
recomputes every local, but `t = x[i]` for `x[i] = t + 1.0` feeds nothing: not repeated).
Two rules, for each global (field or ndarray, not jitrt's hidden fields):
1. (Taichi's global data access rule) a repeated read must still see, when the kernel has
   finished, the value it saw: no write may touch its element after it. A write in an earlier
   task, or earlier in the same iteration (and not again in a later trip of an inner loop
   around both), is fine; so is one that provably touches another element: in some dimension
   the indices differ by a nonzero constant (`x[t + 1, i]` and `x[t, i]`, t an argument;
   within one iteration locals assigned once count as known, and an inner loop around both
   counts upwards: `y[k + 1] = y[k]`). `loss[None] += ...`, `y[i] = 2 * y[i]` and writes of
   globals whose values no adjoint uses are never refused.
2. in a parallel task, a global with a gradient or a repeated read must not be read in one
   iteration where another writes (the read value, and the order in which adjoints meet in
   its gradient, would depend on the threads: a cross-iteration read-after-write, which
   Taichi and Quadrants refuse too). Provably safe: the indices never meet (rule 1's
   constant, or `x[2 * i]` against `x[2 * i + 1]`: offsets apart by a non-multiple of the
   gcd of the loop variables' coefficients), or every parallel loop variable appears alone
   with the same coefficient and offset in one dimension of both (`x[i]` and `x[i]`,
   `v[i, 0]` and `v[i, 1]`), so equal elements mean the same iteration, where rule 1 applies.
   A task whose box is one point (`for _ in range(1)`) has no other iteration: rule 1 only.
Index expressions are integer polynomials (`index_forms.py`); anything else in an index (a
load, a division) proves nothing. Not seen: two ndarray arguments bound to the same memory.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..errors import not_differentiable_at
from ..ir import nodes as n
from .index_forms import Form, Scope, add, form, kernel_scope_defs, scope_of
from ..ir.walk import exprs_of, sub_exprs, walk_expr, walk_stmts
from ..frozen import frozen, record

Key = tuple[str, int]             # ("field", slot) | ("array", argument index)


@frozen
class Access:
    key: Key
    write: bool
    dims: tuple[Form, ...]
    seq: int                      # program order within the task
    loops: tuple[int, ...]        # ids of the inner loops around it, outermost first
    task: int
    loc: n.Loc
    name: str
    bound: bool = False           # read by a parallel task's range, before its iterations


def key_of(ref: n.Ref) -> Key | None:
    """The global a primal access names, or None for gradients and jitrt's hidden fields."""
    if ref.grad or ref.name.startswith("$") or ref.name == n.RANDOM_STATE:
        return None
    return ("field", ref.slot) if isinstance(ref, n.FieldRef) else ("array", ref.arg)


@record
class Needed:
    """What the grad kernel reads of the primal's globals: the reads it repeats (by source
    location: its loads are the primal's, locations kept), every read of the globals it loads
    at a place of its own, and the globals whose gradients it uses."""
    reads: set[tuple[Key, n.Loc]]
    every_read: set[Key]
    grads: set[Key]

    def keys(self) -> set[Key]:
        return {k for k, _ in self.reads} | self.every_read | self.grads

    def value_of(self, r: "Access") -> bool:
        return r.key in self.every_read or (r.key, r.loc) in self.reads


def needed_by(grad: n.TaskedKernel) -> Needed:
    out = Needed(set(), set(), set())
    for e in live_exprs(grad):
        if isinstance(e, (n.Load, n.Atomic)):
            k = key_of(replace(e.ref, grad=False))
            if k is None:
                continue
            if e.ref.grad:
                out.grads.add(k)
            elif isinstance(e, n.Load):
                if e.loc.line:
                    out.reads.add((k, e.loc))
                else:
                    out.every_read.add(k)
    return out


def live_exprs(grad: n.TaskedKernel) -> list[n.Expr]:
    """Every expression of the grad kernel whose value is used: all but the values of
    assignments to locals nothing used reads (the forward sweep recomputes every local, also
    those whose adjoints need no value: `t = x[i]` for `x[i] = t + 1.0`)."""
    stmts = [s for t in grad.tasks for s in walk_stmts(t.body)]
    roots = [x for t in grad.tasks for b in t.begins + t.ends for x in walk_expr(b)]
    roots += [x for s in stmts if not isinstance(s, n.Assign)
              for e in exprs_of(s) for x in walk_expr(e)]
    assigns = [s for s in stmts if isinstance(s, n.Assign)]
    live = {x.name for x in roots if isinstance(x, n.Local)}
    used: list[n.Expr] = []
    done: set[int] = set()
    changed = True
    while changed:
        changed = False
        for k, s in enumerate(assigns):
            if k not in done and s.name in live:
                done.add(k)
                changed = True
                for x in walk_expr(s.value):
                    used.append(x)
                    if isinstance(x, n.Local):
                        live.add(x.name)
    return roots + used


class Collector:
    """The accesses of one task to the globals in `needed`, in program order."""

    def __init__(self, task: int, scope: Scope, needed: set[Key]) -> None:
        self.task, self.scope, self.needed = task, scope, needed
        self.out: list[Access] = []
        self.seq = 0

    def add(self, ref: n.Ref, indices: tuple[n.Expr, ...], write: bool, loc: n.Loc,
            loops: tuple[int, ...]) -> None:
        k = key_of(ref)
        if k is not None and k in self.needed:
            dims = tuple(form(i, self.scope) for i in indices)
            self.out.append(Access(k, write, dims, self.seq, loops, self.task, loc, ref.name))

    def expr(self, e: n.Expr, loops: tuple[int, ...]) -> None:
        for child in sub_exprs(e):
            self.expr(child, loops)
        if isinstance(e, (n.Load, n.Atomic)):
            self.add(e.ref, e.indices, False, e.loc, loops)
        if isinstance(e, n.Atomic):       # its value is used: a read, then a write
            self.seq += 1
            self.add(e.ref, e.indices, True, e.loc, loops)

    def body(self, body: n.Body, loops: tuple[int, ...]) -> None:
        for s in body:
            self.seq += 1
            if isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic):
                a = s.expr
                for e in (a.value,) + a.indices:
                    self.expr(e, loops)
                self.seq += 1
                self.add(a.ref, a.indices, True, s.loc, loops)
                continue
            inner = loops + (id(s),) if isinstance(s, (n.For, n.While)) else loops
            for e in exprs_of(s):
                self.expr(e, inner if isinstance(s, n.While) else loops)
            if isinstance(s, n.Store):
                self.seq += 1
                self.add(s.ref, s.indices, True, s.loc, loops)
            for name in ("body", "orelse"):
                nested = getattr(s, name, None)
                if isinstance(nested, tuple):
                    self.body(nested, inner)


def check_access_rules(primal: n.TaskedKernel, grad: n.TaskedKernel) -> None:
    """Raise at the first write the grad kernel cannot be built around (module docstring)."""
    need = needed_by(grad)
    needed = need.keys()
    if not needed:
        return
    outer = kernel_scope_defs(primal)
    scopes: list[Scope] = []
    accesses: list[Access] = []
    for t, task in enumerate(primal.tasks):
        scope = scope_of(task, outer)
        scopes.append(scope)
        c = Collector(t, scope, needed)
        for e in task.begins + task.ends:
            c.expr(e, ())
        c.out = [replace(a, bound=True) for a in c.out]
        c.body(task.body, ())
        accesses += c.out
    reads = [a for a in accesses if not a.write]
    for w in (a for a in accesses if a.write):
        for r in reads:
            if r.key == w.key:
                task = primal.tasks[w.task]
                kind = "serial" if runs_once(task) else task.kind
                problem = conflict(r, w, scopes[w.task], kind)
                if problem == "cross-iteration" or problem and need.value_of(r):
                    raise refusal(primal.name, r, w, problem)


def runs_once(task: n.Task) -> bool:
    """A parallel task over a box of at most one point (DiffTaichi's electric.py: `for _ in
    range(1)`): no other iteration exists to meet, so it is checked as serial code."""
    return all(isinstance(b, n.Const) and isinstance(e, n.Const) and e.value - b.value <= 1
               for b, e in zip(task.begins, task.ends))


def conflict(r: Access, w: Access, scope: Scope, kind: str) -> str:
    """"" when the write `w` cannot change what the read `r` saw, else which rule it breaks."""
    if len(r.dims) != len(w.dims):
        return ""
    if r.task != w.task or r.bound:
        return "overwrite" if w.task >= r.task and not distinct(r, w, is_global) else ""
    if kind == "parallel":
        if distinct(r, w, lambda atom: scope.kind(atom) == "inv") or \
                apart_across_iterations(r, w, scope):
            return ""
        if not same_iteration_only(r, w, scope):
            return "cross-iteration"
    follows = w.seq > r.seq or bool(set(r.loops) & set(w.loops))
    return "overwrite" if follows and not distinct_in_iteration(r, w, scope) else ""


def is_global(atom: tuple) -> bool:
    """Atoms with one value in every task of a launch (locals may be assigned between)."""
    return atom[0] in ("arg", "shape")


def distinct(r: Access, w: Access, known: Callable[[tuple], bool]) -> bool:
    """Some dimension differs by a nonzero constant, every atom in it being `known`."""
    for a, b in zip(r.dims, w.dims):
        diff = add(a, b, -1)
        if set(diff) == {()} and all(known(atom) for m in list(a) + list(b) for atom in m):
            return True
    return False


def apart_across_iterations(r: Access, w: Access, scope: Scope) -> bool:
    """Some dimension is `sum(a_k * v_k) + c` in both (parallel variables v_k, the same
    coefficients, invariant terms equal) with the constants differing by a non-multiple of
    gcd(a_k): no two iterations reach one element there (`x[2 * i]`, `x[2 * i + 1]`)."""
    for a, b in zip(r.dims, w.dims):
        diff = add(a, b, -1)
        monos = (set(a) | set(b)) - {()}
        if set(diff) - {()} or not all(
                len(m) == 1 and scope.kind(m[0]) == "pvar" or
                all(scope.kind(atom) == "inv" for atom in m) for m in monos):
            continue
        g = 0
        for m in monos:
            if len(m) == 1 and scope.kind(m[0]) == "pvar":
                g = math.gcd(g, a[m])
        if g > 1 and diff.get((), 0) % g:
            return True
    return False


def same_iteration_only(r: Access, w: Access, scope: Scope) -> bool:
    """Whether equal elements imply equal iterations: each parallel variable alone (times a
    constant) in one dimension that is the same in both, beside invariant terms only."""
    for v in scope.pvars:
        mono = (("local", v),)
        if not any(a == b and a.get(mono) and all(
                m == mono or all(scope.kind(atom) == "inv" for atom in m) for m in a)
                for a, b in zip(r.dims, w.dims)):
            return False
    return True


def distinct_in_iteration(r: Access, w: Access, scope: Scope) -> bool:
    """Within one iteration of the task, the write `w` (in program order after `r`, or in a
    later trip of an inner loop around both) never touches the element `r` read."""
    common = set(r.loops) & set(w.loops)
    gap = 0 if w.seq > r.seq else 1            # how many inner trips later w comes at least
    for a, b in zip(r.dims, w.dims):
        step = 0
        ok = True
        for m in (set(a) | set(b)) - {()}:
            kinds = [scope.kind(atom) for atom in m]
            if all(k in ("inv", "pvar", "stable") for k in kinds):
                ok = ok and a.get(m) == b.get(m)
            elif len(m) == 1 and kinds == ["inner"] and len(common) == 1 and \
                    scope.inner[m[0][1]] in common and a.get(m) == b.get(m):
                step = a[m]
            else:
                ok = False
        c = a.get((), 0) - b.get((), 0)
        if ok and (c != 0 if step == 0 else c % step != 0 or c // step < gap):
            return True
    return False


def refusal(kernel: str, r: Access, w: Access, problem: str) -> Exception:
    read = f"line {r.loc.line}" if r.loc.line else "a read"
    if problem == "cross-iteration":
        return not_differentiable_at(
            w.loc, kernel, f"'{w.name}' is written here at an index another iteration of this "
            f"parallel loop may read ({read}): a cross-iteration read-after-write through a "
            "global cannot be differentiated (the value read, and so the gradient, depends on "
            "the order the threads run in; Taichi and Quadrants refuse it too). Read the old "
            "values from one field and write the new ones to another (y[i + 1] = f(x[i])), "
            "or read and write the same index in each iteration")
    return not_differentiable_at(
        w.loc, kernel, f"'{w.name}' is written here after this kernel read the same element "
        f"({read}), and the reverse pass needs the value that was read (Taichi's global data "
        "access rule: a global read for a gradient is not overwritten in the same kernel). "
        "Write the new value to another field or element, e.g. one per step: "
        "x[t + 1, i] = f(x[t, i])")
