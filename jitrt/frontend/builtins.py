"""The functions a kernel may call: `jr.sin`, `jr.static`, `jr.ndrange`, `jr.atomic_add`, ...

Stage: frontend. Each is a `Builtin` object: the AST lowering recognises it by identity and
emits IR. Called from ordinary Python (outside a kernel) the math functions compute with numpy,
so that host code and tests can use them too.
"""
from __future__ import annotations

import builtins
import functools
import math
from dataclasses import FrozenInstanceError
from typing import Any, Callable

import numpy as np

from ..frozen import _declare_fields


class Builtin:
    """A function kernels call, recognised by identity (two are equal only if they are the
    same object); `host` computes it in ordinary Python. Frozen, and a dataclass to
    `dataclasses.fields`/`is_dataclass` (runtime/prekey.py fingerprints one by its name),
    written out instead of `@dataclass(frozen=True, eq=False)`, whose four methods compiled
    from generated source were ~1 ms of `import jitrt` (docs/performance.md, "Cold start:
    LLVM's first use on a helper thread (2026-11-29)")."""
    name: str
    host: Callable[..., Any] | None = None

    def __init__(self, name: str, host: Callable[..., Any] | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "host", host)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __call__(self, *args: Any) -> Any:
        if self.host is None:
            raise RuntimeError(f"jr.{self.name}() can only be used inside a jitrt kernel or func")
        return self.host(*args)

    def __repr__(self) -> str:
        return f"<jitrt builtin {self.name}>"


_declare_fields(Builtin)


def _np1(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda x: f(x)


def _rounding(f: Callable[[Any], Any]) -> Callable[..., Any]:
    """Taichi's floor/ceil/round(x, dtype=None): the result converted to `dtype` if given."""
    def host(x: Any, dtype: Any = None) -> Any:
        if dtype is None:
            return f(x)
        from ..dtypes import coerce
        out = f(x)
        if isinstance(out, np.ndarray):              # a jr.Vector stays one
            return out.astype(coerce(dtype).np)
        return np.asarray(out).astype(coerce(dtype).np)[()]
    return host


# one-argument math functions that become an IR Math op (numpy's name where it differs)
NUMPY_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}
ROUNDING = ("floor", "ceil", "round")     # these also take Taichi's dtype (the result's type)
MATH = {name: Builtin(name, (_rounding if name in ROUNDING else _np1)(
    getattr(np, NUMPY_NAMES.get(name, name)))) for name in
        ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "floor", "ceil", "asin", "acos",
         "atan", "sinh", "cosh", "round")}
pow_ = Builtin("pow", lambda a, b: a ** b)
atan2 = Builtin("atan2", np.arctan2)
# spelled in terms of the above by the frontend
rsqrt = Builtin("rsqrt", lambda x: 1.0 / np.sqrt(x))
log2 = Builtin("log2", np.log2)
exp2 = Builtin("exp2", np.exp2)
sign = Builtin("sign", np.sign)
clamp = Builtin("clamp", np.clip)
def _select(c: Any, a: Any, b: Any) -> Any:
    """Python scope: numpy's `where`; a `jr.Vector`/`jr.Matrix` operand makes the result one
    (np.where is no ufunc: it would give a bare array)."""
    out = np.where(c, a, b)
    from ..host_matrix import HostMatrix, as_host
    return as_host(out) if any(isinstance(v, HostMatrix) for v in (c, a, b)) else out


select = Builtin("select", _select)
random = Builtin("random", lambda dtype=None: np.random.random())
polar_decompose = Builtin("polar_decompose")
svd = Builtin("svd")
sym_eig = Builtin("sym_eig")
eig = Builtin("eig")
DECOMPOSITIONS = {polar_decompose: "polar_decompose2d", svd: "svd2d", sym_eig: "sym_eig2x2",
                  eig: "eig2x2"}
