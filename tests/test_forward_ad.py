"""Forward mode (`jr.ad.FwdMode`, `needs_dual=True`): tangents checked against analytic
derivatives, central finite differences of the primal kernel, and reverse mode.

Inside the with-block every launch runs the kernel's forward-mode version: the same values,
plus in `.dual` the derivative along the seed written into `param.dual`.
"""
import numpy as np
import pytest

import jitrt as jr
# the op tables of the reverse-mode tests, checked here in forward mode
from test_autodiff_ops import OPS as ARITHMETIC
from test_math_library import DERIVATIVES, ONE_ARG

nd = jr.types.ndarray

N = 16
H = 1e-6                                   # central-difference step (f64)
FD = {"rtol": 1e-6, "atol": 1e-8}          # tangent vs finite differences
EXACT = {"rtol": 1e-12, "atol": 1e-12}     # tangent vs the analytic numpy derivative


def dual_fields(n=N, dtype=jr.f64, count=3):
    return [jr.field(dtype, shape=(n,), needs_dual=True) for _ in range(count)]


def fd_direction(run, inputs, directions):
    """d run() along `directions` (one array per input field) by central differences."""
    bases = [f.to_numpy() for f in inputs]
    outs = []
    for sign in (1.0, -1.0):
        for f, b, d in zip(inputs, bases, directions):
            f.from_numpy(b + sign * H * d)
        outs.append(run())
    for f, b in zip(inputs, bases):
        f.from_numpy(b)
    return (outs[0] - outs[1]) / (2 * H)


# ---- every differentiable operation, both operands at once ----------------------------------
# ARITHMETIC: name -> (@jr.func of (a, b), a sampler, b sampler, d/da, d/db (None: 0));
# DERIVATIVES and ONE_ARG: the math library's derivatives, references and ranges.


def check_tangent(op, av, bv, da, db, name, rng):
    """Seed a.dual with u (FwdMode's param) and b.dual with w (kept: clear_gradients=False):
    y.dual must be da * u + db * w, analytically and by finite differences."""
    a, b, y = dual_fields(len(av))
    a.from_numpy(av)
    b.from_numpy(bv)

    @jr.kernel
    def k():
        for i in a:
            y[i] = op(a[i], b[i])

    u, w = rng.uniform(-1, 1, len(av)), rng.uniform(-1, 1, len(av))
    b.dual.from_numpy(w)
    with jr.ad.FwdMode(loss=y, param=a, seed=u, clear_gradients=False):
        k()
    got, primal = y.dual.to_numpy(), y.to_numpy()
    expect = (0 if da is None else da(av, bv) * u) + (0 if db is None else db(av, bv) * w)
    np.testing.assert_allclose(got, expect, **EXACT, err_msg=f"{name}: analytic")
    np.testing.assert_allclose(got, fd_direction(lambda: (k(), y.to_numpy())[1], [a, b],
                                                 [u, w]), **FD, err_msg=f"{name}: FD")
    k()                                       # the normal kernel: the same primal values
    np.testing.assert_allclose(y.to_numpy(), primal, rtol=1e-15, err_msg=f"{name}: values")
    assert not a.dual.to_numpy().any(), "the seed is cleared on exit"


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_arithmetic_tangent(name, rng):
    op, sample_a, sample_b, da, db = ARITHMETIC[name]
    av, bv = sample_a(rng), sample_b(rng)
    if name in ("min", "max"):
        bv = np.where(np.abs(av - bv) < 1e-3, bv + 0.5, bv)   # no ties
    check_tangent(op, av, bv, da, db, name, rng)


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_math_library_tangent(name, rng):
    fn, (ref, (lo, hi)) = getattr(jr, name), ONE_ARG[name]

    @jr.func
    def op(a, b):
        return fn(a) * b

    check_tangent(op, rng.uniform(lo, hi, N), rng.uniform(0.5, 1.5, N),
                  lambda a, b: DERIVATIVES[name](a) * b, lambda a, b: ref(a), name, rng)


