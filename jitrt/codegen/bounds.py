"""Loop versioning of bounds checks: one test per task instead of one per access.

Stage: codegen (parallel tasks). An access whose every index is affine in one task variable
or a constant, one at least not a constant (`a[i]`, `b[i + 1, j - 1]`, `x[2 * i + k]` with
`k` unchanged by the body, `v[i, 0]`: a vector field's component), stays inside its array
for the whole box exactly when the ends of each index's range do, which the task can test
once, before its loop. `affine_accesses` finds those accesses (the variable must not be
reassigned in the body; offsets may be constants, scalar arguments, shapes and locals the body
does not assign); `box_inside` builds the test from the box (begins, extents) and the arrays'
extents, in 64 bits, and also requires each index's range to fit its integer type, so that the
kernel's own (wrapping) arithmetic gives the same values. The task then runs one of two copies
of its loop: without those accesses' checks when the test holds (nothing in the loop body
blocks vectorization any more), with every check otherwise, so an out-of-bounds access is
still skipped and reported with its index. Other accesses (data-dependent indices) keep their
check in both copies. `fault_only` tells when a failing test means the launch faults (every
access it covers runs at every point of the box): the CPU then compiles the checked copy
without optimisation (`kernel_module.emit_fault_only_task`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable

from llvmlite import ir

from ..frozen import frozen
from .. import dtypes
from ..ir import nodes as n
from ..ir.walk import assigned_names, written_refs
from ..ir.walk import all_exprs, bodies_of, exprs_of, sub_exprs, walk_stmts

I1, I64 = ir.IntType(1), ir.IntType(64)

AccessKey = tuple[n.Ref, tuple[n.Expr, ...]]


@frozen
class Affine:
    """index = coef * variable + offset (offset: an expression the body does not change)."""
    var: int
    coef: int
    offset: n.Expr
    dtype: dtypes.DataType       # the index expression's type (its arithmetic wraps there)


def _const(value: int) -> n.Expr:
    return n.Const(value, dtypes.i64)


def _wide(e: n.Expr) -> n.Expr:
    """`e` as an i64 expression (offsets are summed in 64 bits)."""
    return e if e.dtype == dtypes.i64 else n.Cast(e, dtypes.i64)


def invariant(e: n.Expr, changing: set[str]) -> bool:
    """An integer expression whose value is the same for every point of the box."""
    if not e.dtype.is_int:
        return False
    if isinstance(e, (n.Const, n.Arg, n.Shape)):
        return True
    if isinstance(e, n.Local):
        return e.name not in changing
    if isinstance(e, n.Cast):
        return invariant(e.x, changing)
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*"):
        return invariant(e.a, changing) and invariant(e.b, changing)
    return False


def affine(e: n.Expr, variables: dict[str, int], changing: set[str]) -> Affine | None:
    """`e` as coef * variable + offset, or None."""
    if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
        inner = affine(e.x, variables, changing)
        return None if inner is None else Affine(inner.var, inner.coef, inner.offset, e.dtype)
    if isinstance(e, n.Local) and e.name in variables:
        return Affine(variables[e.name], 1, _const(0), e.dtype)
    if not isinstance(e, n.Binary) or not e.dtype.is_int:
        return None
    a, b = affine(e.a, variables, changing), affine(e.b, variables, changing)
    if e.op == "*":
        if a is not None and isinstance(e.b, n.Const):
            c = int(e.b.value)
            return Affine(a.var, a.coef * c, n.Binary("*", a.offset, _const(c), dtypes.i64),
                          e.dtype)
        if b is not None and isinstance(e.a, n.Const):
            c = int(e.a.value)
            return Affine(b.var, b.coef * c, n.Binary("*", b.offset, _const(c), dtypes.i64),
                          e.dtype)
        return None
    if e.op in ("+", "-") and a is not None and invariant(e.b, changing):
        return Affine(a.var, a.coef, n.Binary(e.op, a.offset, _wide(e.b), dtypes.i64),
                      e.dtype)
    if e.op == "+" and b is not None and invariant(e.a, changing):
        return Affine(b.var, b.coef, n.Binary("+", b.offset, _wide(e.a), dtypes.i64), e.dtype)
    return None


def accesses_of(body: n.Body) -> dict[AccessKey, None]:
    """Every field and ndarray access of `body`, in order (a dict used as an ordered set)."""
    keys = [(e.ref, e.indices) for e in all_exprs(body) if isinstance(e, (n.Load, n.Atomic))]
    keys += [(s.ref, s.indices) for s in walk_stmts(body) if isinstance(s, n.Store)]
    return dict.fromkeys(keys)


def cannot_fault(body: n.Body, unchecked: dict[AccessKey, Any]) -> bool:
    """Whether no access of `body` is checked in the loop copy whose unchecked accesses are
    `unchecked`: each is listed there or is a field element at constant indices inside it."""
    def safe(ref: n.Ref, indices: tuple[n.Expr, ...]) -> bool:
        return (ref, indices) in unchecked or isinstance(ref, n.FieldRef) and all(
            isinstance(i, n.Const) and 0 <= int(i.value) < size
            for i, size in zip(indices, ref.shape))
    return all(safe(ref, indices) for ref, indices in accesses_of(body))


def shifted(axes: list[Any], lane: int) -> list[Any]:
    """The axes of an access as the iteration `lane` places later makes it (an interleaved
    body's lane, `passes/interleave.py`): each affine index moves by coef * lane (a gather's
    axis stays: its index is computed)."""
    return [replace(ax, offset=n.Binary("+", ax.offset, _const(ax.coef * lane), dtypes.i64))
            if isinstance(ax, Affine) and lane else ax for ax in axes]


def affine_accesses(task: n.Task) -> dict[AccessKey, list[Affine]]:
    """Every access of the task's body whose indices are all affine in its variables."""
    changing = assigned_names(task.body) | set(task.vars)
    assigned = assigned_names(task.body)
    variables = {v: k for k, v in enumerate(task.vars) if v not in assigned}
    found: dict[AccessKey, list[Affine]] = {}
    for ref, indices in accesses_of(task.body):
        axes = [affine(i, variables, changing) or constant_axis(i) for i in indices]
        # (an access at constant indices only is not listed: nothing to version)
        if indices and all(a is not None for a in axes) and any(a and a.coef for a in axes):
            found[(ref, indices)] = axes  # type: ignore[assignment]
    return found


