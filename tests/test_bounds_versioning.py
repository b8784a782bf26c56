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
