"""Reductions into kernel-scope locals in parallel loops (`s = 0.0; for i in x: s += x[i]`).

Values are checked against numpy; gradients against analytic derivatives and central finite
differences in f64. A loop that assigns such a local otherwise (plain assignment, reads inside
the loop, mixed kinds) runs serially, in order, with a logged warning naming the reason.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import jitrt as jr

THIS_FILE = os.path.abspath(__file__)
with open(THIS_FILE) as _f:
    FILE_LINES = _f.read().splitlines()
CLOSE = {"rtol": 1e-10, "atol": 1e-12}
N = 1000


def marker(tag: str) -> int:
    hits = [k + 1 for k, text in enumerate(FILE_LINES) if text.rstrip().endswith("# @" + tag)]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


@pytest.fixture(autouse=True)
def f64_literals(fresh_program, arch):
    program = jr.init(arch=arch, offline_cache=False, enable_fallback=False, default_fp=jr.f64)
    yield program
    jr.reset()


def filled(rng, dtype=jr.f64, n=N, low=-1.0, high=1.0):
    x = jr.field(dtype, shape=n)
    values = rng.uniform(low, high, n) if dtype.is_float else rng.integers(-50, 50, n)
    x.from_numpy(values.astype(x.to_numpy().dtype))
    return x, x.to_numpy()


def test_sum_returned(rng):
    x, xv = filled(rng)

    @jr.kernel
    def total() -> jr.f64:
        s = 0.0
        for i in x:
            s += x[i]
        return s
    np.testing.assert_allclose(total(), xv.sum(), **CLOSE)
    np.testing.assert_allclose(total(), xv.sum(), **CLOSE)   # the buffer starts again


def test_sub_add_and_start_value(rng):
    x, xv = filled(rng)

    @jr.kernel
    def k(start: jr.f64) -> jr.f64:
        s = start
        for i in x:
            if x[i] > 0:
                s += x[i]
            else:
                s -= 2.0 * x[i]
        return s
    expected = 3.5 + np.where(xv > 0, xv, -2 * xv).sum()
    np.testing.assert_allclose(k(3.5), expected, **CLOSE)


@pytest.mark.parametrize("dtype", [jr.i32, jr.i64, jr.f32])
def test_int_and_f32_sums(rng, dtype):
    x, xv = filled(rng, dtype)

    out = jr.field(dtype, shape=())

    @jr.kernel
    def k():
        s = jr.cast(0, dtype)
        for i in x:
            s += x[i]
        out[None] = s
    k()
    if dtype.is_float:
        np.testing.assert_allclose(out[None], xv.astype(np.float64).sum(), rtol=1e-5)
    else:
        assert out[None] == int(xv.sum())


def test_atomic_builtins_on_locals(rng):
    x, xv = filled(rng)
    out = jr.field(jr.f64, shape=4)

    @jr.kernel
    def k():
        lo = 1e30
        hi = -1e30
        s = 0.0
        c = 0
        for i in x:
            jr.atomic_min(lo, x[i])
            jr.atomic_max(hi, x[i])
            jr.atomic_add(s, x[i] * x[i])
            jr.atomic_sub(c, 1)
        out[0] = lo
        out[1] = hi
        out[2] = s
        out[3] = c
    k()
    np.testing.assert_allclose(out.to_numpy(), [xv.min(), xv.max(), (xv * xv).sum(), -N],
                               **CLOSE)


def test_int_min_max_and_2d_loop(rng):
    a = jr.field(jr.i32, shape=(30, 40))
    av = rng.integers(-1000, 1000, (30, 40)).astype(np.int32)
    a.from_numpy(av)

    @jr.kernel
    def k() -> jr.i32:
        lo = 1 << 30
        hi = -(1 << 30)
        for i, j in a:
            jr.atomic_min(lo, a[i, j])
            jr.atomic_max(hi, a[i, j])
        return hi - lo
    assert k() == av.max() - av.min()


def test_vector_local_component_wise(rng):
    p = jr.Vector.field(3, jr.f64, shape=N)
    pv = rng.uniform(-1, 1, (N, 3))
    p.from_numpy(pv)
    out = jr.Vector.field(3, jr.f64, shape=2)

    @jr.kernel
    def centroid() -> jr.math.vec3:
        c = jr.math.vec3(0.0)
        hi = jr.math.vec3(-10.0)
        for i in p:
            c += p[i]
            c -= 0.5 * p[i]
            jr.atomic_max(hi, p[i])
        out[0] = hi
        c += c                       # serial: reads all of c before writing
        out[1] = c
        return c / N
    np.testing.assert_allclose(centroid(), pv.mean(axis=0), **CLOSE)
    np.testing.assert_allclose(out.to_numpy(), [pv.max(axis=0), pv.sum(axis=0)], **CLOSE)


def test_loops_in_sequence_and_broadcast(rng):
    """The mean from one loop is read (by value) in the next, which reduces another local."""
    x, xv = filled(rng)

    @jr.kernel
    def variance() -> jr.f64:
        s = 0.0
        for i in x:
            s += x[i]
        mean = s / N
        v = 0.0
        for i in x:
            v += (x[i] - mean) ** 2
        for i in x:
            v += 0.0 * x[i]
        s = 0.0
        for i in range(N):
            s += 1.0
        return v / N + s - N
    np.testing.assert_allclose(variance(), xv.var(), **CLOSE)


def test_reduction_in_nested_serial_loop_and_func(rng):
    a = jr.field(jr.f64, shape=(20, 30))
    av = rng.uniform(-1, 1, (20, 30))
    a.from_numpy(av)

    @jr.func
    def add_row(s: jr.template(), i):
        for j in range(30):
            s += a[i, j] * j

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in range(20):
            add_row(s, i)
        return s
    np.testing.assert_allclose(k(), (av * np.arange(30)).sum(), **CLOSE)


def test_ndarray_and_serial_atomic_value():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f64, ndim=1)) -> jr.f64:
        s = 1.0
        old = jr.atomic_add(s, 2.0)      # serial code: the old value, as for fields
        for i in range(a.shape[0]):
            s += a[i]
        return s * 10.0 + old
    a = np.arange(100, dtype=np.float64)
    np.testing.assert_allclose(k(a), (3.0 + a.sum()) * 10.0 + 1.0, **CLOSE)


# ---- refusals --------------------------------------------------------------------------------

def refused(kernel, *args) -> jr.KernelCompileError:
    with pytest.raises(jr.KernelCompileError) as info:
        kernel(*args)
    assert info.value.filename == THIS_FILE
    return info.value


def serial(kernel, caplog, *args):
    """The kernel's value, and the warning that its loop ran serially (logged once)."""
    caplog.clear()
    with caplog.at_level("WARNING", logger="jitrt"):
        value = kernel(*args)
    [record] = [r for r in caplog.records if "runs serially" in r.getMessage()]
    return value, record.getMessage()


