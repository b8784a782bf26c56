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

