"""Every differentiable builtin and matrix function, reverse mode and forward mode, against
central differences of the kernel's own f64 values.

Each kernel computes a batch: row k of `out` is one function applied to row k of the inputs,
so one launch of `k.grad()` (every `out.grad` seeded with 1), one `jr.ad.FwdMode` launch per
input and two launches per input perturbed by +-H give all the derivatives at once. The
inputs include the awkward points: zero, ties of min/max, the base 0 of pow, and matrices
that are the identity, diagonal (distinct and repeated values), rotations and reflections.
Where a function has no derivative (a kink or a repeated eigenvalue for an individual
eigenvector), the check is on what is defined there (docs/adstack.md, "Derivatives at
awkward points"): the tie rule of min/max and the derivative of a group's mean.
"""
import numpy as np
import pytest

import jitrt as jr

H = 1e-6
TOL = {"rtol": 1e-6, "atol": 1e-6}

# unary rows: name -> the inputs (f64); the kernel below applies the same functions in order
UNARY = {
    "sin": [-2.0, -0.3, 0.0, 0.7, 1.5], "cos": [-2.0, -0.3, 0.0, 0.7, 1.5],
    "tan": [-1.2, -0.3, 0.0, 0.7, 1.0], "exp": [-2.0, -0.3, 0.0, 0.7, 1.5],
    "log": [0.05, 0.3, 1.0, 2.0, 7.5], "sqrt": [0.05, 0.3, 1.0, 2.0, 7.5],
    "tanh": [-2.0, -0.3, 0.0, 0.7, 1.5], "asin": [-0.9, -0.3, 0.0, 0.5, 0.8],
    "acos": [-0.9, -0.3, 0.0, 0.5, 0.8], "atan": [-2.0, -0.3, 0.0, 0.7, 3.0],
    "sinh": [-2.0, -0.3, 0.0, 0.7, 1.5], "cosh": [-2.0, -0.3, 0.0, 0.7, 1.5],
    "abs": [-1.5, -0.2, 0.0, 0.3, 2.0], "floor": [-1.5, -0.2, 0.3, 1.7, 2.5],
    "ceil": [-1.5, -0.2, 0.3, 1.7, 2.5], "round": [-1.3, -0.2, 0.3, 1.7, 2.2],
    "rsqrt": [0.05, 0.3, 1.0, 2.0, 7.5], "log2": [0.05, 0.3, 1.0, 2.0, 7.5],
    "exp2": [-2.0, -0.3, 0.0, 0.7, 1.5], "sign": [-1.5, -0.2, 0.3, 1.7, 2.5],
    "clamp": [-1.5, -0.2, 0.0, 0.3, 2.0], "cube": [-1.5, -0.2, 0.0, 0.3, 2.0],
    "inverse_square": [-1.5, -0.2, 0.5, 0.3, 2.0], "neg": [-1.5, -0.2, 0.0, 0.3, 2.0],
}

# binary rows: name -> pairs (x, y); which of x, y is checked at each pair (both unless said)
BINARY = {
    "pow": [(0.5, 1.5), (2.0, -0.7), (1.3, 0.0), (0.0, 2.0), (0.0, 2.5), (0.0, 0.0)],
    "atan2": [(0.0, 1.0), (1.0, 0.0), (0.3, -0.7), (-0.4, -0.2), (0.5, 0.5), (-1.0, 2.0)],
    "min": [(0.5, 1.5), (1.5, 0.5), (0.7, 0.7), (0.0, 0.0), (-1.0, 2.0), (-2.0, -2.0)],
    "max": [(0.5, 1.5), (1.5, 0.5), (0.7, 0.7), (0.0, 0.0), (-1.0, 2.0), (-2.0, -2.0)],
    "mul": [(0.5, 1.5), (0.0, 0.5), (-0.7, 0.7), (0.0, 0.0), (-1.0, 2.0), (3.0, -2.0)],
    "div": [(0.5, 1.5), (0.0, 0.5), (-0.7, 0.7), (1.0, -3.0), (-1.0, 2.0), (3.0, -2.0)],
    "mod": [(0.5, 1.5), (2.3, 0.5), (-0.7, 0.6), (1.0, -3.0), (-1.0, 2.0), (3.5, -2.0)],
    "sub": [(0.5, 1.5), (0.0, 0.5), (-0.7, 0.7), (0.0, 0.0), (-1.0, 2.0), (3.0, -2.0)],
}
# (row, pair) -> the one argument whose derivative exists there
# 0^2.5 has no central difference in x (NaN); 0^y none in y at y = 0 (0^-h is inf): jitrt
# gives 0 there, as torch does
ONLY = {("pow", 4): "y", ("pow", 5): "x"}


