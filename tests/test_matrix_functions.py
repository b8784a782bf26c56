"""jr.polar_decompose, jr.svd, jr.sym_eig on 2x2 matrices: reconstructions and properties
against numpy, f32 and f64, gradients against finite differences, degenerate inputs (identity,
zero matrix, equal eigenvalues) with finite values and gradients."""
import numpy as np
import pytest

import jitrt as jr

N = 32


def run(A, dt=jr.f64):
    """(U, P, Us, S, V, evals, evecs) of each matrix of A (N, 2, 2)."""
    m = jr.Matrix.field(2, 2, dt, shape=len(A))
    outs = [jr.Matrix.field(2, 2, dt, shape=len(A)) for _ in range(5)]
    evals = jr.Vector.field(2, dt, shape=len(A))
    U, P, Us, S, V = outs

    @jr.kernel
    def k():
        for i in m:
            U[i], P[i] = jr.polar_decompose(m[i])
            Us[i], S[i], V[i] = jr.svd(m[i])
            evals[i], evecs = jr.sym_eig(m[i] + m[i].transpose())
            m[i] = evecs
    m.from_numpy(A)
    k()
    return [f.to_numpy() for f in outs] + [evals.to_numpy(), m.to_numpy()]


def check_gradient(m, loss, kernel, value, A, rows):
    """Run `kernel` under a Tape on the matrices A: the loss equals `value(A)` (numpy), every
    gradient is finite, and the gradient of the matrices `rows` matches central differences
    of `value`."""
    m.from_numpy(A)
    loss[None] = 0.0
    with jr.ad.Tape(loss=loss):
        kernel()
    assert loss[None] == pytest.approx(value(A), rel=1e-10)
    grad = m.grad.to_numpy()
    assert np.isfinite(grad).all()
    eps = 1e-6
    for i in rows:
        for idx in np.ndindex(A.shape[1:]):
            plus, minus = A.copy(), A.copy()
            plus[i][idx] += eps
            minus[i][idx] -= eps
            num = (value(plus[i:i + 1]) - value(minus[i:i + 1])) / (2 * eps)
            assert grad[i][idx] == pytest.approx(num, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("dt,tol", [(jr.f64, 1e-12), (jr.f32, 2e-5)])
def test_decompositions(dt, tol, rng):
    A = rng.uniform(-1, 1, (N, 2, 2))
    A[:4] = [np.eye(2), np.zeros((2, 2)), 2 * np.eye(2), [[0, 1], [1, 0]]]
    U, P, Us, S, V, evals, evecs = run(A.astype(dt.np), dt)
    eye = np.broadcast_to(np.eye(2), A.shape)
    np.testing.assert_allclose(U @ P, A, atol=tol)
    np.testing.assert_allclose(U @ U.transpose(0, 2, 1), eye, atol=tol)
    np.testing.assert_allclose(np.linalg.det(U), 1, atol=tol)
    np.testing.assert_allclose(P, P.transpose(0, 2, 1), atol=tol)
    np.testing.assert_allclose(Us @ S @ V.transpose(0, 2, 1), A, atol=tol)
    np.testing.assert_allclose(np.abs(np.diagonal(S, axis1=1, axis2=2)),
                               np.linalg.svd(A, compute_uv=False), atol=tol)
    np.testing.assert_allclose(S[:, 0, 1], 0, atol=tol)
    sym = A + A.transpose(0, 2, 1)
    np.testing.assert_allclose(np.sort(evals, 1), np.linalg.eigvalsh(sym), atol=4 * tol)
    np.testing.assert_allclose(sym @ evecs, evecs * evals[:, None, :], atol=4 * tol)
    np.testing.assert_allclose(U[1], np.eye(2))             # the zero matrix: U = I
    np.testing.assert_allclose(evecs[0], np.eye(2))         # equal eigenvalues: I
    for arr in (U, P, Us, S, V, evals, evecs):
        assert np.isfinite(arr).all()


def test_gradients_against_finite_differences(rng):
    m = jr.Matrix.field(2, 2, jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    w = rng.uniform(-1, 1, (3, 2, 2))
    w0, w1 = (tuple(map(tuple, w[k].tolist())) for k in (0, 1))

    @jr.kernel
    def k():
        for i in m:
            U, P = jr.polar_decompose(m[i])
            Us, S, V = jr.svd(m[i])
            ev, vecs = jr.sym_eig(m[i] + m[i].transpose())
            loss[None] += (U * jr.Matrix(w0)).sum() + S.trace() * 0.5 + \
                ev[0] * ev[1] + (P * jr.Matrix(w1)).sum()

    def value(A):
        out = 0.0
        for a in A:
            u, s, vt = np.linalg.svd(a)
            d = np.diag([1.0, np.sign(np.linalg.det(a))])
            rot = u @ d @ vt                        # the rotation of the polar decomposition
            p = rot.T @ a
            ev = np.linalg.eigvalsh(a + a.T)
            out += (rot * w[0]).sum() + 0.5 * (s[0] + s[1] * np.sign(np.linalg.det(a))) + \
                ev[0] * ev[1] + (p * w[1]).sum()
        return out
    A = rng.uniform(-1, 1, (N, 2, 2)) + np.eye(2)
    A[0] = np.eye(2)                                # the identity: finite gradients
    check_gradient(m, loss, k, value, A, range(1, 6))


def run3(A, dt=jr.f64):
    """(U, P, Us, S, V, evals, evecs) of each matrix of A (n, 3, 3): the 3x3 decompositions."""
    m = jr.Matrix.field(3, 3, dt, shape=len(A))
    U, P, Us, S, V, E = (jr.Matrix.field(3, 3, dt, shape=len(A)) for _ in range(6))
    evals = jr.Vector.field(3, dt, shape=len(A))

    @jr.kernel
    def k():
        for i in m:
            U[i], P[i] = jr.polar_decompose(m[i])
            Us[i], S[i], V[i] = jr.svd(m[i])
            evals[i], E[i] = jr.sym_eig(m[i] + m[i].transpose())
    m.from_numpy(A)
    k()
    return [f.to_numpy() for f in (U, P, Us, S, V)] + [evals.to_numpy(), E.to_numpy()]


DEGENERATE3 = [np.eye(3), np.zeros((3, 3)), 2 * np.eye(3), np.diag([1.0, 1.0, 2.0]),
               [[0, 1, 0], [1, 0, 0], [0, 0, 1]], np.diag([3.0, -1.0, 2.0]),
               np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])]     # rank 1


