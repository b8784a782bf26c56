"""Reverse mode, one differentiable operation at a time, checked against two oracles.

Every op is differentiated on random f64 inputs away from its kinks and poles, and the
gradient the grad kernel produces is compared with (a) the derivative written out in numpy and
(b) central finite differences of the kernel's own forward launch. Elementwise kernels write
`y[i] = op(x[i], z[i])`; the test seeds `y.grad` with random weights, launches `k.grad()` and
reads `x.grad` / `z.grad`. Reductions into a scalar loss go through `jr.ad.Tape`.
"""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray

N = 64
H = 1e-6                                  # central-difference step (f64)
FD = {"rtol": 1e-5, "atol": 1e-7}           # gradient vs finite differences
EXACT = {"rtol": 1e-12, "atol": 1e-12}      # gradient vs the analytic numpy derivative


def away_from_zero(rng, lo, hi, n=N):
    """|v| in [lo, hi) with a random sign."""
    return rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)


def away_from_integers(rng, lo, hi, n=N):
    return rng.integers(lo, hi, n) + rng.uniform(0.1, 0.9, n)


def grad_fields(n=N, dtype=jr.f64):
    return (jr.field(dtype, shape=(n,), needs_grad=True) for _ in range(3))


def run_grad(k, inputs, y, w, *args):
    """Seed y.grad = w, clear the inputs' gradients, launch k.grad; the inputs' gradients."""
    for f in inputs:
        f.grad.fill(0)
    y.grad.from_numpy(w)
    k.grad(*args)
    return [f.grad.to_numpy() for f in inputs]


def fd_elementwise(k, inp, y, w, *args):
    """w * dy/dinp by central differences, for kernels where y[i] depends on inp[i] only."""
    base = inp.to_numpy()
    inp.from_numpy(base + H)
    k(*args)
    yp = y.to_numpy()
    inp.from_numpy(base - H)
    k(*args)
    ym = y.to_numpy()
    inp.from_numpy(base)
    return w * (yp - ym) / (2 * H)


def fd_scalar(forward, inp):
    """d forward() / d inp[j] for every j by central differences of a scalar forward."""
    base = inp.to_numpy()
    out = np.zeros_like(base)
    for j in np.ndindex(base.shape):
        for sign in (1.0, -1.0):
            v = base.copy()
            v[j] += sign * H
            inp.from_numpy(v)
            out[j] += sign * forward() / (2 * H)
    inp.from_numpy(base)
    return out


def elementwise_kernel(op, x, z, y):
    @jr.kernel
    def k():
        for i in x:
            y[i] = op(x[i], z[i])
    return k


# ---- the op table ---------------------------------------------------------------------------
# name -> (@jr.func of (a, b), x sampler, z sampler, d/da numpy, d/db numpy)

@jr.func
def op_add(a, b):
    return a + b


@jr.func
def op_sub(a, b):
    return a - b


@jr.func
def op_mul(a, b):
    return a * b


@jr.func
def op_div(a, b):
    return a / b


@jr.func
def op_neg(a, b):
    return -a


@jr.func
def op_mod(a, b):
    return a % b


@jr.func
def op_sq(a, b):
    return a ** 2


@jr.func
def op_cube(a, b):
    return a ** 3


@jr.func
def op_inv_sq(a, b):
    return a ** -2


@jr.func
def op_pow_zero(a, b):
    return a ** 0 + b * 0.0


@jr.func
def op_pow_const_float(a, b):
    return a ** 2.5


@jr.func
def op_pow_fn(a, b):
    return jr.pow(a, b)


@jr.func
def op_pow_star(a, b):
    return a ** b


@jr.func
def op_sin(a, b):
    return jr.sin(a)


@jr.func
def op_cos(a, b):
    return jr.cos(a)


@jr.func
def op_tan(a, b):
    return jr.tan(a)


@jr.func
def op_exp(a, b):
    return jr.exp(a)


@jr.func
def op_log(a, b):
    return jr.log(a)


@jr.func
def op_sqrt(a, b):
    return jr.sqrt(a)


