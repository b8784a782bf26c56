"""Adjoint rules: for each differentiable operation, the adjoints of its operands.

Stage: used by `autodiff.py` (reverse mode) and `forward_ad.py` (forward mode).
`RULES[op](node, g, b)` returns a list of (operand, adjoint expression) pairs for an expression
node whose output adjoint is `g`; `b` is a small builder with typed helpers (constants,
arithmetic, math calls, selects). Keyed by the IR op: Binary ops by their operator, Unary by its
op, Math by its function name, plus Select and Cast. Operations absent from the table have zero
derivative (comparisons, integer ops, floor/ceil). Forward mode relies on two properties every
rule keeps: the pairs list the node's operands in order, and each adjoint is `g` times the
partial derivative (linear in `g`), so with `g` := an operand's tangent it is that operand's
term of the tangent of the node.
"""
from __future__ import annotations

from typing import Any, Callable

from ..dtypes import DataType, i32
from ..ir import nodes as n


class Build:
    """Typed expression helpers for writing rules."""

    def __init__(self, loc: n.Loc) -> None:
        self.loc = loc

    def c(self, value: float, dt: DataType) -> n.Expr:
        return n.Const(float(value), dt, self.loc)

    def bin(self, op: str, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Binary(op, a, b, a.dtype, self.loc)

    def mul(self, a: n.Expr, b: n.Expr) -> n.Expr:
        return self.bin("*", a, b)

    def div(self, a: n.Expr, b: n.Expr) -> n.Expr:
        return self.bin("/", a, b)

    def neg(self, a: n.Expr) -> n.Expr:
        return n.Unary("neg", a, a.dtype, self.loc)

    def math(self, fn: str, *args: n.Expr) -> n.Expr:
        return n.Math(fn, tuple(args), args[0].dtype, self.loc)

    def less(self, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Binary("<", a, b, i32, self.loc)

    def compare(self, op: str, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Binary(op, a, b, i32, self.loc)

    def select(self, cond: n.Expr, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Select(cond, a, b, a.dtype, self.loc)

    def zero(self, dt: DataType) -> n.Expr:
        return self.c(0.0, dt)


Pairs = list[tuple[n.Expr, n.Expr]]
Rule = Callable[[Any, n.Expr, Build], Pairs]   # the node: a Binary, Math, Unary... of its table


def _min_max(e: n.Binary, g: n.Expr, b: Build) -> Pairs:
    # min(a, c) picks c when c < a, max picks c when c > a: the pick gets g; at a tie
    # (a == c) each gets g / 2, the central difference (as torch and JAX split it)
    picks_c = b.less(e.b, e.a) if e.op == "min" else b.less(e.a, e.b)
    tie = b.compare("==", e.a, e.b)
    zero, half = b.zero(g.dtype), b.mul(g, b.c(0.5, g.dtype))
    return [(e.a, b.select(tie, half, b.select(picks_c, zero, g))),
            (e.b, b.select(tie, half, b.select(picks_c, g, zero)))]


def abs_rule(e: n.Math, g: n.Expr, b: Build) -> Pairs:
    """g times sign(x), 0 at x = 0 (the central difference, and what Taichi and torch give)."""
    x, zero = e.args[0], b.zero(e.dtype)
    return [(x, b.select(b.less(x, zero), b.neg(g), b.select(b.less(zero, x), g, zero)))]


def pow_rule(e: n.Math, g: n.Expr, b: Build) -> Pairs:
    """d(a^y)/da = y a^(y-1), 0 where y = 0 (also at a = 0: a^0 is constant); d(a^y)/dy =
    a^y log(a), with log(1) in place of log(0), so 0 at a = 0 for y > 0 (as torch and JAX
    give; the central difference there is 0 too) instead of 0 * -inf."""
    a, y = e.args
    zero, one = b.zero(e.dtype), b.c(1, e.dtype)
    d_base = b.mul(y, b.math("pow", a, b.bin("-", y, one)))
    safe_a = b.select(b.compare("==", a, zero), one, a)
    return [(a, b.mul(g, b.select(b.compare("==", y, zero), zero, d_base))),
            (y, b.mul(g, b.mul(e, b.math("log", safe_a))))]


def one_minus_square(e: n.Math, b: Build) -> n.Expr:
    """1 - x^2 of the argument, as (1 - x)(1 + x)."""
    x, one = e.args[0], b.c(1, e.dtype)
    return b.mul(b.bin("-", one, x), b.bin("+", one, x))


def atan2_rule(e: n.Math, g: n.Expr, b: Build) -> Pairs:
    y, x = e.args
    r2 = b.bin("+", b.mul(x, x), b.mul(y, y))
    return [(y, b.div(b.mul(g, x), r2)), (x, b.neg(b.div(b.mul(g, y), r2)))]


BINARY_RULES: dict[str, Rule] = {
    "+": lambda e, g, b: [(e.a, g), (e.b, g)],
    "-": lambda e, g, b: [(e.a, g), (e.b, b.neg(g))],
    "*": lambda e, g, b: [(e.a, b.mul(g, e.b)), (e.b, b.mul(g, e.a))],
    "/": lambda e, g, b: [(e.a, b.div(g, e.b)),
                          (e.b, b.neg(b.div(b.mul(g, e.a), b.mul(e.b, e.b))))],
    "%": lambda e, g, b: [(e.a, g), (e.b, b.neg(b.mul(g, b.math("floor", b.div(e.a, e.b)))))],
    "min": _min_max,
    "max": _min_max,
}

MATH_RULES: dict[str, Rule] = {
    "sin": lambda e, g, b: [(e.args[0], b.mul(g, b.math("cos", e.args[0])))],
    "cos": lambda e, g, b: [(e.args[0], b.neg(b.mul(g, b.math("sin", e.args[0]))))],
    "tan": lambda e, g, b: [(e.args[0], b.mul(g, b.bin("+", b.c(1, e.dtype),
                                                         b.mul(e, e))))],
    "exp": lambda e, g, b: [(e.args[0], b.mul(g, e))],
    "log": lambda e, g, b: [(e.args[0], b.div(g, e.args[0]))],
    "sqrt": lambda e, g, b: [(e.args[0], b.div(g, b.mul(b.c(2, e.dtype), e)))],
    "tanh": lambda e, g, b: [(e.args[0], b.mul(g, b.bin("-", b.c(1, e.dtype), b.mul(e, e))))],
    "abs": abs_rule,
    "asin": lambda e, g, b: [(e.args[0], b.div(g, b.math("sqrt", one_minus_square(e, b))))],
    "acos": lambda e, g, b: [(e.args[0], b.neg(b.div(g, b.math("sqrt",
                                                              one_minus_square(e, b)))))],
    "atan": lambda e, g, b: [(e.args[0], b.div(g, b.bin("+", b.c(1, e.dtype),
                                                        b.mul(e.args[0], e.args[0]))))],
    "atan2": lambda e, g, b: atan2_rule(e, g, b),
    "sinh": lambda e, g, b: [(e.args[0], b.mul(g, b.math("cosh", e.args[0])))],
    "cosh": lambda e, g, b: [(e.args[0], b.mul(g, b.math("sinh", e.args[0])))],
    "pow": pow_rule,
}


# Ops whose derivative is zero almost everywhere (or that only produce integers/flags): the
# reverse sweep sends nothing through them. Every other float op needs a rule above; a new op
# in neither table is a compile error, never a silent zero gradient (tests/test_layers.py).
ZERO_DERIVATIVE = frozenset({"//", "floor", "ceil", "round", "<", "<=", ">", ">=", "==", "!=",
                             "and", "or", "<<", ">>", "&", "|", "^", "ipow", "not", "invert",
                             "popcnt", "clz", "ffs", "bitcast",
                             n.STOP_GRAD})


def has_zero_derivative(e: n.Expr) -> bool:
    """Whether `e` legitimately passes no adjoint to its operands."""
    if isinstance(e, (n.Const, n.Arg, n.Shape, n.Atomic, n.Assertion, n.Print)):
        return True
    if isinstance(e, n.Binary):
        return e.op in ZERO_DERIVATIVE
    if isinstance(e, n.Math):
        return e.fn in ZERO_DERIVATIVE
    if isinstance(e, n.Unary):
        return e.op in ZERO_DERIVATIVE
    if isinstance(e, n.Cast):
        return not e.x.dtype.is_float
    return False


def rule_for(e: n.Expr) -> Rule | None:
    if isinstance(e, n.Binary):
        return BINARY_RULES.get(e.op)
    if isinstance(e, n.Math):
        return MATH_RULES.get(e.fn)
    if isinstance(e, n.Unary) and e.op == "neg":
        return lambda e, g, b: [(e.x, b.neg(g))]
    if isinstance(e, n.Unary) and e.op == n.TANGENT_ONLY:
        return lambda e, g, b: [(e.x, g)]
    if isinstance(e, n.Select):
        return lambda e, g, b: [(e.a, b.select(e.cond, g, b.zero(g.dtype))),
                                (e.b, b.select(e.cond, b.zero(g.dtype), g))]
    if isinstance(e, n.Cast) and e.x.dtype.is_float:
        return lambda e, g, b: [(e.x, n.Cast(g, e.x.dtype, b.loc) if g.dtype != e.x.dtype
                                 else g)]
    return None
