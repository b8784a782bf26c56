"""Index expressions as integer polynomials over atoms, for proofs that two accesses of a
global touch different elements (`ad_check_rules.py`).

Stage: analysis helper of the passes. Input: index expressions of one task and the task's
once-assigned locals (substituted, so `j = i + 1; x[j]` is `x[i + 1]`). Output: a `Form`, a
mapping from monomials (sorted tuples of atoms) to integer coefficients, `()` the constant.
Atoms are scalar arguments, ndarray shapes, locals and any other expression taken whole
(a load, a division: opaque). Whether an atom has the same value at two accesses is decided
by the caller (`Scope.kind`). Caches nothing.
"""
from __future__ import annotations

from dataclasses import field

from ..ir import nodes as n
from ..ir.walk import walk_stmts
from ..frozen import record

Atom = tuple                      # ("arg", index, component) | ("shape", arg, axis) | ...
Monomial = tuple[Atom, ...]
Form = dict[Monomial, int]


def const(c: int) -> Form:
    return {(): c} if c else {}


def add(a: Form, b: Form, sign: int = 1) -> Form:
    out = dict(a)
    for m, c in b.items():
        v = out.get(m, 0) + sign * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def mul(a: Form, b: Form) -> Form:
    out: Form = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            out = add(out, {tuple(sorted(ma + mb)): ca * cb})
    return out


@record
class Scope:
    """What the atoms of one task are: its parallel loop variables, its inner loop variables
    (name -> the id of their loop), its once-assigned locals (substituted) and the locals it
    assigns more than once."""
    pvars: frozenset[str]
    inner: dict[str, int] = field(default_factory=dict)
    defs: dict[str, n.Expr] = field(default_factory=dict)
    stable: set[str] = field(default_factory=set)     # once-assigned outside inner loops
    assigned: set[str] = field(default_factory=set)

    def kind(self, atom: Atom) -> str:
        """"inv": the same in every iteration of the task; "pvar": a parallel loop variable;
        "stable": fixed within an iteration; "inner": an inner loop's variable; "unstable"."""
        if atom[0] in ("arg", "shape"):
            return "inv"
        if atom[0] == "local":
            name = atom[1]
            if name in self.pvars:
                return "pvar"
            if name in self.inner:
                return "inner"
            if name in self.stable:
                return "stable"
            return "unstable" if name in self.assigned else "inv"
        return "unstable"


def scope_of(task: n.Task, outer: dict[str, n.Expr]) -> Scope:
    """The scope of `task`; `outer`: the kernel-scope definitions it may substitute."""
    counts: dict[str, int] = {}
    looped: set[str] = set()
    inner: dict[str, int] = {}
    defs: dict[str, n.Expr] = {}

    def visit(body: n.Body, in_loop: bool) -> None:
        for s in body:
            if isinstance(s, n.Assign):
                counts[s.name] = counts.get(s.name, 0) + 1
                defs[s.name] = s.value
                if in_loop:
                    looped.add(s.name)
            elif isinstance(s, (n.For, n.While)):
                if isinstance(s, n.For):
                    inner[s.var] = id(s)
                    counts[s.var] = counts.get(s.var, 0) + 1
                visit(s.body, True)
            elif isinstance(s, n.If):
                visit(s.body, in_loop)
                visit(s.orelse, in_loop)
    visit(task.body, False)
    once = {name for name, c in counts.items() if c == 1 and name not in inner}
    defs = {k: v for k, v in defs.items() if k in once}
    defs.update((k, v) for k, v in outer.items() if k not in counts)
    return Scope(frozenset(task.vars), {k: v for k, v in inner.items() if counts[k] == 1},
                 defs,
                 {k for k in once if k not in looped}, set(counts))


def form(e: n.Expr, scope: Scope, depth: int = 0) -> Form:
    """`e` as a polynomial (once-assigned locals substituted when their value is one)."""
    if isinstance(e, n.Const) and isinstance(e.value, int):
        return const(int(e.value))
    if isinstance(e, n.Cast) and not e.dtype.is_float and not e.x.dtype.is_float:
        return form(e.x, scope, depth)
    if isinstance(e, n.Unary) and e.op == "neg":
        return add({}, form(e.x, scope, depth), -1)
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*") and not e.dtype.is_float:
        a, b = form(e.a, scope, depth), form(e.b, scope, depth)
        return mul(a, b) if e.op == "*" else add(a, b, -1 if e.op == "-" else 1)
    if isinstance(e, n.Arg):
        return {(("arg", e.index, e.component),): 1}
    if isinstance(e, n.Shape):
        return {(("shape", e.ref.arg, e.axis),): 1}
    if isinstance(e, n.Local):
        value = scope.defs.get(e.name)
        if value is not None and depth < 8 and not any(
                m and any(a[0] == "opaque" for a in m)
                for m in form(value, scope, depth + 1)):
            return form(value, scope, depth + 1)
        return {(("local", e.name),): 1}
    return {(("opaque", e),): 1}


def kernel_scope_defs(kernel: n.TaskedKernel) -> dict[str, n.Expr]:
    """Locals assigned exactly once in the whole kernel, in serial code (their values, which
    every later task sees), e.g. the begin and step locals of a stepped range."""
    counts: dict[str, int] = {}
    defs: dict[str, n.Expr] = {}
    for task in kernel.tasks:
        for s in walk_stmts(task.body):
            if isinstance(s, n.Assign):
                counts[s.name] = counts.get(s.name, 0) + 1
                if task.kind == "serial":
                    defs[s.name] = s.value
    return {k: v for k, v in defs.items() if counts[k] == 1}
