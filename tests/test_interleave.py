"""Interleaved iterations on the CPU (passes/interleave.py): a parallel task whose body runs an
inner loop executes `Target.lanes` consecutive indices per pass of its body, in the loop copy
without bounds checks. Every kernel here is checked against numpy at sizes that leave 0 to 3
indices to the one-at-a-time tail, and the rewrite is checked to have been applied (or not)."""
import numpy as np
import pytest

import jitrt as jr
from jitrt.codegen import kernel_module
from jitrt.runtime.adstack import SLICE_ALIGN, AdStackHeap

from test_adstack_sizing import make_problem, sin_recurrence

nd = jr.types.ndarray
SIZES = (1, 3, 4, 5, 7, 64, 1023)


@pytest.fixture
def applied(monkeypatch):
    """The tasks interleaving was asked about: (task, whether it was interleaved). With tiered
    compilation the optimised copies (the interleaved ones) are built on the background
    thread: read it after `jr.sync()`."""
    seen: list[tuple[object, bool]] = []
    real = kernel_module.interleaved_body     # (codegen asks where the body cannot fault)

    def spy(em, task):
        found = real(em, task)
        seen.append((task, found is not None))
        return found
    monkeypatch.setattr(kernel_module, "interleaved_body", spy)
    jr.init(arch=jr.cpu, offline_cache=False)
    yield seen
    jr.reset()


def test_the_cpu_target_interleaves_and_gpus_do_not():
    jr.init(arch=jr.cpu, offline_cache=False)
    from jitrt.runtime import program
    assert program.current().device.codegen_target.lanes == 4
    from jitrt.backends import amdgcn, nvptx
    assert nvptx.codegen_target().lanes == 1 and amdgcn.codegen_target().lanes == 1
    jr.reset()


