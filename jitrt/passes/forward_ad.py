"""Forward-mode autodiff: the JVP kernel, which computes each value's tangent beside it.

Stage: pass (forward-mode kernels only: `pipeline.py` runs it after `simplify`, before
`offload`, so offload captures dual locals like any other). Input: the primal `KernelIR`, the
types of its locals (dual locals are added to them) and a `Duals` map naming the dual buffer of
every field and ndarray that has one. Output: a `KernelIR` that computes every primal value
exactly as the primal kernel does and, just before each statement, the tangents the statement
defines (emitted first, they read the same inputs the statement reads):
- a float local `v` whose value depends on a dual carries a dual local `dual$v`; which locals
  do is a fixed point over the assignments, the others have tangent 0 and cost nothing;
- a load of data with a dual also reads the dual; data without one is a constant (tangent 0),
  and so is a read wrapped in `stop_grad` (`jr.stop_grad`: a zero-derivative op);
- a store stores the tangent into the target's dual, `+=`/`-=` add it atomically, and
  `old = jr.atomic_add(...)` takes the dual's old value as the tangent of `old`; writes to data
  without a dual write no tangent (as Taichi does);
- every other float operation takes its tangent from the reverse-mode rules of
  `adjoint_rules.py`: a rule's adjoint for operand k is linear in the output adjoint g (g times
  the partial derivative), so the same expression with g := the tangent of operand k is that
  operand's term of the JVP, and the terms add up.
Control flow stays as it is (tangents flow forward with the values, so there are no adstacks).
Refused with a `KernelCompileError` at its location: `atomic_min`/`atomic_max` on data with a
dual, an atomic on data with a dual used inside a larger expression, the used value of a float
atomic on data without a dual whose operand has a tangent (it is some other thread's operand),
and a tangent that would evaluate an atomic a second time. Caches nothing (the runtime caches
the compiled kernel, named `<kernel>.fwd[...]`, like any other).
"""
from __future__ import annotations

from dataclasses import field, replace

from ..dtypes import DataType
from ..errors import error_at
from ..frozen import frozen, record
from ..ir import nodes as n
from .adjoint_rules import Build, has_zero_derivative, rule_for
from .local_reductions import reduction_operand
from ..ir.walk import exprs_of, sub_exprs, walk_expr, walk_stmts

DUAL_PREFIX = "dual$"


@frozen
class Duals:
    """Where the dual of each input lives: per field slot its dual field (an entry of the same
    kernel's field table), per ndarray parameter the hidden parameter passed its dual."""
    fields: tuple[tuple[int, n.FieldRef], ...]
    arrays: tuple[tuple[int, n.ArrayRef], ...]

    def of(self, ref: n.Ref) -> n.Ref | None:
        if ref.grad or not ref.dtype.is_float:
            return None
        key, pairs = (ref.slot, self.fields) if isinstance(ref, n.FieldRef) else \
            (ref.arg, self.arrays)
        for k, dual in pairs:
            if k == key:
                return dual
        return None


def forward_mode(kernel: n.KernelIR, local_types: dict[str, DataType], duals: Duals
                 ) -> n.KernelIR:
    """The JVP of `kernel` (see the module docstring); adds dual locals to `local_types`."""
    fwd = Forward(local_types, duals)
    fwd.check_atomics(kernel.body)
    fwd.find_active(kernel.body)
    fwd.check_atomic_values(kernel.body)
    for name in fwd.active:
        local_types[DUAL_PREFIX + name] = local_types[name]
    return replace(kernel, body=fwd.body(kernel.body))


def zero(dt: DataType, loc: n.Loc) -> n.Expr:
    return n.Const(0.0, dt, loc)


def has_atomic(e: n.Expr) -> bool:
    return any(isinstance(x, n.Atomic) for x in walk_expr(e))