def test_plain_assignment_runs_the_loop_serially(caplog):
    x = jr.field(jr.f64, shape=8)
    x.from_numpy(np.arange(8.0))

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in x:
            s = s + x[i]  # @plain
        return s
    value, message = serial(k, caplog)
    assert value == 28.0
    assert f"{THIS_FILE}:{marker('plain') - 1}:" in message      # the loop's line
    assert "'s' is a kernel-scope variable" in message and "s += v" in message


def test_multiply_runs_the_loop_serially(caplog):
    x = jr.field(jr.f64, shape=8)
    x.from_numpy(np.arange(1.0, 9.0))

    @jr.kernel
    def k() -> jr.f64:
        s = 1.0
        for i in x:
            s *= x[i]
        return s
    assert serial(k, caplog)[0] == 40320.0


def test_read_inside_loop_runs_it_serially_in_order(caplog):
    x = jr.field(jr.f64, shape=8)
    x.from_numpy(np.ones(8))

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in x:
            s += x[i]
            x[i] = s
        return s
    value, message = serial(k, caplog)
    assert value == 8.0 and "reduced by this loop" in message
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1.0, 9.0))   # a scan


def test_old_value_inside_loop_runs_it_serially(caplog):
    x = jr.field(jr.f64, shape=8)

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in x:
            x[i] = jr.atomic_add(s, 1.0)
        return s
    assert serial(k, caplog)[0] == 8.0
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8.0))


def test_mixed_kinds_run_serially(caplog):
    x = jr.field(jr.f64, shape=8)
    x.from_numpy(np.arange(8.0))

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in x:
            s += x[i]
            jr.atomic_max(s, 100.0)
        return s
    value, message = serial(k, caplog)
    assert value == 128.0 and "add and max" in message     # 100 after i = 0, then + 1..7


def test_loop_writing_distinct_components_of_a_kernel_scope_vector(caplog):
    @jr.kernel
    def k() -> jr.types.vector(3, jr.i32):
        tmp = jr.Vector([1, 2, 3])
        for i in range(3):
            tmp[i] = tmp[i] * 10 + i
        return tmp
    np.testing.assert_array_equal(serial(k, caplog)[0], [10, 21, 32])


def test_bitwise_reductions_of_integer_locals_stay_parallel(caplog):
    @jr.kernel
    def k() -> jr.math.ivec3:
        a, o, x = 1023, 0, 1023
        for i in range(10):
            jr.atomic_and(a, 2147483647 - 2 ** i)
            o |= 2 ** i
            x ^= 2 ** i
        return jr.Vector([a, o, x])
    with caplog.at_level("WARNING", logger="jitrt"):
        np.testing.assert_array_equal(k(), [0, 1023, 0])
    assert not [r for r in caplog.records if "runs serially" in r.getMessage()]


