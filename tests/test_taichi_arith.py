"""Taichi's arithmetic builtins: `jr.raw_div` (C's truncated integer division, `/` on floats),
`jr.bit_shr` (a logical shift right in the operand's type) and `jr.atomic_mul` (a
compare-and-swap loop on field and ndarray elements; on a local, `s = s * v`), checked against
Python's arithmetic."""
from __future__ import annotations

import numpy as np
import pytest

import jitrt as jr


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, -3), (0, 5)])
def test_raw_div_truncates_toward_zero(a, b):
    @jr.kernel
    def k(a: jr.i32, b: jr.i32) -> jr.i32:
        return jr.raw_div(a, b)

    assert k(a, b) == int(a / b)
    assert jr.raw_div(a, b) == int(a / b)            # the same at Python scope


def test_raw_div_of_floats_and_vectors():
    @jr.kernel
    def k(a: jr.f32) -> jr.math.vec3:
        return jr.raw_div(jr.Vector([a, -a, 2 * a]), 2)

    np.testing.assert_allclose(k(7.0), [3.5, -3.5, 7.0])


def test_bit_shr_is_a_logical_shift_in_the_operands_type():
    @jr.kernel
    def signed(a: jr.i32, b: jr.i32) -> jr.i32:
        return jr.bit_shr(a, b)

    @jr.kernel
    def unsigned(a: jr.u32, b: jr.i32) -> jr.u32:
        return jr.bit_shr(a, b)

    assert [signed(-256, i) for i in range(3)] == [-256, (2**32 - 256) >> 1,
                                                     (2**32 - 256) >> 2]
    assert signed(256, 4) == 16 and unsigned(5, 2) == 1


def test_atomic_mul_on_a_field_element_from_a_parallel_loop():
    c = jr.field(jr.i32, shape=())
    v = jr.field(jr.f64, shape=4)

    @jr.kernel
    def k():
        c[None] = 1
        for i in range(16):
            jr.atomic_mul(c[None], 2)
        for i in range(4):
            v[i] = 1.5
            jr.atomic_mul(v[i], -2.0)

    k()
    assert c[None] == 2 ** 16
    np.testing.assert_array_equal(v.to_numpy(), [-3.0] * 4)


def test_atomic_mul_returns_the_old_value_and_works_on_locals():
    out = jr.field(jr.f32, shape=2)

    @jr.kernel
    def k() -> jr.f32:
        x = 1.0
        for i in range(1, 8):
            jr.atomic_mul(x, jr.f32(i))
        out[0] = 3.0
        out[1] = jr.atomic_mul(out[0], 2.0)
        return x

    assert k() == 5040.0
    np.testing.assert_array_equal(out.to_numpy(), [6.0, 3.0])


def test_unary_operators_and_atan2_are_element_wise_on_matrices():
    yi = jr.Matrix.field(3, 2, jr.i32, ())
    yi.from_numpy(np.array([[3, 2], [9, 0], [7, 4]], np.int32))
    y = jr.Matrix.field(3, 2, jr.f32, ())
    y.from_numpy(np.array([[0, 2], [9, 3.5], [-7, 4]], np.float32))
    xi = jr.Matrix.field(3, 2, jr.i32, 2)
    xf = jr.Matrix.field(3, 2, jr.f32, 2)

    @jr.kernel
    def k(s: jr.f32):
        xi[0] = ~yi[None]
        xi[1] = not yi[None]
        xf[0] = jr.atan2(y[None], s)
        xf[1] = jr.atan2(s, y[None])

    k(5.0)
    yv = yi.to_numpy()
    np.testing.assert_array_equal(xi.to_numpy()[0], ~yv)
    np.testing.assert_array_equal(xi.to_numpy()[1], np.logical_not(yv).astype(np.int32))
    np.testing.assert_allclose(xf.to_numpy()[0], np.arctan2(y.to_numpy(), 5.0), rtol=1e-6)
    np.testing.assert_allclose(xf.to_numpy()[1], np.arctan2(5.0, y.to_numpy()), rtol=1e-6)


def test_if_expression_broadcasts_a_scalar_against_a_vector():
    @jr.kernel
    def k(c: jr.i32) -> jr.math.vec3:
        v = jr.Vector([1.0, 2.0, 3.0])
        return 0 if c > 0 else v

    np.testing.assert_array_equal(k(1), [0, 0, 0])
    np.testing.assert_array_equal(k(0), [1, 2, 3])

    @jr.kernel
    def vector_condition() -> jr.math.vec3:
        v = jr.Vector([1.0, -2.0, 3.0])
        return 0 if v > 0 else v

    with pytest.raises(jr.KernelCompileError, match="use jr.select"):
        vector_condition()


def test_an_item_of_a_static_list_of_python_scope_vectors_is_a_constant_vector():
    offsets = [jr.Vector([1, 2]), jr.Vector([2, 3])]

    @jr.kernel
    def k() -> jr.math.ivec2:
        v = jr.Vector([4, 5])
        v += jr.static(offsets)[0]
        return jr.select(v > 6, v, jr.static(offsets)[1]) + jr.static(offsets)[1]

    np.testing.assert_array_equal(k(), [4, 10])
