"""`jr.linalg.LinearOperator`, `MatrixFreeCG` and `MatrixFreeBICGSTAB` (Taichi's
`ti.linalg` matrix-free solvers): A x = b with A given as a matvec kernel over fields."""
import numpy as np
import pytest

import jitrt as jr
from jitrt.linalg import LinearOperator, MatrixFreeBICGSTAB, MatrixFreeCG

N = 12


def _operator(shift):
    """1-D operators with `shift` on the diagonal: `sym` has -1 on both sides, `asym` -1
    below and -0.5 above (not symmetric: for BiCGSTAB)."""
    @jr.kernel
    def sym(v: jr.template(), mv: jr.template()):
        for i in v:
            left = v[i - 1] if i >= 1 else 0.0
            right = v[i + 1] if i + 1 < N else 0.0
            mv[i] = shift * v[i] - left - right

    @jr.kernel
    def asym(v: jr.template(), mv: jr.template()):
        for i in v:
            left = v[i - 1] if i >= 1 else 0.0
            right = v[i + 1] if i + 1 < N else 0.0
            mv[i] = shift * v[i] - left - 0.5 * right
    return sym, asym


def _dense(shift, asym):
    upper = 0.5 if asym else 1.0
    return np.diag(np.full(N, float(shift))) - np.eye(N, k=-1) - upper * np.eye(N, k=1)


@pytest.mark.parametrize("dtype,tol", [(jr.f32, 1e-5), (jr.f64, 1e-12)])
@pytest.mark.parametrize("solver", [MatrixFreeCG, MatrixFreeBICGSTAB])
def test_solutions_match_numpy(solver, dtype, tol, rng):
    sym, asym = _operator(4.0)
    use_asym = solver is MatrixFreeBICGSTAB
    b = jr.field(dtype, shape=N)
    x = jr.field(dtype, shape=N)
    rhs = rng.standard_normal(N)
    b.from_numpy(rhs.astype(dtype.np))
    assert solver(LinearOperator(asym if use_asym else sym), b, x, tol=tol, maxiter=200)
    want = np.linalg.solve(_dense(4.0, use_asym), rhs)
    np.testing.assert_allclose(x.to_numpy(), want, atol=1e-5 if dtype == jr.f32 else 1e-10)


def test_no_convergence_in_maxiter_is_reported_as_false():
    sym, _ = _operator(2.0)
    b, x = jr.field(jr.f64, shape=N), jr.field(jr.f64, shape=N)
    b.fill(1.0)
    assert MatrixFreeCG(LinearOperator(sym), b, x, tol=1e-12, maxiter=2) is False


def test_bad_arguments_are_named():
    sym, _ = _operator(2.0)
    A = LinearOperator(sym)
    with pytest.raises(TypeError, match="MatrixFreeCG: b is f32 but x f64"):
        MatrixFreeCG(A, jr.field(jr.f32, shape=N), jr.field(jr.f64, shape=N))
    with pytest.raises(TypeError, match="fields of f32 or f64 are solved, got i32"):
        MatrixFreeBICGSTAB(A, jr.field(jr.i32, shape=N), jr.field(jr.i32, shape=N))
    with pytest.raises(RuntimeError, match=r"b has shape \(12,\) \(offset \(0,\)\) but x "
                                           r"\(13,\)"):
        MatrixFreeCG(A, jr.field(jr.f32, shape=N), jr.field(jr.f32, shape=N + 1))
    with pytest.raises(RuntimeError, match=r"x has shape \(12,\) but Ax \(3,\)"):
        A.matvec(jr.field(jr.f32, shape=N), jr.field(jr.f32, shape=3))
