"""Atomics no other iteration races with are plain read-modify-writes (`private_refs` in
passes/reductions.py, Taichi's atomic demotion): `x.grad[f, p] += ...` in a loop over `p`, as
adjoints emit. Checked by the results and by whether the task's optimised IR still holds an
`atomicrmw` (an instruction kind, not LLVM's exact output). Ndarrays (`private_arrays`) are
plain in the task's fast loop only in launches where no other written array shares their
memory; the checked loop keeps the atomics."""
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


@pytest.mark.parametrize("case", ["neighbour", "transposed", "reassigned"])
def test_shared_elements_stay_atomic(case):
    y = jr.field(jr.f32, shape=(N, N))

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

    kernel = {"neighbour": neighbour, "transposed": transposed, "reassigned": reassigned}[case]
    assert atomics_in(kernel)
    kernel()
    column = np.zeros((N, N))
    hits = {"neighbour": list(range(N - 1)) + list(range(1, N)),
            "reassigned": [(i * 7) % 3 for i in range(N)]}.get(case, [])
    column[:, 0] = np.bincount(hits, minlength=N)
    expect = {"transposed": np.full((N, N), 2.0)}.get(case, column)
    np.testing.assert_allclose(y.to_numpy(), expect)


def task_functions(ir_text: str) -> dict[str, str]:
    """The optimised IR's function bodies by name (`define ... @name(` up to its `}`)."""
    found, name, lines = {}, None, []
    for line in ir_text.splitlines():
        if line.startswith("define "):
            name, lines = line.split("@", 1)[1].split("(", 1)[0], []
        elif line == "}" and name is not None:
            found[name], name = "\n".join(lines), None
        elif name is not None:
            lines.append(line)
    return found


ND = jr.types.ndarray(dtype=jr.f32, ndim=1)


@jr.kernel
def bump(b: ND):
    for i in range(b.shape[0]):
        b[i] += 1.0


@jr.kernel
def bump_both(a: ND, b: ND):
    for i in range(a.shape[0]):
        a[i] += 1.0
        b[i] += 2.0                          # may be a's memory, one element on


def test_own_index_ndarray_update_is_plain_in_the_fast_loop():
    a = jr.ndarray(jr.f32, shape=(4096,))
    for _ in range(3):
        bump(a)
    np.testing.assert_array_equal(a.to_numpy(), np.full(4096, 3.0))
    tasks = task_functions(jr.debug.optimized_ir(bump, a))
    fast = [body for name, body in tasks.items() if name.endswith("_task0")]
    checked = [body for name, body in tasks.items() if name.endswith("_task0_checked")]
    assert len(fast) == 1 and "atomicrmw" not in fast[0]
    assert len(checked) == 1 and "atomicrmw" in checked[0]     # the loop that reports faults


def test_views_of_one_buffer_keep_their_atomics():
    """Two written ndarrays that are overlapping views of one numpy buffer: the entry test
    sends the launch to the loop with atomics, and no update is lost."""
    n = 1 << 16
    for _ in range(4):
        buf = np.zeros(n + 1, np.float32)
        bump_both(buf[:-1], buf[1:])
        expect = np.full(n + 1, 3.0, np.float32)
        expect[0], expect[-1] = 1.0, 2.0
        np.testing.assert_array_equal(buf, expect)
    apart = np.zeros(2 * n, np.float32)
    bump_both(apart[:n], apart[n:])          # disjoint views: the fast loop
    np.testing.assert_array_equal(apart, np.repeat(np.float32([1, 2]), n))