def constant_axis(e: n.Expr) -> Affine | None:
    """A constant index as an axis the box test checks once (`x[i, 0]`, a vector field's
    component)."""
    if isinstance(e, n.Const) and e.dtype.is_int:
        return Affine(0, 0, _const(int(e.value)), e.dtype)
    return None


def box_inside(b: ir.IRBuilder, accesses: dict[AccessKey, list[Affine]],
               begins: list[ir.Value], exts: list[ir.Value],
               extents_of: Callable[[n.Ref], list[ir.Value]],
               value_of: Callable[[n.Expr], ir.Value]) -> ir.Value:
    """True when every listed access stays in bounds over the whole (non-empty) box.
    `value_of(expr)` evaluates an invariant offset as an i64 at the task's entry."""
    ok: ir.Value = ir.Constant(I1, 1)
    one = ir.Constant(I64, 1)
    for (ref, _), axes in accesses.items():
        for ax, extent in zip(axes, extents_of(ref)):
            coef, off = ir.Constant(I64, ax.coef), value_of(ax.offset)
            first_var = begins[ax.var]
            last_var = b.sub(b.add(begins[ax.var], exts[ax.var]), one)
            first = b.add(b.mul(first_var, coef), off)
            last = b.add(b.mul(last_var, coef), off)
            low = b.select(b.icmp_signed("<", first, last), first, last)
            high = b.select(b.icmp_signed("<", first, last), last, first)
            top = ir.Constant(I64, dtypes.int_range(ax.dtype)[1] if ax.dtype.bits < 64
                              else (1 << 62))
            inside = b.and_(b.icmp_signed(">=", low, ir.Constant(I64, 0)),
                            b.and_(b.icmp_signed("<", high, extent),
                                   b.icmp_signed("<=", high, top)))
            ok = b.and_(ok, inside)
    return ok


def fault_only(task: n.Task, proven: dict[AccessKey, list[Affine]]) -> bool:
    """True when the box test fails only in launches that fault: every access it covers runs
    at every point of the box (`every_point_accesses`), so an index outside its array at
    some point is an access out of bounds there. (The test also fails when an index leaves
    its integer type, where the kernel's wrapping arithmetic may land inside the array
    again, and when an ndarray whose atomics the fast loop makes plain shares memory with
    another array the task writes (`reductions.private_arrays`): rare cases, still correct,
    only slow.)"""
    always = every_point_accesses(task.body)
    return all(key in always for key in proven)