@pytest.mark.no_gpu_builds     # the 3x3 kernels run on the GPU in the arch=cuda suite instead
@pytest.mark.parametrize("dt,tol", [(jr.f64, 1e-12), (jr.f32, 5e-5)])
def test_3x3_decompositions(dt, tol, rng):
    A = rng.uniform(-1, 1, (N, 3, 3))
    A[:len(DEGENERATE3)] = DEGENERATE3
    U, P, Us, S, V, evals, evecs = run3(A.astype(dt.np), dt)
    eye = np.broadcast_to(np.eye(3), A.shape)
    for arr in (U, P, Us, S, V, evals, evecs):
        assert np.isfinite(arr).all()
    np.testing.assert_allclose(U @ P, A, atol=tol)
    np.testing.assert_allclose(U @ U.transpose(0, 2, 1), eye, atol=tol)
    np.testing.assert_allclose(np.linalg.det(U), 1, atol=tol)
    np.testing.assert_allclose(P, P.transpose(0, 2, 1), atol=tol)
    np.testing.assert_allclose(Us @ S @ V.transpose(0, 2, 1), A, atol=tol)
    for R in (Us, V):
        np.testing.assert_allclose(R @ R.transpose(0, 2, 1), eye, atol=tol)
        np.testing.assert_allclose(np.linalg.det(R), 1, atol=tol)
    sigma = np.diagonal(S, axis1=1, axis2=2)
    np.testing.assert_allclose(np.abs(sigma), np.linalg.svd(A, compute_uv=False), atol=tol)
    off = S - sigma[:, :, None] * np.eye(3)
    np.testing.assert_allclose(off, 0, atol=tol)
    assert (sigma[:, 0] >= sigma[:, 1] - tol).all()
    assert (sigma[:, 1] >= np.abs(sigma[:, 2]) - tol).all()
    det = np.linalg.det(A)
    signed = np.abs(det) > 1e-3
    assert (np.sign(sigma[signed, 2]) == np.sign(det[signed])).all()   # Taichi's convention
    sym = A + A.transpose(0, 2, 1)
    np.testing.assert_allclose(evals, np.linalg.eigvalsh(sym)[:, ::-1], atol=4 * tol)
    np.testing.assert_allclose(sym @ evecs, evecs * evals[:, None, :], atol=8 * tol)
    np.testing.assert_allclose(np.linalg.det(evecs), 1, atol=tol)
    np.testing.assert_allclose(U[0], np.eye(3), atol=tol)     # the identity
    np.testing.assert_allclose(U[1], np.eye(3), atol=tol)     # the zero matrix: U = I


