"""Taichi's global data access rule, checked: the kernels a `jr.ad.Tape(validation=True)`
records (with `jr.init(debug=True)`) run a checked copy of themselves.

The rule: once an element of a field with a gradient has been read inside the tape, nothing
may write it again (a store, `+=` or any atomic), because the reverse pass would use the
overwritten value in the adjoint of that read. Each checked field gets a hidden i32 field of
its storage shape (one bit per element and component, kept per field for the process); the
checked kernel sets an element's bit after every read of the element and asserts, before
every write of it, that the bit is 0. A failed assertion is a `jr.KernelRuntimeError` at the
line of the write, raised by the launch (as Taichi's `TaichiAssertionError`). The tape zeroes
every bit when it starts.

Stage: frontend (the last step of lowering a kernel whose `CompileContext.validate` is set).
Input and output: the kernel's IR body. Caches: the bit fields, per data field (weakly).
Not checked: ndarrays (as in Taichi, whose bits live in fields' layouts) and accesses whose
index expressions have side effects (an atomic in an index).
"""
from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

from .. import dtypes
from ..ir import nodes as n
from ..ir.walk import exprs_of, sub_exprs
from .context import CompileContext

_BITS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()

RULE = ("global data access rule broken: {name} is written here after the tape read the same "
        "element, and the reverse pass needs the value that was read; write the new value to "
        "another element or field (one per step)")


def bits_of(fld: Any) -> Any:
    """The hidden bit field of the data field `fld` (made on first use)."""
    bits = _BITS.get(fld)
    if bits is None:
        from ..data import Field
        bits = _BITS[fld] = Field(dtypes.i32, fld.storage_shape, False, f"{fld.name}.checkbits",
                                  "field")
    return bits


def clear_bits() -> None:
    """Zero every bit (a validating Tape's start)."""
    for bits in list(_BITS.values()):
        bits.fill(0)


def checked(ctx: CompileContext, ref: n.Ref) -> n.FieldRef | None:
    """The bit field of `ref` if its accesses are checked: a field's own data (not its
    gradient) with a gradient asked for."""
    if not isinstance(ref, n.FieldRef) or ref.grad or ref.slot >= len(ctx.field_objs):
        return None
    fld = ctx.field_objs[ref.slot]
    grad = getattr(fld, "grad", None)
    if grad is None or getattr(grad, "implicit", False) or not fld.dtype.is_float \
            or fld.name.endswith(".checkbits"):
        return None
    return ctx.field_ref(bits_of(fld), f"{ref.name}.checkbits")


def pure(indices: tuple[n.Expr, ...]) -> bool:
    """Indices that may be evaluated a second time (no atomics, asserts or prints)."""
    def ok(e: n.Expr) -> bool:
        return not isinstance(e, (n.Atomic, n.Assertion, n.Print, n.Simt)) and \
            all(ok(c) for c in sub_exprs(e))
    return all(ok(i) for i in indices)


class Checker:
    """Rewrites a body: bit marks after reads, bit checks before writes."""

    def __init__(self, ctx: CompileContext) -> None:
        self.ctx = ctx

    def access(self, e: n.Expr, guards: tuple[n.Expr, ...], marks: list[n.Stmt],
               checks: list[n.Stmt]) -> None:
        """The marks (reads) and checks (atomics) of the expression tree `e`; a Select's arms
        run only on their side of the condition."""
        if isinstance(e, n.Select):
            self.access(e.cond, guards, marks, checks)
            self.access(e.a, guards + (e.cond,), marks, checks)
            not_cond = n.Binary("==", e.cond, n.Const(0, e.cond.dtype, e.loc), dtypes.i32,
                                e.loc)
            self.access(e.b, guards + (not_cond,), marks, checks)
            return
        for child in sub_exprs(e):
            self.access(child, guards, marks, checks)
        if isinstance(e, (n.Load, n.Atomic)):
            bits = checked(self.ctx, e.ref)
            if bits is None or not pure(e.indices):
                return
            if isinstance(e, n.Load):
                marks.append(guarded(n.Store(bits, e.indices, n.Const(1, dtypes.i32, e.loc),
                                             e.loc), guards))
            else:
                checks.append(guarded(check(bits, e.ref.name, e.indices, e.loc), guards))

    def statement(self, s: n.Stmt) -> list[n.Stmt]:
        marks: list[n.Stmt] = []
        checks: list[n.Stmt] = []
        for e in exprs_of(s):
            self.access(e, (), marks, checks)
        if isinstance(s, n.Store):
            bits = checked(self.ctx, s.ref)
            if bits is not None and pure(s.indices):
                checks.append(check(bits, s.ref.name, s.indices, s.loc))
        if isinstance(s, n.If):
            s = replace(s, body=self.body(s.body), orelse=self.body(s.orelse))
        elif isinstance(s, n.While):      # the condition is read again after each iteration
            s = replace(s, body=self.body(s.body) + tuple(marks))
        elif isinstance(s, (n.For, n.ParFor)):
            s = replace(s, body=self.body(s.body))
        return marks + checks + [s]

    def body(self, body: n.Body) -> n.Body:
        return tuple(out for s in body for out in self.statement(s))


def guarded(s: n.Stmt, guards: tuple[n.Expr, ...]) -> n.Stmt:
    for g in reversed(guards):
        s = n.If(g, (s,), (), s.loc)
    return s


def check(bits: n.FieldRef, name: str, indices: tuple[n.Expr, ...], loc: n.Loc) -> n.Stmt:
    unread = n.Binary("==", n.Load(bits, indices, dtypes.i32, loc), n.Const(0, dtypes.i32, loc),
                      dtypes.i32, loc)
    return n.Eval(n.Assertion(unread, RULE.format(name=name), dtypes.i32, loc), loc)


def with_checks(body: n.Body, ctx: CompileContext) -> n.Body:
    """`body` with the rule's marks and checks (see the module docstring)."""
    return Checker(ctx).body(body)
