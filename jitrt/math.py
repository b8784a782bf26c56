"""`jr.math`: the vector and matrix types and helpers of Taichi's `ti.math`.

`vec2/vec3/vec4` and `mat2/mat3/mat4` take the program's default float type, `ivec2/3/4`
are i32. In kernels, `jr.math.vec3(x, y, z)` builds a vector; `dot`, `cross`, `normalize`,
`length` work on vectors as their methods do (`docs/usage.md`, "Vectors and matrices"), and
`min`/`max` are element-wise as Taichi's `ti.math.min/max` (not in `__all__`: a star import
keeps Python's own).
"""
from __future__ import annotations

from . import dtypes
from .frontend.builtins import (MATH, Builtin, atan2, clamp, clz, exp2, ffs, isinf, isnan,
                                log2, max_, min_, popcnt, pow_ as pow, rsqrt, select, sign)
from .frontend.func import Func
from .linalg import matrix, vector

sin, cos, tan, exp, log, sqrt, tanh = (MATH[k] for k in ("sin", "cos", "tan", "exp", "log",
                                                         "sqrt", "tanh"))
floor, ceil, asin, acos, atan, sinh, cosh, round = (
    MATH[k] for k in ("floor", "ceil", "asin", "acos", "atan", "sinh", "cosh", "round"))

min, max = min_, max_      # noqa: A001 (Taichi's ti.math.min/max)

vec2, vec3, vec4 = vector(2), vector(3), vector(4)
ivec2, ivec3, ivec4 = vector(2, dtypes.i32), vector(3, dtypes.i32), vector(4, dtypes.i32)
mat2, mat3, mat4 = matrix(2, 2), matrix(3, 3), matrix(4, 4)

dot = Builtin("dot")
cross = Builtin("cross")
normalize = Builtin("normalized")
length = Builtin("norm")
VECTOR_FUNCTIONS = {dot: "dot", cross: "cross", normalize: "normalized", length: "norm"}

# Quadrants' `qd.math` constants, tests and bit counts (frontend/lower_quadrants.py)
inf, nan = float("inf"), float("nan")
pi, e = 3.141592653589793, 2.718281828459045


def _radians(x):  # type: ignore[no-untyped-def]
    return x * (pi / 180.0)


def _degrees(x):  # type: ignore[no-untyped-def]
    return x * (180.0 / pi)


radians, degrees = Func(_radians), Func(_degrees)   # inlined in kernels, plain Python outside

__all__ = ["acos", "asin", "atan", "atan2", "ceil", "clamp", "cos", "cosh", "cross", "dot",
           "degrees", "e", "exp", "exp2", "ffs", "clz", "floor", "inf", "isinf", "isnan",
           "nan", "pi", "popcnt", "radians", "ivec2", "ivec3", "ivec4", "length", "log", "log2",
           "mat2",
           "mat3", "mat4", "normalize", "pow", "round", "rsqrt", "select", "sign", "sin", "sinh",
           "sqrt", "tan", "tanh", "vec2", "vec3", "vec4"]
