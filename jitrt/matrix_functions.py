"""Matrix decompositions for MPM/FEM codes, written in the kernel language itself.

Stage: API (kernel library). `jr.polar_decompose(A)`, `jr.svd(A)` and `jr.sym_eig(A)` in a
kernel inline one of these funcs for a 2x2 or 3x3 matrix (`frontend/lower_call.py` dispatches
on the shape), `jr.eig(A)` (non-symmetric, complex results as in Taichi) for a 2x2 one. They
are differentiable like any kernel code.
- 2x2: closed forms. Degenerate inputs are guarded so that values and gradients stay finite:
  a matrix with A00 + A11 = A10 - A01 = 0 (the zero matrix) has U = I; a symmetric matrix
  with equal eigenvalues (the identity) has eigenvectors I and the eigenvector angle's
  gradient 0 there.
- 3x3: cyclic Jacobi on the symmetric matrix (5 sweeps of the three plane rotations,
  unrolled: off-diagonal entries below 1e-15 relative in f64 on random inputs), eigenvalues
  sorted in decreasing order with a column swap that keeps V a rotation; the SVD takes V from
  the eigenvectors of A^T A and U from a Givens QR of A V (the scheme of McAdams et al.,
  "Computing the singular value decomposition of 3x3 matrices with minimal branching", 2011,
  written here from the paper's description), so U and V are rotations and the last singular
  value carries the sign of det(A); polar from the SVD. A rotation whose target entry is
  tiny is the identity, so the identity, repeated eigenvalues and the zero matrix give
  finite values and gradients (tests/test_matrix_functions.py). The adjoint of a 3x3
  decomposition is a large straight-line function: about 1 s to compile the forward kernel
  and 4-5 s its adjoint on the development VM (the offline cache keeps both).
"""
from __future__ import annotations

from .frontend.builtins import MATH, atan2, select
from .frontend.builtins import static
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


def _eig2x2(A):
    """Taichi's `ti.eig` of a real 2x2 matrix: (eigenvalues as a 2x2 matrix whose rows are
    (real, imaginary) parts, the first with the larger real part or the positive imaginary
    part; eigenvectors as the columns of a 4x2 matrix, each (re, im, re, im), of unit norm).
    The eigenvector of one eigenvalue is a column of A minus the other eigenvalue times I
    (Cayley-Hamilton), the first column as in Taichi unless it vanishes (then the second:
    Taichi divides by zero there); A = cI gives the unit vectors, as in Taichi."""
    tr = A[0, 0] + A[1, 1]
    gap = tr * tr - 4.0 * (A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0])
    real = gap > 0.0
    flat = abs(gap) < TINY
    half = 0.5 * select(flat, 0.0, sqrt(select(flat, 1.0, abs(gap))))
    mean = 0.5 * tr
    l1r, l1i = mean + select(real, half, 0.0), select(real, 0.0, half)
    l2r, l2i = mean - select(real, half, 0.0), select(real, 0.0, -half)
    v1 = eig_vector2x2(A, l2r, l2i, 1.0)
    v2 = eig_vector2x2(A, l1r, l1i, 0.0)
    return (Matrix([[l1r, l1i], [l2r, l2i]]),
            Matrix([[v1[0], v2[0]], [v1[1], v2[1]], [v1[2], v2[2]], [v1[3], v2[3]]]))


def _eig_vector2x2(A, other_r, other_i, which):
    """A unit column of A - (other_r + i other_i) I, as (re, im, re, im); for A = cI the unit
    vector Taichi gives: e1 (`which` 1, the first eigenvalue's) or e0 (`which` 0)."""
    c0 = Vector([A[0, 0] - other_r, -other_i, A[1, 0], 0.0])
    c1 = Vector([A[0, 1], 0.0, A[1, 1] - other_r, -other_i])
    n0 = c0.norm_sqr()
    n1 = c1.norm_sqr()
    first = n0 >= TINY
    v = c0
    if not first:
        v = c1
    nv = select(first, n0, n1)
    scalar = nv < TINY
    v = v / sqrt(select(scalar, 1.0, nv))
    if scalar:
        v = Vector([1.0 - which, 0.0, which, 0.0])
    return v