def test_atomic_on_unknown_name_is_refused():
    @jr.kernel
    def k():
        for i in range(4):
            jr.atomic_add(N, 1.0)  # @unknown
    err = refused(k)
    assert err.line == marker("unknown") and "'N' is not a local variable" in err.reason


def test_serialized_loop_still_plain():
    x = jr.field(jr.f64, shape=8)
    x.from_numpy(np.arange(8.0))

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        jr.loop_config(serialize=True)
        for i in x:
            s = s * 0.5 + x[i]
        return s
    expected = 0.0
    for v in range(8):
        expected = expected * 0.5 + v
    np.testing.assert_allclose(k(), expected, **CLOSE)


# ---- gradients -------------------------------------------------------------------------------

def finite_difference(run, x, xv, k, h=1e-6):
    plus, minus = xv.copy(), xv.copy()
    plus[k] += h
    minus[k] -= h
    x.from_numpy(plus)
    fp = run()
    x.from_numpy(minus)
    fm = run()
    x.from_numpy(xv)
    return (fp - fm) / (2 * h)


def test_gradient_through_square_of_sum(rng):
    x = jr.field(jr.f64, shape=64, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, 64)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        s = 0.5
        for i in x:
            s += x[i] * x[i]
        loss[None] = s * s

    def run():
        k()
        return loss[None]
    with jr.ad.Tape(loss=loss):
        k()
    s = 0.5 + (xv * xv).sum()
    np.testing.assert_allclose(loss[None], s * s, **CLOSE)
    grad = x.grad.to_numpy()
    np.testing.assert_allclose(grad, 4 * s * xv, **CLOSE)
    for k_ in (0, 17, 63):
        np.testing.assert_allclose(grad[k_], finite_difference(run, x, xv, k_), rtol=1e-6)


def test_gradient_through_chained_loops(rng):
    """A mean reduced in one loop, read by value in the next, which reduces again."""
    x = jr.field(jr.f64, shape=50, needs_grad=True)
    w = jr.field(jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, 50)
    x.from_numpy(xv)
    w[None] = 0.7

    @jr.kernel
    def k():
        s = w[None]
        for i in x:
            s -= x[i]
        m = jr.sin(s)
        v = 0.0
        for i in x:
            v += (x[i] - m) ** 2
        loss[None] = v

    def run():
        k()
        return loss[None]
    with jr.ad.Tape(loss=loss):
        k()
    grad, wgrad = x.grad.to_numpy(), w.grad[None]
    for k_ in (0, 9, 49):
        np.testing.assert_allclose(grad[k_], finite_difference(run, x, xv, k_), rtol=1e-6)
    h = 1e-6
    w[None] = 0.7 + h
    fp = run()
    w[None] = 0.7 - h
    fm = run()
    np.testing.assert_allclose(wgrad, (fp - fm) / (2 * h), rtol=1e-6)


def test_gradient_of_returned_sum_is_nothing(rng):
    """As for any kernel return value, `return s` carries no gradient: .grad runs and leaves
    the gradients untouched."""
    x = jr.field(jr.f64, shape=16, needs_grad=True)
    x.from_numpy(rng.uniform(-1, 1, 16))

    @jr.kernel
    def k() -> jr.f64:
        s = 0.0
        for i in x:
            s += x[i]
        return s
    k()
    k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(16))


def test_forward_mode_tangent_of_a_reduction(rng):
    x = jr.field(jr.f64, shape=50, needs_dual=True)
    loss = jr.field(jr.f64, shape=(), needs_dual=True)
    xv, u = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        s = 0.5
        for i in x:
            s += x[i] * x[i]
            s -= 0.1 * x[i]
            s += 1.0
        loss[None] = s * s
    with jr.ad.FwdMode(loss=loss, param=x, seed=list(u)):
        k()
    s = 0.5 + (xv * xv).sum() - 0.1 * xv.sum() + 50
    np.testing.assert_allclose(loss[None], s * s, **CLOSE)
    np.testing.assert_allclose(loss.dual[None], 2 * s * ((2 * xv - 0.1) * u).sum(), **CLOSE)


def test_gradient_of_mean_of_positive_values(rng):
    """An int count and a float sum reduced in one loop; the loss divides them."""
    x = jr.field(jr.f64, shape=40, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, 40)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        s = 0.0
        c = 0
        for i in x:
            if x[i] > 0:
                s += x[i] ** 3
                c += 1
        loss[None] = s / c

    with jr.ad.Tape(loss=loss):
        k()
    pos = xv > 0
    np.testing.assert_allclose(loss[None], (xv[pos] ** 3).sum() / pos.sum(), **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), np.where(pos, 3 * xv ** 2 / pos.sum(), 0.0),
                               **CLOSE)
