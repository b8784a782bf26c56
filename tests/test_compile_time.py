"""Compile-time Python in kernels, as in Taichi: jr.static over any Python value (strings
too), iterables chosen at compile time, range() with a step, jr.grouped, and plain Python
functions inlined like @jr.func."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
MODE = "fast"
WEIGHTS = (1.0, 2.0, 4.0)


def helper(a, b):               # a plain function: inlined like a @jr.func
    return a * 2.0 + b


def test_static_strings_membership_and_iterable_choice():
    @jr.kernel
    def k(out: nd(dtype=jr.f32, ndim=1), tag: jr.template()):
        if jr.static(MODE == "fast"):
            out[0] = 1.0
        else:
            out[0] = 2.0
        if jr.static(tag in ("a", "b")):
            out[1] = 10.0
        if jr.static(tag is None):
            out[1] = 20.0
        total = 0.0
        jr.loop_config(serialize=True)
        for j in (range(3) if jr.static(tag == "a") else jr.static(range(5))):
            total += WEIGHTS[0] * j
        out[2] = total
    out = np.zeros(3, np.float32)
    k(out, "a")
    assert out.tolist() == [1.0, 10.0, 3.0]
    k(out, None)
    assert out.tolist() == [1.0, 20.0, 10.0]


@pytest.mark.parametrize("begin,end,step", [(0, 10, 3), (10, 0, -3), (5, 5, 2), (2, 9, 1),
                                            (-4, 7, 5), (9, -9, -4), (3, 1, 2)])
def test_range_with_a_step(begin, end, step):
    @jr.kernel
    def parallel(out: nd(dtype=jr.i32, ndim=1), b: jr.i32, e: jr.i32, s: jr.i32):
        for i in range(b, e, s):                  # a run-time step: the outermost loop
            out[i + 10] = i

    @jr.kernel
    def const_serial(out: nd(dtype=jr.i32, ndim=1)) -> jr.i32:
        count = 0
        jr.loop_config(serialize=True)
        for _ in range(1):
            for i in range(begin, end, step):      # constant step inside a loop
                out[count] = i
                count += 1
        return count
    out = np.full(30, -99, np.int32)
    parallel(out, begin, end, step)
    want = np.full(30, -99, np.int32)
    for i in range(begin, end, step):
        want[i + 10] = i
    np.testing.assert_array_equal(out, want)
    out[:] = -99
    n = const_serial(out)
    assert n == len(range(begin, end, step))
    assert out[:n].tolist() == list(range(begin, end, step))


def test_range_step_zero_is_a_compile_error():
    @jr.kernel
    def k(out: nd(dtype=jr.i32, ndim=1)):
        for i in range(0, 4, 0):
            out[i] = 1
    with pytest.raises(jr.KernelCompileError, match="step must not be zero"):
        k(np.zeros(4, np.int32))


def test_grouped_loops_give_index_vectors():
    x = jr.field(jr.f32, shape=(3, 4))
    v = jr.Vector.field(2, jr.f32, shape=(3, 4))

    @jr.kernel
    def k():
        for g in jr.grouped(x):
            x[g] = g[0] * 10 + g[1]
            v[g] = g * 1.0
        for g in jr.grouped(jr.ndrange((1, 3), 2)):
            x[g] += 100.0
    k()
    i, j = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    want = (i * 10 + j).astype(np.float32)
    want[1:3, 0:2] += 100
    np.testing.assert_array_equal(x.to_numpy(), want)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([i, j], -1))


def test_plain_python_functions_are_inlined():
    def inner(x):
        return helper(x, 1.0) * WEIGHTS[2]

    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = inner(a[i])
    a = np.arange(4, dtype=np.float32)
    k(a)
    np.testing.assert_allclose(a, (np.arange(4) * 2 + 1) * 4.0)


def test_lambdas_are_inlined_like_funcs():
    """Lambdas called from a kernel are inlined: two on one line are told apart by their
    columns, a closure's values are compile-time constants, each lambda's text is part of the
    cache key, and an error inside one points at its file, line and column."""
    square, cube = (lambda v: v * v), (lambda v: v * v * v)  # noqa: E731

    def scaled(factor):
        return lambda a, b: (a + b) * factor

    blend = scaled(3.0)

    @jr.kernel
    def with_lambdas(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = blend(square(a[i]), cube(2.0))
    a = np.arange(4, dtype=np.float32)
    with_lambdas(a)
    np.testing.assert_array_equal(a, (np.arange(4) ** 2 + 8) * 3.0)
    from jitrt.frontend.func import Func
    assert Func(square).key != Func(cube).key       # one qualname, two cache-key entries

    bad = lambda v: v.nope  # noqa: E731

    @jr.kernel
    def with_bad(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = bad(a[i])
    with pytest.raises(jr.KernelCompileError) as info:
        with_bad(a)
    line = bad.__code__.co_firstlineno
    assert f"test_compile_time.py:{line}:" in str(info.value)


def test_a_lambda_inside_a_kernel_is_a_clear_error():
    @jr.kernel
    def with_lambda(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            f = lambda v: v * v  # noqa: E731
            a[i] = f(a[i])
    with pytest.raises(jr.KernelCompileError, match="Lambda"):
        with_lambda(np.zeros(2, np.float32))


OFFSETS = (-1, 0, 1, 7)
NAMES = ("a", "b")


def test_run_time_indices_into_constant_tuples(arch):
    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
          out: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = WEIGHTS[idx[i]] if idx[i] < 10 else -1.0    # the untaken side: no read
            out[i] = OFFSETS[idx[i] % 4]
    a, out = np.zeros(5, np.float32), np.zeros(5, np.int32)
    idx = np.array([0, 1, 2, -1, 20], np.int32)
    k(a, idx, out)
    assert a.tolist() == [1.0, 2.0, 4.0, 4.0, -1.0]
    assert out.tolist() == [OFFSETS[j % 4] for j in idx.tolist()]
    with pytest.raises(jr.KernelRuntimeError, match=r"index 3 out of bounds .* of 'WEIGHTS'"):
        k(a, np.array([0, 1, 2, 3, 4], np.int32), out)

    @jr.kernel
    def strings(out: nd(dtype=jr.i32, ndim=1)):
        for i in range(out.shape[0]):
            out[i] = NAMES[i]
    with pytest.raises(jr.KernelCompileError, match="tuple of numbers"):
        strings(np.zeros(2, np.int32))
