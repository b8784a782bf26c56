"""`shape` of vector, matrix and struct fields and ndarrays means what it means in Taichi.

`x.shape` is the field's shape, `(N,)` for `jr.Vector.field(3, jr.f32, shape=N)`, at Python
scope and in kernels (`x.shape[0]`, `jr.ndrange(*x.shape)`), for fields and ndarrays (an
ndarray argument's `a.shape` leaves out the element's dimensions); `to_numpy()` keeps the
components, `element_shape`, `n`, `m` describe the element. Launch packing, adstack sizing
from an ndarray's shape and the offline cache see the storage as before.
"""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


def test_python_scope_shapes():
    v = jr.Vector.field(3, jr.f32, shape=5, needs_grad=True, needs_dual=True)
    assert v.shape == (5,) and v.ndim == 1 and v.element_shape == (3,) and (v.n, v.m) == (3, 1)
    assert v.grad.shape == (5,) and v.dual.shape == (5,)
    assert v.to_numpy().shape == (5, 3) and v.storage_shape == (5, 3)
    m = jr.Matrix.field(2, 4, jr.f64, shape=(3, 6))
    assert m.shape == (3, 6) and (m.n, m.m) == (2, 4) and m.to_numpy().shape == (3, 6, 2, 4)
    a = jr.ndarray(jr.math.vec2, shape=7)
    assert a.shape == (7,) and a.to_numpy().shape == (7, 2)
    b = jr.Vector.ndarray(3, jr.i32, shape=(2, 2))
    assert b.shape == (2, 2) and b.element_shape == (3,)
    s = jr.Struct.field({"pos": jr.math.vec3, "m": jr.f32}, shape=4)
    assert s.shape == (4,) and s.pos.shape == (4,) and s.m.shape == (4,)
    z = jr.Vector.field(2, jr.f32, shape=())
    assert z.shape == () and z[None].shape == (2,)
    z[None] = [1.0, 2.0]
    assert z[None][1] == 2.0
    placed = jr.Vector.field(2, jr.f32)
    jr.root.dense(jr.ij, (3, 4)).place(placed)
    assert placed.shape == (3, 4) and placed.grad.shape == (3, 4)
    v.from_numpy(np.ones((5, 3), np.float32))               # from_numpy takes the storage
    with pytest.raises(ValueError, match=r"shape \(5,\) does not match \(5, 3\)"):
        v.from_numpy(np.ones(5, np.float32))
    assert "shape=(5,) element_shape=(3,)" in repr(v)


def test_kernels_see_the_fields_shape():
    n = 6
    x = jr.Vector.field(3, jr.f32, shape=n)
    m = jr.Matrix.field(2, 2, jr.i32, shape=(2, 3))
    out = jr.field(jr.i32, shape=4)

    @jr.kernel
    def fill():
        for g in jr.grouped(jr.ndrange(*x.shape)):
            x[g] = [g[0], 1.0, 2.0]
        for i, j in jr.ndrange(*m.shape):
            m[i, j] = [[i, j], [x.shape[0], m.shape[1]]]
        out[0] = x.shape[0]
        out[1] = m.shape[0] * 10 + m.shape[1]
        out[2] = x.n * 10 + m.m

    fill()
    assert x.shape == (n,)
    np.testing.assert_array_equal(x.to_numpy()[:, 0], np.arange(n))
    assert out.to_numpy().tolist() == [6, 23, 32, 0]
    np.testing.assert_array_equal(m.to_numpy()[1, 2], [[1, 2], [6, 3]])


def test_kernels_see_the_ndarrays_shape():
    @jr.kernel
    def typed(a: nd(dtype=jr.math.vec3, ndim=1)) -> jr.i32:
        for i in range(a.shape[0]):
            a[i] = [i, 2 * i, 3 * i]
        return a.shape[0]

    @jr.kernel
    def untyped(a: nd()) -> jr.i32:
        total = 0
        for i, j in jr.ndrange(*a.shape):
            total += i * 10 + j
        return total

    a = jr.ndarray(jr.math.vec3, shape=5)
    assert typed(a) == 5
    np.testing.assert_array_equal(a.to_numpy()[4], [4, 8, 12])
    assert typed(np.zeros((7, 3), np.float32)) == 7        # a numpy array of vec3s
    b = jr.ndarray(jr.math.vec2, shape=(2, 3))
    assert untyped(b) == sum(i * 10 + j for i in range(2) for j in range(3))
    assert untyped(np.zeros((2, 3), np.float32)) == untyped(b)   # scalars: shape (2, 3) too


def test_an_element_axis_of_an_ndarray_shape_is_a_compile_error():
    @jr.kernel
    def second(a: nd(dtype=jr.math.vec3, ndim=1)) -> jr.i32:
        return a.shape[1]

    with pytest.raises(jr.KernelCompileError, match=r"axis 1 out of range for a 1-d ndarray "
                       r"'a' \(a.shape leaves out the element's dimensions\)"):
        second(jr.ndarray(jr.math.vec3, shape=4))


def test_a_scalar_annotation_sees_a_vector_ndarray_as_its_storage():
    @jr.kernel
    def cols(a: nd(dtype=jr.f32, ndim=2)) -> jr.i32:
        return a.shape[1]

    assert cols(jr.ndarray(jr.math.vec3, shape=4)) == 3


def test_adstack_sizing_from_a_vector_ndarrays_shape():
    """A reverse-mode inner loop bounded by `a.shape[0]` of a vec2 ndarray (an NdarrayShape
    size expression) is sized by N, not by the storage's element axis."""
    x = jr.field(jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def run(a: nd(dtype=jr.types.vector(2, jr.f64), ndim=1)):
        for t in range(1):
            v = x[None]
            for _ in range(a.shape[0]):
                v = v * 0.5 + a[0][1]
            loss[None] += v

    a = jr.ndarray(jr.types.vector(2, jr.f64), shape=9)
    a.from_numpy(np.tile([0.0, 0.25], (9, 1)))
    x[None] = 3.0
    with jr.ad.Tape(loss=loss):
        run(a)
    assert x.grad[None] == pytest.approx(0.5 ** 9)
    infos = jr.debug.sizing_infos(run, grad=True)
    assert infos, "the loop keeps an adstack"


def test_vector_field_template_arguments_and_repacking():
    @jr.kernel
    def count(f: jr.template(), a: nd(dtype=jr.math.vec2, ndim=1)) -> jr.i32:
        return f.shape[0] * 100 + a.shape[0]

    f = jr.Vector.field(4, jr.f32, shape=3)
    assert count(f, jr.ndarray(jr.math.vec2, shape=5)) == 305
    assert count(f, jr.ndarray(jr.math.vec2, shape=8)) == 308      # repacked shape
    assert count(f, np.zeros((2, 2), np.float32)) == 302