def rows(table):
    width = max(len(v) for v in table.values())
    return np.array([v + v[-1:] * (width - len(v)) for v in table.values()])


def central(launch, fields, h=H):
    """Per input field: the central difference of `out` for all of its entries at once (each
    entry of out depends on the same entry of the inputs only)."""
    diffs = []
    for f in fields:
        base = f.to_numpy()
        f.from_numpy(base + h)
        plus = launch()
        f.from_numpy(base - h)
        minus = launch()
        f.from_numpy(base)
        diffs.append((plus - minus) / (2 * h))
    return diffs


def reverse_and_forward(kernel, out, fields, dual_fields):
    """(gradients, tangents) of out's entries w.r.t. each input field's matching entries."""
    for f in fields:
        f.grad.fill(0)
    kernel()
    out.grad.fill(1.0)
    kernel.grad()
    grads = [f.grad.to_numpy() for f in fields]
    tangents = []
    for f in dual_fields:
        with jr.ad.FwdMode(loss=out, param=f, seed=[1.0] * f.to_numpy().size):
            kernel()
        tangents.append(out.dual.to_numpy())
    return grads, tangents


def scalar_fields(shape):
    return [jr.field(jr.f64, shape=shape, needs_grad=True, needs_dual=True) for _ in range(3)]


def test_every_unary_builtin(arch):
    values = rows(UNARY)
    x, out, _ = scalar_fields(values.shape)
    cols = values.shape[1]

    @jr.kernel
    def k():
        for j in range(cols):
            out[0, j] = jr.sin(x[0, j])
            out[1, j] = jr.cos(x[1, j])
            out[2, j] = jr.tan(x[2, j])
            out[3, j] = jr.exp(x[3, j])
            out[4, j] = jr.log(x[4, j])
            out[5, j] = jr.sqrt(x[5, j])
            out[6, j] = jr.tanh(x[6, j])
            out[7, j] = jr.asin(x[7, j])
            out[8, j] = jr.acos(x[8, j])
            out[9, j] = jr.atan(x[9, j])
            out[10, j] = jr.sinh(x[10, j])
            out[11, j] = jr.cosh(x[11, j])
            out[12, j] = abs(x[12, j])
            out[13, j] = jr.floor(x[13, j]) * x[13, j]
            out[14, j] = jr.ceil(x[14, j]) * x[14, j]
            out[15, j] = jr.round(x[15, j]) * x[15, j]
            out[16, j] = jr.rsqrt(x[16, j])
            out[17, j] = jr.log2(x[17, j])
            out[18, j] = jr.exp2(x[18, j])
            out[19, j] = jr.sign(x[19, j]) * x[19, j]
            out[20, j] = jr.clamp(x[20, j], -1.0, 0.5)
            out[21, j] = x[21, j] ** 3
            out[22, j] = x[22, j] ** -2
            out[23, j] = -x[23, j]

    x.from_numpy(values)
    (grad,), (tangent,) = reverse_and_forward(k, out, [x], [x])
    (fd,) = central(lambda: (k(), out.to_numpy())[1], [x])
    names = list(UNARY)
    for r, name in enumerate(names):
        np.testing.assert_allclose(grad[r], fd[r], **TOL, err_msg=f"reverse: {name}")
        np.testing.assert_allclose(tangent[r], fd[r], **TOL, err_msg=f"forward: {name}")
    assert grad[names.index("abs"), 2] == 0.0          # |x| at 0: 0, as Taichi and torch
    assert tangent[names.index("abs"), 2] == 0.0


