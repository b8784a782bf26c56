"""AST -> IR for formatted strings in kernels: f-strings, `"...".format(...)` and `"..." % args`.

Stage: frontend (a family of the lowering visitor). A formatted string whose values are all
known at compile time is a Python string, formatted here. One with run-time values is a
`FormatValue`: text and (value, spec) parts, which `print` turns into one `n.Print` (each
value printed by the device with its printf specifier) and `assert` into its message.

Format specifiers are printf's, as in Taichi: `{x:.2f}`, `{i:5d}`, `{v:e}` (each component of
a vector or matrix), a spec without a conversion takes the value's own (`{x:.3}` of a float is
`.3f`, of an int `.3d`: zero-padded to 3 digits), an f64 with no precision gets 12 digits; a
conversion of the wrong kind for the value's type (`{f:d}` of a float, `{i:u}` of a signed int)
is a KernelTypeError. `str.format` numbers its `{}` fields from 0 independently of explicit
`{1}` ones, takes exactly as many positional arguments as the largest index needs and every
keyword it is given must be used (Taichi's rules). Nothing is cached here.
"""
from __future__ import annotations

import ast
import re
import string
from typing import Any

from .. import dtypes
from ..errors import KernelSyntaxError, KernelTypeError
from ..frozen import frozen
from ..ir import nodes as n
from .context import LoweringHost, PyValue
from .lower_expr import Value, describe, is_number
from .vectors import TupleValue, VecValue

PRINTF_SPEC = r"%?([-+ #0]*)(\d*)(\.\d*)?(hh|ll|[hljztL])?([a-zA-Z]?)\Z"
REAL, SIGNED, UNSIGNED, UNSUPPORTED = "fFeEaAgG", "di", "oxXu", "csnp"
PERCENT = r"%(?:\(\w+\))?([-+ #0]*)(\d*)(\.\d*)?(?:hh|ll|[hlL])?([diouxXeEfFgGcrsa%])"
# (patterns compiled on first use, by `re`'s cache: this module loads with every first compile,
# and most kernels format nothing)


@frozen
class FormatValue:
    """A string with run-time values in it: `parts` are text or (value, printf spec or None)."""
    parts: tuple[Any, ...]

    @property
    def description(self) -> str:
        return "a formatted string with run-time values (only print() and assert take one)"


def printf_spec(spec: str, dt: dtypes.DataType) -> str:
    """The printf specifier (no `%`, no length) that `spec` gives a value of type `dt`;
    ValueError (syntax) or TypeError (a conversion of the wrong kind) with the reason."""
    m = re.match(PRINTF_SPEC, spec)
    if m is None or (m.group(5) and m.group(5) not in REAL + SIGNED + UNSIGNED + UNSUPPORTED):
        raise ValueError(f"'{spec}' is not a valid printf format specifier "
                         "([flags][width][.precision][conversion], e.g. '.2f', '5d', 'e')")
    flags, width, precision, _, conv = m.groups("")
    if conv and conv in UNSUPPORTED:
        raise ValueError(f"conversion '{conv}' is not supported")
    if (conv in REAL and not dt.is_float) or (conv in SIGNED and not (
            dt.is_int and dt.is_signed)) or (conv in UNSIGNED and not (
            dt.is_int and not dt.is_signed)):
        if conv:
            raise TypeError(f"'{spec}' doesn't match '{dt.name}'.")
    if not conv:
        conv = "f" if dt.is_float else "d" if dt.is_signed else "u"
    if dt.is_float and not precision and dt.bits == 64:
        precision = ".12"
    return flags + width + precision + conv


