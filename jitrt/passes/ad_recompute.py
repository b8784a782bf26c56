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
  once, outside loops) assigned before, other iteration-local locals, and locals that meet
  the first two conditions but whose own value is not recomputable (`w = sin(x[i])`): those
  are stacked, pushed once per pass through their body, so the reverse sweep reads their
  stack's top, which holds the same pass's value until their own assignment is reversed.

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

from dataclasses import replace
from typing import Callable

from ..dtypes import DataType
from ..ir import nodes as n
from ..ir.walk import all_exprs, assigned_names, bodies_of, map_stmt, walk_expr, walk_stmts

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
    once: set[str] = set()       # stacked, but pushed once per pass, read after it only

    def operand_ok(name: str, enclosing: frozenset[str]) -> bool:
        if name in found or name in done or name in once:
            return True
        if name in loop_vars:
            return name in enclosing and name in stable_vars
        return name not in assigns

    def visit(b: n.Body, enclosing: frozenset[str]) -> None:
        later = reads_after(b) if enclosing else {}
        for k, s in enumerate(b):
            if isinstance(s, n.Assign):
                if enclosing and counts.get(s.name) == 1 and s.name not in excluded and \
                        reads.get(s.name, 0) == later[k]:
                    if recomputable(s.value, lambda x: operand_ok(x, enclosing)):
                        found.add(s.name)
                    else:
                        once.add(s.name)
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


# ---- versions of locals assigned more than once in an iteration -----------------------------

def version_iteration_locals(body: n.Body, local_types: dict[str, DataType],
                             excluded: set[str]) -> n.Body:
    """A normalized task body in which each local that a loop body L assigns more than once,
    but reads only after its first assignment in L (`v = i - 1; if v < 0: v = n - 1`, what an
    inlined `@jr.func` with an early fix-up leaves), gets a name per assignment (`v$i1`,
    `v$i2`), the reads renamed to the version they see, and each `if` that only assigns such
    locals becomes selects (`v$i2 = v$i1 if $flag else ...`, evaluating the chosen side only):
    every version is then assigned once, and iteration-local when its value qualifies.
    Requirements, for the local `v` and the loop body L: every assignment of `v` in the task is
    a statement of L or of a branch of an `if` in L whose branches hold assignments only, every
    read of `v` is inside L, and the first statement of L that reads or assigns `v` is an
    assignment of L that does not read it (so no read sees another iteration's value). The
    `excluded` locals (kernel-scope floats whose adjoints cross tasks) keep their names."""
    reads = read_counts(body)
    sites = {name: where for name, where in assignment_sites(body).items()
             if name not in excluded}
    return tuple(_version_in(s, reads, sites, local_types) for s in body)


def assignment_sites(body: n.Body) -> dict[str, set[int]]:
    """For each local: the ids of the bodies whose statements assign it (an `if`'s branches
    counted as the body holding the `if`, when they hold assignments only)."""
    out: dict[str, set[int]] = {}

    def visit(b: n.Body) -> None:
        for s in b:
            if isinstance(s, n.Assign):
                out.setdefault(s.name, set()).add(id(b))
            elif flat_if(s):
                for a in branch_assigns(s):
                    out.setdefault(a.name, set()).add(id(b))
            else:
                for name in assigned_names((s,)) - set(_nested_assigns(s)):
                    out.setdefault(name, set()).add(-1)     # a loop variable, a real func
                for nested in bodies_of(s):
                    visit(nested)
    visit(body)
    return out


def _nested_assigns(s: n.Stmt) -> list[str]:
    return [x.name for x in walk_stmts((s,)) if isinstance(x, n.Assign)]


def flat_if(s: n.Stmt) -> bool:
    """An `if` on a flag local whose branches hold assignments only."""
    return isinstance(s, n.If) and isinstance(s.cond, n.Local) and \
        all(isinstance(a, n.Assign) for a in s.body + s.orelse)


def branch_assigns(s: n.Stmt) -> list[n.Assign]:
    """The assignments of a flat `if`, the `else` branch's last."""
    branches = s.body + s.orelse if isinstance(s, n.If) else ()
    return [a for a in branches if isinstance(a, n.Assign)]


