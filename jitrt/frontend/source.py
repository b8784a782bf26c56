"""Source capture and error locations.

Stage: frontend entry. `capture(fn)` reads a function's source once, dedents and parses it into
an AST (never mutated afterwards) and records where it sits in its file, so that every IR node
and every error can name the user's file, line and column.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import KernelCompileError, error_at
from ..ir.nodes import Loc


@dataclass(frozen=True)
class SourceInfo:
    filename: str
    first_line: int       # line number of the `def` (after decorators) in the file
    indent: int           # columns removed by dedenting
    text: str             # dedented source
    file_lines: tuple[str, ...]
    tree: ast.FunctionDef

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        return Loc(self.filename, line, getattr(node, "col_offset", 0) + self.indent)

    def error(self, node: ast.AST | None, message: str) -> KernelCompileError:
        if node is None:
            return KernelCompileError(message, self.filename, self.first_line, 0)
        loc = self.loc(node)
        return error_at(loc, message, self.file_lines)


def capture(fn) -> SourceInfo:
    """Read and parse `fn`'s source. Raises KernelCompileError if the source is unavailable."""
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
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = lines[0]
    indent = len(first) - len(first.lstrip()) if text != raw else 0
    module = ast.parse(text)
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise KernelCompileError(f"{fn.__qualname__} is not a plain function definition",
                                 filename, start, 0)
    file_lines = tuple(linecache.getlines(filename))
    return SourceInfo(filename, start, indent, text, file_lines, tree)
