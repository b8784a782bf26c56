"""SizeExpr: the grammar in which adstack capacities are expressed, and its evaluation.

Stage: IR (a grammar of sizes: produced by `passes/adstack_sizing.py` at compile time,
emitted by `codegen/sizing.py`, evaluated by the runtime at launch).
Nodes (frozen, hashable, printable): Const, ScalarArg, FieldLoad, NdarrayRead, NdarrayShape,
BoundVar, Add, Sub (saturating at 0), Mul, Max, Min, MaxOverRange(var, begin, end, body).
`fold` simplifies constant sub-trees; `free_vars` and `is_closed` tell whether a MaxOverRange
can be reduced at launch on its own (its bounds use no bound variable); `text` prints a stable
form used as a key.
"""
from __future__ import annotations

from typing import Iterator, Union

from ..frozen import frozen


@frozen
class Const:
    value: int


@frozen
class ScalarArg:
    index: int
    name: str


@frozen
class FieldLoad:
    slot: int                        # the kernel's field table slot
    name: str
    indices: tuple["SizeExpr", ...]


@frozen
class NdarrayRead:
    arg: int
    name: str
    indices: tuple["SizeExpr", ...]


@frozen
class NdarrayShape:
    arg: int
    name: str
    axis: int


@frozen
class BoundVar:
    name: str


@frozen
class Add:
    a: "SizeExpr"
    b: "SizeExpr"


@frozen
class Sub:
    """max(a - b, 0)."""
    a: "SizeExpr"
    b: "SizeExpr"


@frozen
class Mul:
    a: "SizeExpr"
    b: "SizeExpr"


@frozen
class Max:
    a: "SizeExpr"
    b: "SizeExpr"


@frozen
class Min:
    a: "SizeExpr"
    b: "SizeExpr"


@frozen
class MaxOverRange:
    """max over var in [begin, end) of body; 0 for an empty range."""
    var: str
    begin: "SizeExpr"
    end: "SizeExpr"
    body: "SizeExpr"


SizeExpr = Union[Const, ScalarArg, FieldLoad, NdarrayRead, NdarrayShape, BoundVar, Add, Sub, Mul,
                 Max, Min, MaxOverRange]
BINARY = (Add, Sub, Mul, Max, Min)


def children(e: SizeExpr) -> Iterator[SizeExpr]:
    if isinstance(e, BINARY):
        yield e.a
        yield e.b
    elif isinstance(e, (FieldLoad, NdarrayRead)):
        yield from e.indices
    elif isinstance(e, MaxOverRange):
        yield e.begin
        yield e.end
        yield e.body


def free_vars(e: SizeExpr) -> frozenset[str]:
    if isinstance(e, BoundVar):
        return frozenset((e.name,))
    if isinstance(e, MaxOverRange):
        return free_vars(e.begin) | free_vars(e.end) | (free_vars(e.body) - {e.var})
    out: frozenset[str] = frozenset()
    for c in children(e):
        out |= free_vars(c)
    return out


def is_closed(e: SizeExpr) -> bool:
    return not free_vars(e)


def _apply(cls: type, a: int, b: int) -> int:
    if cls is Add:
        return a + b
    if cls is Sub:
        return max(a - b, 0)
    if cls is Mul:
        return a * b
    if cls is Max:
        return max(a, b)
    return min(a, b)


def fold(e: SizeExpr) -> SizeExpr:
    """Constant folding and the identities x+0, x*1, x*0, max(x, 0) for counts."""
    if isinstance(e, BINARY):
        a, b = fold(e.a), fold(e.b)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(_apply(type(e), a.value, b.value))
        if isinstance(e, Add) and isinstance(b, Const) and b.value == 0:
            return a
        if isinstance(e, Add) and isinstance(a, Const) and a.value == 0:
            return b
        if isinstance(e, Mul) and isinstance(a, Const) and a.value in (0, 1):
            return b if a.value == 1 else Const(0)
        if isinstance(e, Mul) and isinstance(b, Const) and b.value in (0, 1):
            return a if b.value == 1 else Const(0)
        if isinstance(e, Sub) and isinstance(b, Const) and b.value == 0 and \
                isinstance(a, (Const, NdarrayShape)):
            return a
        return type(e)(a, b)
    if isinstance(e, MaxOverRange):
        body = fold(e.body)
        begin, end = fold(e.begin), fold(e.end)
        if e.var not in free_vars(body):
            # max of a constant body over a range: body if the range is non-empty, else 0
            if isinstance(begin, Const) and isinstance(end, Const):
                return body if end.value > begin.value else Const(0)
            return Mul(Min(Sub(end, begin), Const(1)), body) if not isinstance(body, Const) \
                or body.value else Const(0)
        return MaxOverRange(e.var, begin, end, body)
    if isinstance(e, FieldLoad):
        return FieldLoad(e.slot, e.name, tuple(fold(i) for i in e.indices))
    if isinstance(e, NdarrayRead):
        return NdarrayRead(e.arg, e.name, tuple(fold(i) for i in e.indices))
    return e


def text(e: SizeExpr) -> str:
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, ScalarArg):
        return f"${e.name}"
    if isinstance(e, BoundVar):
        return e.name
    if isinstance(e, NdarrayShape):
        return f"{e.name}.shape[{e.axis}]"
    if isinstance(e, FieldLoad):
        return f"{e.name}[{', '.join(text(i) for i in e.indices)}]"
    if isinstance(e, NdarrayRead):
        return f"{e.name}[{', '.join(text(i) for i in e.indices)}]"
    if isinstance(e, MaxOverRange):
        return f"max_{{{e.var} in [{text(e.begin)}, {text(e.end)})}}({text(e.body)})"
    op = {Add: "+", Sub: "-sat", Mul: "*", Max: "max", Min: "min"}[type(e)]
    if op in ("max", "min"):
        return f"{op}({text(e.a)}, {text(e.b)})"
    return f"({text(e.a)} {op} {text(e.b)})"


def closed_reductions(e: SizeExpr) -> list[MaxOverRange]:
    """The outermost MaxOverRange nodes whose bounds are closed: the max-reducer specs."""
    if isinstance(e, MaxOverRange) and is_closed(e.begin) and is_closed(e.end):
        return [e]
    out: list[MaxOverRange] = []
    for c in children(e):
        out += closed_reductions(c)
    return out