class FormatLowering(LoweringHost):
    # ---- building ---------------------------------------------------------------------
    def expr_JoinedStr(self, node: ast.JoinedStr) -> Any:
        parts: list[Any] = []
        for piece in node.values:
            if isinstance(piece, ast.Constant):
                parts.append(str(piece.value))
                continue
            assert isinstance(piece, ast.FormattedValue)
            spec = None
            if piece.format_spec is not None:
                shown = self.expr(piece.format_spec)
                if not (isinstance(shown, PyValue) and isinstance(shown.obj, str)):
                    raise self.err(piece.format_spec, "a format spec in a kernel must be known "
                                   "at compile time")
                spec = shown.obj or None
            value = self.expr(piece.value)
            if isinstance(value, PyValue) and piece.conversion in (ord("r"), ord("a")):
                value = PyValue(repr(value.obj) if piece.conversion == ord("r") else
                                ascii(value.obj))
            parts.append((value, spec))
        return self.formatted(parts, node)

    def str_format(self, text: str, node: ast.Call) -> Any:
        """`text.format(*args, **kwargs)` with Taichi's numbering and argument checks."""
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        fields: list[tuple[str, Any, Any]] = []
        auto = 0
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise self.err(node, f"bad format string: {exc}", KernelSyntaxError) from None
        for literal, name, spec, conversion in parsed:
            if name is None:
                fields.append((literal, None, None))
                continue
            key: Any = name
            if name == "":
                key, auto = auto, auto + 1
            elif name.isdigit():
                key = int(name)
            elif not name.isidentifier():
                raise self.err(node, f"format field '{{{name}}}' is not supported in kernels "
                               "(use {}, {0} or {name})", KernelSyntaxError)
            fields.append((literal, key, (spec or None, conversion)))
        positions = [f[1] for f in fields if isinstance(f[1], int)]
        wanted = max(positions, default=-1) + 1
        if wanted != len(args):
            raise self.err(node, f"Expected {wanted} positional argument(s), but received "
                           f"{len(args)} instead.", KernelSyntaxError)
        names = [f[1] for f in fields if isinstance(f[1], str)]
        for name in names:
            if name not in kwargs:
                raise self.err(node, f"Keyword '{name}' not found.", KernelSyntaxError)
        for name in kwargs:
            if name not in names:
                raise self.err(node, f"Keyword '{name}' not used.", KernelSyntaxError)
        parts: list[Any] = []
        for literal, key, extra in fields:
            parts.append(literal)
            if key is None:
                continue
            spec, conversion = extra
            value = args[key] if isinstance(key, int) else kwargs[key]
            if isinstance(value, PyValue) and conversion in ("r", "a"):
                value = PyValue(repr(value.obj) if conversion == "r" else ascii(value.obj))
            parts.append((value, spec))
        return self.formatted(parts, node)

    def percent_format(self, text: str, values: Value, node: ast.AST) -> Any:
        """`text % values` (printf-style, as Python's): each conversion takes the next value;
        a run-time value is converted to the conversion's kind (`%d` of a float truncates,
        as Python's `int()`)."""
        items: list[Any]
        if isinstance(values, PyValue) and isinstance(values.obj, tuple):
            items = [PyValue(x) for x in values.obj]
        elif isinstance(values, TupleValue):          # `% (a, b)`: lower_expr.expr_BinOp
            items = list(values.items)
        else:
            items = [values]
        parts: list[Any] = []
        at, used = 0, 0
        for m in re.finditer(PERCENT, text):
            parts.append(text[at:m.start()])
            at = m.end()
            flags, width, precision, conv = m.groups("")
            if conv == "%":
                parts.append("%")
                continue
            if used >= len(items):
                raise self.err(node, "not enough arguments for format string")
            item, used = items[used], used + 1
            if conv in "rsa":
                parts.append((item, None))
                continue
            if isinstance(item, PyValue):                   # Python's own
                try:
                    parts.append(("%" + flags + width + precision + conv) % item.obj)
                except (TypeError, ValueError) as exc:
                    raise self.err(node, f"string formatting fails: {exc}") from None
                continue
            e = self.value(node, item)
            if conv in REAL and not e.dtype.is_float:
                e = self.cast(e, dtypes.f64)
            elif conv not in REAL and e.dtype.is_float:
                e = self.cast(e, dtypes.i64)
            if conv in SIGNED + UNSIGNED:
                conv = conv if conv in "oxX" else ("d" if e.dtype.is_signed else "u")
                if conv in "oxX" and e.dtype.is_signed:
                    e = self.cast(e, dtypes.u64)
            parts.append((e, flags + width + precision + conv))
        parts.append(text[at:])
        if used != len(items):
            raise self.err(node, "not all arguments converted during string formatting")
        return self.formatted(parts, node)

    def formatted(self, parts: list[Any], node: ast.AST) -> Any:
        """The formatted string of `parts` (text, or (value, spec)): a Python string when
        every value is known at compile time, else a FormatValue."""
        if all(isinstance(p, str) or isinstance(p[0], PyValue) for p in parts):
            return PyValue("".join(p if isinstance(p, str) else self.format_constant(
                p[0].obj, p[1], node) for p in parts))
        merged: list[Any] = []
        for p in parts:
            if isinstance(p, tuple) and isinstance(p[0], FormatValue):
                merged += list(p[0].parts)
            elif isinstance(p, tuple) and isinstance(p[0], PyValue):
                merged.append(self.format_constant(p[0].obj, p[1], node))
            else:
                merged.append(p)
        return FormatValue(tuple(merged))

    def format_constant(self, value: Any, spec: str | None, node: ast.AST) -> str:
        """A compile-time value in a formatted string: `str(value)`, or with a spec as a
        run-time value of its type would print (printf's rules, by Python's `%`)."""
        if not spec:
            return str(value)
        if is_number(PyValue(value)) and not isinstance(value, bool):
            dt = self.ctx.default_fp if isinstance(value, float) else self.ctx.default_ip
            fmt = self.checked_spec(spec, dt, node)
            return ("%" + fmt) % value
        try:
            return format(value, spec)
        except (TypeError, ValueError) as exc:
            raise self.err(node, f"cannot format {describe(value)} with '{spec}': {exc}",
                           KernelSyntaxError) from None

    def print_constant(self, value: Any, spec: str | None, node: ast.AST) -> str:
        """A compile-time value given to print() itself (not inside a formatted string): a
        number prints as the same number computed at run time would (Taichi makes it a
        constant of the default type: `print(1.5)` shows `1.500000`, `print(True)` `1`)."""
        if spec or not is_number(PyValue(value)):
            return self.format_constant(value, spec, node)
        if isinstance(value, float):
            return self.ctx.default_fp.print_spec % value
        return str(int(value))

    def checked_spec(self, spec: str, dt: dtypes.DataType, node: ast.AST) -> str:
        try:
            return printf_spec(spec, dt)
        except TypeError as exc:
            raise self.err(node, str(exc), KernelTypeError) from None
        except ValueError as exc:
            raise self.err(node, str(exc), KernelSyntaxError) from None

    # ---- using ------------------------------------------------------------------------
    def assert_message(self, msg: Any, node: ast.AST
                       ) -> tuple[str, tuple[n.Expr, ...], tuple[str, ...]]:
        """An assert's message: a compile-time string, or a formatted one with at most 2
        run-time values (they travel in the fault record): its text with a NUL where each
        value goes, the values and their printf specs."""
        if isinstance(msg, PyValue) and isinstance(msg.obj, str):
            return msg.obj, (), ()
        if not isinstance(msg, FormatValue):
            raise self.err(node, "an assert message must be a string (an f-string, "
                           "str.format or % formatting may hold run-time values)")
        pieces: list[str] = [""]
        args: list[n.Expr] = []
        formats: list[str] = []
        self.print_parts(msg, None, node, pieces, args, formats)
        if len(args) > 2:
            raise self.err(node, f"an assert message holds at most 2 run-time values, got "
                           f"{len(args)} (a vector counts each component)")
        return "\0".join(pieces), tuple(args), tuple(formats)

    def print_parts(self, v: Any, spec: str | None, node: ast.AST, pieces: list[str],
                    args: list[n.Expr], formats: list[str]) -> None:
        """Append `v` to a print's text pieces and device arguments (with their printf
        specs; "" is the default): vectors as [x, y], matrices as [[..], [..]]."""
        if isinstance(v, FormatValue):
            for p in v.parts:
                if isinstance(p, str):
                    pieces[-1] += p
                else:
                    self.print_parts(p[0], p[1], node, pieces, args, formats)
            return
        if isinstance(v, VecValue) and len(v.shape) == 2:
            pieces[-1] += "["
            for r in range(v.shape[0]):
                if r:
                    pieces[-1] += ", "
                self.print_parts(v.row(r), spec, node, pieces, args, formats)
            pieces[-1] += "]"
            return
        if isinstance(v, (VecValue, TupleValue)):
            pieces[-1] += "["
            for k, x in enumerate(v.items):
                if k:
                    pieces[-1] += ", "
                self.print_parts(x, spec, node, pieces, args, formats)
            pieces[-1] += "]"
            return
        if isinstance(v, PyValue) and isinstance(v.obj, (tuple, list)):
            self.print_parts(TupleValue(tuple(PyValue(x) for x in v.obj)), spec, node, pieces,
                             args, formats)
            return
        if isinstance(v, PyValue):
            pieces[-1] += self.print_constant(v.obj, spec, node)
            return
        e = self.value(node, v)
        formats.append(self.checked_spec(spec, e.dtype, node) if spec else "")
        args.append(e)
        pieces.append("")