def sym_eig_problem(m, loss):
    """A loss of the eigenvalues of m[i] + m[i]^T and of one eigenvector's component (only
    where the eigenvector is defined: no repeated eigenvalue), as a kernel, and its numpy
    value for matrices A (one per element of m)."""
    distinct = jr.field(jr.f64, shape=6)      # an eigenvector is defined (no repeated value)
    distinct.from_numpy(np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0]))

    @jr.kernel
    def eig():
        for i in m:
            ev, vecs = jr.sym_eig(m[i] + m[i].transpose())
            loss[None] += ev[0] * ev[2] + ev[1] + distinct[i] * vecs[0, 0] * vecs[0, 0]

    def value(A):
        out = 0.0
        for a, d in zip(A, distinct.to_numpy()[-len(A):]):     # (A: the last elements)
            ev, vecs = np.linalg.eigh(a + a.T)
            out += ev[2] * ev[0] + ev[1] + d * vecs[0, 2] ** 2
        return out
    return eig, value


@pytest.mark.slow              # a 3x3 decomposition's primal and adjoint take seconds to compile
@pytest.mark.no_gpu_builds     # two adjoints of 3x3 decompositions: ~90 s more for PTX + AMDGPU
def test_3x3_gradients_against_finite_differences(rng):
    """Through polar_decompose (which is the SVD, then two products) and sym_eig: each kernel
    of 3x3 decompositions and its adjoint is large, so two small kernels. The default suite
    checks the same derivatives more cheaply: sym_eig's in forward mode (below), the polar
    decomposition's in reverse mode (test_ad_property.py, in f32)."""
    m = jr.Matrix.field(3, 3, jr.f64, shape=6, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    w = rng.uniform(-1, 1, (2, 3, 3))
    w0, w1 = (tuple(map(tuple, w[k].tolist())) for k in (0, 1))

    @jr.kernel
    def polar():
        for i in m:
            U, P = jr.polar_decompose(m[i])
            loss[None] += (U * jr.Matrix(w0)).sum() + (P * jr.Matrix(w1)).sum()

    eig, eig_value = sym_eig_problem(m, loss)

    def polar_value(A):
        out = 0.0
        for a in A:
            u, _, vt = np.linalg.svd(a)
            rot = u @ np.diag([1.0, 1.0, np.sign(np.linalg.det(a))]) @ vt
            out += (rot * w[0]).sum() + (rot.T @ a * w[1]).sum()
        return out
    A = rng.uniform(-1, 1, (6, 3, 3)) + 2 * np.eye(3)
    A[0] = np.eye(3)                                # the identity: finite gradients
    A[1] = np.diag([2.0, 2.0, 1.0])                 # two equal singular values
    for kernel, value in ((polar, polar_value), (eig, eig_value)):
        check_gradient(m, loss, kernel, value, A, range(2, 6))


@pytest.mark.no_gpu_builds     # a 3x3 decomposition's forward-mode kernel
def test_3x3_sym_eig_tangents_against_finite_differences(rng):
    """The derivatives of 3x3 eigenvalues and an eigenvector in one compile: the forward-mode
    kernel (it computes the loss too) along single entries and random directions, against
    central differences of numpy's eigh; finite along any direction at the identity (three
    equal eigenvalues) and at diag(2, 2, 1) (two)."""
    m = jr.Matrix.field(3, 3, jr.f64, shape=6, needs_dual=True)
    loss = jr.field(jr.f64, shape=(), needs_dual=True)
    eig, value = sym_eig_problem(m, loss)
    A = rng.uniform(-1, 1, (6, 3, 3)) + 2 * np.eye(3)
    A[0] = np.eye(3)
    A[1] = np.diag([2.0, 2.0, 1.0])
    m.from_numpy(A)

    def tangent(direction):
        loss[None] = 0.0
        with jr.ad.FwdMode(loss=loss, param=m, seed=direction.ravel().tolist()):
            eig()
        assert loss[None] == pytest.approx(value(A), rel=1e-10)
        return loss.dual[None]
    eps = 1e-6
    directions = []
    for i, idx in [(2, (0, 0)), (3, (0, 1)), (4, (2, 1)), (5, (1, 2))]:
        unit = np.zeros(A.shape)
        unit[i][idx] = 1.0
        directions.append(unit)
    for _ in range(2):
        random = rng.uniform(-1, 1, A.shape)
        random[:2] = 0.0                       # no derivative at repeated eigenvalues
        directions.append(random)
    for d in directions:
        num = (value(A + eps * d) - value(A - eps * d)) / (2 * eps)
        assert tangent(d) == pytest.approx(num, rel=1e-5, abs=1e-6)
    for i in (0, 1):
        at_repeated = np.zeros(A.shape)
        at_repeated[i] = rng.uniform(-1, 1, (3, 3))
        assert np.isfinite(tangent(at_repeated))


def test_other_shapes_are_a_clear_error():
    m = jr.Matrix.field(4, 4, jr.f32, shape=4)

    @jr.kernel
    def k():
        for i in m:
            U, P = jr.polar_decompose(m[i])
            m[i] = U
    with pytest.raises(jr.KernelCompileError, match="2x2 and 3x3 matrices"):
        k()


def eig_numpy(A):
    """Taichi's layout of eig for one 2x2 matrix, from numpy: eigenvalues ordered as jr.eig
    orders them (larger real part first; the positive imaginary part first)."""
    w = np.linalg.eigvals(A)
    w = sorted(w, key=lambda z: (-z.real, -z.imag))
    return np.array([[z.real, z.imag] for z in w])


def test_eig_2x2_real_complex_and_degenerate(rng):
    A = rng.uniform(-1, 1, (N, 2, 2))
    A[0] = np.diag([1.5, 1.5])                 # cI: Taichi's unit eigenvectors
    A[1] = [[1.0, 5.0], [0.0, 2.0]]            # a first column of A - l2 I that vanishes
    A[2] = [[0.0, -2.0], [1.0, 0.0]]           # complex pair
    m = jr.Matrix.field(2, 2, jr.f64, shape=N)
    vals = jr.Matrix.field(2, 2, jr.f64, shape=N)
    vecs = jr.Matrix.field(4, 2, jr.f64, shape=N)

    @jr.kernel
    def k():
        for i in m:
            vals[i], vecs[i] = jr.eig(m[i], jr.f64)
    m.from_numpy(A)
    k()
    got_vals, got_vecs = vals.to_numpy(), vecs.to_numpy()
    for i in range(N):
        np.testing.assert_allclose(got_vals[i], eig_numpy(A[i]), atol=1e-12)
        for col in range(2):
            lam = got_vals[i][col][0] + 1j * got_vals[i][col][1]
            v = got_vecs[i][0::2, col] + 1j * got_vecs[i][1::2, col]
            assert np.linalg.norm(v) == pytest.approx(1.0, rel=1e-12)
            np.testing.assert_allclose(A[i] @ v, lam * v, atol=1e-10)
    np.testing.assert_array_equal(got_vecs[0], [[0, 1], [0, 0], [1, 0], [0, 0]])


def test_eig_gradient_against_finite_differences(rng):
    m = jr.Matrix.field(2, 2, jr.f64, shape=4, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in m:
            vals, vecs = jr.eig(m[i])
            loss[None] += vals[0, 0] * 0.7 + vals[1, 1] * vals[1, 1] + vecs[2, 0] * 0.3

    def value(A):
        total = 0.0
        for a in A:
            w = eig_numpy(a)
            # the first eigenvector as jr.eig takes it: the first column of A - l2 I, unit norm
            col = a[:, 0] - np.array([w[1, 0] + 1j * w[1, 1], 0])
            total += w[0, 0] * 0.7 + w[1, 1] ** 2 + (col[1] / np.linalg.norm(col)).real * 0.3
        return total

    A = rng.uniform(-1, 1, (4, 2, 2))
    check_gradient(m, loss, k, value, A, range(4))
