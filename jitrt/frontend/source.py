"""Source capture and error locations.

Stage: frontend entry. `capture(fn)` reads a function's source once, dedents and parses it into
an AST (never mutated afterwards) and records where it sits in its file, so that every IR node
and every error can name the user's file, line and column.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import re
import sys
import textwrap
from typing import Any

from ..frozen import frozen
from ..errors import (TO_LINE_END, KernelCompileError, compile_error_kind, error_at,
                      frame_text, source_excerpt)
from ..ir.nodes import Loc


@frozen
class SourceInfo:
    filename: str
    first_line: int       # line number of the `def` (after decorators) in the file
    indent: int           # columns removed by dedenting
    text: str             # dedented source
    file_lines: tuple[str, ...]
    tree: ast.FunctionDef

    @property
    def place(self) -> tuple[str, int, int, int]:
        """(file, first line, number of lines, indent): where this source is in its file, as
        compiled kernels record it for their funcs (`CompileContext.origins`)."""
        return (self.filename, self.first_line, self.text.count("\n") + 1, self.indent)

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        return Loc(self.filename, line, getattr(node, "col_offset", 0) + self.indent)

    def span_end(self, node: ast.AST) -> tuple[int, int] | None:
        """Where the excerpt of `node` ends (file line, column): the end of an expression or
        a simple statement; the end of the header line(s) of a statement with a body."""
        body = getattr(node, "body", None)
        if isinstance(node, ast.stmt) and isinstance(body, list) and body:
            last = max(body[0].lineno - 1, node.lineno)
            return last + self.first_line - 1, TO_LINE_END
        end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_line is None or end_col is None:
            return None
        return end_line + self.first_line - 1, end_col + self.indent

    def error(self, node: ast.AST | None, message: str,
              kind: type[KernelCompileError] | None = None) -> KernelCompileError:
        if node is None:
            cls = kind or compile_error_kind(message)
            return cls(message, self.filename, self.first_line, 0)
        loc = self.loc(node)
        return error_at(loc, message, self.file_lines, kind, end=self.span_end(node),
                        func=self.tree.name)

    def frame(self, node: ast.AST) -> str:
        """The `File "...", line N, in f:` block of the call `node` in this function, for an
        error raised inside the function it calls (`KernelCompileError.called_from`)."""
        loc = self.loc(node)
        end_line, end_col = self.span_end(node) or (None, None)
        return frame_text(self.filename, loc.line, self.tree.name, source_excerpt(
            self.file_lines, loc.line, loc.col, end_line, end_col))


def capture(fn) -> SourceInfo:
    """Read and parse `fn`'s source. Raises KernelCompileError if the source is unavailable."""
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_name == "<lambda>":
        return _lambda_source(fn)
    found = _from_code(fn)
    if found is None:
        found = _from_inspect(fn)
    filename, start, lines, indent, text, tree = found
    if not isinstance(tree, ast.FunctionDef):
        raise KernelCompileError(f"{fn.__qualname__} is not a plain function definition",
                                 filename, start, 0)
    file_lines = tuple(linecache.getlines(filename))
    return SourceInfo(filename, start, indent, text, file_lines, tree)


_Found = tuple[str, int, list[str], int, str, ast.stmt]


def _lambda_source(fn) -> SourceInfo:
    """A lambda as `def <lambda>(params): return body`: the lambda expression is found in its
    file's AST by its first line (and, when a line holds several, by the columns of its code's
    instructions); its text is the lambda alone, so two lambdas never share a cache key."""
    code = fn.__code__
    filename, line = code.co_filename, code.co_firstlineno
    file_lines = linecache.getlines(filename)
    try:
        tree = ast.parse("".join(file_lines))
    except (SyntaxError, ValueError):
        tree = None
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)
             and node.lineno == line] if tree is not None else []
    if len(found) > 1 and hasattr(code, "co_positions"):
        cols = [(ln, col) for ln, _, col, _ in code.co_positions() if ln and col]
        found = [lam for lam in found if all(
            (lam.lineno, lam.col_offset) <= pos <= (lam.end_lineno, lam.end_col_offset)
            for pos in cols)]
    if len(found) != 1:
        raise KernelCompileError(
            f"cannot find the source of the lambda {fn.__qualname__} (line {line}): a lambda "
            "called from a kernel must be written in a Python file, alone on its line or with "
            "its own columns; or make it a def", filename, line, 0)
    lam = found[0]
    text = ast.get_source_segment("".join(file_lines), lam) or ""
    expr = ast.parse(text, mode="eval").body
    assert isinstance(expr, ast.Lambda)
    extra: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}
    body = ast.copy_location(ast.Return(value=expr.body), expr.body)
    fdef = ast.FunctionDef(name="<lambda>", args=expr.args, body=[body], decorator_list=[],
                           returns=None, type_comment=None, **extra)
    ast.fix_missing_locations(ast.copy_location(fdef, expr))
    return SourceInfo(filename, line, lam.col_offset, text, tuple(file_lines), fdef)


def _parsed(filename: str, start: int, lines: list[str]) -> _Found:
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = lines[0]
    indent = len(first) - len(first.lstrip()) if text != raw else 0
    return filename, start, lines, indent, text, ast.parse(text).body[0]


def _from_inspect(fn) -> _Found:
    try:
        lines, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as exc:
        code = getattr(fn, "__code__", None)
        where = code.co_filename if code is not None else "<unknown>"
        raise KernelCompileError(
            f"cannot read the source of {fn.__qualname__} ({exc}): kernels and funcs must be "
            "defined in a Python file (a module or a script), not typed into the interactive "
            "prompt or exec()'d from a string", where,
            code.co_firstlineno if code is not None else 0) from None
    return _parsed(filename, start, lines)


_DEF_OR_DECORATOR = re.compile(r"\s*(@|def\s|async\s+def\s)")


def _from_code(fn) -> _Found | None:
    """The function's lines found through its code object: the first line is where inspect
    starts (the first decorator), the last is the furthest line any of its instructions
    spans (nested functions included), so no tokenizer runs (inspect's costs ~2.5 ms to
    set up and ~0.3 ms per function). None where that cannot be trusted, and the caller asks
    inspect: no instruction positions (Python 3.10), a lambda or a wrapper, not a `.py` file
    in linecache, a line after the last instruction that still belongs to the function (a
    last statement without code), or lines that do not parse. Unlike inspect's, the lines
    stop at the last statement (comments after it are left out)."""
    code = getattr(fn, "__code__", None)
    if code is None or not hasattr(code, "co_positions") or code.co_name == "<lambda>" \
            or hasattr(fn, "__wrapped__"):
        return None
    filename = code.co_filename
    if not filename.endswith(".py"):
        return None
    linecache.checkcache(filename)
    file_lines = linecache.getlines(filename)
    first = code.co_firstlineno - 1
    while 0 < first < len(file_lines) and not _DEF_OR_DECORATOR.match(file_lines[first]):
        first -= 1            # as inspect.findsource: back to the `def` or a decorator
    if not 0 <= first < len(file_lines) or not _DEF_OR_DECORATOR.match(file_lines[first]):
        return None
    last, stack = 0, [code]
    while stack:
        c = stack.pop()
        for line, end, _, _ in c.co_positions():
            last = max(last, end or line or 0)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_positions"))
    if last <= first or last > len(file_lines):
        return None
    own = len(file_lines[first]) - len(file_lines[first].lstrip())
    for line in file_lines[last:]:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            if len(line) - len(line.lstrip()) > own:
                return None       # the function goes on past its last instruction
            break
    try:
        return _parsed(filename, first + 1, file_lines[first:last])
    except SyntaxError:
        return None