def test_every_binary_builtin(arch):
    pairs = np.array(list(BINARY.values()))             # (rows, cols, 2)
    x, y, out = scalar_fields(pairs.shape[:2])
    cols = pairs.shape[1]

    @jr.kernel
    def k():
        for j in range(cols):
            out[0, j] = jr.pow(x[0, j], y[0, j])
            out[1, j] = jr.atan2(x[1, j], y[1, j])
            out[2, j] = min(x[2, j], y[2, j])
            out[3, j] = max(x[3, j], y[3, j])
            out[4, j] = x[4, j] * y[4, j]
            out[5, j] = x[5, j] / y[5, j]
            out[6, j] = x[6, j] % y[6, j]
            out[7, j] = x[7, j] - y[7, j]

    x.from_numpy(pairs[..., 0])
    y.from_numpy(pairs[..., 1])
    grads, tangents = reverse_and_forward(k, out, [x, y], [x, y])
    fds = central(lambda: (k(), out.to_numpy())[1], [x, y])
    for r, name in enumerate(BINARY):
        for c in range(cols):
            for a, arg in enumerate("xy"):
                if ONLY.get((name, c), arg) != arg:
                    continue
                where = f"{name}{tuple(pairs[r, c])} d/d{arg}"
                assert np.isfinite(grads[a][r, c]), where
                expect = pytest.approx(fds[a][r, c], rel=1e-6, abs=1e-6)
                assert grads[a][r, c] == expect, "reverse " + where
                assert tangents[a][r, c] == expect, "forward " + where
    r = list(BINARY).index("pow")
    assert grads[1][r, 3] == 0.0 and tangents[1][r, 3] == 0.0   # d(0^y)/dy at y > 0: 0
    assert grads[0][list(BINARY).index("max"), 2] == 0.5        # a tie: half each


# ---- matrix functions -----------------------------------------------------------------------
# quantities (rows of out): each a smooth function of the results wherever the check runs
QUANTITIES = ("polar U", "polar P", "svd sum(S)", "svd U V^T", "svd each value and vector",
              "sym_eig sum", "sym_eig each value and vector", "inverse", "determinant",
              "norms", "vector products")
EVERYWHERE = set(QUANTITIES)
# at repeated singular values / eigenvalues single values and vectors have no derivative
REPEATED = EVERYWHERE - {"svd each value and vector", "sym_eig each value and vector"}