def test_atan2_tangent(rng):
    @jr.func
    def op(a, b):
        return jr.atan2(a, b)

    av, bv = (rng.uniform(0.5, 2, N) * rng.choice([-1.0, 1.0], N) for _ in range(2))
    check_tangent(op, av, bv, lambda a, b: b / (a * a + b * b),
                  lambda a, b: -a / (a * a + b * b), "atan2", rng)


# ---- FwdMode itself -------------------------------------------------------------------------

def test_scalar_param_default_seed_and_primal_values():
    x = jr.field(jr.f32, shape=(), needs_dual=True)
    y = jr.field(jr.f32, shape=(), needs_dual=True)

    @jr.kernel
    def f():
        v = x[None]
        y[None] = jr.sin(v) * v + 3.0

    x[None] = 0.5
    with jr.ad.FwdMode(loss=y, param=x):
        assert x.dual[None] == 1.0                  # the default seed of a 0-d param
        f()
    assert y[None] == pytest.approx(np.sin(0.5) * 0.5 + 3.0, rel=1e-6)
    assert y.dual[None] == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5), rel=1e-6)
    assert x.dual[None] == 0.0


def test_vector_param_one_hot_seed_is_a_jacobian_column(rng):
    n_in, n_out = 4, 3
    x = jr.field(jr.f64, shape=n_in, needs_dual=True)
    y = jr.field(jr.f64, shape=n_out, needs_dual=True)
    xv = rng.uniform(-1, 1, n_in)
    x.from_numpy(xv)

    @jr.kernel
    def f():
        for i in range(n_out):
            for j in range(n_in):
                y[i] += (i + 1) * jr.sin(x[j]) * x[i]

    jac = np.zeros((n_out, n_in))
    for j in range(n_in):
        y.fill(0)
        with jr.ad.FwdMode(loss=y, param=x, seed=np.eye(n_in)[j]):
            f()
        jac[:, j] = y.dual.to_numpy()
    s = np.sin(xv).sum()
    expect = np.array([[(i + 1) * (np.cos(xv[j]) * xv[i] + (s if i == j else 0))
                        for j in range(n_in)] for i in range(n_out)])
    np.testing.assert_allclose(jac, expect, rtol=1e-12)


def test_plus_equals_from_a_parallel_loop_adds_duals(rng):
    x = jr.field(jr.f64, shape=N, needs_dual=True)
    loss = jr.field(jr.f64, shape=(), needs_dual=True)
    xv, u = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def f():
        for i in x:
            loss[None] += x[i] * x[i]
            loss[None] -= 0.5 * x[i]

    with jr.ad.FwdMode(loss=loss, param=x, seed=u):
        f()
    assert loss[None] == pytest.approx(np.sum(xv * xv - 0.5 * xv), rel=1e-12)
    assert loss.dual[None] == pytest.approx(np.sum((2 * xv - 0.5) * u), rel=1e-12)


def test_loops_with_data_dependent_bounds_match_reverse_mode(rng):
    x = jr.field(jr.f64, shape=N, needs_dual=True, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_dual=True, needs_grad=True)
    steps = jr.ndarray(jr.i32, shape=N)
    steps.from_numpy(rng.integers(0, 6, N).astype(np.int32))
    x.from_numpy(rng.uniform(-1, 1, N))

    @jr.kernel
    def f(steps: nd(dtype=jr.i32, ndim=1), k: jr.f64):
        for i in range(N):
            v = x[i]
            for _ in range(steps[i]):
                v = jr.sin(v) * k + 0.1 * v
            loss[None] += v * v

    with jr.ad.Tape(loss=loss):
        f(steps, 0.9)
    grad = x.grad.to_numpy()
    for j in (0, 3, N - 1):
        loss[None] = 0.0
        with jr.ad.FwdMode(loss=loss, param=x, seed=np.eye(N)[j]):
            f(steps, 0.9)
        assert loss.dual[None] == pytest.approx(grad[j], rel=1e-12, abs=1e-14)

    def run():
        loss[None] = 0.0
        f(steps, 0.9)
        return loss[None]
    u = rng.uniform(-1, 1, N)
    loss[None] = 0.0
    with jr.ad.FwdMode(loss=loss, param=x, seed=u):
        f(steps, 0.9)
    assert loss.dual[None] == pytest.approx(fd_direction(run, [x], [u]), rel=1e-6)
    assert loss.dual[None] == pytest.approx(grad @ u, rel=1e-12)