def every_point_accesses(body: n.Body) -> set[AccessKey]:
    """The accesses of a task body that run at every point of its box: in the expressions of
    its top-level statements (an `if`'s condition, a loop's bounds; not the arms of `a if c
    else b` nor the right side of `and` / `or`), up to the first statement that may skip the
    rest of the body (a `break`, `continue` or `return` anywhere in it)."""
    found: set[AccessKey] = set()
    for s in body:
        if isinstance(s, (n.Assign, n.Eval, n.StackInit, n.StackPush, n.StackAccAdj)):
            roots = list(exprs_of(s))
        elif isinstance(s, n.Store):
            roots = list(exprs_of(s))
            found.add((s.ref, s.indices))
        elif isinstance(s, (n.If, n.While)):
            roots = [s.cond]
        elif isinstance(s, (n.For, n.ReverseFor)):
            roots = [s.begin, s.end]
        elif isinstance(s, n.StackPop):
            roots = []
        else:
            break
        for root in roots:
            _eager_accesses(root, found)
        if any(isinstance(inner, (n.Break, n.Continue, n.Return))
               for part in bodies_of(s) for inner in walk_stmts(part)):
            break
    return found


def _eager_accesses(e: n.Expr, found: set[AccessKey]) -> None:
    """Accesses `e` makes whenever it is evaluated (lazy operands left out)."""
    if isinstance(e, n.Select):
        _eager_accesses(e.cond, found)
        return
    if isinstance(e, n.Binary) and e.op in ("and", "or"):
        _eager_accesses(e.a, found)
        return
    if isinstance(e, (n.Load, n.Atomic)):
        found.add((e.ref, e.indices))
    for child in sub_exprs(e):
        _eager_accesses(child, found)


# ---- gathers: an index read from an array -------------------------------------------------

def _index_source(e: n.Expr) -> n.Load | None:
    """The load `e` is (through widening signed casts): the index of a gather `x[idx[i]]`."""
    while isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int and \
            e.x.dtype.is_signed and e.dtype.is_signed and e.dtype.bits >= e.x.dtype.bits:
        e = e.x
    if isinstance(e, n.Load) and e.dtype.is_int and e.dtype.is_signed and len(e.indices) == 1:
        return e
    return None


def gathered_accesses(task: n.Task, proven: dict[AccessKey, list[Affine]]
                      ) -> dict[AccessKey, list[Affine | AccessKey]]:
    """Accesses not proven by `affine_accesses` whose every index is affine or read by a
    proven 1-D access from an array the task does not write (`x[idx[i]]`, `u[idx[i], j]`):
    the minimum and maximum of the values that array holds over the task's range bound the
    index (`range_of_values`)."""
    changing = assigned_names(task.body) | set(task.vars)
    variables = {v: k for k, v in enumerate(task.vars) if v not in assigned_names(task.body)}
    written = written_refs(task.body)
    keys = [(e.ref, e.indices) for e in all_exprs(task.body) if isinstance(e, (n.Load, n.Atomic))]
    keys += [(s.ref, s.indices) for s in walk_stmts(task.body) if isinstance(s, n.Store)]
    found: dict[AccessKey, list[Affine | AccessKey]] = {}
    for ref, indices in keys:
        if (ref, indices) in proven or not indices:
            continue
        axes: list[Affine | AccessKey] = []
        for index in indices:
            src = _index_source(index)
            if src is not None and src.ref not in written and (src.ref, src.indices) in proven:
                axes.append((src.ref, src.indices))
                continue
            ax = affine(index, variables, changing)
            if ax is None:
                break
            axes.append(ax)
        else:
            if any(not isinstance(ax, Affine) for ax in axes):
                found[(ref, indices)] = axes
    return found


