"""The GLSL-style and complex-number helpers of Taichi's `ti.math`, as `@jr.func`s:
`mix`, `step`, `fract`, `smoothstep`, `mod`, `degrees`, `radians`, `distance`, `reflect`,
`refract`, `isnan`, `isinf`, `determinant`, `inverse`, the 2-d/3-d transforms (`rotation2d`,
`vdir`, `translate`, `scale`, `rot_by_axis`, `rot_yaw_pitch_roll`, `rotation3d`) and complex
numbers as 2-vectors (`cmul`, `cconj`, `cdiv`, `cinv`, `cexp`, `clog`).

Stage: API (kernel library). Re-exported by `jr.math`; they work in kernels and at Python
scope, on scalars and element-wise on vectors where the formula is element-wise. Caches
nothing.
"""
from __future__ import annotations

import math as _m

from .frontend.builtins import MATH, atan2, clamp, select
from .frontend.func import Func
from .linalg import Matrix, Vector

pi, e, inf, nan = _m.pi, _m.e, _m.inf, _m.nan
_floor, _sqrt, _cos, _sin, _exp, _log = (MATH[k] for k in ("floor", "sqrt", "cos", "sin", "exp",
                                                          "log"))
_DEG = 180.0 / _m.pi


def _mix(x, y, a):
    return x * (1.0 - a) + y * a


def _step(edge, x):
    return select(x >= edge, 1.0, 0.0)       # 1 where x >= edge


def _fract(x):
    return x - _floor(x)


def _smoothstep(edge0, edge1, x):
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def _mod(x, y):
    return x - y * _floor(x / y)             # the sign of y, as GLSL's mod


def _degrees(x):
    return x * _DEG


def _radians(x):
    return x / _DEG


def _distance(x, y):
    return (x - y).norm()


def _reflect(x, n):
    return x - 2.0 * x.dot(n) * n


def _refract(x, n, eta):
    c = x.dot(n)
    k = 1.0 - eta * eta * (1.0 - c * c)
    bent = eta * x - (eta * c + _sqrt(select(k >= 0.0, k, 0.0))) * n
    return select(k >= 0.0, bent, bent * 0.0)    # total internal reflection: zero


def _isnan(x):
    return x != x


def _isinf(x):
    return (x == inf) | (x == -inf)


def _determinant(m):
    return m.determinant()


def _inverse(m):
    return m.inverse()


def _rotation2d(ang):
    c, s = _cos(ang), _sin(ang)
    return Matrix([[c, -s], [s, c]])


def _vdir(ang):
    return Vector([_cos(ang), _sin(ang)])


def _translate(dx, dy, dz):
    return Matrix([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz],
                   [0.0, 0.0, 0.0, 1.0]])


def _scale(sx, sy, sz):
    return Matrix([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def _rot_by_axis(axis, ang):
    """The 4x4 homogeneous matrix of a rotation by `ang` about `axis` (Taichi's layout: the
    rows hold the rotated basis, so it rotates row vectors)."""
    u = axis.normalized()
    c, s = _cos(ang), _sin(ang)
    t = (1.0 - c) * u
    return Matrix([[c + t[0] * u[0], t[0] * u[1] + s * u[2], t[0] * u[2] - s * u[1], 0.0],
                   [t[1] * u[0] - s * u[2], c + t[1] * u[1], t[1] * u[2] + s * u[0], 0.0],
                   [t[2] * u[0] + s * u[1], t[2] * u[1] - s * u[0], c + t[2] * u[2], 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def _rot_yaw_pitch_roll(yaw, pitch, roll):
    """Euler angles: about Y (yaw), then X (pitch), then Z (roll); 4x4 homogeneous."""
    ch, sh, cp, sp, cb, sb = _cos(yaw), _sin(yaw), _cos(pitch), _sin(pitch), _cos(roll), \
        _sin(roll)
    return Matrix([[ch * cb + sh * sp * sb, sb * cp, ch * sp * sb - sh * cb, 0.0],
                   [sh * sp * cb - ch * sb, cb * cp, sb * sh + ch * sp * cb, 0.0],
                   [sh * cp, -sp, ch * cp, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def _rotation3d(ang_x, ang_y, ang_z):
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


def _cmul(a, b):
    return Vector([a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]])


def _cconj(z):
    return Vector([z[0], -z[1]])


def _cdiv(a, b):
    return Vector([a[0] * b[0] + a[1] * b[1], a[1] * b[0] - a[0] * b[1]]) / b.dot(b)


def _cinv(z):
    return Vector([z[0], -z[1]]) / z.dot(z)


def _cexp(z):
    r = _exp(z[0])
    return Vector([r * _cos(z[1]), r * _sin(z[1])])


def _clog(z):
    return Vector([_log(z.dot(z)) / 2.0, atan2(z[1], z[0])])


mix, step, fract, smoothstep, mod = Func(_mix), Func(_step), Func(_fract), Func(_smoothstep), \
    Func(_mod)
degrees, radians, distance, reflect, refract = Func(_degrees), Func(_radians), \
    Func(_distance), Func(_reflect), Func(_refract)
isnan, isinf, determinant, inverse = Func(_isnan), Func(_isinf), Func(_determinant), \
    Func(_inverse)
rotation2d, vdir, translate, scale = Func(_rotation2d), Func(_vdir), Func(_translate), \
    Func(_scale)
rot_by_axis, rot_yaw_pitch_roll, rotation3d = Func(_rot_by_axis), Func(_rot_yaw_pitch_roll), \
    Func(_rotation3d)
cmul, cconj, cdiv, cinv, cexp, clog = Func(_cmul), Func(_cconj), Func(_cdiv), Func(_cinv), \
    Func(_cexp), Func(_clog)

__all__ = ["cconj", "cdiv", "cexp", "cinv", "clog", "cmul", "degrees", "determinant",
           "distance", "e", "fract", "inf", "inverse", "isinf", "isnan", "mix", "mod", "nan",
           "pi", "radians", "reflect", "refract", "rot_by_axis", "rot_yaw_pitch_roll",
           "rotation2d", "rotation3d", "scale", "smoothstep", "step", "translate", "vdir"]
