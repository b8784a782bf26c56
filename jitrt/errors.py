"""The exceptions jitrt raises (every one is a `JitrtError`), and the source-line helpers
that locate an error at a line and column of the user's file. Below every other layer: the
frontend, the passes, codegen and the runtime all report through here.
"""
from __future__ import annotations

import inspect
import linecache
from typing import Any


EXCERPT_WIDTH = 80     # columns of one excerpt line: longer lines are cut into pieces
TAB_COLUMNS = 4        # a tab in an excerpt's source line (Taichi's)
TO_LINE_END = -1       # an `end_col` meaning "to the last non-blank column of the line"


def source_excerpt(lines: "tuple[str, ...] | list[str]", line: int, col: int,
            end_line: int | None = None, end_col: int | None = None) -> str:
    """Taichi's source excerpt of a span of the user's file: each line from `line` to
    `end_line` (1-based) as written (tabs expanded to 4 columns), and under it carets from
    `col` (the first line) or its first non-blank column (the others) to `end_col` (the last
    line; TO_LINE_END: its last non-blank column; None: one caret at `col`) or the line's
    last non-blank column (the others); a line longer than 80 columns in pieces of 80, each
    with its part of the carets. "" when the line cannot be read."""
    if not 0 < line <= len(lines):
        return ""
    end_line = line if end_line is None else min(max(end_line, line), len(lines))
    out: list[str] = []
    for k in range(line, end_line + 1):
        raw = lines[k - 1].rstrip("\r\n")
        text = raw.expandtabs(TAB_COLUMNS)
        last = len(text.rstrip())
        lo = len(raw[:col].expandtabs(TAB_COLUMNS)) if k == line else \
            len(text) - len(text.lstrip())
        hi = last
        if k == end_line and end_col is None:
            hi = lo + 1
        elif k == end_line and end_col != TO_LINE_END:
            hi = len(raw[:end_col].expandtabs(TAB_COLUMNS))
        hint = " " * lo + "^" * max(hi - lo, 1 if k == line else 0)
        for start in range(0, max(len(text), 1), EXCERPT_WIDTH):
            out.append(text[start:start + EXCERPT_WIDTH] + "\n")
            piece = hint[start:start + EXCERPT_WIDTH]
            if "^" in piece:
                out.append(piece.rstrip() + "\n")
    return "".join(out)


def frame_text(filename: str, line: int, func: str, text: str) -> str:
    """One `File "...", line N, in f:` block of an error: the place and its excerpt."""
    return f'File "{filename}", line {line}' + (f", in {func}" if func else "") + ":\n" + text


def caret_text(source_line: str, col: int) -> str:
    """The source line, indented, and a caret under column `col` (0-based)."""
    stripped = source_line.rstrip("\n")
    indent = len(stripped) - len(stripped.lstrip())
    return f"    {stripped.strip()}\n    {' ' * max(col - indent, 0)}^"


def source_line(loc: Any, file_lines: tuple[str, ...] = ()) -> str:
    """The text of the line `loc` (anything with .file and .line) points at; "" when the file
    cannot be read."""
    lines = file_lines or linecache.getlines(loc.file)
    return lines[loc.line - 1] if 0 < loc.line <= len(lines) else ""


def error_at(loc: Any, message: str, file_lines: tuple[str, ...] = (),
             kind: "type[KernelCompileError] | None" = None, *, end: Any = None,
             func: str = "") -> "KernelCompileError":
    """A KernelCompileError at `loc` (.file, .line, .col) with the source excerpt: carets
    from the column to `end` ((end line, end col), see `source_excerpt`), else one caret; in
    function `func`. Its class is `kind`, else the one `compile_error_kind(message)` picks."""
    cls = kind or compile_error_kind(message)
    lines = file_lines or tuple(linecache.getlines(loc.file))
    end_line, end_col = end if end is not None else (None, None)
    return cls(message, loc.file, loc.line, loc.col, source_line(loc, lines),
               excerpt=source_excerpt(lines, loc.line, loc.col, end_line, end_col), func=func)


