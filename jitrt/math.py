"""`jr.math`: the vector and matrix types and helpers of Taichi's `ti.math`.

`vec2/vec3/vec4` and `mat2/mat3/mat4` take the program's default float type, `ivec2/3/4`
are i32. In kernels, `jr.math.vec3(x, y, z)` builds a vector; `dot`, `cross`, `normalize`,
`length` work on vectors as their methods do (`docs/usage.md`, "Vectors and matrices").
"""
from __future__ import annotations

from . import dtypes
from .frontend.builtins import Builtin
from .linalg import matrix, vector

vec2, vec3, vec4 = vector(2), vector(3), vector(4)
ivec2, ivec3, ivec4 = vector(2, dtypes.i32), vector(3, dtypes.i32), vector(4, dtypes.i32)
mat2, mat3, mat4 = matrix(2, 2), matrix(3, 3), matrix(4, 4)

dot = Builtin("dot")
cross = Builtin("cross")
normalize = Builtin("normalized")
length = Builtin("norm")
VECTOR_FUNCTIONS = {dot: "dot", cross: "cross", normalize: "normalized", length: "norm"}

__all__ = ["cross", "dot", "ivec2", "ivec3", "ivec4", "length", "mat2", "mat3", "mat4",
           "normalize", "vec2", "vec3", "vec4"]