@jr.func
def op_tanh(a, b):
    return jr.tanh(a)


@jr.func
def op_abs(a, b):
    return abs(a)


@jr.func
def op_floor(a, b):
    return jr.floor(a) * b


@jr.func
def op_ceil(a, b):
    return jr.ceil(a) * b


@jr.func
def op_min(a, b):
    return min(a, b)


@jr.func
def op_max(a, b):
    return max(a, b)


def signed(rng):
    return rng.uniform(-2, 2, N)


def positive(rng):
    return rng.uniform(0.5, 2.5, N)


def nonzero(rng):
    return away_from_zero(rng, 0.5, 2.0)


def no_int(rng):
    return away_from_integers(rng, -4, 4)


ZERO = None   # the derivative is identically zero

OPS = {
    "add": (op_add, signed, signed, lambda a, b: 1 + 0 * a, lambda a, b: 1 + 0 * b),
    "sub": (op_sub, signed, signed, lambda a, b: 1 + 0 * a, lambda a, b: -1 + 0 * b),
    "mul": (op_mul, signed, signed, lambda a, b: b, lambda a, b: a),
    "div": (op_div, signed, nonzero, lambda a, b: 1 / b, lambda a, b: -a / b ** 2),
    "neg": (op_neg, signed, signed, lambda a, b: -1 + 0 * a, ZERO),
    "mod": (op_mod, no_int, lambda r: rng_scaled(r, 0.7, 1.9), lambda a, b: 1 + 0 * a,
            lambda a, b: -np.floor(a / b)),
    "pow2": (op_sq, signed, signed, lambda a, b: 2 * a, ZERO),
    "pow3": (op_cube, signed, signed, lambda a, b: 3 * a ** 2, ZERO),
    "pow-2": (op_inv_sq, nonzero, signed, lambda a, b: -2 / a ** 3, ZERO),
    "pow0": (op_pow_zero, signed, signed, ZERO, ZERO),
    "pow2.5": (op_pow_const_float, positive, signed, lambda a, b: 2.5 * a ** 1.5, ZERO),
    "jr.pow": (op_pow_fn, positive, signed, lambda a, b: b * a ** (b - 1),
               lambda a, b: a ** b * np.log(a)),
    "a**b": (op_pow_star, positive, signed, lambda a, b: b * a ** (b - 1),
             lambda a, b: a ** b * np.log(a)),
    "sin": (op_sin, signed, signed, lambda a, b: np.cos(a), ZERO),
    "cos": (op_cos, signed, signed, lambda a, b: -np.sin(a), ZERO),
    "tan": (op_tan, lambda r: r.uniform(-1.2, 1.2, N), signed,
            lambda a, b: 1 / np.cos(a) ** 2, ZERO),
    "exp": (op_exp, signed, signed, lambda a, b: np.exp(a), ZERO),
    "log": (op_log, positive, signed, lambda a, b: 1 / a, ZERO),
    "sqrt": (op_sqrt, positive, signed, lambda a, b: 0.5 / np.sqrt(a), ZERO),
    "tanh": (op_tanh, signed, signed, lambda a, b: 1 - np.tanh(a) ** 2, ZERO),
    "abs": (op_abs, lambda r: away_from_zero(r, 0.1, 2.0), signed, lambda a, b: np.sign(a),
            ZERO),
    "floor": (op_floor, no_int, signed, ZERO, lambda a, b: np.floor(a)),
    "ceil": (op_ceil, no_int, signed, ZERO, lambda a, b: np.ceil(a)),
    "min": (op_min, signed, signed, lambda a, b: (a < b) * 1.0, lambda a, b: (b < a) * 1.0),
    "max": (op_max, signed, signed, lambda a, b: (a > b) * 1.0, lambda a, b: (b > a) * 1.0),
}


def rng_scaled(rng, lo, hi):
    return rng.uniform(lo, hi, N)