def call_mismatch(sig: inspect.Signature, nargs: int, keywords: "list[str]") -> str:
    """Why a call with `nargs` positional arguments and `keywords` does not fit `sig`, in the
    words Taichi's call errors use ("Too many arguments", "Unexpected argument 'x'",
    "Multiple values for argument 'x'", "Parameter `x` missing"); "" when it fits."""
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if nargs > len(positional) and not any(p.kind == p.VAR_POSITIONAL for p in params):
        return f"Too many arguments: it takes {len(positional)}, got {nargs}"
    names = [p.name for p in params]
    for key in keywords:
        if key not in names and not any(p.kind == p.VAR_KEYWORD for p in params):
            return f"Unexpected argument '{key}'"
        if key in names and names.index(key) < min(nargs, len(positional)):
            return f"Multiple values for argument '{key}' (given by position and by keyword)"
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        by_position = p in positional and i < nargs
        if not by_position and p.name not in keywords:
            return f"Parameter `{p.name}` missing"
    return ""


class JitrtError(Exception):
    """Base class of every jitrt error."""


class KernelCompileError(JitrtError):
    """Unsupported Python in a kernel, a type error, or a bound outside the sizing grammar.

    The message is laid out as Taichi's (and as a Python traceback): a blank first line, then
    one `File "...", line N, in f:` block per call from the kernel down to the place (the
    source lines, with carets under the whole expression or statement header at fault),
    then `file:line:col: reason`. Without a readable source line it is only the last line.
    """

    def __init__(self, message: str, filename: str = "<unknown>", line: int = 0, col: int = 0,
                 source_line: str = "", *, excerpt: str | None = None, func: str = "") -> None:
        self.filename, self.line, self.col, self.source_line = filename, line, col, source_line
        self.reason, self.func = message, func
        if excerpt is None:
            excerpt = source_excerpt((source_line,), 1, col) if source_line else ""
        self.excerpt = excerpt
        self.callers: list[str] = []       # the frames of the calls above, outermost first
        super().__init__(self._text())

    def _text(self) -> str:
        place = f"{self.filename}:{self.line}:{self.col + 1}: {self.reason}"
        if not self.excerpt and not self.callers:
            return place
        here = frame_text(self.filename, self.line, self.func, self.excerpt) \
            if self.excerpt else ""
        return "\n" + "".join(self.callers) + here + place

    def called_from(self, frame: str) -> None:
        """Record the call (a `frame_text` block) through which the failing code was
        reached; called from the innermost call outwards."""
        self.callers.insert(0, frame)
        self.args = (self._text(),)


class KernelSyntaxError(KernelCompileError, SyntaxError):  # type: ignore[misc]
    """Python a kernel cannot contain (an unsupported statement, expression or call form):
    Taichi's `TaichiSyntaxError`, a `SyntaxError`."""

    def __init__(self, message: str, filename: str = "<unknown>", line: int = 0, col: int = 0,
                 source_line: str = "", *, excerpt: str | None = None, func: str = "") -> None:
        super().__init__(message, filename, line, col, source_line, excerpt=excerpt, func=func)
        # what Python's traceback shows for a SyntaxError: the place, the line with a caret
        # under it, then the reason
        self.lineno, self.offset, self.msg = line, col + 1, message
        self.text = source_line or None

    def __str__(self) -> str:
        # SyntaxError's own str() is "msg (file, line N)"; jitrt's message names the place
        return str(self.args[0]) if self.args else ""


class KernelTypeError(KernelCompileError, TypeError):
    """A value of the wrong type or shape in a kernel (Taichi's `TaichiTypeError`)."""


class KernelNameError(KernelCompileError, NameError):
    """A name a kernel uses that is not defined (Taichi's `TaichiNameError`)."""


class KernelIndexError(KernelCompileError, IndexError):
    """An index known at compile time that is out of range or of the wrong count (Taichi's
    `TaichiIndexError`)."""


