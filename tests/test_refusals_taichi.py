"""Programs Taichi 1.7.4 refuses that jitrt refuses too (issue 29), each with the kind Taichi
raises (jitrt's class deriving from the same built-in) and only in Taichi's situations: the
programs next to each refusal still run."""
import numpy as np
import pytest

import jitrt as jr


@pytest.mark.parametrize("shape", [0, (1, 0), (0, 4)])
def test_an_ndarray_with_a_zero_extent_is_not_a_valid_shape(shape):
    with pytest.raises(jr.InvalidShapeError, match="is not a valid shape for ndarray") as info:
        jr.ndarray(jr.i32, shape=shape)
    assert isinstance(info.value, jr.TaichiRuntimeError)       # Taichi's kind
    with pytest.raises(jr.InvalidShapeError, match="takes extents from 1"):
        jr.ndarray(jr.math.vec3, shape=shape)


def test_an_empty_numpy_array_and_an_empty_field_still_run():
    @jr.kernel
    def count(a: jr.types.ndarray(dtype=jr.f32, ndim=1)) -> jr.i32:
        n = 0
        for i in range(a.shape[0]):
            n += 1
        return n

    assert count(np.zeros(0, np.float32)) == 0
    assert count(np.zeros(3, np.float32)) == 3
    assert jr.field(jr.f32, shape=(2, 0)).to_numpy().shape == (2, 0)


@pytest.mark.parametrize("debug", [False, True])
def test_a_negative_python_scope_index_of_a_field_is_out_of_bounds_with_debug(arch, debug):
    jr.init(arch=arch, debug=debug)
    x = jr.field(jr.f32, shape=3)
    v = jr.Vector.field(2, jr.i32, shape=3)
    a = jr.ndarray(jr.f32, shape=3)
    x[2], a[2] = 5.0, 6.0
    v[2] = [7, 8]
    assert a[-1] == 6.0 and v[2][-1] == 8            # ndarrays and components: as numpy
    if not debug:
        assert x[-1] == 5.0 and list(v[-1]) == [7, 8]
        return
    for read in (lambda: x[-1], lambda: v[-1]):
        with pytest.raises(jr.KernelBoundsError, match="index -1 is out of bounds") as info:
            read()
        assert isinstance(info.value, AssertionError)          # Taichi's debug build
    with pytest.raises(AssertionError, match="does not count from the end"):
        x[-1] = 10.0
    assert x.to_numpy().tolist() == [0.0, 0.0, 5.0]            # nothing written
    assert x[1:].tolist() == [0.0, 5.0]                        # slices stay numpy's


def test_a_static_loop_over_a_fields_indices_is_refused():
    val = jr.field(jr.i32, shape=(2, 3))

    @jr.kernel
    def grouped_field():
        for ij in jr.static(jr.grouped(val)):
            val[ij] = 1

    @jr.kernel
    def plain_field():
        for i in jr.static(val):
            val[i, 0] = 1

    for kernel in (grouped_field, plain_field):
        with pytest.raises(jr.TaichiCompilationError,
                           match="loop over a field's indices is not supported") as info:
            kernel()
        assert f"{__file__}:" in str(info.value) and "^" in str(info.value)
    assert not val.to_numpy().any()

    @jr.kernel
    def unrolled_box():                     # what the message advises, and a run-time loop
        for ij in jr.static(jr.grouped(jr.ndrange(2, 3))):
            val[ij] += ij[0] * 3 + ij[1]
        for ij in jr.grouped(val):
            val[ij] += 10

    unrolled_box()
    assert val.to_numpy().tolist() == [[10, 11, 12], [13, 14, 15]]
    with pytest.raises(NotImplementedError, match="only available in Taichi scope"):
        list(jr.grouped(val))               # Python scope, as `for i in val`


def test_a_negative_constant_index_of_a_vector_or_matrix_is_refused():
    @jr.kernel
    def sliced(i: jr.i32):
        x = jr.Vector([i, i + 1, i + 2])
        print(x[:-1])

    @jr.kernel
    def last(i: jr.i32) -> jr.i32:
        x = jr.Vector([i, i + 1, i + 2])
        return x[-1]

    @jr.kernel
    def corner() -> jr.i32:
        m = jr.Matrix([[1, 2], [3, 4]])
        return m[0, -1]

    for kernel in (sliced, last, corner):
        with pytest.raises(jr.TaichiSyntaxError,
                           match="Negative indices are not supported in Taichi kernels") as info:
            kernel(0) if kernel is not corner else kernel()
        assert isinstance(info.value, SyntaxError) and f"{__file__}:" in str(info.value)

    @jr.kernel
    def from_zero(i: jr.i32) -> jr.i32:       # what stays: indices from 0, a negative step
        x = jr.Vector([i, i + 1, i + 2])
        r = x[::-1]
        m = jr.Matrix([[1, 2], [3, 4]])
        return x[2] * 100 + x[1:][0] * 10 + r[0] + m[1, 0]

    assert from_zero(1) == 300 + 20 + 3 + 3


@pytest.mark.parametrize("dt", [jr.i32, jr.i64])
def test_a_negative_run_time_integer_exponent_is_an_error_with_debug(arch, dt):
    def run(debug):
        jr.init(arch=arch, debug=debug)
        z = jr.field(dt, shape=())

        @jr.kernel
        def power(x: dt, y: dt):
            z[None] = x ** y

        power(3, 4)
        assert z[None] == 81
        power(10, -2)
        return z[None]

    assert run(False) == 0                     # trunc(1 / 100), docs/usage.md
    with pytest.raises(jr.TaichiRuntimeError, match=r"Negative exponent in pow\(int, int\)"):
        run(True)
