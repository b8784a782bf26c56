"""`jr.real_func`: functions compiled as functions of their own (Taichi's `ti.real_func`).

Recursion (on data and on a field passed as a template), returns inside loops, vector and
matrix parameters and results, tuples, `jr.ref` parameters, ndarrays, calls from parallel
loops; the errors of a missing annotation, a captured ndarray and a gradient launch.
"""
from __future__ import annotations

import numpy as np
import pytest

import jitrt as jr

ND = jr.types.ndarray


def test_recursion_on_a_value():
    @jr.real_func
    def tri(n: jr.i32) -> jr.i32:
        if n == 0:
            return 0
        return tri(n - 1) + n

    @jr.kernel
    def k(n: jr.i32) -> jr.i32:
        return tri(n)

    assert k(100) == 5050
    assert k(0) == 0


def test_recursion_over_a_template_field():
    f = jr.field(jr.i32, shape=100)
    f.from_numpy(np.arange(100, dtype=np.int32) * 3)

    @jr.real_func
    def total(g: jr.template(), lo: jr.i32, hi: jr.i32) -> jr.i32:
        if lo == hi:
            return g[lo]
        mid = (lo + hi) // 2
        return total(g, lo, mid) + total(g, mid + 1, hi)

    @jr.kernel
    def k(lo: jr.i32, hi: jr.i32) -> jr.i32:
        return total(f, lo, hi)

    assert k(0, 99) == 3 * 99 * 50
    assert k(10, 12) == 3 * (10 + 11 + 12)


def test_return_inside_a_loop_and_side_effects_once_per_call():
    x = jr.field(jr.i32, shape=())

    @jr.real_func
    def first_over(limit: jr.i32) -> jr.i32:
        x[None] += 1
        s = 0
        for i in range(100):
            if s > limit:
                return i
            s += i
        return -1

    @jr.kernel
    def k(limit: jr.i32) -> jr.i32:
        return first_over(limit) * 1000 + first_over(10000)

    assert k(10) == 6 * 1000 - 1     # s reaches 15 > 10 at i = 6; 4950 never > 10000
    assert x[None] == 2


def test_parameters_convert_and_vectors_matrices_tuples_pass_by_value():
    @jr.real_func
    def combine(a: jr.math.mat2, b: jr.math.vec2, s: jr.i32) -> (jr.f32, jr.math.vec2):
        a[0, 0] = 100.0                      # the caller's matrix is not changed
        return s * 1.0, jr.Vector([a[0, 0] + b[0], a[1, 1] + b[1]])

    @jr.kernel
    def k() -> jr.math.vec4:
        m = jr.math.mat2(1, 2, 3, 4)
        s, v = combine(m, jr.Vector([5.0, 6.0]), 2.9)
        return jr.Vector([s, v[0], v[1], m[0, 0]])

    np.testing.assert_allclose(k(), [2.0, 105.0, 10.0, 1.0])


def test_ref_parameter_writes_back_to_the_callers_local():
    @jr.real_func
    def double(a: jr.ref(jr.f32)):
        a += a

    @jr.kernel
    def k() -> jr.f32:
        v = 5.0
        double(v)
        double(v)
        return v

    assert k() == 20.0


def test_called_from_a_parallel_loop_with_an_ndarray():
    @jr.real_func
    def scaled(a: ND(dtype=jr.f32, ndim=1), i: jr.i32) -> jr.f32:
        return a[i] * 2.0

    @jr.kernel
    def k(a: ND(dtype=jr.f32, ndim=1), out: ND(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            out[i] = scaled(a, i)

    a = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    k(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_a_parameter_without_annotation_is_refused_at_decoration():
    with pytest.raises(jr.KernelSyntaxError, match="'a' must be type annotated"):
        @jr.real_func
        def add(a, b: jr.i32) -> jr.i32:
            return a + b


def test_a_returned_value_needs_a_return_annotation():
    @jr.real_func
    def add(a: jr.i32, b: jr.i32):
        return a + b

    @jr.kernel
    def k():
        add(1, 2)

    with pytest.raises(jr.KernelCompileError, match="return value must be annotated"):
        k()


def test_an_ndarray_parameter_needs_the_kernels_ndarray_argument():
    w = jr.ndarray(jr.f32, shape=(2,))

    @jr.real_func
    def first(a: ND(dtype=jr.f32, ndim=1)) -> jr.f32:
        return a[0]

    @jr.kernel
    def k() -> jr.f32:
        return first(w)

    with pytest.raises(jr.KernelTypeError, match="Expected ndarray in the kernel argument"):
        k()


def test_kernels_calling_real_functions_are_not_differentiated():
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.real_func
    def sq(v: jr.f32) -> jr.f32:
        return v * v

    @jr.kernel
    def k():
        for i in range(4):
            loss[None] += sq(x[i])

    k()
    with pytest.raises(jr.KernelCompileError, match="real functions are not differentiated"):
        k.grad()


def test_a_call_in_an_assert_runs_without_debug_as_in_taichi():
    x = jr.field(jr.i32, shape=())

    @jr.real_func
    def bump(v: jr.i32) -> jr.i32:
        x[None] += v
        return 0

    @jr.kernel
    def k():
        assert bump(15) == 0         # not checked (debug is off), but bump runs
        assert bump(10) == 1

    k()
    assert x[None] == 25


def test_a_real_func_method_of_a_data_oriented_class_takes_self_at_compile_time():
    @jr.data_oriented
    class Grid:
        def __init__(self, n):
            self.val = jr.field(jr.f32, shape=(n, n))

        @jr.real_func
        def inc(self, i: jr.i32, j: jr.i32):
            self.val[i, j] += i * j

        @jr.real_func
        def mul(self, i: jr.i32, j: jr.i32) -> jr.i32:
            return i * j

        @jr.kernel
        def fill(self):
            for i, j in self.val:
                self.inc(i, j)
                self.val[i, j] += self.mul(i, j)

    g = Grid(6)
    g.fill()
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(g.val.to_numpy(), 2 * i * j)