# A compile error's built-in kind, when the raising site does not name one: the first rule
# whose words appear in the message (docs/porting.md, "Error kinds"). Unsupported constructs
# are SyntaxErrors, as in Taichi; a message matching no rule stays a plain KernelCompileError
# (Taichi's TaichiCompilationError, an Exception).
_KIND_RULES: "tuple[tuple[tuple[str, ...], type[KernelCompileError]], ...]" = (
    (("is not defined",), KernelNameError),
    (("out of range", "index(es) were given", "dimension(s) but"), KernelIndexError),
    (("cannot assign to parameter", "annotation", "calling @jr.func"), KernelSyntaxError),
    (("expected a number", "must be an integer", "needs an integer", "needs integers",
      "without ",
      "dtype", "cannot assign", "cannot store", "is a scalar local", " local; ",
      "has no component", "has no attribute", "shape", "needs a vector", "needs a matrix",
      "needs a square", "needs two", "must be a scalar", "is one number"), KernelTypeError),
    (("not supported", "not allowed", "cannot be called", "can only", "only functions",
      "takes", "must be known at compile time", "needs a value known", "is only allowed",
      "outside a loop", "unsupported", "Starred", "**kwargs", "keyword arguments"),
     KernelSyntaxError),
)


class PlacelessCompileError(KernelCompileError):
    """A `KernelCompileError` raised at Python scope, where Taichi raises its compile-time
    classes too (its Python-scope methods run its kernel-scope checks): no source place, the
    call is the user's own line in the traceback."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.filename, self.line, self.col, self.source_line = "", 0, 0, ""
        self.reason, self.excerpt, self.func = message, "", ""
        self.callers: list[str] = []


def compile_error_kind(message: str) -> "type[KernelCompileError]":
    """The KernelCompileError subclass for `message` (see _KIND_RULES)."""
    for words, cls in _KIND_RULES:
        if any(w in message for w in words):
            return cls
    return KernelCompileError


class KernelArgError(JitrtError, TypeError, RuntimeError):
    """Wrong number, type, dtype or ndim of launch arguments: a `TypeError` and, as Taichi's
    `TaichiRuntimeTypeError`, a `RuntimeError`."""


class KernelArgValueError(KernelArgError, ValueError):
    """An ndarray argument whose element type, element shape or number of dimensions is not
    the annotation's: a `KernelArgError`, and the `ValueError` Taichi raises for it."""


class IndexCountError(PlacelessCompileError, KernelIndexError, AssertionError):
    """`x[i, j]` at Python scope with another number of indices than `x` takes: an
    `IndexError` (as before), the `TaichiIndexError` Taichi raises for an ndarray and the
    `AssertionError` it raises for a field."""


class IndexTypeError(JitrtError, IndexError, TypeError):
    """`x[0, :]` (a slice, or anything not an integer, in an index tuple) at Python scope: an
    `IndexError` (as before) and the `TypeError` Taichi raises."""


class KernelRuntimeError(JitrtError, RuntimeError):
    """A kernel detected a fault while running (an index out of bounds); the faulty access was
    skipped, so memory is intact."""


class KernelArgSyntaxError(KernelArgError, KernelSyntaxError):  # type: ignore[misc]
    """Launch arguments Taichi refuses with a `TaichiSyntaxError`: a `KernelArgError` and a
    `KernelSyntaxError` (with no source location: the call is the user's own line in the
    traceback). A kernel method called on an object of a class without `@jr.data_oriented`
    raises it directly."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.filename, self.line, self.col, self.source_line = None, 0, 0, ""  # type: ignore
        self.reason, self.msg = message, message
        self.excerpt, self.func, self.callers = "", "", []
        self.lineno = self.offset = None  # type: ignore[assignment]
        self.text = None


class KernelArgCountError(KernelArgSyntaxError):
    """Too many or too few launch arguments, or an unknown or repeated keyword (a `TypeError`,
    as Python's own for a call, and Taichi's `TaichiSyntaxError`)."""


class KernelAssertionError(KernelRuntimeError, AssertionError):
    """An `assert` in a kernel failed (`jr.init(debug=True)`): Taichi's
    `TaichiAssertionError`, a `RuntimeError` and an `AssertionError`."""


class KernelBoundsError(KernelAssertionError, IndexError):
    """A kernel (the access was skipped), or Python scope (`x[3] = v`), indexed a field or
    ndarray out of its bounds: an `IndexError`, and the `AssertionError`/`RuntimeError`
    Taichi's debug build raises for it (`TaichiAssertionError`)."""


