"""Iteration-local locals of an adjoint task: recomputed in the reverse sweep, not stacked.

Stage: helper of `autodiff.py` (grad kernels only). Input: a task body after `normalize` and
what `classify` counted (assignments per local, the plain values, the kernel-scope floats
whose adjoints cross tasks). Output: the locals the reverse sweep recomputes instead of
popping them from an adstack (`iteration_locals`), and the statements that recompute the
ones a reversed body reads (`recompute_prefix`). Caches nothing.

A local `v` assigned inside a loop is *iteration-local* when
- it is assigned exactly once in the task body, `v = e`, a statement of some body L (a loop
  body, or a branch inside one);
- every read of `v` is in a statement after that assignment in L (nested anywhere inside
  it), and `e` does not read `v`: each read sees the value assigned in the same pass through
  L, never one from an earlier iteration (it is not loop-carried) nor one read after L;
- `e` is *recomputable*: constants, arguments, shapes, arithmetic, comparisons, selects,
  casts, math other than the libm functions whose partials the CPU tapes (`TAPED`), loads
  of the primal's fields and ndarrays (no gradient, no hidden field, no atomic), and reads of
  locals that hold the same value wherever L runs: locals the task never assigns (kernel-scope
  values, the loop variables of enclosing loops that no loop rebinds), plain values (assigned
  once, outside loops) assigned before, and other iteration-local locals.

What the reverse sweep does instead of a stack: at the start of each reversed L it assigns
`v = e` again (in the forward order, only the ones its statements read), and a float `v`
gets a plain adjoint `adj$v` reset to 0 there, which its reads add into and its assignment
propagates into `e`. This is Taichi's rule too: only loop-carried locals are stacked, the
rest is recomputed. Why the value is the same: the reversed L runs exactly where L ran (the
recorded flags and bounds), with the same loop variables, so every operand holds what it
held in the forward sweep; the grad kernel writes no primal global, so a load reads there
what it read in the forward sweep, which the global data access rule (`ad_check_rules.py`,
run on the grad kernel, where the recomputed loads are live exactly when the reverse sweep
uses their values) already requires to be what the primal kernel read. A division or an
access recomputed there faults only where the forward sweep's already did.
"""
from __future__ import annotations

from typing import Callable

from ..ir import nodes as n
from ..ir.walk import all_exprs, bodies_of, walk_expr, walk_stmts

# math functions whose partials the CPU tapes (`autodiff.tape_partials`): a libm call each,
# worth a stack entry rather than a second call in the reverse sweep
TAPED = frozenset(("sin", "cos", "tan", "exp", "log", "pow", "tanh", "asin", "acos", "atan",
                   "atan2", "sinh", "cosh"))

_PURE = (n.Const, n.Arg, n.Shape, n.Unary, n.Binary, n.Select, n.Cast)


def iteration_locals(body: n.Body, counts: dict[str, int], plain: set[str],
                     excluded: set[str]) -> set[str]:
    """The iteration-local locals of a normalized task body (module docstring), `excluded`
    never among them."""
    assigns = {s.name for s in walk_stmts(body) if isinstance(s, n.Assign)}
    loop_vars = {s.var for s in walk_stmts(body) if isinstance(s, n.For)}
    stable_vars = loop_vars - assigns - rebound_loop_vars(body)
    reads = read_counts(body)
    found: set[str] = set()
    done: set[str] = set()       # plain values assigned so far (program order)

    def operand_ok(name: str, enclosing: frozenset[str]) -> bool:
        if name in found or name in done:
            return True
        if name in loop_vars:
            return name in enclosing and name in stable_vars
        return name not in assigns

    def visit(b: n.Body, enclosing: frozenset[str]) -> None:
        later = reads_after(b) if enclosing else {}
        for k, s in enumerate(b):
            if isinstance(s, n.Assign):
                if enclosing and counts.get(s.name) == 1 and s.name not in excluded and \
                        reads.get(s.name, 0) == later[k] and \
                        recomputable(s.value, lambda x: operand_ok(x, enclosing)):
                    found.add(s.name)
                elif s.name in plain:
                    done.add(s.name)
            inner = enclosing | {s.var} if isinstance(s, n.For) else enclosing
            for nested in bodies_of(s):
                visit(nested, inner)

    visit(body, frozenset())
    return found


def recomputable(e: n.Expr, local_ok: Callable[[str], bool]) -> bool:
    for x in walk_expr(e):
        if isinstance(x, n.Local):
            if not local_ok(x.name):
                return False
        elif isinstance(x, n.Math):
            if x.fn in TAPED:
                return False
        elif isinstance(x, n.Load):
            if x.ref.grad or x.ref.name.startswith("$") or x.ref.name == n.RANDOM_STATE:
                return False
        elif not isinstance(x, _PURE):
            return False
    return True


def rebound_loop_vars(body: n.Body) -> set[str]:
    """Loop variables of a loop nested in a loop of the same variable (shadowed)."""
    out: set[str] = set()

    def visit(b: n.Body, enclosing: frozenset[str]) -> None:
        for s in b:
            inner = enclosing
            if isinstance(s, n.For):
                if s.var in enclosing:
                    out.add(s.var)
                inner = enclosing | {s.var}
            for nested in bodies_of(s):
                visit(nested, inner)
    visit(body, frozenset())
    return out


def reads_after(body: n.Body) -> dict[int, int]:
    """For each assignment `body[k]`: how often the statements after it read its local."""
    after: dict[str, int] = {}
    out: dict[int, int] = {}
    for k in reversed(range(len(body))):
        s = body[k]
        if isinstance(s, n.Assign):
            out[k] = after.get(s.name, 0)
        for name, count in read_counts((s,)).items():
            after[name] = after.get(name, 0) + count
    return out


def read_counts(body: n.Body) -> dict[str, int]:
    counts: dict[str, int] = {}
    for x in all_exprs(body):
        if isinstance(x, n.Local):
            counts[x.name] = counts.get(x.name, 0) + 1
    return counts


def recompute_prefix(body: n.Body, reversed_body: list[n.Stmt], names: set[str],
                     sub: Callable[[n.Expr], n.Expr]) -> list[n.Assign]:
    """What the reverse sweep assigns at the start of the reversed `body`: the iteration-local
    locals `body` defines that `reversed_body` reads (and those they read), in the forward
    order, and the adjoint `adj$v` of each float one it accumulates into, reset to 0."""
    needed = set(read_counts(tuple(reversed_body)))
    defs = [s for s in body if isinstance(s, n.Assign) and s.name in names]
    out: list[n.Assign] = []
    for s in reversed(defs):
        if "adj$" + s.name in needed:
            out.append(n.Assign("adj$" + s.name, n.Const(0.0, s.value.dtype, s.loc), s.loc))
        if s.name in needed:
            value = sub(s.value)
            out.append(n.Assign(s.name, value, s.loc))
            needed |= set(read_counts((n.Eval(value, s.loc),)))
    return out[::-1]