def test_if_else_while_break_and_a_func(rng):
    x, y, _ = dual_fields()
    xv = rng.uniform(-2, 2, N)
    x.from_numpy(xv)

    @jr.func
    def shaped(v):
        out = v * v
        if v < 0.0:
            out = jr.exp(v)
        else:
            out = out + jr.sqrt(v + 1.0)
        return out

    @jr.kernel
    def f():
        for i in x:
            v = shaped(x[i])
            n = 0
            while True:               # forward mode differentiates while/break too
                n += 1
                v = v * 0.5 + x[i]
                if n >= 3:
                    break
            y[i] = v

    u = rng.uniform(-1, 1, N)
    with jr.ad.FwdMode(loss=y, param=x, seed=u):
        f()
    d0 = np.where(xv < 0, np.exp(xv), 2 * xv + 0.5 / np.sqrt(np.maximum(xv, 0) + 1))
    expect = (d0 * 0.125 + 0.25 + 0.5 + 1) * u
    np.testing.assert_allclose(y.dual.to_numpy(), expect, rtol=1e-12)
    np.testing.assert_allclose(y.dual.to_numpy(),
                               fd_direction(lambda: (f(), y.to_numpy())[1], [x], [u]), **FD)


def test_select_takes_the_tangent_of_the_side_taken(rng):
    x, y, _ = dual_fields()
    x.from_numpy(rng.uniform(-1, 1, N))

    @jr.kernel
    def f():
        for i in x:
            y[i] = x[i + 1] * 2.0 if i + 1 < N else x[i] * 3.0    # no read past the end

    with jr.ad.FwdMode(loss=y, param=x, seed=np.arange(N, dtype=np.float64)):
        f()
    expect = np.append(2.0 * np.arange(1, N), 3.0 * (N - 1))
    np.testing.assert_allclose(y.dual.to_numpy(), expect)


def test_vector_fields_and_matrix_math(rng):
    p = jr.Vector.field(3, jr.f64, shape=N, needs_dual=True)
    out = jr.field(jr.f64, shape=N, needs_dual=True)
    pv = rng.uniform(-1, 1, (N, 3))
    p.from_numpy(pv)
    m = np.array([[1.0, 2.0, 0.5], [0.0, 1.5, -1.0], [0.25, 0.0, 2.0]])

    @jr.kernel
    def f():
        for i in p:
            a = jr.Matrix([[1.0, 2.0, 0.5], [0.0, 1.5, -1.0], [0.25, 0.0, 2.0]])
            q = a @ p[i]
            out[i] = q.norm() + q.dot(p[i])

    u = rng.uniform(-1, 1, (N, 3))
    with jr.ad.FwdMode(loss=out, param=p, seed=u.reshape(-1)):
        f()
    q = pv @ m.T
    dq = u @ m.T
    expect = np.sum(q * dq, axis=1) / np.linalg.norm(q, axis=1) + np.sum(dq * pv + q * u, 1)
    np.testing.assert_allclose(out.dual.to_numpy(), expect, rtol=1e-12)


