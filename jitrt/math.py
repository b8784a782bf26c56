"""`jr.math`: the vector and matrix types and helpers of Taichi's `ti.math`.

`vec2/vec3/vec4` and `mat2/mat3/mat4` take the program's default float type, `ivec2/3/4`
its default integer type, `uvec2/3/4` the unsigned type of that width (all resolved where the
type is used, after `jr.init`). In kernels, `jr.math.vec3(x, y, z)` builds a vector; `dot`,
`cross`, `normalize`, `length` work on vectors as their methods do (`docs/usage.md`, "Vectors
and matrices"), and `min`/`max` are element-wise as Taichi's `ti.math.min/max` (not in
`__all__`: a star import keeps Python's own).
"""
from __future__ import annotations

from .math_glsl import *  # noqa: F401,F403 (mix, step, ..., pi: math_glsl.__all__)
from .math_glsl import __all__ as _glsl_names
# isnan/isinf: Quadrants' builtins (an i32, element-wise on vectors) over the GLSL helpers'
from .frontend.builtins import (  # type: ignore[assignment]
                                MATH, Builtin, atan2, clamp, clz, exp2, ffs, isinf, isnan,
                                log2, max_, min_, popcnt, pow_ as pow, rsqrt, select, sign)
from .frontend.func import Func
from .linalg import matrix, unsigned_vector, vector

sin, cos, tan, exp, log, sqrt, tanh = (MATH[k] for k in ("sin", "cos", "tan", "exp", "log",
                                                         "sqrt", "tanh"))
floor, ceil, asin, acos, atan, sinh, cosh, round = (
    MATH[k] for k in ("floor", "ceil", "asin", "acos", "atan", "sinh", "cosh", "round"))

min, max = min_, max_      # noqa: A001 (Taichi's ti.math.min/max)

vec2, vec3, vec4 = vector(2), vector(3), vector(4)
ivec2, ivec3, ivec4 = vector(2, int), vector(3, int), vector(4, int)
uvec2, uvec3, uvec4 = unsigned_vector(2), unsigned_vector(3), unsigned_vector(4)
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
           "sqrt", "tan", "tanh", "uvec2", "uvec3", "uvec4", "vec2", "vec3", "vec4",
           *_glsl_names]


def __getattr__(name: str) -> object:
    """A name of Taichi's ti.math jitrt lacks: an AttributeError that says what to use."""
    from .peer_names import missing
    raise missing("jitrt.math", name)
