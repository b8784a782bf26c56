"""`jr.stop_grad(x)` (Taichi's `ti.stop_grad`): the reads of x in the block where it is called
(before and after the call, nested blocks and inlined funcs included) send no gradient into
x.grad, in reverse mode, and carry no tangent, in forward mode. Writes of x still pass x's
gradient on. The expected numbers are what Taichi 1.7.4 computes for the same kernels."""
import numpy as np
import pytest

import jitrt as jr

N = 4


@pytest.fixture
def data():
    x = jr.field(jr.f64, shape=N, needs_grad=True, needs_dual=True)
    y = jr.field(jr.f64, shape=N, needs_grad=True, needs_dual=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True, needs_dual=True)
    x.from_numpy(np.arange(N, dtype=np.float64))
    y.from_numpy(np.arange(N, dtype=np.float64))
    return x, y, loss


def x_grad(kernel, x, loss):
    with jr.ad.Tape(loss=loss):
        kernel()
    return x.grad.to_numpy()


def test_taichi_stop_grad_and_stop_grad2(data):
    """Taichi's tests/python/test_stop_grad.py: one loop with the stop, one without."""
    x, _, loss = data

    @jr.kernel
    def normal():
        for i in range(N):
            loss[None] += x[i] ** 2

    @jr.kernel
    def stopped():
        for i in range(N):
            jr.stop_grad(x)
            loss[None] += x[i] ** 2

    @jr.kernel
    def two_loops():
        for i in range(N):
            jr.stop_grad(x)
            loss[None] += x[i] ** 2
        for i in range(N):
            loss[None] += x[i] ** 2
    np.testing.assert_array_equal(x_grad(normal, x, loss), 2 * np.arange(N))
    np.testing.assert_array_equal(x_grad(stopped, x, loss), np.zeros(N))
    np.testing.assert_array_equal(x_grad(two_loops, x, loss), 2 * np.arange(N))
    assert loss[None] == 2 * float((np.arange(N) ** 2).sum())   # values are unchanged


def test_the_block_is_the_scope(data):
    x, y, loss = data

    @jr.kernel
    def after_the_read():                     # the whole block: reads before the call too
        for i in range(N):
            loss[None] += x[i] ** 2
            jr.stop_grad(x)

    @jr.kernel
    def kernel_level():                       # the kernel body: every loop, before and after
        for i in range(N):
            loss[None] += x[i] ** 2
        jr.stop_grad(x)
        for i in range(N):
            loss[None] += x[i] ** 3

    @jr.kernel
    def in_a_branch():                        # only that branch
        for i in range(N):
            if i > 1:
                jr.stop_grad(x)
                loss[None] += x[i] ** 2
            else:
                loss[None] += x[i] ** 2
            loss[None] += x[i] * y[i]

    @jr.kernel
    def in_an_inner_loop():                   # the inner loop's reads only
        for i in range(N):
            for _ in range(2):
                jr.stop_grad(x)
                loss[None] += x[i] ** 2
            loss[None] += x[i] ** 2

    @jr.func
    def stop_x():
        jr.stop_grad(x)

    @jr.kernel
    def in_a_func():                          # a func's body is part of its caller's block
        for i in range(N):
            loss[None] += x[i] ** 2
            stop_x()
    i = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(x_grad(after_the_read, x, loss), np.zeros(N))
    np.testing.assert_array_equal(x_grad(kernel_level, x, loss), np.zeros(N))
    np.testing.assert_array_equal(x_grad(in_a_branch, x, loss), np.where(i > 1, 0, 2 * i) + i)
    np.testing.assert_array_equal(x_grad(in_an_inner_loop, x, loss), 2 * i)
    np.testing.assert_array_equal(x_grad(in_a_func, x, loss), np.zeros(N))


def test_writes_still_pass_the_gradient_on(data):
    """Only reads stop: `x[i] = ...` sends x's gradient into its value as usual (Taichi 1.7.4
    gives the same zeros here: y's gradient reaches x[i] through a stopped read)."""
    x, y, _ = data

    @jr.kernel
    def k():
        for i in range(N):
            jr.stop_grad(x)
            y[i] = x[i] * 2.0
            x[i] = y[i] * 3.0
    k()
    x.grad.fill(1.0)
    y.grad.fill(0.0)
    k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(N))
    np.testing.assert_array_equal(y.grad.to_numpy(), np.zeros(N))

    @jr.kernel
    def unstopped():
        for i in range(N):
            y[i] = x[i] * 2.0
            x[i] = y[i] * 3.0
    x.grad.fill(1.0)
    unstopped.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 6.0))


def test_vector_fields_struct_fields_and_ndarrays():
    v = jr.Vector.field(2, jr.f64, shape=N, needs_grad=True)
    s = jr.Struct.field({"a": jr.f64, "b": jr.math.vec2}, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k(arr: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in range(N):
            jr.stop_grad(v)
            jr.stop_grad(s)
            jr.stop_grad(arr)
            loss[None] += v[i][0] * v[i][1] + s[i].a * s[i].b[1] + arr[i] ** 2
        for i in range(N):
            loss[None] += v[i][1] + arr[i]
    v.fill(2.0)
    s.fill(3.0)
    arr = jr.ndarray(jr.f64, shape=N, needs_grad=True)
    arr.fill(4.0)
    k(arr)
    loss.grad[None] = 1.0
    k.grad(arr)
    np.testing.assert_array_equal(v.grad.to_numpy(), np.tile([0.0, 1.0], (N, 1)))
    assert not s.members["a"].grad.to_numpy().any() and not s.members["b"].grad.to_numpy().any()
    np.testing.assert_array_equal(arr.grad.to_numpy(), np.ones(N))


def test_forward_mode_carries_no_tangent_through_stopped_reads(data):
    """As in Taichi 1.7.4 (its forward mode checks the same stops)."""
    x, y, loss = data

    @jr.kernel
    def k():
        for i in range(N):
            jr.stop_grad(x)
            loss[None] += x[i] ** 2
        for i in range(N):
            loss[None] += 3.0 * x[i]
    seed = [1.0, 2.0, 3.0, 4.0]
    with jr.ad.FwdMode(loss=loss, param=x, seed=seed):
        k()
    assert loss.dual[None] == 3.0 * sum(seed)


def test_misuse_is_a_located_compile_error(data):
    x, _, loss = data

    @jr.kernel
    def not_data():
        for i in range(N):
            jr.stop_grad(3.0)

    @jr.kernel
    def as_a_value():
        for i in range(N):
            a = jr.stop_grad(x)
            loss[None] += a

    @jr.kernel
    def two():
        for i in range(N):
            jr.stop_grad(x, loss)
    for kernel, words in ((not_data, r"jr.stop_grad\(\) takes a field or an ndarray, got "
                                     "float"),
                          (as_a_value, r"jr.stop_grad\(\) is a statement"),
                          (two, r"takes one field or ndarray, got 2 arguments")):
        with pytest.raises(jr.KernelCompileError, match=words) as info:
            kernel()
        assert info.value.line == kernel.fn.__code__.co_firstlineno + 3
    with pytest.raises(RuntimeError, match="only be used inside a jitrt kernel"):
        jr.stop_grad(x)