def test_ndarrays_with_needs_dual_and_plain_numpy_constants(rng):
    a = jr.ndarray(jr.f64, shape=N, needs_dual=True)
    b = jr.ndarray(jr.f64, shape=N, needs_dual=True)
    c = rng.uniform(1, 2, N)                   # a numpy array: no dual, a constant
    no_dual = jr.ndarray(jr.f64, shape=N)
    av = rng.uniform(-1, 1, N)
    a.from_numpy(av)
    no_dual.from_numpy(np.full(N, 2.0))

    @jr.kernel
    def f(a: nd(dtype=jr.f64, ndim=1), b: nd(dtype=jr.f64, ndim=1),
          c: nd(dtype=jr.f64, ndim=1), d: nd(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            b[i] = jr.exp(a[i]) * c[i] + d[i] * a[i]

    u = rng.uniform(-1, 1, N)
    with jr.ad.FwdMode(loss=b, param=a, seed=u):
        f(a, b, c, no_dual)
        f(a, b, c, no_dual)                    # the forward kernel's fast path
    np.testing.assert_allclose(b.dual.to_numpy(), (np.exp(av) * c + 2.0) * u, rtol=1e-12)
    np.testing.assert_allclose(b.to_numpy(), np.exp(av) * c + 2.0 * av, rtol=1e-12)
    assert a.dual.to_numpy().tolist() == [0.0] * N


def test_vector_ndarrays_with_needs_dual(rng):
    a = jr.Vector.ndarray(3, jr.f64, shape=N, needs_dual=True)
    out = jr.ndarray(jr.f64, shape=N, needs_dual=True)
    av, u = rng.uniform(-1, 1, (N, 3)), rng.uniform(-1, 1, (N, 3))
    a.from_numpy(av)

    @jr.kernel
    def f(a: nd(dtype=jr.types.vector(3, jr.f64), ndim=1), out: nd(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            out[i] = a[i].norm_sqr()

    with jr.ad.FwdMode(loss=out, param=a, seed=u.reshape(-1)):
        f(a, out)
    np.testing.assert_allclose(out.dual.to_numpy(), np.sum(2 * av * u, 1), rtol=1e-12)


def test_stores_store_duals_and_data_without_dual_is_constant(rng):
    x = jr.field(jr.f64, shape=N, needs_dual=True)
    y = jr.field(jr.f64, shape=N, needs_dual=True)
    plain = jr.field(jr.f64, shape=N)          # no dual: read as a constant, written freely
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    plain.from_numpy(np.full(N, 3.0))

    @jr.kernel
    def f():
        for i in x:
            y[i] = x[i] * plain[i]
            y[i] = 2.0 * y[i] + 1.0            # an in-place update: dual 2 * the old dual
            plain[i] = y[i]

    u = rng.uniform(-1, 1, N)
    with jr.ad.FwdMode(loss=y, param=x, seed=u):
        f()
    np.testing.assert_allclose(y.dual.to_numpy(), 6.0 * u, rtol=1e-12)
    np.testing.assert_allclose(plain.to_numpy(), 6.0 * xv + 1.0, rtol=1e-12)


def test_kernel_scope_locals_atomic_values_and_returns(rng):
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    acc = jr.field(jr.f64, shape=(), needs_dual=True)
    y = jr.field(jr.f64, shape=N, needs_dual=True)
    x[None] = 0.7

    @jr.kernel
    def f() -> jr.f64:
        s = x[None] * x[None]                  # serial, read by the parallel task below
        for i in range(N):
            y[i] = s * i
        acc[None] = 1.0
        old = jr.atomic_add(acc[None], jr.sin(x[None]))
        return old * s

    with jr.ad.FwdMode(loss=y, param=x):
        r = f()
    assert r == pytest.approx(0.49)            # launches return the primal value
    np.testing.assert_allclose(y.dual.to_numpy(), 1.4 * np.arange(N), rtol=1e-12)
    assert acc.dual[None] == pytest.approx(np.cos(0.7), rel=1e-12)
    assert acc[None] == pytest.approx(1.0 + np.sin(0.7), rel=1e-12)


def test_chained_kernels_in_one_block():
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    y = jr.field(jr.f64, shape=(), needs_dual=True)
    z = jr.field(jr.f64, shape=(), needs_dual=True)

    @jr.kernel
    def square():
        y[None] = x[None] * x[None]

    @jr.kernel
    def wave(k: jr.f64):
        z[None] = jr.sin(y[None]) * k

    x[None] = 0.8
    with jr.ad.FwdMode(loss=z, param=x):
        square()
        wave(2.0)
    assert z.dual[None] == pytest.approx(2.0 * np.cos(0.64) * 1.6, rel=1e-12)
    assert y.dual[None] == pytest.approx(1.6, rel=1e-12)

    @jr.kernel
    def read_dual() -> jr.f64:
        return z.dual[None]                    # a dual is a field kernels can read too
    assert read_dual() == z.dual[None]


def test_duals_cleared_on_enter_and_the_seed_on_exit():
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    y = jr.field(jr.f64, shape=(), needs_dual=True)
    other = jr.ndarray(jr.f64, shape=3, needs_dual=True)

    @jr.kernel
    def f():
        y[None] += 3.0 * x[None]

    y.dual[None] = 5.0
    other.dual.fill(7.0)
    with jr.ad.FwdMode(loss=y, param=x, seed=[2.0]):
        assert y.dual[None] == 0.0 and other.dual.to_numpy().tolist() == [0.0] * 3
        f()
    assert (y.dual[None], x.dual[None]) == (6.0, 0.0)     # the result stays, the seed goes
    with jr.ad.FwdMode(loss=y, param=x, clear_gradients=False):
        f()
    assert y.dual[None] == 9.0                             # accumulated onto the kept dual


def test_after_the_block_launches_run_the_normal_kernel():
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    y = jr.field(jr.f64, shape=(), needs_dual=True)

    @jr.kernel
    def f(k: jr.f64):
        y[None] = x[None] * k

    x[None] = 2.0
    f(1.0)                                                 # the normal kernel's fast path first
    with jr.ad.FwdMode(loss=y, param=x):
        f(3.0)
    assert y.dual[None] == 3.0
    y.dual[None] = -1.0
    before = jr.debug.stats()["compiles"]
    f(4.0)
    assert y[None] == 8.0 and y.dual[None] == -1.0         # no tangent written
    with jr.ad.FwdMode(loss=y, param=x):
        f(5.0)                                             # compiled once, cached
    assert y.dual[None] == 5.0
    assert jr.debug.stats()["compiles"] == before


def test_seed_and_argument_errors():
    x = jr.field(jr.f32, shape=3, needs_dual=True)
    y = jr.field(jr.f32, shape=(), needs_dual=True)
    plain = jr.field(jr.f32, shape=(), name="plain")
    with pytest.raises(ValueError, match=r"param '.*' has 3 elements .*seed="):
        jr.ad.FwdMode(loss=y, param=x)
    with pytest.raises(ValueError, match="seed has 2 values but param .* has 3 elements"):
        jr.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0])
    with pytest.raises(ValueError, match="'plain' was created without needs_dual=True"):
        jr.ad.FwdMode(loss=plain, param=x, seed=[1.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="needs a field or ndarray"):
        jr.ad.FwdMode(loss=y, param=1.0)
    with pytest.raises(TypeError, match="needs_dual=True needs a float dtype"):
        jr.field(jr.i32, shape=3, needs_dual=True)
    with jr.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0]):
        with pytest.raises(RuntimeError, match="FwdMode cannot be used inside jr.ad.FwdMode"):
            with jr.ad.FwdMode(loss=y, param=x, seed=[0.0, 1.0, 0.0]):
                pass
        with pytest.raises(RuntimeError, match="Tape cannot be used inside jr.ad.FwdMode"):
            with jr.ad.Tape():
                pass
    with jr.ad.Tape():
        with pytest.raises(RuntimeError, match="FwdMode cannot be used inside jr.ad.Tape"):
            with jr.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0]):
                pass


