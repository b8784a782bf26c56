"""Atomics no other iteration races with are plain read-modify-writes (`private_refs` in
passes/reductions.py, Taichi's atomic demotion): `x.grad[f, p] += ...` in a loop over `p`, as
adjoints emit. Checked by the results and by whether the task's optimised IR still holds an
`atomicrmw` (an instruction kind, not LLVM's exact output)."""
import numpy as np
import pytest

import jitrt as jr

N = 64
pytestmark = pytest.mark.cpu_only


def atomics_in(kernel, *args) -> bool:
    return "atomicrmw" in jr.debug.optimized_ir(kernel, *args)


def test_own_index_accumulation_is_plain_and_correct():
    x = jr.field(jr.f32, shape=N)
    y = jr.field(jr.f32, shape=(3, N))
    lo = jr.field(jr.i32, shape=N)

    @jr.kernel
    def acc(f: jr.i32):
        for p in x:
            for j in range(3):
                y[f, p] += x[p] * j          # the same element per p: plain
            y[f, p] -= 1.0
            jr.atomic_min(lo[p], p - 5)

    x.from_numpy(np.arange(N, dtype=np.float32))
    lo.from_numpy(np.zeros(N, np.int32))
    acc(1)
    acc(1)
    expect = 2 * (3 * np.arange(N) - 1.0)
    np.testing.assert_allclose(y.to_numpy()[1], expect)
    assert not y.to_numpy()[[0, 2]].any()
    np.testing.assert_array_equal(lo.to_numpy(), np.minimum(0, np.arange(N) - 5))
    assert not atomics_in(acc, 1)


def test_gradients_use_plain_accumulation():
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def energy():
        for i in x:
            loss[None] += x[i] * x[i] * x[i]

    x.from_numpy(np.linspace(-1, 1, N))
    with jr.ad.Tape(loss=loss):
        energy()
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * np.linspace(-1, 1, N) ** 2)


@pytest.mark.parametrize("case", ["neighbour", "transposed", "reassigned", "ndarray"])
def test_shared_elements_stay_atomic(case):
    y = jr.field(jr.f32, shape=(N, N))
    a = jr.ndarray(jr.f32, shape=(N,))

    @jr.kernel
    def neighbour():
        for i in range(N - 1):
            y[i, 0] += 1.0
            y[i + 1, 0] += 1.0               # element i+1 is also iteration i+1's

    @jr.kernel
    def transposed():
        for i in range(N):
            for j in range(N):
                y[i, j] += 1.0
                y[j, i] += 1.0               # y[1, 2] is iteration 1's and iteration 2's

    @jr.kernel
    def reassigned():
        for i in range(N):
            i = (i * 7) % 3                  # noqa: PLW2901
            y[i, 0] += 1.0

    @jr.kernel
    def on_ndarray(b: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(N):
            b[i] += 1.0                      # an ndarray may be another argument's memory

    kernel, args = {"neighbour": (neighbour, ()), "transposed": (transposed, ()),
                    "reassigned": (reassigned, ()), "ndarray": (on_ndarray, (a,))}[case]
    assert atomics_in(kernel, *args)
    kernel(*args)
    got = a.to_numpy() if case == "ndarray" else y.to_numpy()
    column = np.zeros((N, N))
    hits = {"neighbour": list(range(N - 1)) + list(range(1, N)),
            "reassigned": [(i * 7) % 3 for i in range(N)]}.get(case, [])
    column[:, 0] = np.bincount(hits, minlength=N)
    expect = {"transposed": np.full((N, N), 2.0), "ndarray": np.ones(N)}.get(case, column)
    np.testing.assert_allclose(got, expect)
