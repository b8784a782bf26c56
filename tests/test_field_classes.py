"""Taichi's field classes and structure-of-arrays placement (issue 29).

`jr.field` gives a `jr.ScalarField`, `jr.Vector.field`/`jr.Matrix.field` a `jr.MatrixField`,
`jr.Struct.field` a `jr.StructField` (before placement too); `v.get_scalar_field(i)` is one
component, which `place` accepts (Taichi's SOA placement: the first component places the
field, the others must agree) and which reads and writes the parent's data at Python scope and
in kernels; `jr.Layout.AOS/SOA` is accepted by `Vector.field(layout=)`.
"""
import numpy as np
import pytest

import jitrt as jr


def test_field_classes():
    x = jr.field(jr.f32, shape=3)
    v = jr.Vector.field(2, jr.f32, shape=3)
    m = jr.Matrix.field(2, 2, jr.f64, shape=3)
    t = jr.field(jr.math.vec3, shape=2)
    s = jr.Struct.field({"p": jr.math.vec2, "w": jr.f32}, shape=3)
    assert isinstance(x, jr.ScalarField) and not isinstance(x, jr.MatrixField)
    assert all(isinstance(f, jr.MatrixField) and not isinstance(f, jr.ScalarField)
               for f in (v, m, t))
    assert all(isinstance(f, jr.Field) for f in (x, v, m, t))
    assert isinstance(s, jr.StructField)
    assert isinstance(s.p, jr.MatrixField) and isinstance(s.w, jr.ScalarField)
    assert isinstance(jr.field(jr.f32, shape=2, needs_grad=True).grad, jr.ScalarField)
    pending_x, pending_v = jr.field(jr.f32), jr.Vector.field(3, jr.f32)
    assert isinstance(pending_x, jr.ScalarField) and isinstance(pending_v, jr.MatrixField)
    jr.root.dense(jr.i, 4).place(pending_x, pending_v)
    assert type(pending_x) is jr.ScalarField and type(pending_v) is jr.MatrixField
    assert isinstance(pending_v.grad, jr.MatrixField)


def test_soa_placement_of_components_runs():
    """Taichi's SOA idiom: every component placed on its own, over 2 axes."""
    T, N = 3, 5
    x = jr.Vector.field(3, jr.f32)
    for i in range(3):
        jr.root.dense(jr.k, T).dense(jr.l, N).place(x.get_scalar_field(i))
    assert x.shape == (T, N) and x.to_numpy().shape == (T, N, 3)

    @jr.kernel
    def fill():
        for t, n in x:
            x[t, n] = [t, n, t * n]

    fill()
    np.testing.assert_array_equal(x.to_numpy()[2, 4], [2, 4, 8])
    m = jr.Matrix.field(2, 2, jr.i32)
    for i in range(2):
        for j in range(2):
            jr.root.dense(jr.i, 4).place(m.get_scalar_field(i, j))
    assert m.shape == (4,)


def test_components_placed_with_different_shapes_are_refused_at_the_next_kernel():
    a = jr.Matrix.field(2, 2, jr.i32)
    jr.root.dense(jr.i, 10).place(a.get_scalar_field(0, 0))
    jr.root.dense(jr.i, 11).place(a.get_scalar_field(0, 1))    # as in Taichi: not here

    @jr.kernel
    def foo():
        pass

    with pytest.raises(RuntimeError, match="Members of the following field have different "
                       r"shapes: .* is placed with shape \(10,\), its component .* with \(11,\)"):
        foo()
    with pytest.raises(IndexError, match=r"get_scalar_field\(2, 0\)"):
        a.get_scalar_field(2, 0)
    with pytest.raises(IndexError, match="give 2 index"):
        a.get_scalar_field(0, 0, 0)


def test_a_component_reads_and_writes_its_parent():
    v = jr.Vector.field(3, jr.f32, shape=4, needs_grad=True)
    y = v.get_scalar_field(1)
    assert y.shape == (4,) and y.dtype == jr.f32
    y[2] = 5.0
    assert v[2][1] == 5.0 and y[2] == 5.0
    y.from_numpy(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(v.to_numpy()[:, 1], [0, 1, 2, 3])
    np.testing.assert_array_equal(v.to_numpy()[:, 0], [0, 0, 0, 0])
    np.testing.assert_array_equal(y.to_numpy(), [0, 1, 2, 3])
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def use():
        for i in y:
            loss[None] += y[i] * y[i]

    with jr.ad.Tape(loss=loss):
        use()
    assert loss[None] == 14.0
    np.testing.assert_array_equal(v.grad.to_numpy()[:, 1], [0, 2, 4, 6])
    np.testing.assert_array_equal(y.grad.to_numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal(v.grad.to_numpy()[:, 2], [0, 0, 0, 0])


def test_layout_argument():
    aos = jr.Vector.field(3, jr.f32, shape=4, layout=jr.Layout.AOS)
    soa = jr.Vector.field(3, jr.f32, shape=4, layout=jr.Layout.SOA)
    m = jr.Matrix.field(2, 2, jr.f32, shape=4, layout=jr.Layout.SOA)
    assert aos.shape == soa.shape == m.shape == (4,)
    soa[1] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(soa.to_numpy()[1], [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="layout must be jr.Layout.AOS or jr.Layout.SOA"):
        jr.Vector.field(3, jr.f32, shape=4, layout="soa")