# what jr.polar_decompose/svd/sym_eig/eig inline for a 2x2 matrix
polar_decompose2d, sym_eig2x2, svd2d = Func(_polar_decompose2d), Func(_sym_eig2x2), Func(_svd2d)
eig2x2, eig_vector2x2 = Func(_eig2x2), Func(_eig_vector2x2)


# ---- 3x3: cyclic Jacobi, sorted, then a Givens QR (the scheme of McAdams et al., 2011) -------
# Everything is unrolled at compile time: JACOBI_SWEEPS sweeps of the three plane rotations.
# A rotation's angle zeroes the off-diagonal entry it targets; a tiny entry (or an already
# diagonal matrix) gives angle 0, so values and gradients stay finite at the identity, at
# repeated eigenvalues and at the zero matrix.
JACOBI_SWEEPS = 5


def _jacobi_angle(app, aqq, apq):
    """(cos, sin) of the plane rotation J (J[p, p] = J[q, q] = c, J[p, q] = s, J[q, p] = -s)
    with (J^T S J)[p, q] = 0."""
    tiny = apq * apq < TINY
    theta = 0.5 * atan2(select(tiny, 0.0, 2.0 * apq), select(tiny, 1.0, aqq - app))
    return cos(theta), sin(theta)


def _rotate(app, aqq, apq, arp, arq, vp, vq):
    """One Jacobi rotation of a symmetric 3x3 S in the plane (p, q), r the third index: the
    new S[p, p], S[q, q], S[p, q] (about 0), S[r, p], S[r, q], and V's columns p and q."""
    c, s = jacobi_angle(app, aqq, apq)
    cc, ss, cs = c * c, s * s, c * s
    return (cc * app - 2.0 * cs * apq + ss * aqq, ss * app + 2.0 * cs * apq + cc * aqq,
            cs * (app - aqq) + (cc - ss) * apq, c * arp - s * arq, s * arp + c * arq,
            c * vp - s * vq, s * vp + c * vq)


def _identity_columns(like):
    """The identity's columns in `like`'s type (a literal of constants would be f32)."""
    z = like * 0.0
    return Vector([z + 1.0, z, z]), Vector([z, z + 1.0, z]), Vector([z, z, z + 1.0])


def _jacobi3x3(S):
    """(diagonal of D, V) with S = V D V^T for a symmetric S, V a rotation: cyclic Jacobi,
    JACOBI_SWEEPS sweeps over the planes (0, 1), (0, 2), (1, 2), on S's six entries."""
    a00, a11, a22, a01, a02, a12 = S[0, 0], S[1, 1], S[2, 2], S[0, 1], S[0, 2], S[1, 2]
    v0, v1, v2 = identity_columns(a00)
    for _ in static(range(JACOBI_SWEEPS)):
        a00, a11, a01, a02, a12, v0, v1 = rotate(a00, a11, a01, a02, a12, v0, v1)
        a00, a22, a02, a01, a12, v0, v2 = rotate(a00, a22, a02, a01, a12, v0, v2)
        a11, a22, a12, a01, a02, v1, v2 = rotate(a11, a22, a12, a01, a02, v1, v2)
    V = Matrix([[v0[0], v1[0], v2[0]], [v0[1], v1[1], v2[1]], [v0[2], v1[2], v2[2]]])
    return Vector([a00, a11, a22]), V


def _swap_columns(e0, e1, a0, a1, a2, b0, b1, b2):
    """Order the pair (e0 >= e1) with its columns a, b; a swap negates the column that
    moves first, so that the matrix keeps its determinant."""
    swap = e0 < e1
    return (select(swap, e1, e0), select(swap, e0, e1),
            select(swap, -b0, a0), select(swap, -b1, a1), select(swap, -b2, a2),
            select(swap, a0, b0), select(swap, a1, b1), select(swap, a2, b2))


