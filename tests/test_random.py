"""jr.random(): uniform floats in [0, 1) (and integer bits), different per element, per call
and per launch, repeating exactly after jr.init(random_seed=...) on every arch."""
import numpy as np
import pytest

import jitrt as jr

N = 1 << 16
x = jr.field(jr.f32, shape=(N,))
pairs = jr.field(jr.f64, shape=(N, 2))
ints = jr.field(jr.i32, shape=(8,))


@jr.kernel
def draw():
    for i in x:
        x[i] = jr.random()
        for k in range(2):
            pairs[i, k] = jr.random(jr.f64)
    s = 0
    while s < 8:                       # serial code: the call counter still advances
        ints[s] = jr.random(jr.i32)
        s += 1


def test_uniform_and_distinct(arch):
    jr.init(arch=arch, offline_cache=False, random_seed=7)
    draw()
    a, p, i1 = x.to_numpy(), pairs.to_numpy(), ints.to_numpy().copy()
    assert 0.0 <= a.min() and a.max() < 1.0 and 0.0 <= p.min() and p.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.01 and abs(p.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(p[:, 0], p[:, 1])[0, 1]) < 0.02     # calls in one iteration differ
    assert len(np.unique(a)) > 0.99 * N
    assert len(set(i1.tolist())) == 8
    hist, _ = np.histogram(a, bins=16, range=(0, 1))
    assert hist.min() > 0.9 * N / 16
    draw()                                                     # the next launch differs
    assert (x.to_numpy() != a).mean() > 0.99
    jr.init(arch=arch, offline_cache=False, random_seed=7)    # the same seed: the same numbers
    draw()
    np.testing.assert_array_equal(x.to_numpy(), a)
    np.testing.assert_array_equal(ints.to_numpy(), i1)
    jr.init(arch=arch, offline_cache=False, random_seed=8)
    draw()
    assert (x.to_numpy() != a).mean() > 0.99


def test_bad_dtype_is_a_compile_error():
    @jr.kernel
    def k():
        for i in x:
            x[i] = jr.random("f32")
    with pytest.raises(jr.KernelCompileError, match="jitrt dtype"):
        k()


def test_randn_is_standard_normal():
    z = jr.field(jr.f64, shape=(N,))

    @jr.kernel
    def k():
        for i in z:
            z[i] = jr.randn(jr.f64)
    k()
    v = z.to_numpy()
    assert abs(v.mean()) < 0.02 and abs(v.std() - 1.0) < 0.02
    assert np.isfinite(v).all() and abs((np.abs(v) < 1).mean() - 0.6827) < 0.01


def test_two_calls_in_one_expression_differ():
    d = jr.field(jr.f64, shape=(N,))

    @jr.kernel
    def k():
        for i in d:
            d[i] = jr.random(jr.f64) - jr.random(jr.f64)
    k()
    v = d.to_numpy()
    assert (v != 0).all() and abs(v.mean()) < 0.01


def test_a_kernel_drawing_random_numbers_cannot_be_differentiated():
    """Its adjoint launch would draw other numbers than the forward launch (a silently wrong
    gradient before); Taichi refuses it too."""
    x = jr.field(jr.f32, shape=(), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def work():
        loss[None] = x[None] * jr.random()

    work()                                           # the forward kernel is fine
    with pytest.raises(jr.KernelCompileError, match="jr.random.*cannot be differentiated"):
        with jr.ad.Tape(loss=loss):
            work()


def test_reading_an_ndarrays_gradient_cannot_be_differentiated():
    """`c += x.grad[i] * x[i]` differentiated would read x.grad while adding into it (a result
    that depends on the order of the threads): refused, as Taichi does (a field's .grad is a
    field of its own, read as a constant: tests/test_peer_semantics.py)."""
    a = jr.ndarray(jr.f32, shape=4, needs_grad=True)
    c = jr.ndarray(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def kn(x: jr.types.ndarray(), c: jr.types.ndarray()):
        for i in range(x.shape[0]):
            c[None] += x.grad[i] * x[i]

    a.fill(3.0)
    a.grad.fill(2.0)
    kn(a, c)
    assert c.to_numpy() == 24.0
    c.grad.fill(1.0)
    with pytest.raises(jr.NotDifferentiableError, match="reads x.grad"):
        kn.grad(a, c)
    np.testing.assert_array_equal(a.grad.to_numpy(), [2.0] * 4)