def test_what_forward_mode_refuses():
    x = jr.field(jr.f32, shape=4, needs_dual=True, needs_grad=True)
    m = jr.field(jr.f32, shape=(), needs_dual=True)

    @jr.kernel
    def extremum():
        for i in x:
            jr.atomic_max(m[None], x[i])

    @jr.kernel
    def plain(k: jr.f32):
        for i in x:
            x[i] = x[i] * k

    with jr.ad.FwdMode(loss=m, param=x, seed=[1.0, 0, 0, 0]):
        with pytest.raises(jr.KernelCompileError, match="atomic_max on 'm'"):
            extremum()
        with pytest.raises(jr.JitrtError, match="reverse-mode .grad cannot run inside"):
            plain.grad(2.0)
    plain(2.0)                                  # outside: the normal kernel, compiled fine


def test_forward_kernels_are_cached_on_disk(tmp_path):
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    y = jr.field(jr.f64, shape=(), needs_dual=True)

    @jr.kernel
    def f():
        y[None] = jr.exp(x[None])

    for first in (True, False):
        jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))
        x[None] = 0.5
        f()
        with jr.ad.FwdMode(loss=y, param=x):
            f()
        assert y.dual[None] == pytest.approx(np.exp(0.5), rel=1e-12)
        stats = jr.debug.stats()
        if first:       # the normal and the forward-mode kernel: two entries
            assert (stats["compiles"], stats["offline_cache_misses"]) == (2, 2)
        else:
            assert (stats["compiles"], stats["offline_cache_hits"]) == (0, 2)
    jr.init(offline_cache=False)