def _sorted3(e0, e1, e2, V):
    """Eigenvalues in decreasing order with V's columns to match (V stays a rotation)."""
    x0, x1, x2, y0, y1, y2, z0, z1, z2 = (V[0, 0], V[1, 0], V[2, 0], V[0, 1], V[1, 1],
                                          V[2, 1], V[0, 2], V[1, 2], V[2, 2])
    e0, e1, x0, x1, x2, y0, y1, y2 = swap_columns(e0, e1, x0, x1, x2, y0, y1, y2)
    e1, e2, y0, y1, y2, z0, z1, z2 = swap_columns(e1, e2, y0, y1, y2, z0, z1, z2)
    e0, e1, x0, x1, x2, y0, y1, y2 = swap_columns(e0, e1, x0, x1, x2, y0, y1, y2)
    return Vector([e0, e1, e2]), Matrix([[x0, y0, z0], [x1, y1, z1], [x2, y2, z2]])


def _sym_eig3x3(A):
    """(eigenvalues in decreasing order, eigenvectors as the columns of a rotation) of the
    symmetric part of A."""
    d, V = jacobi3x3((A + A.transpose()) * 0.5)
    return sorted3(d[0], d[1], d[2], V)


def _givens(a, b):
    """(c, s) with c = a / r, s = b / r, r = |(a, b)|; (1, 0) for a tiny (a, b)."""
    q = a * a + b * b
    tiny = q < TINY
    inv = 1.0 / sqrt(select(tiny, 1.0, q))
    return select(tiny, 1.0, a * inv), select(tiny, 0.0, b * inv)


def _givens_step(bp, bq, up, uq, a, b):
    """Rows p, q of B and columns p, q of U after the Givens rotation that zeroes B[q, k]
    (a = B[p, k], b = B[q, k])."""
    c, s = givens(a, b)
    return c * bp + s * bq, c * bq - s * bp, c * up + s * uq, c * uq - s * up


def _svd3d(A):
    """(U, S, V) with A = U S V^T, U and V rotations, S diagonal in decreasing order but for
    its last entry, which takes the sign of det(A) (as in Taichi). V from the eigenvectors of
    A^T A; U from a Givens QR of A V, whose columns are orthogonal with decreasing norms."""
    _, V = sym_eig3x3(A.transpose() @ A)
    B = A @ V
    b0 = Vector([B[0, 0], B[0, 1], B[0, 2]])
    b1 = Vector([B[1, 0], B[1, 1], B[1, 2]])
    b2 = Vector([B[2, 0], B[2, 1], B[2, 2]])
    u0, u1, u2 = identity_columns(B[0, 0])
    b0, b1, u0, u1 = givens_step(b0, b1, u0, u1, b0[0], b1[0])
    b0, b2, u0, u2 = givens_step(b0, b2, u0, u2, b0[0], b2[0])
    b1, b2, u1, u2 = givens_step(b1, b2, u1, u2, b1[1], b2[1])
    U = Matrix([[u0[0], u1[0], u2[0]], [u0[1], u1[1], u2[1]], [u0[2], u1[2], u2[2]]])
    z = b0[0] * 0.0
    return U, Matrix([[b0[0], z, z], [z, b1[1], z], [z, z, b2[2]]]), V


def _polar_decompose3d(A):
    """(U, P) with A = U P, U a rotation, P symmetric (from the SVD: U = W V^T, P = V S V^T)."""
    W, S, V = svd3d(A)
    return W @ V.transpose(), V @ S @ V.transpose()


jacobi_angle, rotate, identity_columns = Func(_jacobi_angle), Func(_rotate), \
    Func(_identity_columns)
jacobi3x3, sorted3, givens, givens_step = Func(_jacobi3x3), Func(_sorted3), Func(_givens), \
    Func(_givens_step)
swap_columns = Func(_swap_columns)
sym_eig3x3, svd3d, polar_decompose3d = Func(_sym_eig3x3), Func(_svd3d), Func(_polar_decompose3d)