def rotation(n, angle):
    c, s = np.cos(angle), np.sin(angle)
    if n == 2:
        return np.array([[c, -s], [s, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ np.array(
        [[1.0, 0, 0], [0, np.cos(0.4), -np.sin(0.4)], [0, np.sin(0.4), np.cos(0.4)]])


def matrix_inputs(n, rng):
    """(matrix, the quantities checked there) for the awkward and the generic points."""
    distinct = np.diag([1.0, 2.0, 3.0][:n])
    flipped = np.diag([1.0, 2.0, -3.0][:n])
    repeated = np.diag([1.0, 1.0, 2.0][:n]) if n == 3 else 2 * np.eye(2)
    cases = [(np.eye(n), REPEATED), (2 * np.eye(n), REPEATED), (distinct, EVERYWHERE),
             (repeated, REPEATED), (flipped, EVERYWHERE),
             (rotation(n, 0.3), REPEATED),
             (rotation(n, 0.3) @ distinct, EVERYWHERE),
             (np.eye(n) + 1e-2 * rng.uniform(-1, 1, (n, n)), EVERYWHERE)]
    cases += [(rng.uniform(-1, 1, (n, n)) + 1.5 * np.eye(n), EVERYWHERE) for _ in range(3)]
    return np.array([a for a, _ in cases]), [q for _, q in cases]


def matrix_kernel(n, m, out, rng):
    w = [tuple(map(tuple, rng.uniform(-1, 1, (n, n)).tolist())) for _ in range(6)]
    c = tuple(rng.uniform(0.5, 1.5, n).tolist())
    wv = tuple(rng.uniform(-1, 1, n).tolist())

    @jr.kernel
    def k():
        for i in m:
            A = m[i]
            U, P = jr.polar_decompose(A)
            Us, S, V = jr.svd(A)
            ev, E = jr.sym_eig(A + A.transpose())
            C = jr.Matrix(w[5]) * 0.0
            for d in jr.static(range(n)):
                C[d, d] = c[d]
            out[0, i] = (U * jr.Matrix(w[0])).sum()
            out[1, i] = (P * jr.Matrix(w[1])).sum()
            out[2, i] = S.trace()
            out[3, i] = ((Us @ V.transpose()) * jr.Matrix(w[2])).sum()
            out[4, i] = (S * C).sum() + ((Us.transpose() @ jr.Matrix(w[3]) @ V) * C).sum()
            out[5, i] = ev.sum()
            out[6, i] = (ev * jr.Vector(c)).sum() + (
                (E.transpose() @ jr.Matrix(w[4]) @ E) * C).sum()
            out[7, i] = (A.inverse() * jr.Matrix(w[5])).sum()
            out[8, i] = A.determinant()
            c0 = jr.Vector.zero(jr.f64, n)
            c1 = jr.Vector.zero(jr.f64, n)
            for r in jr.static(range(n)):
                c0[r] = A[r, 0]
                c1[r] = A[r, 1]
            out[9, i] = c0.norm() + c0.norm_inv() + c0.norm_sqr()
            extra = c0[0] * 0.0                  # an f64 local (0.0 would be f32)
            if jr.static(n == 3):
                extra = (c0.cross(c1) * jr.Vector(wv)).sum()
            out[10, i] = (c0.normalized() * jr.Vector(wv)).sum() + c0.dot(c1) + \
                (c0.outer_product(c1) * jr.Matrix(w[0])).sum() + extra
    return k


def check_matrix_functions(n, rng):
    A, checked = matrix_inputs(n, rng)
    m = jr.Matrix.field(n, n, jr.f64, shape=len(A), needs_grad=True, needs_dual=True)
    out = jr.field(jr.f64, shape=(len(QUANTITIES), len(A)), needs_grad=True, needs_dual=True)
    k = matrix_kernel(n, m, out, rng)
    m.from_numpy(A)
    k()
    grads = []                                    # per quantity: d out[q, i] / d A_i
    for q in range(len(QUANTITIES)):
        m.grad.fill(0)
        seed = np.zeros((len(QUANTITIES), len(A)))
        seed[q] = 1.0
        out.grad.from_numpy(seed)
        k.grad()
        grads.append(m.grad.to_numpy())
    for r in range(n):
        for col in range(n):
            unit = np.zeros(A.shape)
            unit[:, r, col] = 1.0
            with jr.ad.FwdMode(loss=out, param=m, seed=unit.ravel().tolist()):
                k()
            tangent = out.dual.to_numpy()
            m.from_numpy(A + H * unit)
            k()
            plus = out.to_numpy()
            m.from_numpy(A - H * unit)
            k()
            fd = (plus - out.to_numpy()) / (2 * H)
            m.from_numpy(A)
            for q, name in enumerate(QUANTITIES):
                for i in range(len(A)):
                    if name not in checked[i]:
                        continue
                    where = f"{n}x{n} {name} at {A[i].tolist()}, entry ({r}, {col})"
                    expect = pytest.approx(fd[q, i], rel=1e-5, abs=1e-5)
                    assert grads[q][i, r, col] == expect, "reverse: " + where
                    assert tangent[q, i] == expect, "forward: " + where


def test_2x2_matrix_functions(arch, rng):
    check_matrix_functions(2, rng)


@pytest.mark.slow              # its primal, adjoint and forward-mode kernels: ~30 s of compiles
@pytest.mark.no_gpu_builds     # 3x3 decompositions: the GPU suite runs it on the GPU instead
def test_3x3_matrix_functions(arch, rng):
    """Every 3x3 quantity in both modes at the awkward points (make test-all). The default
    suite keeps a cheaper check of each 3x3 derivative: the 2x2 case above runs the same
    checks, the polar decomposition (the SVD within) in reverse mode below, sym_eig in
    forward mode in test_matrix_functions.py."""
    check_matrix_functions(3, rng)


@pytest.mark.no_gpu_builds     # a 3x3 decomposition and its adjoint
def test_polar_gradient_at_orthogonal_inputs_in_f32(arch, rng):
    """The reported case: at the identity the gradient of sum(W * R) is (W - W^T) / 2 (it
    was the lower triangle of W - W^T); at 2I half that; at a rotation Q, dR = Q Omega with
    Omega the skew part of Q^T dA, so the gradient is Q (Q^T W - W^T Q) / 2."""
    w = rng.uniform(-1, 1, (3, 3))
    W = tuple(map(tuple, w.tolist()))
    m = jr.Matrix.field(3, 3, jr.f32, shape=3, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in m:
            U, P = jr.polar_decompose(m[i])
            loss[None] += (U * jr.Matrix(W)).sum()

    q = rotation(3, 0.3)
    m.from_numpy(np.stack([np.eye(3), 2 * np.eye(3), q]).astype(np.float32))
    with jr.ad.Tape(loss=loss):
        k()
    g = m.grad.to_numpy()
    skew = (w - w.T) / 2
    np.testing.assert_allclose(g[0], skew, atol=1e-5)
    np.testing.assert_allclose(g[1], skew / 2, atol=1e-5)
    np.testing.assert_allclose(g[2], q @ (q.T @ w - w.T @ q) / 2, atol=1e-5)


def test_tangent_only_terms_cost_nothing_outside_derivatives(arch):
    """How the 3x3 matrix functions state derivatives: `y + tangent_only(t)` is y in value,
    with t's derivative; the primal kernel computes no part of t (its IR has no sin here),
    reverse and forward mode differentiate through it, `detached(v)` has none."""
    from jitrt.frontend.builtins import detached, tangent_only
    x = jr.field(jr.f64, shape=3, needs_grad=True, needs_dual=True)
    y = jr.field(jr.f64, shape=3, needs_grad=True, needs_dual=True)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            t = jr.sin(v) * 3.0          # (a load would stay: its bounds check is an effect)
            y[i] = detached(v * v) + tangent_only(t)

    x.from_numpy(np.array([0.0, 0.5, -1.0]))
    k()
    np.testing.assert_array_equal(y.to_numpy(), [0.0, 0.25, 1.0])
    primal = "\n".join(jr.debug.kernel_ir(k))
    assert "sin" not in primal and "-0.0" not in primal
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * np.cos([0.0, 0.5, -1.0]), rtol=1e-14)
    with jr.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0]):
        k()
    np.testing.assert_allclose(y.dual.to_numpy(), 3 * np.cos([0.0, 0.5, -1.0]), rtol=1e-14)


def test_tangent_only_chains_are_dropped_whole_and_shared_locals_stay(arch):
    """The primal kernel drops every local that only feeds a tangent_only term, through a
    chain of them (t3 reads t2, which reads t1), but keeps one the kernel also stores (c)."""
    from jitrt.frontend.builtins import detached, tangent_only
    x = jr.field(jr.f64, shape=3, needs_grad=True)
    y = jr.field(jr.f64, shape=3, needs_grad=True)
    z = jr.field(jr.f64, shape=3)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            t1 = jr.sin(v)
            t2 = t1 * t1 + jr.exp(v)
            c = jr.cos(v)
            t3 = t2 * 0.5 + c
            z[i] = c
            y[i] = detached(v * v) + tangent_only(t3)

    x.from_numpy(np.array([0.0, 0.5, -1.0]))
    k()
    np.testing.assert_array_equal(y.to_numpy(), [0.0, 0.25, 1.0])
    np.testing.assert_array_equal(z.to_numpy(), np.cos([0.0, 0.5, -1.0]))
    primal = "\n".join(jr.debug.kernel_ir(k))
    assert "sin" not in primal and "exp" not in primal and "cos" in primal
    y.grad.fill(1.0)
    k.grad()
    v = np.array([0.0, 0.5, -1.0])
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 * np.sin(2 * v) + 0.5 * np.exp(v) - np.sin(v),
                               rtol=1e-14)
