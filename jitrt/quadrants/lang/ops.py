"""`jr.lang.ops` (Taichi's and Quadrants' `ti.lang.ops`): the language's operators as
functions, for programs and tests that pass an operator around as a value (tables of
`(ti.lang.ops.logical_not, np.logical_not)`, `ti.lang.ops.add(a, b)` in a kernel).

Stage: API. Every name is an object jitrt already understands, so each works in kernels and at
Python scope (on numbers and on Python-scope `jr.Vector`/`jr.Matrix`, element-wise) with the
meaning of the operator it stands for:
- `add sub mul truediv floordiv mod pow neg bit_not bit_and bit_or bit_xor bit_shl bit_sar
  cmp_lt cmp_le cmp_gt cmp_ge cmp_eq cmp_ne` are Python's `operator` functions (`mod` is `%`,
  Python's sign rule; `bit_sar` is `>>`, arithmetic on signed integers);
- `logical_not(a)` is `not a` (1 where a component is 0, else 0); `logical_and(a, b)`,
  `logical_or(a, b)` are `a and b`, `a or b`; `ifte(c, a, b)` is `a if c else b`;
- the functions Taichi also exports at its top level (`sin`, `abs`, `max`, `atomic_add`,
  `select`, `cast`, ...) are jitrt's own (`jr.sin` is `jr.lang.ops.sin`).
Taichi's internals in that module (`assign`, `expr_init`, `wrap_if_not_expr`, ...) are not
here; a name jitrt lacks raises the AttributeError `jitrt.__getattr__` gives. Caches nothing.
"""
from __future__ import annotations

import operator as _op

from ...frontend import builtins as _bi
from ...frontend.builtins import (MATH, atan2, atomic_add, atomic_and, atomic_max, atomic_min,
                                  atomic_mul, atomic_or, atomic_sub, atomic_xor, bit_cast,
                                  bit_shr, cast,
                                  clz, ifte, logical_and, logical_not, logical_or, popcnt,
                                  raw_div, raw_mod, random, rsqrt, select)

add, sub, mul, truediv, floordiv, mod = _op.add, _op.sub, _op.mul, _op.truediv, _op.floordiv, \
    _op.mod
neg, bit_not = _op.neg, _op.invert
bit_and, bit_or, bit_xor, bit_shl, bit_sar = _op.and_, _op.or_, _op.xor, _op.lshift, _op.rshift
cmp_lt, cmp_le, cmp_gt, cmp_ge, cmp_eq, cmp_ne = _op.lt, _op.le, _op.gt, _op.ge, _op.eq, _op.ne
pow = _bi.pow_  # noqa: A001
max, min, abs = _bi.max_, _bi.min_, _bi.abs_  # noqa: A001
max_impl, min_impl = _bi.max_, _bi.min_
sin, cos, tan, exp, log, sqrt, tanh = (MATH[k] for k in ("sin", "cos", "tan", "exp", "log",
                                                         "sqrt", "tanh"))
asin, acos, floor, ceil, round = (MATH[k] for k in ("asin", "acos", "floor", "ceil", "round"))

__all__ = ["abs", "acos", "add", "asin", "atan2", "atomic_add", "atomic_and", "atomic_max",
           "atomic_min", "atomic_mul", "atomic_or", "atomic_sub", "atomic_xor", "bit_and",
           "bit_cast", "bit_not", "bit_or", "bit_sar", "bit_shl", "bit_shr", "bit_xor", "cast",
           "ceil", "clz",
           "cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_ne", "cos", "exp", "floor",
           "floordiv", "ifte", "log", "logical_and", "logical_not", "logical_or", "max",
           "max_impl", "min", "min_impl", "mod", "mul", "neg", "popcnt", "pow", "random",
           "raw_div", "raw_mod", "round", "rsqrt", "select", "sin", "sqrt", "sub", "tan", "tanh",
           "truediv"]


def __getattr__(name: str) -> object:
    """A name of Taichi's `ops` that jitrt lacks (`bit_cast`, `frexp`, ...): the error
    `jr.<name>` gives, naming this module."""
    from ...peer_names import missing
    raise missing("jitrt.lang.ops", name, globals())