def gathers_inside(em: Any, task: n.Task, gathers: dict[AccessKey, list[Affine | AccessKey]],
                   proven: dict[AccessKey, list[Affine]], inside: ir.Value, lo: ir.Value,
                   hi: ir.Value, begin: ir.Value) -> ir.Value:
    """`inside` and, for every gather, its index sources' values over this chunk (variable
    begin + lo .. begin + hi - 1 of a one-variable task) inside the gathered array's extent,
    and no array the task writes overlapping a source (else a store could change an index
    after it was checked). The sources are read only when `inside` holds (their own accesses
    are then in bounds); one pass over each, a min/max reduction LLVM vectorizes."""
    b, fn = em.builder, em.fn
    start, scan, join = b.block, fn.append_basic_block("gather_scan"), \
        fn.append_basic_block("gather_checked")
    b.cbranch(inside, scan, join)
    b.position_at_end(scan)
    ok: ir.Value = ir.Constant(I1, 1)
    ranges: dict[AccessKey, tuple[ir.Value, ir.Value]] = {}
    for axes in gathers.values():
        for ax in axes:
            if not isinstance(ax, Affine) and ax not in ranges:
                ranges[ax] = range_of_values(em, ax, proven[ax][0], lo, hi, begin)
    for (ref, _), axes in gathers.items():
        for ax, extent in zip(axes, em.extents(ref)):
            if not isinstance(ax, Affine):
                low, high = ranges[ax]
                ok = b.and_(ok, b.and_(b.icmp_signed(">=", low, ir.Constant(I64, 0)),
                                       b.icmp_signed("<", high, extent)))
    ok = apart(em, task, dict.fromkeys(key[0] for key in ranges), ok)   # (access order)
    scanned = b.block
    b.branch(join)
    b.position_at_end(join)
    result = b.phi(I1)
    result.add_incoming(ir.Constant(I1, 0), start)
    result.add_incoming(ok, scanned)
    return result


def apart(em: Any, task: n.Task, refs: Iterable[n.Ref], ok: ir.Value) -> ir.Value:
    """`ok` and no array of `refs` sharing memory with another array the task writes (two
    arguments may view one buffer). Each pair is tested once, in the order of `refs` and
    then of the written arrays sorted (the same IR in every process: no set order)."""
    b = em.builder
    written = sorted(written_refs(task.body), key=repr)
    tested: set[frozenset] = set()
    for ref in refs:
        for other in written:
            if other != ref and frozenset((ref, other)) not in tested:
                tested.add(frozenset((ref, other)))
                ok = b.and_(ok, disjoint(em, ref, other))
    return ok


def _span(em: Any, ref: n.Ref) -> tuple[ir.Value, ir.Value]:
    b = em.builder
    size: ir.Value = ir.Constant(I64, ref.dtype.bits // 8)
    for extent in em.extents(ref):
        size = b.mul(size, extent)
    start = b.ptrtoint(em.data_ptr(ref), I64)
    return start, b.add(start, size)


def disjoint(em: Any, a: n.Ref, c: n.Ref) -> ir.Value:
    b = em.builder
    (a0, a1), (c0, c1) = _span(em, a), _span(em, c)
    return b.or_(b.icmp_unsigned("<=", a1, c0), b.icmp_unsigned("<=", c1, a0))


def range_of_values(em: Any, source: AccessKey, ax: Affine, lo: ir.Value, hi: ir.Value,
                    begin: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(min, max) as i64 of `source`'s values at coef * v + offset for v in begin + lo ..
    begin + hi - 1 ((INT64_MAX, INT64_MIN) for an empty chunk)."""
    b, fn = em.builder, em.fn
    ref = source[0]
    data = em.data_ptr(ref)
    coef = ir.Constant(I64, ax.coef)
    off = em.to_slot(em.expr(ax.offset), ax.offset.dtype)
    top, bottom = ir.Constant(I64, (1 << 63) - 1), ir.Constant(I64, -(1 << 63))
    head, body, done = (fn.append_basic_block(f"gather_{k}") for k in ("head", "body", "done"))
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    k, mn, mx = b.phi(I64), b.phi(I64), b.phi(I64)
    for phi, init in ((k, lo), (mn, top), (mx, bottom)):
        phi.add_incoming(init, entry)
    b.cbranch(b.icmp_signed("<", k, hi), body, done)
    b.position_at_end(body)
    at = b.add(b.mul(b.add(begin, k), coef), off)
    value = b.load(b.gep(data, [at]))
    if ref.dtype.bits < 64:
        value = b.sext(value, I64)
    new_mn = b.select(b.icmp_signed("<", value, mn), value, mn)
    new_mx = b.select(b.icmp_signed(">", value, mx), value, mx)
    k.add_incoming(b.add(k, ir.Constant(I64, 1)), body)
    mn.add_incoming(new_mn, body)
    mx.add_incoming(new_mx, body)
    b.branch(head)
    b.position_at_end(done)
    return mn, mx
