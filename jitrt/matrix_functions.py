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
  finite values (tests/test_matrix_functions.py). The derivatives of the 3x3 results are
  not taken through the algorithm (whose skipped rotations lost them at diagonal inputs):
  the algorithm runs on `detached` inputs and each result adds a `tangent_only` term, zero in
  value, whose derivative is the analytic one (section at the end; docs/adstack.md gives the
  rules at repeated values). `passes/ad_markers.py` then removes the terms and their code, so
  a primal kernel runs the algorithm alone and an adjoint holds no adjoint of the algorithm.
"""
from __future__ import annotations

from .frontend.builtins import MATH, atan2, detached, select, tangent_only
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


def _sym_eig3x3_values(S):
    """(eigenvalues in decreasing order, eigenvectors as the columns of a rotation) of the
    symmetric S (the algorithm: its own derivative is not used, see `_sym_eig3x3`)."""
    d, V = jacobi3x3(S)
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


def _svd3d_values(A):
    """(U, S, V) with A = U S V^T, U and V rotations, S diagonal in decreasing order but for
    its last entry, which takes the sign of det(A) (as in Taichi). V from the eigenvectors of
    A^T A; U from a Givens QR of A V, whose columns are orthogonal with decreasing norms."""
    _, V = sym_eig3x3_values(A.transpose() @ A)
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


jacobi_angle, rotate, identity_columns = Func(_jacobi_angle), Func(_rotate), \
    Func(_identity_columns)
jacobi3x3, sorted3, givens, givens_step = Func(_jacobi3x3), Func(_sorted3), Func(_givens), \
    Func(_givens_step)
swap_columns = Func(_swap_columns)
sym_eig3x3_values, svd3d_values = Func(_sym_eig3x3_values), Func(_svd3d_values)


# ---- 3x3 derivatives: stated, not taken through the algorithm ------------------------------
# The algorithm runs on detached inputs; each result is its value plus `tangent_only(...)` of
# a term linear in A whose derivative is the result's (zero in value: the primal kernels never
# compute it). With A = U S V^T and M = U^T dA V: dS_ii = M_ii; dU = U W_U, dV = V W_V with,
# for i != j, splitting M_ij into its symmetric part s and skew part k,
# W_V[i, j] = s / (S_j - S_i) - k / (S_i + S_j) and W_U[i, j] = W_V[i, j] + 2 k / (S_i + S_j);
# so the polar factor R = U V^T has dR = U (W_U - W_V) V^T, with no S_j - S_i: it is defined
# wherever S_i + S_j != 0 (repeated singular values included). Values closer than `tol`
# (GAP_ULPS units of round-off of the matrix's float type, relative to the sum of the
# magnitudes: about 1e-4 in f32 and 2e-13 in f64, above what the algorithm's own round-off
# leaves between equal values) count as equal: their 1 / (S_j - S_i) term is dropped (V keeps
# its columns in the group, U follows R) and each value of the group gets the derivative of
# the group's mean (docs/adstack.md). Symmetric eigenproblems likewise: dL_i = M_ii,
# W[i, j] = M_ij / (L_j - L_i).
GAP_ULPS = 1000.0


def _equal_within(e0, e1, e2):
    """The distance below which two of the values e0, e1, e2 count as equal, computed in
    their float type: 4/3 is not exact there, and 3 (4/3 - 1) - 1 is its rounding error
    (2^-23 in f32, 2^-52 in f64)."""
    scale = abs(e0) + abs(e1) + abs(e2)
    third = (scale * 0.0 + 4.0) / 3.0 - 1.0
    return GAP_ULPS * abs(third * 3.0 - 1.0) * scale + TINY


def _inv_gap(d, tol):
    """1 / d, or 0 where |d| <= tol (the two values count as equal)."""
    big = abs(d) > tol
    return select(big, 1.0 / select(big, d, 1.0), 0.0)


def _same(a, b, tol):
    return select(abs(a - b) <= tol, 1.0, 0.0)


def _group_means(d0, d1, d2, e0, e1, e2, tol):
    """Per value e_i: the mean of the d_j of the values e_j equal to e_i (within tol)."""
    s01, s02, s12 = same(e0, e1, tol), same(e0, e2, tol), same(e1, e2, tol)
    return ((d0 + s01 * d1 + s02 * d2) / (1.0 + s01 + s02),
            (d1 + s01 * d0 + s12 * d2) / (1.0 + s01 + s12),
            (d2 + s02 * d0 + s12 * d1) / (1.0 + s02 + s12))


def _skew3(x01, x02, x12):
    """The antisymmetric matrix with these entries above the diagonal."""
    z = x01 * 0.0
    return Matrix([[z, x01, x02], [-x01, z, x12], [-x02, -x12, z]])


def _svd_pair(mij, mji, si, sj, tol):
    """(W_U[i, j], W_V[i, j]) of an SVD for i < j (see above)."""
    sym = (mij + mji) * 0.5
    skw = (mij - mji) * 0.5
    a = sym * inv_gap(sj - si, tol)
    b = skw * inv_gap(si + sj, tol)
    return a + b, a - b


def _svd3d(A):
    """`_svd3d_values` of A with the derivative stated above."""
    U0, S0, V0 = svd3d_values(detached(A))
    U0, S0, V0 = detached(U0), detached(S0), detached(V0)
    s0, s1, s2 = S0[0, 0], S0[1, 1], S0[2, 2]
    tol = equal_within(s0, s1, s2)
    M = U0.transpose() @ A @ V0
    u01, v01 = svd_pair(M[0, 1], M[1, 0], s0, s1, tol)
    u02, v02 = svd_pair(M[0, 2], M[2, 0], s0, s2, tol)
    u12, v12 = svd_pair(M[1, 2], M[2, 1], s1, s2, tol)
    d0, d1, d2 = group_means(M[0, 0], M[1, 1], M[2, 2], s0, s1, s2, tol)
    z = d0 * 0.0
    U = U0 + tangent_only(U0 @ skew3(u01, u02, u12))
    S = S0 + tangent_only(Matrix([[d0, z, z], [z, d1, z], [z, z, d2]]))
    return U, S, V0 + tangent_only(V0 @ skew3(v01, v02, v12))


def _polar_decompose3d(A):
    """(U, P) with A = U P, U a rotation, P symmetric (from the SVD: U = W V^T, P = V S V^T),
    with the derivative stated above (dP from dU: P = U^T A)."""
    W0, S0, V0 = svd3d_values(detached(A))
    W0, S0, V0 = detached(W0), detached(S0), detached(V0)
    s0, s1, s2 = S0[0, 0], S0[1, 1], S0[2, 2]
    tol = equal_within(s0, s1, s2)
    M = W0.transpose() @ A @ V0
    r01 = (M[0, 1] - M[1, 0]) * inv_gap(s0 + s1, tol)
    r02 = (M[0, 2] - M[2, 0]) * inv_gap(s0 + s2, tol)
    r12 = (M[1, 2] - M[2, 1]) * inv_gap(s1 + s2, tol)
    U = W0 @ V0.transpose() + tangent_only(W0 @ skew3(r01, r02, r12) @ V0.transpose())
    UA = U.transpose() @ A
    return U, V0 @ S0 @ V0.transpose() + tangent_only((UA + UA.transpose()) * 0.5)


def _sym_eig3x3(A):
    """(eigenvalues in decreasing order, eigenvectors as the columns of a rotation) of the
    symmetric part of A, with the derivative stated above."""
    S = (A + A.transpose()) * 0.5
    L0, V0 = sym_eig3x3_values(detached(S))
    L0, V0 = detached(L0), detached(V0)
    tol = equal_within(L0[0], L0[1], L0[2])
    M = V0.transpose() @ S @ V0
    w01 = M[0, 1] * inv_gap(L0[1] - L0[0], tol)
    w02 = M[0, 2] * inv_gap(L0[2] - L0[0], tol)
    w12 = M[1, 2] * inv_gap(L0[2] - L0[1], tol)
    d0, d1, d2 = group_means(M[0, 0], M[1, 1], M[2, 2], L0[0], L0[1], L0[2], tol)
    return L0 + tangent_only(Vector([d0, d1, d2])), V0 + tangent_only(V0 @ skew3(w01, w02, w12))


inv_gap, same, group_means, skew3 = Func(_inv_gap), Func(_same), Func(_group_means), \
    Func(_skew3)
equal_within = Func(_equal_within)
svd_pair = Func(_svd_pair)
sym_eig3x3, svd3d, polar_decompose3d = Func(_sym_eig3x3), Func(_svd3d), Func(_polar_decompose3d)