@pytest.mark.parametrize("name", list(OPS))
def test_op_gradient(name, rng):
    op, sample_x, sample_z, da, db = OPS[name]
    x, z, y = grad_fields()
    xv, zv = sample_x(rng), sample_z(rng)
    if name in ("min", "max"):
        zv = np.where(np.abs(xv - zv) < 1e-3, zv + 0.5, zv)   # no ties
    x.from_numpy(xv)
    z.from_numpy(zv)
    w = rng.uniform(0.5, 1.5, N) * rng.choice([-1.0, 1.0], N)
    k = elementwise_kernel(op, x, z, y)
    k()
    gx, gz = run_grad(k, [x, z], y, w)
    for got, deriv, inp in ((gx, da, x), (gz, db, z)):
        expect = np.zeros(N) if deriv is ZERO else w * deriv(xv, zv)
        np.testing.assert_allclose(got, expect, **EXACT, err_msg=f"{name}: analytic")
        np.testing.assert_allclose(got, fd_elementwise(k, inp, y, w), **FD,
                                   err_msg=f"{name}: finite differences")
    if name != "pow0":
        assert np.any(gx != 0) or np.any(gz != 0), "a derivative that is not identically 0"


def test_ops_written_inline_with_loads_as_operands(rng):
    """The same rules when operands are global loads and nested expressions, not func params."""
    x, z, y = grad_fields()
    xv, zv = rng.uniform(0.5, 2.0, N), rng.uniform(-1.0, 1.0, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            y[i] = (jr.sin(x[i] * z[i]) + jr.exp(-z[i]) / x[i] - jr.log(x[i]) * jr.sqrt(x[i])
                    + jr.tanh(z[i] - x[i]) * jr.cos(x[i]) + jr.tan(z[i]) ** 2
                    + abs(z[i]) * max(x[i], z[i]) - min(x[i] ** 3, 1.5) + jr.pow(x[i], z[i]))

    w = rng.uniform(-1, 1, N)
    k()
    a, b = xv, zv
    dfa = (b * np.cos(a * b) - np.exp(-b) / a ** 2 - np.sqrt(a) / a - np.log(a) * 0.5 /
           np.sqrt(a) - (1 - np.tanh(b - a) ** 2) * np.cos(a) - np.tanh(b - a) * np.sin(a)
           + np.abs(b) * (a > b) - 3 * a ** 2 * (a ** 3 < 1.5) + b * a ** (b - 1))
    dfb = (a * np.cos(a * b) - np.exp(-b) / a + (1 - np.tanh(b - a) ** 2) * np.cos(a)
           + 2 * np.tan(b) / np.cos(b) ** 2 + np.sign(b) * np.maximum(a, b)
           + np.abs(b) * (b > a) + a ** b * np.log(a))
    gx, gz = run_grad(k, [x, z], y, w)
    np.testing.assert_allclose(gx, w * dfa, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gz, w * dfb, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, fd_elementwise(k, x, y, w), **FD)


def test_repeated_reads_of_a_local_accumulate(rng):
    x, _, y = grad_fields()
    xv = rng.uniform(-2, 2, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            a = x[i]
            b = a * a
            y[i] = a * b + jr.sin(a) * b - a

    w = rng.uniform(-1, 1, N)
    (gx,) = run_grad(k, [x], y, w)
    np.testing.assert_allclose(gx, w * (3 * xv ** 2 + np.cos(xv) * xv ** 2
                                        + 2 * xv * np.sin(xv) - 1), **EXACT)


# ---- casts ----------------------------------------------------------------------------------

def test_cast_f64_to_f32_and_back(rng):
    x, _, y = grad_fields()
    xv = rng.uniform(-2, 2, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            t = jr.cast(x[i], jr.f32)
            y[i] = jr.cast(t * t * 3.0, jr.f64) + x[i]

    w = rng.uniform(-1, 1, N)
    (gx,) = run_grad(k, [x], y, w)
    x32 = xv.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(gx, w * (6 * x32 + 1), rtol=1e-6)


def test_cast_f32_field_into_f64_output(rng):
    x = jr.field(jr.f32, shape=(N,), needs_grad=True)
    y = jr.field(jr.f64, shape=(N,), needs_grad=True)
    xv = rng.uniform(-2, 2, N).astype(np.float32)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            d = jr.cast(x[i], jr.f64)
            y[i] = jr.exp(d) * 2.0

    w = rng.uniform(-1, 1, N)
    (gx,) = run_grad(k, [x], y, w)
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx, (w * np.exp(xv.astype(np.float64)) * 2.0), rtol=1e-6)


def test_int_conversion_has_zero_gradient(rng):
    x, _, y = grad_fields()
    xv = away_from_integers(rng, -5, 5)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            y[i] = x[i] * int(x[i]) + float(int(x[i] * 3.0))

    w = rng.uniform(-1, 1, N)
    k()
    np.testing.assert_allclose(y.to_numpy(), xv * np.trunc(xv) + np.trunc(3 * xv), **EXACT)
    (gx,) = run_grad(k, [x], y, w)
    np.testing.assert_allclose(gx, w * np.trunc(xv), **EXACT)
    np.testing.assert_allclose(gx, fd_elementwise(k, x, y, w), **FD)


# ---- selects and branches -------------------------------------------------------------------

def test_ternary_select(rng):
    x, z, y = grad_fields()
    xv, zv = rng.uniform(-2, 2, N), rng.uniform(-2, 2, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            y[i] = x[i] * z[i] if x[i] > z[i] else jr.sin(x[i]) - z[i] * 2.0

    w = rng.uniform(-1, 1, N)
    gx, gz = run_grad(k, [x, z], y, w)
    hi = xv > zv
    assert 0 < hi.sum() < N
    np.testing.assert_allclose(gx, w * np.where(hi, zv, np.cos(xv)), **EXACT)
    np.testing.assert_allclose(gz, w * np.where(hi, xv, -2.0), **EXACT)
    np.testing.assert_allclose(gz, fd_elementwise(k, z, y, w), **FD)


def test_if_else_branches_with_stores(rng):
    x, z, y = grad_fields()
    xv, zv = away_from_zero(rng, 0.1, 2), rng.uniform(-2, 2, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            if x[i] > 0.0:
                y[i] = x[i] * x[i] * z[i]
            else:
                y[i] = z[i] - jr.exp(x[i])

    w = rng.uniform(-1, 1, N)
    gx, gz = run_grad(k, [x, z], y, w)
    pos = xv > 0
    np.testing.assert_allclose(gx, w * np.where(pos, 2 * xv * zv, -np.exp(xv)), **EXACT)
    np.testing.assert_allclose(gz, w * np.where(pos, xv ** 2, 1.0), **EXACT)


def test_local_reassigned_in_branches(rng):
    """A local assigned more than once outside loops becomes a stack: both paths replay."""
    x, z, y = grad_fields()
    xv, zv = away_from_zero(rng, 0.1, 2), rng.uniform(-2, 2, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            if v > 0.0:
                v = v * z[i]
            else:
                v = jr.exp(v) + z[i]
            v = v * v
            y[i] = v

    w = rng.uniform(-1, 1, N)
    gx, gz = run_grad(k, [x, z], y, w)
    pos = xv > 0
    inner = np.where(pos, xv * zv, np.exp(xv) + zv)
    np.testing.assert_allclose(gx, w * 2 * inner * np.where(pos, zv, np.exp(xv)), **EXACT)
    np.testing.assert_allclose(gz, w * 2 * inner * np.where(pos, xv, 1.0), **EXACT)
    np.testing.assert_allclose(gx, fd_elementwise(k, x, y, w), **FD)


# ---- global memory ----------------------------------------------------------------------------

def test_ndarray_arguments_with_needs_grad(rng):
    a = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)
    b = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)
    out = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)
    av, bv = rng.uniform(-2, 2, N), rng.uniform(0.5, 2, N)
    a.from_numpy(av)
    b.from_numpy(bv)

    @jr.kernel
    def k(p: nd(dtype=jr.f64, ndim=1), q: nd(dtype=jr.f64, ndim=1),
          o: nd(dtype=jr.f64, ndim=1), s: jr.f64):
        for i in range(p.shape[0]):
            o[i] = p[i] * p[i] * s / q[i]

    w = rng.uniform(-1, 1, N)
    ga, gb = run_grad(k, [a, b], out, w, a, b, out, 1.5)
    np.testing.assert_allclose(ga, w * 2 * av * 1.5 / bv, **EXACT)
    np.testing.assert_allclose(gb, -w * av ** 2 * 1.5 / bv ** 2, **EXACT)
    np.testing.assert_allclose(ga, fd_elementwise(k, a, out, w, a, b, out, 1.5), **FD)


def test_field_and_ndarray_mixed_in_one_kernel(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    a = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)
    y = jr.field(jr.f64, shape=(N,), needs_grad=True)
    xv, av = rng.uniform(-2, 2, N), rng.uniform(-2, 2, N)
    x.from_numpy(xv)
    a.from_numpy(av)

    @jr.kernel
    def k(p: nd(dtype=jr.f64, ndim=1)):
        for i in x:
            y[i] = jr.sin(x[i]) * p[i] + p[i] * p[i]

    w = rng.uniform(-1, 1, N)
    gx, ga = run_grad(k, [x, a], y, w, a)
    np.testing.assert_allclose(gx, w * np.cos(xv) * av, **EXACT)
    np.testing.assert_allclose(ga, w * (np.sin(xv) + 2 * av), **EXACT)


def test_store_to_shifted_index(rng):
    """y[i] = f(x[i + 1]): the load's adjoint goes to the element that was read."""
    x, _, y = grad_fields()
    xv = rng.uniform(-2, 2, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in range(N - 1):
            y[i] = x[i + 1] * x[i + 1] - x[i]

    w = rng.uniform(-1, 1, N)
    (gx,) = run_grad(k, [x], y, w)
    expect = np.zeros(N)
    expect[1:] += w[:-1] * 2 * xv[1:]
    expect[:-1] -= w[:-1]
    np.testing.assert_allclose(gx, expect, **EXACT)


def test_atomic_add_and_sub_into_scalar_loss(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    z = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv, zv = rng.uniform(-2, 2, N), rng.uniform(-2, 2, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            loss[None] += x[i] * x[i] * z[i]
            loss[None] -= jr.sin(z[i]) * 3.0
            jr.atomic_add(loss[None], x[i] * 0.5)

    def forward():
        loss[None] = 0.0
        k()
        return loss[None]

    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(loss[None], np.sum(xv ** 2 * zv - 3 * np.sin(zv) + 0.5 * xv),
                               rtol=1e-12)
    gx, gz = x.grad.to_numpy(), z.grad.to_numpy()
    np.testing.assert_allclose(gx, 2 * xv * zv + 0.5, **EXACT)
    np.testing.assert_allclose(gz, xv ** 2 - 3 * np.cos(zv), **EXACT)
    np.testing.assert_allclose(gz, fd_scalar(forward, z), **FD)


def test_plus_equals_into_vector_output(rng):
    """`y[i // 4] += ...` from many threads: every contributor gets the output's adjoint."""
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    y = jr.field(jr.f64, shape=(N // 4,), needs_grad=True)
    xv = rng.uniform(-2, 2, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            y[i // 4] += jr.exp(x[i] * 0.5)

    w = rng.uniform(-1, 1, N // 4)
    x.grad.fill(0)
    y.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.repeat(w, 4) * 0.5 * np.exp(0.5 * xv),
                               **EXACT)


def test_tape_on_f32_loss_matches_f64_reference(rng):
    x = jr.field(jr.f32, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, N).astype(np.float32)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            loss[None] += jr.tanh(x[i]) * x[i]

    with jr.ad.Tape(loss=loss):
        k()
    t = np.tanh(xv.astype(np.float64))
    np.testing.assert_allclose(x.grad.to_numpy(), (1 - t ** 2) * xv + t, rtol=1e-5, atol=1e-6)


# ---- @jr.func ----------------------------------------------------------------------------------

@jr.func
def sq(v):
    return v * v


@jr.func
def blend(a, b):
    t = sq(a) + a * b
    u = jr.sin(t)
    return u * b + sq(b)


def test_nested_funcs_with_locals(rng):
    x, z, y = grad_fields()
    xv, zv = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    z.from_numpy(zv)

    @jr.kernel
    def k():
        for i in x:
            y[i] = blend(x[i], z[i]) + sq(x[i] - z[i])

    w = rng.uniform(-1, 1, N)
    k()
    t = xv ** 2 + xv * zv
    np.testing.assert_allclose(y.to_numpy(), np.sin(t) * zv + zv ** 2 + (xv - zv) ** 2,
                               **EXACT)
    gx, gz = run_grad(k, [x, z], y, w)
    np.testing.assert_allclose(gx, w * (np.cos(t) * (2 * xv + zv) * zv + 2 * (xv - zv)),
                               **EXACT)
    np.testing.assert_allclose(gz, w * (np.cos(t) * xv * zv + np.sin(t) + 2 * zv
                                        - 2 * (xv - zv)), **EXACT)
    np.testing.assert_allclose(gz, fd_elementwise(k, z, y, w), **FD)


@jr.func
def accumulate(target: jr.template(), i, v):
    target[None] += v * v


def test_func_writing_through_a_template_parameter(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            accumulate(loss, i, jr.exp(x[i]))

    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.exp(2 * xv), **EXACT)


def test_grad_accumulates_across_launches(rng):
    """Two grad launches without clearing the inputs' gradients add up (the Tape is what
    clears); the output's seed is used up by the first (a store resets the gradient of what
    it overwrote, as in Taichi), so it is seeded again."""
    x, _, y = grad_fields()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            y[i] = x[i] * x[i] * x[i]

    w = rng.uniform(-1, 1, N)
    (g1,) = run_grad(k, [x], y, w)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0)
    y.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * g1, **EXACT)
    np.testing.assert_allclose(g1, w * 3 * xv ** 2, **EXACT)


def test_a_store_resets_the_gradient_it_overwrote():
    """Overwriting a value hides the earlier value from the result: three kernels each
    overwriting loss give x.grad from the last store only; an in-place update y = 2y + 1 gives
    dy_old = 2 (not 2 + the stale 1)."""
    x = jr.field(jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    y = jr.field(jr.f64, shape=4, needs_grad=True)

    @jr.kernel
    def scale(c: jr.f64):
        loss[None] = x[None] * c

    @jr.kernel
    def in_place():
        for i in y:
            y[i] = y[i] * 2.0 + 1.0

    @jr.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    x[None] = 1.0
    with jr.ad.Tape(loss=loss):
        scale(1.0)
        scale(2.0)
        scale(4.0)
    assert x.grad[None] == 4.0
    y.from_numpy(np.arange(4.0))
    with jr.ad.Tape(loss=loss):
        in_place()
        in_place()
        total()
    np.testing.assert_array_equal(y.grad.to_numpy(), 4.0)


def test_tape_clears_ndarray_gradients_between_tapes(rng):
    a = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    av = rng.uniform(-1, 1, N)
    a.from_numpy(av)

    @jr.kernel
    def k(p: nd(dtype=jr.f64, ndim=1)):
        for i in range(p.shape[0]):
            loss[None] += jr.sin(p[i]) * p[i]

    for _ in range(2):
        with jr.ad.Tape(loss=loss):
            k(a)
        np.testing.assert_allclose(a.grad.to_numpy(), np.cos(av) * av + np.sin(av), **EXACT)


def test_adjoint_of_a_conditional_expression_follows_the_branch_taken():
    """`x[i] if 0 <= i < n else 0.0` reads x only inside; its adjoint must not touch x.grad
    outside either (Taichi gives x.grad = 2x here)."""
    n = 4
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in range(n + 2):
            v = x[i] if 0 <= i < n else 0.0
            w = 3.0 if i >= n else x[i] * 0.5
            loss[None] += v * v + w

    x.from_numpy(np.arange(1, 5, dtype=np.float32))
    with jr.ad.Tape(loss=loss):
        k()
    jr.sync()
    assert loss[None] == pytest.approx(30.0 + 5.0 + 6.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(1, 5) + 0.5)