class AdStackOverflowError(JitrtError, RuntimeError):
    """A push past an adstack's capacity (skipped; the launch raises)."""

    def __init__(self, message: str, kernel_name: str = "", task_id: int = -1,
                 registry_id: int = 0) -> None:
        super().__init__(message)
        self.kernel_name, self.task_id, self.registry_id = kernel_name, task_id, registry_id


class AutodiffError(JitrtError, RuntimeError):
    """A recorded computation whose gradient jitrt cannot compute correctly (for example, a
    Tape whose later launches change the data that decides an earlier launch's trip counts)."""


class TapeLossError(AutodiffError, ValueError):
    """A `jr.ad.Tape(loss=...)` whose loss cannot be seeded: more than one element, or no
    gradient. A `ValueError` and, as Taichi's refusal of the same losses, a `RuntimeError`."""


class NotDifferentiableError(KernelCompileError, AutodiffError):
    """A kernel whose adjoint jitrt refuses to build (it calls `jr.random()`, reads or writes
    an ndarray's `.grad`, loops with `while`/`break`/`continue`): raised when the gradient
    kernel is compiled, at the offending line. A `KernelCompileError` (jitrt's kind) and a
    `RuntimeError` through `AutodiffError` (what Taichi raises for the same refusals)."""


def not_differentiable_at(loc: Any, kernel: str, message: str) -> NotDifferentiableError:
    """A NotDifferentiableError for kernel `kernel` at `loc` (.file, .line, .col)."""
    return NotDifferentiableError(f"kernel {kernel}: {message}", loc.file, loc.line, loc.col,
                                  source_line(loc))


class FloatDtypeError(KernelRuntimeError, TypeError):
    """`needs_grad=True` or `needs_dual=True` on a field or ndarray of an integer dtype. A
    `TypeError` (jitrt's kind for a wrong dtype) and a `KernelRuntimeError`, the
    `RuntimeError` class Taichi's `TaichiRuntimeError` maps to, which Taichi raises here."""


class GradCheckWarning(UserWarning):
    """`jr.ad.Tape(grad_check=[...])`: a gradient disagrees with finite differences."""


class CastWarning(UserWarning):
    """A value converted to a narrower type where it is stored (Taichi's `TaichiCastWarning`,
    "may lose precision"): an f64 added into an f32 local, an i64 stored into an i32 field.
    Issued once per source site when the kernel compiles (not when a warm start finds it in
    the offline cache)."""


class OfflineCacheError(JitrtError):
    """Raised only by explicit cache tooling."""


class ConfigError(JitrtError, ValueError):
    """An invalid `jr.init` option or `JITRT_*` variable; the message names it and the values
    it accepts."""


class UnknownOptionError(JitrtError, TypeError, KeyError):
    """`jr.init()` given an option it does not know: a `TypeError` (Python's own for an
    unknown keyword) and the `KeyError` Taichi's `ti.init` raises. Shown as its message
    (a KeyError alone would show the message quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidShapeError(KernelRuntimeError, TypeError, ValueError):
    """A field or ndarray shape that is not a tuple of integers from 0 to 2**31 - 1: a
    `TypeError` (not integers) or `ValueError` (out of range), as jitrt raised before, and
    a `KernelRuntimeError`, the class of Taichi's `TaichiRuntimeError` it raises here."""


class BackendUnavailableError(JitrtError, RuntimeError):
    """The chosen arch has no usable runtime on this machine."""


# Taichi's names of its exception classes, for jitrt's equivalents (docs/porting.md): code
# written for Taichi catches jitrt's errors under the names it knows
TaichiCompilationError = KernelCompileError
TaichiSyntaxError = KernelSyntaxError
TaichiTypeError = KernelTypeError
TaichiNameError = KernelNameError
TaichiIndexError = KernelIndexError
TaichiRuntimeError = KernelRuntimeError
TaichiAssertionError = KernelAssertionError
TaichiRuntimeTypeError = KernelArgError
