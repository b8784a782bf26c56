"""The math library in kernels: asin, acos, atan, atan2, sinh, cosh, round, rsqrt, log2, exp2,
sign, clamp, select (and their math./np. spellings) against numpy, in f32 and f64, element-wise
on vectors, and their gradients against the analytic derivatives."""
import math

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
N = 64
ONE_ARG = {
    "asin": (np.arcsin, (-0.99, 0.99)), "acos": (np.arccos, (-0.99, 0.99)),
    "atan": (np.arctan, (-20, 20)), "sinh": (np.sinh, (-5, 5)), "cosh": (np.cosh, (-5, 5)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 10)), "log2": (np.log2, (0.01, 100)),
    "exp2": (np.exp2, (-10, 10)), "round": (np.round, (-10, 10)),
}


def one_arg_kernel(name):
    fn = getattr(jr, name)

    @jr.kernel
    def k(x: nd(ndim=1), y: nd(ndim=1)):
        for i in range(x.shape[0]):
            y[i] = fn(x[i])
    return k


@pytest.mark.parametrize("dt,rtol", [(np.float64, 1e-14), (np.float32, 3e-6)])
@pytest.mark.parametrize("name", sorted(ONE_ARG))
def test_one_argument_functions_match_numpy(name, dt, rtol, rng):
    ref, (lo, hi) = ONE_ARG[name]
    x = rng.uniform(lo, hi, N).astype(dt)
    if name == "round":
        x[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, 2.4999]      # half to even, as numpy
    y = np.zeros_like(x)
    one_arg_kernel(name)(x, y)
    np.testing.assert_allclose(y, ref(x).astype(dt), rtol=rtol, atol=rtol)


def test_two_argument_and_integer_functions(rng):
    @jr.kernel
    def k(y: nd(dtype=jr.f64, ndim=1), x: nd(dtype=jr.f64, ndim=1), i: nd(dtype=jr.i32, ndim=1),
          out: nd(dtype=jr.f64, ndim=2), iout: nd(dtype=jr.i32, ndim=2)):
        for j in range(y.shape[0]):
            out[j, 0] = jr.atan2(y[j], x[j])
            out[j, 1] = math.atan2(y[j], x[j]) + np.arctan2(x[j], y[j])
            out[j, 2] = jr.clamp(x[j], -0.5, 0.25)
            out[j, 3] = jr.select(x[j] > y[j], x[j], y[j] * 2.0)
            out[j, 4] = jr.sign(x[j]) + np.sign(y[j]) * 10.0
            out[j, 5] = math.asin(x[j] * 0.5) + np.arcsin(y[j] * 0.5) + math.sinh(x[j])
            iout[j, 0] = jr.sign(i[j])
            iout[j, 1] = jr.clamp(i[j], -2, 3)
    y, x = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    x[:4] = [0.0, -0.0, 1.0, -1.0]
    y[:4] = [0.0, 0.0, 0.0, -0.0]
    i = rng.integers(-5, 6, N).astype(np.int32)
    out, iout = np.zeros((N, 6)), np.zeros((N, 2), np.int32)
    k(y, x, i, out, iout)
    want = np.stack([np.arctan2(y, x), np.arctan2(y, x) + np.arctan2(x, y), np.clip(x, -0.5, 0.25),
                     np.where(x > y, x, 2 * y), np.sign(x) + np.sign(y) * 10,
                     np.arcsin(x / 2) + np.arcsin(y / 2) + np.sinh(x)], 1)
    np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(np.signbit(out[:4, 0]), np.signbit(want[:4, 0]))
    np.testing.assert_array_equal(iout, np.stack([np.sign(i), np.clip(i, -2, 3)], 1))


def test_element_wise_on_vectors():
    @jr.kernel
    def k(out: nd(dtype=jr.f64, ndim=2)):
        for j in range(out.shape[0]):
            v = jr.math.vec3(-2.0, 0.3, 4.0) * (j + 1)
            out[j, 0] = jr.clamp(v, -1.0, 1.0).sum()
            out[j, 1] = jr.math.atan(v).sum() + jr.sign(v).sum() * 10.0
            out[j, 2] = jr.select(v > 0.0, v, -v).sum()
    out = np.zeros((3, 3))
    k(out)
    v = np.array([-2.0, 0.3, 4.0])[None] * np.arange(1, 4)[:, None]
    want = np.stack([np.clip(v, -1, 1).sum(1), np.arctan(v).sum(1) + np.sign(v).sum(1) * 10,
                     np.abs(v).sum(1)], 1)
    np.testing.assert_allclose(out, want, rtol=1e-6)        # vec3 holds the default f32


DERIVATIVES = {
    "asin": lambda x: 1 / np.sqrt(1 - x * x), "acos": lambda x: -1 / np.sqrt(1 - x * x),
    "atan": lambda x: 1 / (1 + x * x), "sinh": np.cosh, "cosh": np.sinh,
    "rsqrt": lambda x: -0.5 * x ** -1.5, "log2": lambda x: 1 / (x * np.log(2)),
    "exp2": lambda x: np.exp2(x) * np.log(2), "round": lambda x: 0 * x,
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_gradients(name, rng):
    fn = getattr(jr, name)
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            loss[None] += fn(x[i])
    lo, hi = ONE_ARG[name][1]
    xv = rng.uniform(lo, hi, N)
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), DERIVATIVES[name](xv), rtol=1e-12)


def test_atan2_gradient(rng):
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    y = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            loss[None] += jr.atan2(y[i], x[i])
    xv, yv = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    y.from_numpy(yv)
    with jr.ad.Tape(loss=loss):
        k()
    r2 = xv * xv + yv * yv
    np.testing.assert_allclose(y.grad.to_numpy(), xv / r2, rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), -yv / r2, rtol=1e-12)


def test_host_spellings_compute_with_numpy():
    assert jr.atan2(1.0, 1.0) == pytest.approx(math.pi / 4)
    assert jr.clamp(5, 0, 3) == 3 and jr.sign(-2.0) == -1.0 and jr.round(2.5) == 2.0
    assert jr.math.clamp is jr.clamp and jr.math.sinh is jr.sinh


def test_wrong_argument_counts_are_compile_errors():
    @jr.kernel
    def k(x: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = jr.clamp(x[i], 0.0)
    with pytest.raises(jr.KernelCompileError, match=r"clamp\(\) takes 3"):
        k(np.zeros(2, np.float32))


def test_vector_math_only_where_loops_vectorize():
    """f32 sin in a parallel task's own loop is jitrt's branch-free code (the loop vectorizes);
    inside an inner loop, whose iterations depend on each other, it is libm's scalar sinf,
    which is faster there (codegen/targets.py)."""
    nd = jr.types.ndarray

    @jr.kernel
    def straight(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = jr.sin(x[i])

    @jr.kernel
    def chained(x: nd(dtype=jr.f32, ndim=1), n: nd(dtype=jr.i32, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(n[i]):
                v = jr.sin(v)
            x[i] = v

    x = np.linspace(0, 1, 64, dtype=np.float32)
    assert "llvm.sin.f32" not in jr.debug.optimized_ir(straight, x, x.copy())
    assert "llvm.sin.f32" in jr.debug.optimized_ir(chained, x, np.ones(64, np.int32))
    y = x.copy()
    chained(y, np.full(64, 2, np.int32))
    np.testing.assert_allclose(y, np.sin(np.sin(x)), rtol=1e-6)
