"""Matrix decompositions for MPM/FEM codes, written in the kernel language itself.

Stage: API (kernel library). `jr.polar_decompose(A)`, `jr.svd(A)` and `jr.sym_eig(A)` in a
kernel inline one of these funcs for a 2x2 matrix (closed forms; `frontend/vectors.py`
dispatches on the shape, and a 3x3 matrix is a compile error in this version). They are
differentiable like any kernel code. Degenerate inputs are guarded so that values and
gradients stay finite: a matrix with A00 + A11 = A10 - A01 = 0 (the zero matrix) has U = I;
a symmetric matrix with equal eigenvalues (the identity) has eigenvectors I and the
eigenvector angle's gradient 0 there.
"""
from __future__ import annotations

from .frontend.builtins import MATH, atan2, select
from .frontend.func import Func
from .linalg import Matrix, Vector

sqrt, cos, sin = MATH["sqrt"], MATH["cos"], MATH["sin"]
TINY = 1e-30


def _polar_decompose2d(A):
    """(U, P) with A = U P, U a rotation, P symmetric."""
    x = A[0, 0] + A[1, 1]
    y = A[1, 0] - A[0, 1]
    q = x * x + y * y
    degenerate = q < TINY
    scale = 1.0 / sqrt(select(degenerate, 1.0, q))
    c = select(degenerate, 1.0, x * scale)
    s = select(degenerate, 0.0, y * scale)
    U = Matrix([[c, -s], [s, c]])
    return U, U.transpose() @ A


def _sym_eig2x2(A):
    """(eigenvalues [l0, l1] with l0 >= l1, eigenvectors as the columns of a rotation)."""
    a = A[0, 0]
    b = (A[0, 1] + A[1, 0]) * 0.5
    d = A[1, 1]
    half = (a - d) * 0.5
    q = half * half + b * b
    degenerate = q < TINY
    r = select(degenerate, 0.0, sqrt(select(degenerate, 1.0, q)))
    mean = (a + d) * 0.5
    theta = 0.5 * atan2(select(degenerate, 0.0, 2.0 * b), select(degenerate, 1.0, a - d))
    c = cos(theta)
    s = sin(theta)
    return Vector([mean + r, mean - r]), Matrix([[c, -s], [s, c]])


def _svd2d(A):
    """(U, S, V) with A = U S V^T, U and V rotations, S diagonal (S[1, 1] takes the sign of
    det(A), as in Taichi)."""
    R, P = polar_decompose2d(A)
    sig, V = sym_eig2x2(P)
    return R @ V, Matrix([[sig[0], 0.0], [0.0, sig[1]]]), V


# what jr.polar_decompose/svd/sym_eig inline for a 2x2 matrix
polar_decompose2d, sym_eig2x2, svd2d = Func(_polar_decompose2d), Func(_sym_eig2x2), Func(_svd2d)
