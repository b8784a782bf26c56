"""Taichi's materialization checks: every field declared without a shape must be placed, and
a gradient (dual) asked for at declaration must be placed too, before a kernel compiles.

Stage: data (beside `data.py` and `layout.py`). `declared(f)` records a field created without
a shape in the current program, with the user's line that declared it; `awaiting(f, kind)`
records one created with `needs_grad=True` (`kind` "grad") or `needs_dual=True` ("dual"),
whose companion must be placed explicitly (`place(x.grad)`, or `jr.root.lazy_grad()`), as
in Taichi; `placed(f)` and `asked_for_all(kind)` settle them; `mismatched(f, message)`
records a field one of whose components was placed with another shape. `check()` (the
compiler calls it for each new kernel) raises `FieldPlacementError` naming what is left and
where it was declared. `new_program()` (jr.init) forgets the previous program's fields.
Holds weak references only; caches nothing.
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from .errors import JitrtError

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_declared: list[tuple["weakref.ref[Any]", str]] = []
_awaiting: list[tuple["weakref.ref[Any]", str, str]] = []
# fields one of whose components was placed with another shape, and the message
_mismatched: list[tuple["weakref.ref[Any]", str]] = []


class FieldPlacementError(JitrtError, RuntimeError):
    """A kernel was about to compile while a field (or a gradient/dual asked for) is not
    placed: Taichi's materialization error (a `RuntimeError`)."""


def _user_line() -> str:
    """`file:line` of the first caller outside jitrt."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def declared(f: Any) -> None:
    _declared.append((weakref.ref(f), _user_line()))


def awaiting(f: Any, kind: str) -> None:
    _awaiting.append((weakref.ref(f), kind, _user_line()))


def placed(f: Any) -> None:
    """`f` was placed by the program: a gradient or dual of an awaiting field is settled."""
    _awaiting[:] = [(r, kind, where) for r, kind, where in _awaiting
                    if r() is not None and getattr(r(), kind, None) is not f]


def asked_for_all(kind: str) -> None:
    """`lazy_grad()` / `lazy_dual()`: every awaiting gradient (dual) is placed."""
    _awaiting[:] = [e for e in _awaiting if e[1] != kind and e[0]() is not None]


def mismatched(f: Any, message: str) -> None:
    """A component of a vector/matrix field was placed with a shape or offset other than the
    field's (the `place` kept the field's): reported by the next `check()`, as Taichi
    reports it at the next launch."""
    _mismatched.append((weakref.ref(f), message))


def new_program() -> None:
    _declared.clear()
    _awaiting.clear()
    _mismatched.clear()


def check() -> None:
    """Raise FieldPlacementError if a declared field or an awaited companion is unplaced, or
    a component was placed with another shape than its field."""
    _mismatched[:] = [(r, m) for r, m in _mismatched if r() is not None]
    if _mismatched:
        raise FieldPlacementError(_mismatched[0][1])
    if not _declared and not _awaiting:
        return
    _declared[:] = [(r, w) for r, w in _declared if getattr(r(), "pending", False)]
    if _declared:
        where = ", ".join(f"{_what(r())} declared at {w}" for r, w in _declared)
        raise FieldPlacementError(
            f"These field(s) are not placed: {where}. Place them before launching a kernel "
            "(jr.root.dense(jr.i, n).place(x)) or create them with shape=...")
    for r, kind, where in _awaiting:
        f = r()
        if f is not None and not f.pending:
            raise FieldPlacementError(
                f"These field(s) require `needs_{kind}=True`, however their {kind} field(s) "
                f"are not placed: {_what(f)} declared at {where}. Place it with the field "
                f"(jr.root.dense(...).place(x, x.{kind})) or call jr.root.lazy_{kind}() "
                f"(Taichi's words, as spelt there, for programs that look for them: These "
                f"field(s) requrie `needs_{kind}=True`, however their {kind} field(s) are "
                "not placed)")


def _what(f: Any) -> str:
    return f"'{f.name}'" if f.named else f"a field of {f.dtype.name}"
