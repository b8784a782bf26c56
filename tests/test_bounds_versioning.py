"""Loop versioning of bounds checks (`codegen/bounds.py`): accesses affine in the task's
variables are tested once per box; a box that is not inside runs the checked loop, so a bad
index is still skipped and reported with its value, on every arch."""
import re

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def shift(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1), lo: jr.i32, hi: jr.i32):
    for i in range(lo, hi):
        y[i] = x[i + 1] * 2 + x[i - 1]


def test_inside_box_runs_and_is_exact():
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    shift(x, y, 1, 9)                    # every access inside: the unchecked loop
    expected = np.zeros(10, np.float32)
    expected[1:9] = x[2:10] * 2 + x[0:8]
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("lo, hi, bad", [(0, 9, -1), (1, 10, 10)])
def test_box_partly_outside_reports_the_bad_index(lo, hi, bad):
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match=rf"index {bad} out of bounds on axis 0 "
                                                    r"of 'x'"):
        shift(x, y, lo, hi)
        jr.sync()
    assert y[5] == x[6] * 2 + x[4]      # the other points ran


def test_two_dimensional_box_and_a_reassigned_variable():
    @jr.kernel
    def blur(a: nd(dtype=jr.f64, ndim=2), out: nd(dtype=jr.f64, ndim=2)):
        for i, j in jr.ndrange((1, a.shape[0] - 1), (1, a.shape[1] - 1)):
            out[i, j] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]

    @jr.kernel
    def moved(a: nd(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            k = i
            i = k + 1                    # not the loop's variable any more: stays checked
            a[i - 1] = 1.0

    a = np.random.default_rng(0).uniform(size=(6, 7))
    out = np.zeros_like(a)
    blur(a, out)
    np.testing.assert_allclose(out[1:-1, 1:-1], a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                               + a[1:-1, 2:])
    b = np.zeros(5)
    moved(b)
    assert b.tolist() == [1.0] * 5


@pytest.mark.cpu_only
def test_unchecked_loops_are_vectorized_on_the_host():
    """Any x86-64 has SIMD (SSE2 at least): saxpy's loop must use vector types once its checks
    are versioned out (the width depends on the host, not asserted)."""
    @jr.kernel
    def saxpy(s: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = s * x[i] + y[i]

    text = jr.debug.optimized_ir(saxpy, 2.0, np.ones(4, np.float32), np.ones(4, np.float32))
    assert re.search(r"<\d+ x float>", text)


def test_vector_components_are_versioned_with_their_element():
    """`v[i]` of a vector field reads `v[i, 0]`, `v[i, 1]`...: the constant component axis is
    tested once with the affine one, so the loop has no checks left; a bad element index is
    still reported."""
    v = jr.Vector.field(3, jr.f32, shape=(8,))
    w = jr.Vector.field(3, jr.f32, shape=(8,))

    @jr.kernel
    def scale(lo: jr.i32, hi: jr.i32):
        for i in range(lo, hi):
            v[i] = w[i + 1] * 2.0

    w.from_numpy(np.arange(24, dtype=np.float32).reshape(8, 3))
    scale(0, 7)
    np.testing.assert_array_equal(v.to_numpy()[:7], w.to_numpy()[1:] * 2)
    # the loop vectorizes only without checks (the width depends on the host)
    assert re.search(r"<\d+ x float>", jr.debug.optimized_ir(scale, 0, 7))
    with pytest.raises(jr.KernelRuntimeError, match=r"index 8 out of bounds on axis 0 of 'w'"):
        scale(0, 8)
        jr.sync()


@pytest.mark.cpu_only
@pytest.mark.parametrize("threads, grain", [(1, 1), (2, 1), (2, 7), (3, 1000)])
def test_multidimensional_boxes_split_anywhere_by_the_pool(threads, grain):
    """The CPU runs an n-D box as rows (outer coordinates once per row, the last dimension a
    counted loop); chunks from the pool may start and end mid-row."""
    jr.init(arch=jr.cpu, offline_cache=False, num_threads=threads, parallel_grain=grain)

    @jr.kernel
    def fill(a: nd(dtype=jr.i32, ndim=3), k: jr.i32):
        for i, j, m in jr.ndrange((1, a.shape[0]), a.shape[1], (2, a.shape[2] - 1)):
            a[i, j, m] += i * 10000 + j * 100 + m + k

    a = np.zeros((5, 7, 9), np.int32)
    fill(a, 3)
    i, j, m = np.meshgrid(np.arange(5), np.arange(7), np.arange(9), indexing="ij")
    expected = np.where((i >= 1) & (m >= 2) & (m < 8), i * 10000 + j * 100 + m + 3, 0)
    np.testing.assert_array_equal(a, expected)


@jr.kernel
def strided(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1), k: jr.i32, n: jr.i32):
    for i in range(n):
        y[i] = x[2 * i + k] - x[k + 3 * i - 2 * i]


@pytest.mark.parametrize("k, n, bad", [(1, 5, None), (0, 5, None), (2, 5, 10), (-1, 3, -1)])
def test_coefficients_and_invariant_offsets(k, n, bad):
    x = np.arange(10, dtype=np.float32) ** 2
    y = np.zeros(5, np.float32)
    if bad is None:
        strided(x, y, k, n)
        i = np.arange(n)
        np.testing.assert_array_equal(y[:n], x[2 * i + k] - x[k + i])
        return
    with pytest.raises(jr.KernelRuntimeError, match=rf"index {bad} out of bounds"):
        strided(x, y, k, n)
        jr.sync()


@pytest.mark.cpu_only
def test_an_index_that_wraps_its_type_stays_checked():
    """i + k in i32 wraps past 2**31 - 1: the versioned test must not call it inside (the
    kernel's wrapped index would be negative), so the checked loop reports it."""
    @jr.kernel
    def wrap(x: nd(dtype=jr.f32, ndim=1), k: jr.i32):
        for i in range(2):
            x[i + k] = 1.0

    x = np.zeros(4, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match="out of bounds"):
        wrap(x, 2**31 - 1)
    assert (x == 0).all()


# ---- gathers: x[idx[i]] checked by one scan of idx per chunk (the CPU) ----------------------

@jr.kernel
def gather(x: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
           y: nd(dtype=jr.f32, ndim=1)):
    for i in range(idx.shape[0]):
        y[i] = x[idx[i]] * 2.0


@pytest.mark.parametrize("n", [1, 17, 5000, 100_000])
def test_gather_inside_is_exact(n):
    rng = np.random.default_rng(n)
    x = rng.random(n, dtype=np.float32)
    idx = rng.integers(0, n, n, dtype=np.int32)
    y = np.zeros(n, np.float32)
    gather(x, idx, y)
    np.testing.assert_array_equal(y, x[idx] * 2)


GATHERS_PROGRAM = """
import numpy as np
import jitrt as jr
nd = jr.types.ndarray
jr.init(offline_cache=False, tiered_compile=False)

@jr.kernel
def two_gathers(x: nd(dtype=jr.f32, ndim=1), ia: nd(dtype=jr.i32, ndim=1),
                ib: nd(dtype=jr.i32, ndim=1), y: nd(dtype=jr.f32, ndim=1),
                z: nd(dtype=jr.f32, ndim=1), w: nd(dtype=jr.f32, ndim=1)):
    for i in range(ia.shape[0]):
        y[i] = x[ia[i]] + x[ib[i]]
        z[i] = x[ib[i]] * 2.0
        w[i] = x[ia[i]] - 1.0

a = np.zeros(8, np.float32)
i = np.zeros(8, np.int32)
print(jr.debug.optimized_ir(two_gathers, a, i, i.copy(), a.copy(), a.copy(), a.copy()))
"""


@pytest.mark.cpu_only
def test_the_gather_test_emits_the_same_ir_under_every_hash_seed(tmp_path):
    """Its sources and written arrays are visited in a fixed order (sets of refs iterated in
    hash order gave each process its own order of the overlap tests)."""
    import os
    import subprocess
    import sys
    script = tmp_path / "gathers.py"
    script.write_text(GATHERS_PROGRAM)
    outs = []
    for seed in ("1", "2", "3"):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, PYTHONHASHSEED=seed))
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("bad", [-1, 64, -(1 << 31), (1 << 31) - 1])
def test_gather_with_a_bad_index_reports_it(bad):
    x = np.arange(64, dtype=np.float32)
    idx = np.arange(64, dtype=np.int32)[::-1].copy()
    idx[40] = bad
    y = np.zeros(64, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match=rf"index {bad} out of bounds on axis 0 "
                                                    r"of 'x'"):
        gather(x, idx, y)
        jr.sync()
    assert y[0] == 126 and y[41] == 44       # the other points ran