def test_an_index_that_performs_an_atomic_runs_it_once(rng):
    x = jr.field(jr.f64, shape=N, needs_dual=True)
    out = jr.field(jr.f64, shape=N, needs_dual=True)
    count = jr.field(jr.i32, shape=())
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def compact():
        for i in x:
            if x[i] > 0.0:
                out[jr.atomic_add(count[None], 1)] = x[i] * x[i]

    with jr.ad.FwdMode(loss=out, param=x, seed=np.ones(N)):
        compact()
    kept = count[None]
    assert kept == int(np.sum(xv > 0))
    values, duals = out.to_numpy()[:kept], out.dual.to_numpy()[:kept]
    order = np.argsort(values)
    np.testing.assert_allclose(values[order], np.sort(xv[xv > 0] ** 2), rtol=1e-12)
    np.testing.assert_allclose(duals[order], 2 * np.sort(xv[xv > 0]), rtol=1e-12)


def test_an_atomic_with_a_dual_inside_an_expression_is_refused():
    x = jr.field(jr.f64, shape=(), needs_dual=True)
    acc = jr.field(jr.f64, shape=(), needs_dual=True)

    @jr.kernel
    def f():
        x[None] = jr.atomic_add(acc[None], 1.0) * 2.0

    with jr.ad.FwdMode(loss=x, param=acc):
        with pytest.raises(jr.KernelCompileError, match="assign its result to a local first"):
            f()


def test_fields_placed_later_get_their_duals():
    x = jr.field(jr.f64, needs_dual=True)
    v = jr.Vector.field(2, jr.f64, needs_dual=True)
    jr.root.dense(jr.i, 4).place(x, v)
    jr.root.lazy_dual()                        # accepted, as in Taichi: nothing to do
    assert x.dual.shape == (4,) and v.dual.shape == (4,) and x.needs_dual
    w = jr.field(jr.math.vec3, shape=3, needs_dual=True)
    assert w.dual.shape == (3,) and w.dual.element_shape == (3,)
    assert w.dual.to_numpy().shape == (3, 3)
    s = jr.field(jr.f64, shape=(), needs_dual=True)
    x.from_numpy(np.arange(4.0))

    @jr.kernel
    def f():
        for i in x:
            s[None] += x[i] * v[i][1]

    v.fill(2.0)
    with jr.ad.FwdMode(loss=s, param=x, seed=[0.0, 1.0, 0.0, 1.0]):
        f()
    assert s.dual[None] == 4.0