@record
class Forward:
    local_types: dict[str, DataType]
    duals: Duals
    active: set[str] = field(default_factory=set)   # float locals that carry a tangent
    counter: int = 0
    # per statement: id of a node -> (the node, its tangent); the node is kept to check the id
    memo: dict[int, tuple[n.Expr, n.Expr | None]] = field(default_factory=dict)

    # ---- which locals carry a tangent -----------------------------------------------------

    def find_active(self, body: n.Body) -> None:
        """Grow `active` until no assignment gives a new local a tangent."""
        assigns = [s for s in walk_stmts(body) if isinstance(s, n.Assign)
                   and s.value.dtype.is_float]
        grown = True
        while grown:
            grown = False
            for s in assigns:
                self.memo.clear()            # tangents of locals depend on `active`
                if s.name not in self.active and self.assigned_tangent(s.value) is not None:
                    self.active.add(s.name)
                    grown = True

    def check_atomics(self, body: n.Body) -> None:
        """An atomic on data with a dual is differentiated as a statement (`x[i] += v`) or as
        the whole value of an assignment (`old = jr.atomic_add(x[i], v)`), never elsewhere."""
        for s in walk_stmts(body):
            top = s.expr if isinstance(s, n.Eval) else s.value if isinstance(s, n.Assign) \
                else None
            for e in exprs_of(s):
                for x in walk_expr(e):
                    if not isinstance(x, n.Atomic) or self.duals.of(x.ref) is None:
                        continue
                    if x.op not in ("add", "sub"):
                        raise error_at(x.loc, f"forward mode cannot differentiate atomic_{x.op} "
                                       f"on '{x.ref.name}', which has a dual (which update "
                                       "wins is decided at run time); use data without "
                                       "needs_dual=True or compute the extremum in a local")
                    if x is not top:
                        raise error_at(x.loc, f"forward mode: the atomic on '{x.ref.name}' "
                                       "(which has a dual) is used inside an expression; "
                                       "assign its result to a local first (old = "
                                       "jr.atomic_add(...))")

    def check_atomic_values(self, body: n.Body) -> None:
        """The old value of a float atomic on data without a dual, used as a value, whose
        operand has a tangent (`old = jr.atomic_min(a[0], x[i])`): the old value is an
        earlier thread's operand, so its tangent depends on the order threads ran in (and
        is not 0): refused, as in reverse mode."""
        for s in walk_stmts(body):
            top = s.expr if isinstance(s, n.Eval) else None
            for e in exprs_of(s):
                for x in walk_expr(e):
                    if isinstance(x, n.Atomic) and x is not top and x.dtype.is_float and \
                            self.duals.of(x.ref) is None and self.tangent(x.value) is not None:
                        raise error_at(x.loc, f"forward mode cannot differentiate the value "
                                       f"jr.atomic_{x.op} returns (the old content of "
                                       f"'{x.ref.name}', which has no dual): it is an "
                                       "operand of whichever thread ran before, so its "
                                       "tangent depends on the order threads ran in; use "
                                       "the atomic as a statement")
            self.memo.clear()

    # ---- tangents of expressions ----------------------------------------------------------

    def assigned_tangent(self, value: n.Expr) -> n.Expr | None:
        """The tangent of a value assigned to a local: an atomic on data with a dual gives
        the dual's old content (its own atomic update of the dual)."""
        dual = self.duals.of(value.ref) if isinstance(value, n.Atomic) else None
        if dual is None:
            return self.tangent(value)
        assert isinstance(value, n.Atomic)
        t = self.tangent(value.value)
        return n.Atomic(value.op, dual, value.indices, t if t is not None else
                        zero(value.dtype, value.loc), value.dtype, value.loc)

    def tangent(self, e: n.Expr) -> n.Expr | None:
        """The tangent of `e` (None: 0), built from the same primal sub-expressions."""
        found = self.memo.get(id(e))
        if found is None or found[0] is not e:
            found = self.memo[id(e)] = (e, self._tangent(e))
        return found[1]

    def _tangent(self, e: n.Expr) -> n.Expr | None:
        if not e.dtype.is_float or has_zero_derivative(e):
            return None
        if isinstance(e, n.Local):
            return n.Local(DUAL_PREFIX + e.name, e.dtype, e.loc) if e.name in self.active \
                else None
        if isinstance(e, n.Load):
            dual = self.duals.of(e.ref)
            if dual is None:
                return None
            return self.pure(n.Load(dual, e.indices, e.dtype, e.loc), e.loc)
        if isinstance(e, n.Select):        # one side evaluated, as for the primal value
            ta, tb = self.tangent(e.a), self.tangent(e.b)
            if ta is None and tb is None:
                return None
            return self.pure(n.Select(e.cond, zero(e.dtype, e.loc) if ta is None else ta,
                                      zero(e.dtype, e.loc) if tb is None else tb, e.dtype,
                                      e.loc), e.loc)
        if isinstance(e, n.Cast):          # float to float: the tangent converts too
            t = self.tangent(e.x)
            return None if t is None else n.Cast(t, e.dtype, e.loc)
        operands = tuple(sub_exprs(e))
        tangents = [self.tangent(x) for x in operands]
        if all(t is None for t in tangents):
            return None
        rule = rule_for(e)
        if rule is None:
            raise error_at(e.loc, f"cannot differentiate {type(e).__name__} "
                           f"'{getattr(e, 'op', getattr(e, 'fn', ''))}' in forward mode: no "
                           "derivative rule (a jitrt bug: please report it)")
        total: n.Expr | None = None
        for k, t in enumerate(tangents):
            if t is None:
                continue
            operand, term = rule(e, t, Build(e.loc))[k]
            assert operand is operands[k], "rules list operands in order"
            total = term if total is None else n.Binary("+", total, term, e.dtype, e.loc)
        assert total is not None
        return self.pure(total, e.loc)

    def pure(self, e: n.Expr, loc: n.Loc) -> n.Expr:
        """A tangent must not evaluate an atomic again (the primal statement performs it)."""
        if has_atomic(e):
            raise error_at(loc, "forward mode would evaluate an atomic here a second time to "
                           "compute a tangent; assign the atomic's result to a local first")
        return e

    # ---- statements -----------------------------------------------------------------------

    def body(self, stmts: n.Body) -> n.Body:
        out: list[n.Stmt] = []
        for s in stmts:
            self.memo.clear()
            self.stmt(s, out)
        return tuple(out)

    def stmt(self, s: n.Stmt, out: list[n.Stmt]) -> None:
        if isinstance(s, n.Assign):
            if s.name in self.active:
                if isinstance(s.value, n.Atomic):
                    s = replace(s, value=self.hoisted_indices(s.value, out))
                t = self.assigned_tangent(s.value)
                t = t if t is not None else zero(s.value.dtype, s.loc)
                dual_name = DUAL_PREFIX + s.name
                if s.reduce in ("add", "sub") and t == n.Local(dual_name, t.dtype):
                    pass      # `s += c` with a constant c: the tangent stays (no assignment)
                else:         # `s += v`: its tangent is `dual$s += dual$v`, a reduction too
                    reduce = next((r for r in ("add", "sub") if s.reduce in ("add", "sub")
                                   and reduction_operand(dual_name, t, r) is not None), "")
                    out.append(n.Assign(dual_name, t, s.loc, reduce))
        elif isinstance(s, n.Store):
            dual = self.duals.of(s.ref)
            if dual is not None:
                if any(has_atomic(i) for i in s.indices):   # Python: the value comes first
                    value = self.fresh_local(s.value, out)
                    s = replace(s, value=value, indices=tuple(self.fresh_local(i, out)
                                                              for i in s.indices))
                t = self.tangent(s.value)
                out.append(n.Store(dual, s.indices, t if t is not None else
                                   zero(s.ref.dtype, s.loc), s.loc))
        elif isinstance(s, n.Eval) and isinstance(s.expr, n.Atomic):
            dual = self.duals.of(s.expr.ref)
            if dual is not None:
                a = self.hoisted_indices(s.expr, out)
                s = replace(s, expr=a)
                t = self.tangent(a.value)
                if t is not None:
                    out.append(n.Eval(n.Atomic(a.op, dual, a.indices, t, a.dtype, a.loc),
                                      s.loc))
        elif isinstance(s, (n.If, n.For, n.While, n.ParFor)):
            s = replace(s, body=self.body(s.body))
            if isinstance(s, n.If):
                s = replace(s, orelse=self.body(s.orelse))
        out.append(s)

    def hoisted_indices(self, a: n.Atomic, out: list[n.Stmt]) -> n.Atomic:
        """`a` with its indices in fresh locals when they perform an atomic themselves
        (`x[jr.atomic_add(n[None], 1)] += v`): the dual update must address the same element
        without running that atomic twice. (A store hoists its value first, then its indices,
        the order Python evaluates them in.)"""
        if not any(has_atomic(i) for i in a.indices):
            return a
        return replace(a, indices=tuple(self.fresh_local(i, out) for i in a.indices))

    def fresh_local(self, e: n.Expr, out: list[n.Stmt]) -> n.Expr:
        """`e` evaluated into a new local (with its tangent beside it, if it has one)."""
        if isinstance(e, (n.Const, n.Local, n.Arg)):
            return e
        self.counter += 1
        name = f"$fwd{self.counter}"
        self.local_types[name] = e.dtype
        t = self.tangent(e)
        if t is not None:
            self.active.add(name)
            self.local_types[DUAL_PREFIX + name] = e.dtype
            out.append(n.Assign(DUAL_PREFIX + name, t, e.loc))
        out.append(n.Assign(name, e, e.loc))
        return n.Local(name, e.dtype, e.loc)
