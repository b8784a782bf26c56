"""Gradients through kernel-scope floats computed in serial code and read by later tasks."""
from __future__ import annotations

import numpy as np

import jitrt as jr

CLOSE = dict(rtol=1e-10, atol=1e-12)


def make(n: int = 64):
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    x = jr.field(jr.f64, shape=(n,), needs_grad=True)
    w = jr.field(jr.f64, shape=(2,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    return x, w, loss


def test_scope_value_read_by_two_parallel_loops(rng):
    x, w, loss = make()
    xv, wv = rng.uniform(-1, 1, 64), rng.uniform(0.5, 1.5, 2)
    x.from_numpy(xv)
    w.from_numpy(wv)

    @jr.kernel
    def k():
        a = jr.sin(w[0]) * w[1]
        for i in x:
            loss[None] += x[i] * a
        for i in x:
            loss[None] += a * a * x[i] * x[i]

    with jr.ad.Tape(loss=loss):
        k()
    a = np.sin(wv[0]) * wv[1]
    dlda = xv.sum() + 2 * a * (xv ** 2).sum()
    np.testing.assert_allclose(x.grad.to_numpy(), a + 2 * a * a * xv, **CLOSE)
    np.testing.assert_allclose(w.grad.to_numpy(), [dlda * np.cos(wv[0]) * wv[1],
                                                    dlda * np.sin(wv[0])], **CLOSE)


def test_scope_value_built_in_a_serial_loop(rng):
    """The defining serial task keeps the value on an adstack (assigned in a loop): the seed
    lands on the top entry and flows back through the recurrence."""
    x, w, loss = make()
    xv, wv = rng.uniform(-1, 1, 64), rng.uniform(0.5, 1.5, 2)
    x.from_numpy(xv)
    w.from_numpy(wv)

    @jr.kernel
    def k():
        s = w[0]
        jr.loop_config(serialize=True)
        for _ in range(3):
            s = s * w[1] + 0.1
        for i in x:
            loss[None] += x[i] * s

    with jr.ad.Tape(loss=loss):
        k()
    s, ds_dw0, ds_dw1 = wv[0], 1.0, 0.0
    for _ in range(3):
        s, ds_dw0, ds_dw1 = s * wv[1] + 0.1, ds_dw0 * wv[1], ds_dw1 * wv[1] + s
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(64, s), **CLOSE)
    np.testing.assert_allclose(w.grad.to_numpy(), [xv.sum() * ds_dw0, xv.sum() * ds_dw1],
                               **CLOSE)


def test_repeated_grad_launches_do_not_accumulate_stale_scope_adjoints(rng):
    x, w, loss = make()
    xv, wv = rng.uniform(-1, 1, 64), rng.uniform(0.5, 1.5, 2)
    x.from_numpy(xv)
    w.from_numpy(wv)

    @jr.kernel
    def k():
        a = w[0] * 2.0
        for i in x:
            loss[None] += x[i] * a

    for _ in range(3):
        with jr.ad.Tape(loss=loss):
            k()
        np.testing.assert_allclose(w.grad[0], 2.0 * xv.sum(), **CLOSE)



def test_scope_value_reassigned_by_a_later_serial_task():
    """`s` read by one loop, then assigned again (from other data) and read by a later loop:
    each definition gets the adjoints of its own readers only (was [8, 6], both loops' share
    reaching x[0])."""
    x, w, loss = make(2)
    x.from_numpy(np.array([1.0, 3.0]))

    @jr.kernel
    def k():
        s = x[0]
        for _ in range(2):
            loss[None] += s * s
        s = x[1]
        for _ in range(1):
            loss[None] += s * s

    with jr.ad.Tape(loss=loss):
        k()
    assert loss[None] == 2 * 1.0 + 9.0
    np.testing.assert_allclose(x.grad.to_numpy(), [4.0, 6.0], **CLOSE)


def test_scope_value_updated_from_its_old_value_and_in_a_branch():
    """A later serial task reading the old value (`s = s * s`) or assigning it in one branch
    only passes the old definition its share through a copy."""
    x, w, loss = make(2)

    @jr.kernel
    def k() -> jr.f64:
        s = x[0]
        for _ in range(1):
            loss[None] += s
        if x[1] > 100.0:
            s = x[1] * 3.0
        for _ in range(2):
            loss[None] += s
        s = s * s
        for _ in range(1):
            loss[None] += s
        return s

    for xv, ret, grad in (([1.0, 200.0], 360000.0, [1.0, 6.0 + 2 * 600.0 * 3.0]),
                          ([2.0, 2.0], 4.0, [1.0 + 2.0 + 2 * 2.0, 0.0])):
        x.from_numpy(np.array(xv))
        with jr.ad.Tape(loss=loss):
            assert k() == ret
        np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)


def test_scope_reduction_that_starts_from_data():
    """`s = x[0]; for ...: s += y[i]` then a loop reading `s`: the value offload loads back
    after the reduction is a definition of its own (x[0] used to get the adjoint twice)."""
    x, w, loss = make(2)
    x.from_numpy(np.array([1.0, 2.0]))
    w.from_numpy(np.array([0.5, 0.25]))

    @jr.kernel
    def k():
        s = x[0]
        for i in range(2):
            s += w[i]
        for _ in range(1):
            loss[None] += s * 3.0

    with jr.ad.Tape(loss=loss):
        k()
    assert loss[None] == (1.0 + 0.75) * 3.0
    np.testing.assert_allclose(x.grad.to_numpy(), [3.0, 0.0], **CLOSE)
    np.testing.assert_allclose(w.grad.to_numpy(), [3.0, 3.0], **CLOSE)
