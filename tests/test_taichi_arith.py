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