randn = Builtin("randn", lambda dtype=None: np.random.standard_normal())
# Taichi's ti.min/ti.max (two or more arguments, element-wise) and ti.abs; in kernels they
# lower as Python's min/max/abs do
min_ = Builtin("min", lambda *args: functools.reduce(np.minimum, args))
max_ = Builtin("max", lambda *args: functools.reduce(np.maximum, args))
abs_ = Builtin("abs", np.abs)
# for jitrt/matrix_functions.py (not exported): x without a derivative, and a zero term with
# x's derivative (nodes.TANGENT_ONLY); element-wise on vectors and matrices
detached = Builtin("detached", lambda x: x)
tangent_only = Builtin("tangent_only", lambda x: 0 * x)
DERIVED = (rsqrt, log2, exp2, sign, clamp, select, detached, tangent_only)
static = Builtin("static", lambda x: x)
cast = Builtin("cast", None)
loop_config = Builtin("loop_config", None)
atomic_add = Builtin("atomic_add", None)
atomic_sub = Builtin("atomic_sub", None)
atomic_min = Builtin("atomic_min", None)
atomic_max = Builtin("atomic_max", None)
atomic_and = Builtin("atomic_and", None)    # integers only, as the bitwise operators
atomic_or = Builtin("atomic_or", None)
atomic_xor = Builtin("atomic_xor", None)
# Quadrants' exchange: the old value back, the new one stored (integers and floats)
atomic_exchange = Builtin("atomic_exchange", None)
atomic_mul = Builtin("atomic_mul", None)    # Taichi's: a compare-and-swap loop
ATOMICS = {atomic_add: "add", atomic_sub: "sub", atomic_min: "min", atomic_max: "max",
           atomic_and: "and", atomic_or: "or", atomic_xor: "xor", atomic_exchange: "xchg",
           atomic_mul: "mul"}
BITWISE_ATOMICS = ("and", "or", "xor")
# statements about fields: `jr.stop_grad(x)` (no gradient into x from the reads of the
# enclosing block) and `jr.block_local(x, ...)` (Taichi's GPU cache hint: checked, no code)
stop_grad = Builtin("stop_grad", None)
# Taichi's `ti.lang.ops.logical_not/logical_and/logical_or/ifte` (jitrt/quadrants/lang/ops.py):
# in kernels `not a`, `a and b`, `a or b`, `b if a else c` (frontend/lower_pycalls.py); at Python
# scope numpy's logical_not (element-wise on vectors, as Taichi's) and Python's own operators
logical_not = Builtin("logical_not", np.logical_not)
logical_and = Builtin("logical_and", lambda a, b: a and b)
logical_or = Builtin("logical_or", lambda a, b: a or b)
ifte = Builtin("ifte", lambda cond, a, b: a if cond else b)
block_local = Builtin("block_local", None)


def _static_assert(cond: Any, msg: Any = None) -> None:
    if not cond:
        raise AssertionError(msg if msg is not None else "static_assert failed")


# compile-time checks and prints (Taichi's): evaluated while the kernel compiles, no code
static_assert = Builtin("static_assert", _static_assert)
static_print = Builtin("static_print", print)


def _no_host(name: str, why: str) -> Callable[..., Any]:
    def refuse(*args: Any) -> Any:
        raise NotImplementedError(f"jr.math.{name}() has no Python fallback: {why}")
    return refuse


_WIDTH = "the result depends on the integer's bit width, which a Python int does not have"
# Quadrants' functions the frontend lowers itself (frontend/lower_quadrants.py)
raw_mod = Builtin("raw_mod", np.fmod)                          # C's remainder (truncated)


def _c_div(a: Any, b: Any) -> Any:
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a / b


