"""Reverse mode through jr.atomic_min/atomic_max reductions (the tie rule of docs/adstack.md,
"Derivatives at awkward points") and the refusal of atomics whose used value would need a
derivative the reverse pass cannot recover."""
import numpy as np
import pytest

import jitrt as jr


def test_atomic_max_sends_the_adjoint_to_the_arg_max_split_among_ties(arch):
    x = jr.field(jr.f64, shape=5, needs_grad=True)
    top = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            jr.atomic_max(top[None], 2.0 * x[i])

    x.from_numpy(np.array([0.1, 0.5, 0.3, 0.5, -1.0]))
    top[None] = -100.0
    k()
    assert top[None] == 1.0
    top.grad[None] = 1.0
    k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), [0.0, 1.0, 0.0, 1.0, 0.0])
    assert top.grad[None] == 0.0      # the previous value lost: its adjoint is used up


def test_atomic_min_per_element_and_previous_value_that_wins(arch):
    x = jr.field(jr.f64, shape=5, needs_grad=True)
    y = jr.field(jr.f64, shape=2, needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            jr.atomic_min(y[i % 2], x[i] * x[i])

    x.from_numpy(np.array([0.1, 0.5, -0.1, 0.5, -1.0]))
    y.from_numpy(np.array([0.005, 100.0]))
    k()
    np.testing.assert_allclose(y.to_numpy(), [0.005, 0.25])
    y.grad.from_numpy(np.array([1.0, 10.0]))
    k.grad()
    # y[0] kept its previous value (0.005 < 0.01): x gets nothing, y.grad[0] stays;
    # y[1] = x[1]^2 = x[3]^2: the two ties share 10, times d(x^2)/dx = 1
    np.testing.assert_allclose(x.grad.to_numpy(), [0.0, 5.0, 0.0, 5.0, 0.0])
    np.testing.assert_allclose(y.grad.to_numpy(), [1.0, 0.0])
    k.grad()                          # the scratch was cleared: nothing more flows
    np.testing.assert_allclose(x.grad.to_numpy(), [0.0, 5.0, 0.0, 5.0, 0.0])


def test_atomic_max_from_an_inner_loop_and_a_local_reduction(arch):
    x = jr.field(jr.f64, shape=(3, 4), needs_grad=True)
    rowmax = jr.field(jr.f64, shape=3, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def rows():
        for i in range(3):
            for j in range(4):
                jr.atomic_max(rowmax[i], jr.sin(x[i, j]))

    @jr.kernel
    def smallest():
        s = 1e9
        for i in range(3):
            jr.atomic_min(s, x[i, 0])
        loss[None] = 3.0 * s

    a = np.array([[0.1, 0.9, 0.2, 0.4], [1.0, 1.0, -0.5, 0.0], [0.3, 0.2, 0.1, 1.2]])
    x.from_numpy(a)
    rowmax.fill(-10.0)
    rows()
    rowmax.grad.from_numpy(np.array([1.0, 2.0, 3.0]))
    rows.grad()
    expect = np.zeros((3, 4))
    expect[0, 1] = np.cos(0.9)
    expect[1, 0] = expect[1, 1] = np.cos(1.0)      # a tie: 2.0 split in two
    expect[2, 3] = 3 * np.cos(1.2)
    np.testing.assert_allclose(x.grad.to_numpy(), expect, rtol=1e-12)
    x.grad.fill(0)
    with jr.ad.Tape(loss=loss):
        smallest()
    assert loss[None] == pytest.approx(0.3)
    expect = np.zeros((3, 4))
    expect[0, 0] = 3.0
    np.testing.assert_allclose(x.grad.to_numpy(), expect)


def test_used_value_of_a_float_atomic_is_refused(arch):
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    a = jr.field(jr.f64, shape=1, needs_grad=True)
    out = jr.field(jr.f64, shape=4, needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            old = jr.atomic_min(a[0], x[i] * 3.0)
            out[i] = old * old

    k()
    with pytest.raises(jr.KernelCompileError) as info:
        k.grad()
    message = str(info.value)
    assert "atomic_min" in message and "order the threads ran in" in message
    assert "k.grad" in message and "old = jr.atomic_min(a[0], x[i] * 3.0)" in message


def test_integer_tickets_and_constant_atomics_stay_differentiable(arch):
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    out = jr.field(jr.f64, shape=4, needs_grad=True)
    count = jr.field(jr.i32, shape=())
    hits = jr.field(jr.f64, shape=())          # no gradient, constant operand

    @jr.kernel
    def k():
        for i in x:
            jr.atomic_add(count[None], 1)
            h = jr.atomic_add(hits[None], 1.0)
            out[i] = x[i] * 2.0 + h * 0.0

    k()
    out.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0] * 4)


def test_ndarray_destination_of_atomic_max_is_refused(arch):
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    top = jr.ndarray(jr.f64, shape=(1,), needs_grad=True)

    @jr.kernel
    def k(t: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in x:
            jr.atomic_max(t[0], x[i])

    k(top)
    with pytest.raises(jr.KernelCompileError, match="atomic_max into the ndarray 't'"):
        k.grad(top)


def test_forward_mode_refuses_a_used_atomic_value_with_a_tangent(arch):
    x = jr.field(jr.f64, shape=4, needs_dual=True)
    a = jr.field(jr.f64, shape=1)
    out = jr.field(jr.f64, shape=4, needs_dual=True)

    @jr.kernel
    def k():
        for i in x:
            old = jr.atomic_min(a[0], x[i] * 3.0)
            out[i] = old

    with pytest.raises(jr.KernelCompileError, match="forward mode cannot differentiate the "
                       "value jr.atomic_min returns"):
        with jr.ad.FwdMode(loss=out, param=x, seed=[1.0] * 4):
            k()
