"""The exceptions jitrt raises (every one is a `JitrtError`), and the source-line helpers
that locate an error at a line and column of the user's file. Below every other layer: the
frontend, the passes, codegen and the runtime all report through here.
"""
from __future__ import annotations

import linecache
from typing import Any


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


def error_at(loc: Any, message: str, file_lines: tuple[str, ...] = ()) -> "KernelCompileError":
    """A KernelCompileError at `loc` (.file, .line, .col) with the source line and a caret."""
    return KernelCompileError(message, loc.file, loc.line, loc.col, source_line(loc, file_lines))


class JitrtError(Exception):
    """Base class of every jitrt error."""


class KernelCompileError(JitrtError):
    """Unsupported Python in a kernel, a type error, or a bound outside the sizing grammar.

    The message names the file, line and column and shows the source line with a caret.
    """

    def __init__(self, message: str, filename: str = "<unknown>", line: int = 0, col: int = 0,
                 source_line: str = "") -> None:
        self.filename, self.line, self.col, self.source_line = filename, line, col, source_line
        self.reason = message
        text = f"{filename}:{line}:{col + 1}: {message}"
        if source_line:
            text += "\n" + caret_text(source_line, col)
        super().__init__(text)


class KernelArgError(JitrtError, TypeError):
    """Wrong number, type, dtype or ndim of launch arguments."""


class KernelRuntimeError(JitrtError, RuntimeError):
    """A kernel detected a fault while running (an index out of bounds); the faulty access was
    skipped, so memory is intact."""


class AdStackOverflowError(JitrtError, RuntimeError):
    """A push past an adstack's capacity (skipped; the launch raises)."""

    def __init__(self, message: str, kernel_name: str = "", task_id: int = -1,
                 registry_id: int = 0) -> None:
        super().__init__(message)
        self.kernel_name, self.task_id, self.registry_id = kernel_name, task_id, registry_id


class AutodiffError(JitrtError, RuntimeError):
    """A recorded computation whose gradient jitrt cannot compute correctly (for example, a
    Tape whose later launches change the data that decides an earlier launch's trip counts)."""


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
    Issued once per source site when the kernel compiles."""


class OfflineCacheError(JitrtError):
    """Raised only by explicit cache tooling."""


class ConfigError(JitrtError, ValueError):
    """An invalid `jr.init` option or `JITRT_*` variable; the message names it and the values
    it accepts."""


class BackendUnavailableError(JitrtError, RuntimeError):
    """The chosen arch has no usable runtime on this machine."""