@pytest.mark.parametrize("n", SIZES)
def test_trip_counts_that_differ_per_lane(applied, n):
    @jr.kernel
    def chain(x: nd(dtype=jr.f64, ndim=1), cnt: nd(dtype=jr.i32, ndim=1),
              out: nd(dtype=jr.f64, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            out[i] = v

    rng = np.random.default_rng(n)
    x, cnt = rng.random(n), rng.integers(0, 9, n).astype(np.int32)
    out = np.zeros(n)
    chain(x, cnt, out)
    want, _ = sin_recurrence(x, cnt)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    jr.sync()
    assert [ok for _, ok in applied] == [True]


@pytest.mark.parametrize("n", (5, 64))
def test_begins_and_ends_that_differ_per_lane_and_the_loop_variable(applied, n):
    @jr.kernel
    def spans(lo: nd(dtype=jr.i32, ndim=1), hi: nd(dtype=jr.i32, ndim=1),
              out: nd(dtype=jr.i64, ndim=1), last: nd(dtype=jr.i32, ndim=1)):
        for i in range(lo.shape[0]):
            s = 0
            at = -1
            for j in range(lo[i], hi[i]):
                s = s * 3 + j
                at = j         # the loop's variable is its own: not readable after the loop
            out[i] = s
            last[i] = at

    rng = np.random.default_rng(1)
    lo = rng.integers(-4, 5, n).astype(np.int32)
    hi = (lo + rng.integers(1, 7, n)).astype(np.int32)
    out, last = np.zeros(n, np.int64), np.zeros(n, np.int32)
    spans(lo, hi, out, last)
    want = []
    for a, b in zip(lo, hi):
        s = 0
        for j in range(a, b):
            s = s * 3 + j
        want.append(s)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(last, hi - 1)
    jr.sync()
    assert [ok for _, ok in applied] == [True]


def test_nested_loops_branches_and_stores_inside(applied):
    n = 37

    @jr.kernel
    def nested(cnt: nd(dtype=jr.i32, ndim=1), x: nd(dtype=jr.f32, ndim=1),
               hits: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            for r in range(3):                     # the same bounds in every lane
                for _ in range(cnt[i] + r):        # bounds per lane
                    v = v * 0.75 + 0.5
                    if v > 1.2:                    # a condition per lane, a store inside
                        hits[i] += 1
            out[i] = v

    rng = np.random.default_rng(2)
    cnt, x = rng.integers(0, 5, n).astype(np.int32), rng.random(n).astype(np.float32) * 3
    hits, out = np.zeros(n, np.int32), np.zeros(n, np.float32)
    nested(cnt, x, hits, out)
    want_hits, want_out = np.zeros(n, np.int32), np.zeros(n, np.float32)
    for i in range(n):
        v = x[i]
        for r in range(3):
            for _ in range(cnt[i] + r):
                v = np.float32(v * np.float32(0.75) + np.float32(0.5))
                want_hits[i] += v > 1.2
        want_out[i] = v
    np.testing.assert_array_equal(hits, want_hits)
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    jr.sync()
    assert [ok for _, ok in applied] == [True]


# every tail length (1, 0, 3 indices) in f64, and f32's adstack slots at one of them (the
# full product compiled two more forward and adjoint pairs)
@pytest.mark.parametrize("n,dtype", [(5, jr.f64), (64, jr.f64), (1023, jr.f64), (1023, jr.f32)])
def test_gradient_with_adstacks_per_lane(applied, n, dtype):
    x, loss, recur = make_problem(n, dtype)
    rng = np.random.default_rng(3)
    xv, counts = rng.random(n), rng.integers(0, 9, n).astype(np.int32)
    cnt = jr.ndarray(jr.i32, shape=(n,))
    cnt.from_numpy(counts)
    x.from_numpy(xv.astype(dtype.np))
    recur(cnt)
    loss.grad[None] = 1
    recur.grad(cnt)
    v, dv = sin_recurrence(x.to_numpy(), counts)
    tol = 1e-5 if dtype == jr.f32 else 1e-12
    np.testing.assert_allclose(loss[None], v.sum(), rtol=tol)
    np.testing.assert_allclose(x.grad.to_numpy(), dv, rtol=tol, atol=tol)
    jr.sync()
    assert [ok for _, ok in applied] == [True, True]      # the forward and the adjoint


def test_an_overflowing_lane_is_reported(applied):
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=3)
    x, loss, recur = make_problem(8, jr.f64)
    counts = np.array([1, 1, 1, 1, 1, 5, 1, 1], np.int32)    # lane 1 of the second pass
    cnt = jr.ndarray(jr.i32, shape=(8,))
    cnt.from_numpy(counts)
    recur(cnt)
    with pytest.raises(jr.AdStackOverflowError, match="recur"):
        recur.grad(cnt)
    counts[5] = 1                      # fits: the initial entry, x[i] and one step's value
    cnt.from_numpy(counts)
    x.grad.fill(0)
    loss.grad[None] = 1
    recur.grad(cnt)
    _, dv = sin_recurrence(x.to_numpy(), counts)
    np.testing.assert_allclose(x.grad.to_numpy(), dv, rtol=1e-12)


def test_a_tiered_compile_interleaves_its_optimised_copy_only(applied, monkeypatch):
    """The quick copy is built without interleaving (its codegen and LLVM time would double);
    the background thread builds the optimised copy's module once compiles are quiet, or at
    once when the program syncs."""
    from jitrt.backends import cpu_tiers
    monkeypatch.setattr(cpu_tiers, "QUIET_S", 60.0)
    monkeypatch.setenv("JITRT_TIERED_COMPILE", "1")    # (the suite's default is off)
    jr.init(arch=jr.cpu, offline_cache=False)
    x, loss, recur = make_problem(16, jr.f64)
    xv = np.linspace(0, 1, 16)
    x.from_numpy(xv)
    counts = np.arange(16, dtype=np.int32) % 5
    cnt = jr.ndarray(jr.i32, shape=(16,))
    cnt.from_numpy(counts)
    recur(cnt)
    assert jr.debug.stats()["quick_compiles"] == 1
    assert applied == []
    jr.sync()
    assert [ok for _, ok in applied] == [True]
    recur(cnt)
    np.testing.assert_allclose(loss[None], 2 * sin_recurrence(xv, counts)[0].sum(), rtol=1e-12)


def test_bodies_that_are_not_interleaved(applied):
    n = 6

    @jr.kernel
    def flat(x: nd(dtype=jr.f32, ndim=1)):          # no inner loop: LLVM vectorizes it
        for i in range(x.shape[0]):
            x[i] = x[i] * 2

    @jr.kernel
    def indirect(x: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1)):
        for i in range(x.shape[0]):
            k = idx[i]
            for _ in range(2):
                x[k] += 1                               # may fault: keeps its check

    @jr.kernel
    def loops_with_while(x: nd(dtype=jr.i32, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(3):
                while v > 1:
                    v = v // 2
            x[i] = v

    a = np.ones(n, np.float32)
    flat(a)
    indirect(a, np.arange(n, dtype=np.int32)[::-1].copy())
    b = np.arange(n, dtype=np.int32) * 7
    loops_with_while(b)
    np.testing.assert_array_equal(a, np.full(n, 4, np.float32))
    np.testing.assert_array_equal(b, np.minimum(np.arange(n) * 7, 1))
    jr.sync()
    assert not any(ok for _, ok in applied)


def test_the_heap_keeps_threads_slices_apart():
    heap = AdStackHeap()
    assert heap.ptr % SLICE_ALIGN == 0
    heap.ensure(1 << 20)
    assert heap.ptr % SLICE_ALIGN == 0


def test_interleaved_and_plain_copies_agree(applied, monkeypatch):
    """Vectors (scalars per component), a select, an atomic whose old value is read, a
    kernel-scope reduction and a constant-bound loop, compiled with and without interleaving:
    the same results."""
    n = 29
    out = jr.Vector.field(2, jr.f64, shape=(n,))
    hist = jr.field(jr.i32, shape=(4,))
    total = jr.field(jr.f64, shape=())

    def make():
        @jr.kernel
        def mixed(cnt: nd(dtype=jr.i32, ndim=1), x: nd(dtype=jr.f64, ndim=1)):
            s = 0.0
            for i in range(x.shape[0]):
                p = jr.math.vec2(x[i], 1.0 - x[i])
                for _ in range(cnt[i]):
                    p = jr.math.vec2(p[0] * 0.8 - p[1] * 0.6, p[0] * 0.6 + p[1] * 0.8)
                    if p[0] < -0.5:
                        p = -p
                for _ in range(3):
                    p = p * 1.01
                old = jr.atomic_add(hist[1], cnt[i])
                out[i] = p + old * 0.0
                s += p[0]
            total[None] = s
        return mixed

    rng = np.random.default_rng(11)
    cnt, x = rng.integers(0, 7, n).astype(np.int32), rng.random(n)
    results = []
    for interleaved in (True, False):
        if not interleaved:
            monkeypatch.setattr(kernel_module, "interleaved_body", lambda em, task: None)
        kernel = make()
        hist.fill(0)
        kernel(cnt, x)
        jr.sync()
        results.append((out.to_numpy(), hist.to_numpy(), total[None]))
    (a, ha, ta), (b, hb, tb) = results
    np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_array_equal(ha, hb)
    np.testing.assert_array_equal(ha, [0, cnt.sum(), 0, 0])
    np.testing.assert_allclose(ta, tb, rtol=1e-12)
    assert [ok for _, ok in applied] == [True]     # (the spy was replaced for the second)


def test_a_tiered_kernel_without_candidates_is_built_once(monkeypatch):
    """Only a kernel whose optimised module differs from its quick copy (a task to
    interleave, or a loop whose check-free copy only a fault would skip: `quick_target`)
    defers that module's build; others hand the background thread the quick copy's own
    text."""
    from jitrt.backends import cpu_tiers
    monkeypatch.setenv("JITRT_TIERED_COMPILE", "1")
    jr.init(arch=jr.cpu, offline_cache=False)
    texts = []
    real = cpu_tiers.Tiers.optimise_later

    def spy(self, prefix, text, done, *rest):
        texts.append(isinstance(text, str))
        return real(self, prefix, text, done, *rest)
    monkeypatch.setattr(cpu_tiers.Tiers, "optimise_later", spy)

    @jr.kernel
    def flat(x: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            if i > 0:                   # (the box test can fail without a fault: one copy)
                x[i] = x[i] * 2

    x, loss, recur = make_problem(8, jr.f64)
    a = np.ones(4, np.float32)
    flat(a)
    recur(np.ones(8, np.int32))
    jr.sync()
    assert texts == [True, False]          # flat: its own text; recur: built later
    np.testing.assert_array_equal(a, [1, 2, 2, 2])
    jr.reset()
