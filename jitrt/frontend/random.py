"""`jr.random()` in kernels: counter-based random numbers, lowered to plain integer IR.

Stage: frontend. Each launch of a kernel that calls `jr.random` reads a program-wide 64-bit
state (a hidden 0-d field) into a kernel-scope local at its start and advances the state by
one; a call returns a hash (splitmix64 steps) of that launch value, the indices of the
enclosing parallel loop and a per-iteration call counter, scaled to [0, 1) for floats. So
numbers differ between launches, elements and calls, need no per-thread memory, and repeat
exactly after `jr.init(random_seed=...)` with the same seed and launches (on any device: the
hash is the same integer code everywhere). Caches: the state field, per process.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..ir import nodes as n

_STATE: list[Any] = [None]
_SEED = [0]
GOLDEN = 0x9E3779B97F4A7C15
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
SEED_LOCAL = "$rng_launch"


def state_field() -> Any:
    """The program-wide random state (a 0-d u64 field), made once."""
    if _STATE[0] is None:
        from ..data import Field
        state = Field(dtypes.u64, (), False, n.RANDOM_STATE, "field")
        state[None] = _SEED[0]
        _STATE[0] = state
    return _STATE[0]


def reset(seed: int) -> None:
    """Start the sequence again from `seed` (jr.init(random_seed=...)); nothing to do until
    a kernel calls jr.random."""
    _SEED[0] = seed & ((1 << 64) - 1)
    if _STATE[0] is not None:
        _STATE[0][None] = _SEED[0]


def mix(x: n.Expr, loc: n.Loc) -> n.Expr:
    """One splitmix64 finalisation step of a u64 expression."""
    u = dtypes.u64

    def c(v: int) -> n.Expr:
        return n.Const(v, u, loc)

    def op(o: str, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Binary(o, a, b, u, loc)
    z = op("+", x, c(GOLDEN))
    z = op("*", op("^", z, op(">>", z, c(30))), c(MIX1))
    z = op("*", op("^", z, op(">>", z, c(27))), c(MIX2))
    return op("^", z, op(">>", z, c(31)))


def value(bits: n.Expr, dtype: dtypes.DataType, loc: n.Loc) -> n.Expr:
    """A random u64 as `dtype`: floats uniform in [0, 1), integers all bits."""
    u = dtypes.u64
    if dtype.is_float:
        keep = 53 if dtype.bits == 64 else 24
        top = n.Binary(">>", bits, n.Const(64 - keep, u, loc), u, loc)
        return n.Binary("*", n.Cast(top, dtype, loc), n.Const(2.0 ** -keep, dtype, loc),
                        dtype, loc)
    return n.Cast(bits, dtype, loc)
