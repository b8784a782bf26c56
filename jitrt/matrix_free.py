# mypy: disable-error-code="valid-type"
"""Matrix-free Krylov solvers: Taichi's `ti.linalg.LinearOperator`, `MatrixFreeCG` and
`MatrixFreeBICGSTAB`, solving A x = b where A is a kernel `matvec(v, Av)` over fields.

Stage: API (host code over kernels; re-exported by `jitrt.linalg`). Each iteration is a few
launches: the user's matvec, dot products (a kernel-scope reduction, returned to the host)
and `out = u + a * v` updates, over fields of any number of axes (offsets included) holding
f32 or f64. The solver's own vectors are temporary fields of `b`'s shape. The update and dot
kernels take fields as template parameters, so they compile once per field they see.
Convergence: the residual's 2-norm below `tol` (CG) or, for BiCGSTAB, that of `s` or `r`;
the functions return whether it converged within `maxiter` iterations, as Taichi's do, and
stop early on a breakdown (a zero denominator). Caches nothing.
"""
from __future__ import annotations

from math import sqrt
from typing import Any

from . import dtypes
from .data import Field
from .data_declare import field
from .frontend.builtins import cast, grouped, static
from .kernel import kernel
from .types import template


def _dot(p: template(), q: template(), dt: template()) -> dtypes.f64:  # type: ignore
    s = cast(0.0, static(dt))
    for idx in grouped(p):
        s += p[idx] * q[idx]
    return s


def _combine(out: template(), u: template(), a: dtypes.f64, v: template()) -> None:  # type: ignore
    """out = u + a * v (out may be u or v)."""
    for idx in grouped(out):
        out[idx] = cast(u[idx] + a * v[idx], static(out.dtype))


dot, combine = kernel(_dot), kernel(_combine)


class LinearOperator:
    """A matrix given by its product: `LinearOperator(matvec)` where the kernel
    `matvec(v, Av)` writes A v into the field `Av`."""

    def __init__(self, matvec_kernel: Any) -> None:
        self._matvec = matvec_kernel

    def matvec(self, x: Any, Ax: Any) -> None:
        """Ax = A x (fields of one shape)."""
        if x.shape != Ax.shape:
            raise RuntimeError(f"LinearOperator.matvec: x has shape {x.shape} but Ax "
                               f"{Ax.shape}")
        self._matvec(x, Ax)


def _check(A: Any, b: Any, x: Any, who: str) -> None:
    if not isinstance(A, LinearOperator):
        raise TypeError(f"{who}: A must be a jr.linalg.LinearOperator, got {A!r}")
    for what, f in (("b", b), ("x", x)):
        if not isinstance(f, Field) or f.element_shape:
            raise TypeError(f"{who}: {what} must be a field of scalars, got {f!r}")
    if b.dtype != x.dtype:
        raise TypeError(f"{who}: b is {b.dtype.name} but x {x.dtype.name}: give both one dtype")
    if b.dtype not in (dtypes.f32, dtypes.f64):
        raise TypeError(f"{who}: fields of f32 or f64 are solved, got {b.dtype.name}")
    if (b.shape, b.offset) != (x.shape, x.offset):
        raise RuntimeError(f"{who}: b has shape {b.shape} (offset {b.offset}) but x "
                           f"{x.shape} (offset {x.offset})")


def _temps(b: Any, count: int) -> list[Any]:
    return [field(b.dtype, shape=b.shape, offset=b.offset) for _ in range(count)]


def MatrixFreeCG(A: LinearOperator, b: Any, x: Any, tol: float = 1e-6,  # noqa: N802
                 maxiter: int = 5000, quiet: bool = True) -> bool:
    """Conjugate gradients for a symmetric positive-definite A: improves the guess `x` in
    place; True when the residual norm fell below `tol`."""
    _check(A, b, x, "MatrixFreeCG")
    r, p, Ap = _temps(b, 3)
    dt = b.dtype
    A.matvec(x, Ap)
    combine(r, b, -1.0, Ap)                    # r = b - A x
    combine(p, r, 0.0, r)                      # p = r
    rr = dot(r, r, dt)
    for it in range(maxiter):
        if sqrt(rr) < tol:
            break
        A.matvec(p, Ap)
        pAp = dot(p, Ap, dt)
        if pAp == 0.0:
            break
        alpha = rr / pAp
        combine(x, x, alpha, p)
        combine(r, r, -alpha, Ap)
        new_rr = dot(r, r, dt)
        combine(p, r, new_rr / rr, p)          # p = r + beta p
        rr = new_rr
        if not quiet:
            print(f">>> Iter = {it + 1:4}, Residual = {sqrt(rr):e}")
    return sqrt(rr) < tol


def MatrixFreeBICGSTAB(A: LinearOperator, b: Any, x: Any, tol: float = 1e-6,  # noqa: N802
                       maxiter: int = 5000, quiet: bool = True) -> bool:
    """BiCGSTAB for a general nonsingular A: improves the guess `x` in place; True when the
    residual norm fell below `tol`."""
    _check(A, b, x, "MatrixFreeBICGSTAB")
    r, r0, p, v, s, t = _temps(b, 6)
    dt = b.dtype
    A.matvec(x, v)
    combine(r, b, -1.0, v)                     # r = b - A x
    combine(r0, r, 0.0, r)
    v.fill(0)
    rho = alpha = omega = 1.0
    norm = sqrt(dot(r, r, dt))
    for it in range(maxiter):
        if norm < tol:
            break
        rho_new = dot(r0, r, dt)
        if rho_new == 0.0 or omega == 0.0:
            break
        beta = rho_new / rho * (alpha / omega)
        combine(p, p, -omega, v)
        combine(p, r, beta, p)                 # p = r + beta (p - omega v)
        A.matvec(p, v)
        r0v = dot(r0, v, dt)
        if r0v == 0.0:
            break
        alpha = rho_new / r0v
        combine(s, r, -alpha, v)
        combine(x, x, alpha, p)
        norm = sqrt(dot(s, s, dt))
        if norm < tol:
            break
        A.matvec(s, t)
        tt = dot(t, t, dt)
        omega = dot(t, s, dt) / tt if tt != 0.0 else 0.0
        combine(x, x, omega, s)
        combine(r, s, -omega, t)
        norm = sqrt(dot(r, r, dt))
        rho = rho_new
        if not quiet:
            print(f">>> Iter = {it + 1:4}, Residual = {norm:e}")
    return norm < tol