def test_gather_whose_indices_the_kernel_overwrites_stays_checked():
    """out[i] = src[idx[i]] with out and idx views of one buffer (out = buf[1:], idx = buf[:-1]):
    each store changes the next index, so a scan of idx before the loop proves nothing."""
    @jr.kernel
    def chase(src: nd(dtype=jr.i32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
              out: nd(dtype=jr.i32, ndim=1)):
        for i in range(idx.shape[0]):
            out[i] = src[idx[i]]

    jr.init(num_threads=1)
    buf = np.zeros(5, np.int32)
    src = np.array([7, 0, 0, 0], np.int32)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 7 out of bounds on axis 0 of 'src'"):
        chase(src, buf[:-1], buf[1:])
        jr.sync()


def test_gather_from_a_field_and_an_index_expression_with_a_cast():
    f = jr.field(jr.f64, shape=(32,))
    f.from_numpy(np.arange(32, dtype=np.float64))

    @jr.kernel
    def pick(idx: nd(dtype=jr.i64, ndim=1), out: nd(dtype=jr.f64, ndim=1)):
        for i in range(idx.shape[0]):
            out[i] = f[idx[i]] + f[i % 32]

    idx = np.arange(100, dtype=np.int64) % 32
    out = np.zeros(100)
    pick(idx, out)
    np.testing.assert_array_equal(out, 2 * (np.arange(100) % 32))
    idx[99] = 32
    with pytest.raises(jr.KernelRuntimeError, match=r"index 32 out of bounds on axis 0 of 'f"):
        pick(idx, out)
        jr.sync()
