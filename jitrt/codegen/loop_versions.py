"""A GPU thread's inner loops versioned on their bounds checks: one test before the loop
instead of a check per access and iteration.

Stage: codegen (targets whose failing check ends the thread, `TargetTraits.fault_ends_thread`:
CUDA). A thread's innermost serial `for` loop whose every access has indices affine in the
loop variable or unchanged by the body is emitted twice (`StmtEmitter.stmt_For`): without
those checks when a test before the loop shows every index inside its array over the loop's
whole range (`bounds.box_inside`, the loop as a one-axis box), and with every check otherwise,
so an access out of bounds still faults with its own site and index. A local the body assigns
once, at its top level, before any statement reads it, counts as the expression assigned
(`i_cr = i_c + i_r` then `jac[i_cr, i_d, i_b]`). The check-free copy has one exit, which lets
LLVM unroll it and ptxas predicate its conditional loads, as in Taichi's and Quadrants' code
without checks (Genesis's Hessian assembly: docs/gpu.md, "Bounds checks on CUDA").

Only loops whose statements assign locals, store, branch, `continue` or `break`
(`VERSIONED_STMTS`: Genesis's Hessian assembly and its envelope's loops) and that become free
of checks are versioned: a loop with an access that stays checked (an index loaded from
data), a nested loop, a barrier, warp or shared-memory operation (a thread's copy must not
differ from its warp's), an atomic, an adstack operation, a call, a print or an assertion
keeps one copy (each copy costs compile time: LLVM and ptxas see the body twice). Caches
nothing.
"""
from __future__ import annotations

from typing import Any

from ..ir import nodes as n
from ..ir.walk import all_exprs, assigned_names, map_expr, walk_expr, walk_stmts
from . import bounds
from .targets import INSTRUCTIONS

# the statements of a loop body without effects (`effect_free`) and of one that may be
# versioned (`proven_accesses`)
PURE_STMTS = (n.Assign, n.If, n.Continue)
VERSIONED_STMTS = PURE_STMTS + (n.Store, n.Eval, n.Break)
EFFECTS = (n.Atomic, n.Simt, n.Print, n.Assertion)


def only(body: n.Body, stmts: tuple[type, ...]) -> bool:
    """Whether every statement of the body (nested ones too) is one of `stmts` and no
    expression is an atomic, a block-level operation, a print or an assertion (so: no call,
    adstack operation, nested loop or return either)."""
    return (all(isinstance(s, stmts) for s in walk_stmts(body))
            and not any(isinstance(e, EFFECTS) for e in all_exprs(body)))


def effect_free(body: n.Body) -> bool:
    """Whether a loop body only computes: locals assigned from reads and arithmetic, ifs,
    `continue`; no store, atomic, call, print, assertion, block-level operation, adstack
    operation, nested loop, `break` or return."""
    return only(body, PURE_STMTS)


def stores_only(body: n.Body) -> bool:
    """Whether a loop body's only effects are stores to fields and ndarrays (no `break`)."""
    return only(body, PURE_STMTS + (n.Store, n.Eval))


def calls_math(body: n.Body) -> bool:
    """Whether the body calls a math function of the device library (sin, exp, ...: a call
    LLVM may not copy while the kernel is optimised, `nvptx_math.BIG_BODY`, and long enough
    that the loop's own branch is nothing beside it)."""
    return any(isinstance(e, n.Math) and e.fn not in INSTRUCTIONS for e in all_exprs(body))


def proven_accesses(loop: n.For) -> dict[bounds.AccessKey, list[Any]] | None:
    """For each access of the loop's body, its axes as `bounds.Affine` in the loop variable
    (coefficient 0: unchanged by the body), when the body only computes, stores and breaks
    (`VERSIONED_STMTS`) and every access has them; None otherwise. (An index that reads data
    is never invariant, `bounds.invariant`: a store in the body cannot move it.)"""
    body = loop.body
    if not only(body, VERSIONED_STMTS):
        return None
    assigned = assigned_names(body)
    changing = assigned | {loop.var}
    variables = {} if loop.var in assigned else {loop.var: 0}
    defs = straight_definitions(body)
    found: dict[bounds.AccessKey, list[Any]] = {}
    for ref, indices in bounds.accesses_of(body):
        axes = []
        for index in indices:
            e = map_expr(index, lambda x: substituted(x, defs))
            ax = bounds.affine(e, variables, changing) or bounds.constant_axis(e)
            if ax is None and bounds.invariant(e, changing):
                ax = bounds.Affine(0, 0, bounds._wide(e), e.dtype)
            if ax is None:
                return None
            axes.append(ax)
        found[(ref, indices)] = axes
    if not any(ax.coef or not isinstance(ax.offset, n.Const)
               for axes in found.values() for ax in axes):
        return None                        # constant indices only: nothing to version
    return found


def straight_definitions(body: n.Body) -> dict[str, n.Expr]:
    """The body's locals assigned once, at its top level, before any statement reads them,
    each with the expression assigned (earlier such locals substituted in it)."""
    count: dict[str, int] = {}
    for s in walk_stmts(body):
        for name in assigned_names((s,)) if not isinstance(s, n.If) else ():
            count[name] = count.get(name, 0) + 1
    read: set[str] = set()
    defs: dict[str, n.Expr] = {}
    for s in body:
        if (isinstance(s, n.Assign) and count.get(s.name) == 1 and s.name not in read
                and not any(isinstance(e, n.Local) and e.name == s.name
                            for e in walk_expr(s.value))):
            defs[s.name] = map_expr(s.value, lambda x: substituted(x, defs))
        for e in all_exprs((s,)):
            if isinstance(e, n.Local):
                read.add(e.name)
    return {name: e for name, e in defs.items() if e.dtype.is_int}


def substituted(e: n.Expr, defs: dict[str, n.Expr]) -> n.Expr:
    """A local of `defs` as its expression (of the same type); any other node as it is."""
    if isinstance(e, n.Local) and e.name in defs and defs[e.name].dtype == e.dtype:
        return defs[e.name]
    return e