raw_div = Builtin("raw_div", _c_div)       # Taichi's: C's division of integers (truncated)
bit_shr = Builtin("bit_shr", _no_host("bit_shr", _WIDTH))     # logical shift right
outer = Builtin("outer", np.outer)                             # outer product of two vectors
isnan = Builtin("isnan", np.isnan)
isinf = Builtin("isinf", np.isinf)
popcnt = Builtin("popcnt", _no_host("popcnt", _WIDTH))        # set bits, an i32
clz = Builtin("clz", _no_host("clz", _WIDTH))                 # leading zero bits, an i32
ffs = Builtin("ffs", _no_host("ffs", _WIDTH))                 # 1 + lowest set bit; 0 for 0
graph_do_while = Builtin("graph.do_while", bool)
# Taichi's bit_cast(x, dtype): x's bits read as dtype, of x's width (kernels only)
bit_cast = Builtin("bit_cast")
QUADRANTS = (raw_mod, outer, isnan, isinf, popcnt, clz, ffs, graph_do_while, raw_div,
             bit_shr, bit_cast)


class grouped:
    """`for I in jr.grouped(x)` (a field) or `jr.grouped(jr.ndrange(...))`: one loop over the
    box whose index `I` is an integer vector (`x[I]` indexes with all of it)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def __iter__(self):
        import itertools
        if isinstance(self.source, ndrange):
            return (np.array(i) for i in self.source)
        from ..data import Field
        if isinstance(self.source, Field):    # refused as `for i in x` is, as in Taichi
            return iter(self.source)
        return (np.array(i) for i in itertools.product(*(range(s) for s in self.source.shape)))


class ndrange:
    """`for i, j in jr.ndrange(n, (b, e))`: a box of loop indices (parallel at the outermost
    level). Outside kernels it iterates like nested ranges."""

    def __init__(self, *extents: Any) -> None:
        def is_int(v: Any) -> bool:
            return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
        for e in extents:            # checked where Python scope or jr.static(...) builds one
            if not (is_int(e) or isinstance(e, (tuple, list)) and len(e) == 2 and all(
                    is_int(v) for v in e)):
                raise TypeError(f"Every argument of ndrange should be an integer scalar or a "
                                f"tuple/list of (int, int), got {e!r}")
        self.extents = tuple(tuple(e) if isinstance(e, list) else e for e in extents)

    def __iter__(self):
        import itertools
        ranges = [range(*e) if isinstance(e, tuple) else range(e) for e in self.extents]
        return itertools.product(*ranges)


# Python's own callables that kernels understand, mapped to our builtin of the same meaning.
PYTHON_EQUIVALENTS: dict[Any, Builtin] = {
    math.sin: MATH["sin"], math.cos: MATH["cos"], math.tan: MATH["tan"], math.exp: MATH["exp"],
    math.log: MATH["log"], math.sqrt: MATH["sqrt"], math.tanh: MATH["tanh"],
    math.floor: MATH["floor"], math.ceil: MATH["ceil"], math.pow: pow_,
    math.asin: MATH["asin"], math.acos: MATH["acos"], math.atan: MATH["atan"],
    math.sinh: MATH["sinh"], math.cosh: MATH["cosh"], math.atan2: atan2, math.log2: log2,
    builtins.pow: pow_,     # Python's pow(x, y) is x ** y (waterwave.py), as in Taichi
}
# numpy's ufuncs of the same meaning (kernels often start life as numpy code); np.round
# rounds half to even, as jr.round does (Python's round() returns an int: not mapped)
PYTHON_EQUIVALENTS.update({getattr(np, NUMPY_NAMES.get(name, name)): MATH[name]
                           for name in MATH})
PYTHON_EQUIVALENTS.update({np.power: pow_, np.arctan2: atan2, np.log2: log2, np.exp2: exp2,
                           np.sign: sign, np.clip: clamp, np.where: select})
PY_ABS, PY_MIN, PY_MAX, PY_INT, PY_FLOAT, PY_RANGE, PY_LEN, PY_PRINT = (
    builtins.abs, builtins.min, builtins.max, builtins.int, builtins.float, builtins.range,
    builtins.len, builtins.print)