def _version_in(s: n.Stmt, reads: dict[str, int], sites: dict[str, set[int]],
                local_types: dict[str, DataType]) -> n.Stmt:
    if isinstance(s, n.For):
        names = versioned_names(s.body, reads, sites)     # (the body's id is in `sites`)
        body = tuple(_version_in(x, reads, sites, local_types) for x in s.body)
        return replace(s, body=version_loop_body(body, names, local_types))
    if isinstance(s, n.If):
        return replace(s, body=tuple(_version_in(x, reads, sites, local_types) for x in s.body),
                       orelse=tuple(_version_in(x, reads, sites, local_types)
                                    for x in s.orelse))
    return s


def version_loop_body(body: n.Body, names: set[str], local_types: dict[str, DataType]
                      ) -> n.Body:
    """`body` with the flat `if`s assigning `names` as selects, and each assignment of one of
    `names` a version of its own."""
    if not names:
        return body
    flat: list[n.Stmt] = []
    for s in body:
        if isinstance(s, n.If) and flat_if(s) and {a.name for a in branch_assigns(s)} <= names:
            for branch, taken in ((s.body, True), (s.orelse, False)):
                flat += [as_select(a, s.cond, taken, local_types) for a in branch
                         if isinstance(a, n.Assign)]
        else:
            flat.append(s)
    return versioned(tuple(flat), names, local_types, "i")


def versioned(body: n.Body, names: set[str], local_types: dict[str, DataType], tag: str
              ) -> n.Body:
    """Straight-line `body` with each assignment of one of `names` a local of its own
    (`v$<tag>1`, `v$<tag>2`, ...: typed in `local_types`) and every read renamed to the
    version it sees."""
    current: dict[str, str] = {}
    versions: dict[str, int] = {}

    def read(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Local) and x.name in current:
            return replace(x, name=current[x.name])
        return x
    out: list[n.Stmt] = []
    for s in body:
        s = map_stmt(s, read)
        if isinstance(s, n.Assign) and s.name in names:
            versions[s.name] = versions.get(s.name, 0) + 1
            new = f"{s.name}${tag}{versions[s.name]}"
            local_types[new] = local_types[s.name]
            current[s.name] = new
            s = replace(s, name=new)
        out.append(s)
    return tuple(out)


def versioned_names(body: n.Body, reads: dict[str, int], sites: dict[str, set[int]]
                    ) -> set[str]:
    """The locals `version_loop_body` renames in the loop body `body` (the requirements in
    `version_iteration_locals`), those with one assignment left out (nothing to rename)."""
    here = {name for name, where in sites.items() if where == {id(body)}}
    inside = read_counts(body)
    first: dict[str, bool] = {}          # name -> whether its first touch is a clean assign
    count: dict[str, int] = {}
    for s in body:
        touched = set(read_counts((s,))) | set(_nested_assigns(s))
        for name in touched & here:
            if name not in first:
                first[name] = isinstance(s, n.Assign) and s.name == name and \
                    name not in read_counts((s,))
        for name in _nested_assigns(s):
            count[name] = count.get(name, 0) + 1
    names = {v for v in here if first.get(v) and count.get(v, 0) > 1 and
             reads.get(v, 0) == inside.get(v, 0)}
    changed = True
    while changed:                       # an `if` that also assigns another local stays
        changed = False
        for s in body:
            if flat_if(s):
                assigned = {a.name for a in branch_assigns(s)}
                if assigned & names and not assigned <= names:
                    names -= assigned
                    changed = True
    return names


def as_select(a: n.Assign, cond: n.Expr, taken: bool, local_types: dict[str, DataType]
              ) -> n.Assign:
    """`name = value` under `if cond` (`taken`) or its `else`, as an unconditional assignment."""
    dt = local_types[a.name]
    value = a.value if a.value.dtype == dt else n.Cast(a.value, dt, a.loc)
    old = n.Local(a.name, dt, a.loc)
    pair = (value, old) if taken else (old, value)
    return n.Assign(a.name, n.Select(cond, pair[0], pair[1], dt, a.loc), a.loc)
