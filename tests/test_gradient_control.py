"""The peers' gradient controls: @jr.ad.no_grad kernels, @jr.ad.grad_replaced functions with a
@jr.ad.grad_for backward (checkpointing), jr.ad.clear_all_gradients, Tape(clear_gradients=)."""
import numpy as np
import pytest

import jitrt as jr

N = 8


def make():
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    y = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    @jr.kernel
    def total():
        for i in y:
            loss[None] += y[i]
    return x, y, loss, square, total


def test_no_grad_kernels_are_not_recorded():
    x, y, loss, square, total = make()
    calls = jr.field(jr.i32, shape=())

    @jr.ad.no_grad
    @jr.kernel
    def count():
        calls[None] += 1

    x.from_numpy(np.arange(N, dtype=np.float64))
    with jr.ad.Tape(loss=loss):
        square()
        count()
        total()
    assert calls[None] == 1                        # it ran forward, once
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(N))
    count.grad()                                   # nothing to do


def test_grad_replaced_runs_the_users_backward():
    x, y, loss, square, total = make()
    seen = []

    @jr.ad.grad_replaced
    def forward(scale):
        square()                                   # not recorded by itself
        seen.append(("forward", scale))

    @jr.ad.grad_for(forward)
    def backward(scale):
        seen.append(("backward", scale))
        square()                                   # recompute (checkpointing), then its grad
        square.grad()

    x.from_numpy(np.arange(N, dtype=np.float64))
    with jr.ad.Tape(loss=loss):
        forward(3)
        total()
    assert seen == [("forward", 3), ("backward", 3)]
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(N))
    forward(4)                                     # outside a Tape: just the function
    assert seen[-1] == ("forward", 4)

    @jr.ad.grad_replaced
    def lonely():
        pass
    with pytest.raises(jr.AutodiffError, match="no @jr.ad.grad_for"):
        with jr.ad.Tape(loss=loss):
            lonely()
    with pytest.raises(jr.AutodiffError, match="grad_replaced"):
        jr.ad.grad_for(square)


def test_clear_all_gradients_and_tape_without_clearing():
    x, y, loss, square, total = make()
    x.from_numpy(np.ones(N))
    with jr.ad.Tape(loss=loss):
        square()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0)
    with jr.ad.Tape(loss=loss, clear_gradients=False):   # accumulates onto the last one
        square()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 4.0)
    jr.ad.clear_all_gradients()
    assert not x.grad.to_numpy().any() and not y.grad.to_numpy().any()


def test_entering_a_tape_zeroes_its_loss():
    """As Taichi's Tape: a step that adds into the loss computes it afresh each time (it grew
    by one step's loss per Tape before)."""
    x, y, loss, square, total = make()
    x.from_numpy(np.full(N, 2.0))
    losses = []
    for _ in range(3):
        with jr.ad.Tape(loss=loss):
            square()
            total()
        losses.append(loss[None])
    assert losses == [4.0 * N] * 3
    np.testing.assert_allclose(x.grad.to_numpy(), 4.0)
    nd_loss = jr.ndarray(jr.f64, shape=(), needs_grad=True)
    nd_loss.fill(5.0)
    with jr.ad.Tape(loss=nd_loss):
        pass
    assert nd_loss.to_numpy() == 0.0


def test_constant_loop_bounds_need_no_adstack():
    """Loops with constant bounds record nothing: a kernel with no loop state runs its grad
    even with a forced adstack capacity of 1 (it overflowed before)."""
    jr.init(offline_cache=False, ad_stack_size=1)
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            for j in range(4):
                for m in range(3):
                    loss[None] += x[i] * j * m
    x.from_numpy(np.ones(N))
    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 18.0)


def test_no_grad_on_a_python_function_and_grad_of_a_replaced_function():
    """As Taichi: @no_grad on a Python function makes it one Tape step with an empty
    backward; a @grad_replaced function's `.grad(...)` runs its @grad_for backward."""
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    total = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def func(mul: jr.f32):
        for i in range(4):
            jr.atomic_add(total[None], x[i] * mul)

    @jr.ad.no_grad
    def skipped(mul):
        func(mul)
        func(mul)

    with jr.ad.Tape(loss=total):
        skipped(4)
        func(5)
    assert x.grad.to_numpy().tolist() == [5.0] * 4
    assert total[None] == 0.0                      # x is 0: only the recorded structure counts

    @jr.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @jr.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)

    x.grad.fill(0.0)
    total.grad[None] = 1.0
    forward(4)
    forward.grad(4)
    assert x.grad.to_numpy().tolist() == [4.0] * 4
    with pytest.raises(TypeError, match="no_grad goes on"):
        jr.ad.no_grad(3)
