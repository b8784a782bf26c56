"""Dense SNode layouts as in Taichi: fields declared without a shape, placed by
jr.root.dense(...).place(...), chained levels multiplying their extents."""
import numpy as np
import pytest

import jitrt as jr


def test_dense_layouts_place_fields():
    x = jr.field(jr.f32)
    y = jr.field(jr.f64, needs_grad=True)
    v = jr.Vector.field(2, jr.f32)
    s = jr.field(jr.f32)
    rows = jr.field(jr.i32)
    jr.root.dense(jr.ij, (4, 4)).dense(jr.ij, (2, 2)).place(x, y, v)
    jr.root.place(s)
    jr.root.dense(jr.i, 3).dense(jr.j, 5).place(rows)
    jr.root.lazy_grad()
    assert isinstance(x, jr.Field) and x.shape == (8, 8) and v.shape == (8, 8)
    assert y.grad.shape == (8, 8) and s.shape == () and rows.shape == (3, 5)

    @jr.kernel
    def k():
        for i, j in x:
            x[i, j] = i * 10 + j
            v[i, j] = [i, j]
            y[i, j] = x[i, j] * 2.0
            s[None] += 1.0
        for i, j in rows:
            rows[i, j] = i * j
    k()
    i, j = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(x.to_numpy(), i * 10 + j)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([i, j], -1))
    assert s[None] == 64.0
    np.testing.assert_array_equal(rows.to_numpy(), np.outer(np.arange(3), np.arange(5)))
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def total():
        for a, b in y:
            loss[None] += y[a, b] * y[a, b]
    with jr.ad.Tape(loss=loss):
        total()
    np.testing.assert_allclose(y.grad.to_numpy(), 2 * y.to_numpy())


def test_unplaced_fields_and_misuse_are_clear_errors():
    z = jr.field(jr.f32, name="z")

    @jr.kernel
    def k():
        for q in range(4):
            z[q] = 1.0
    with pytest.raises(jr.KernelCompileError, match="'z' has no shape yet"):
        k()
    with pytest.raises(RuntimeError, match="'z' has no shape yet"):
        z.fill(0)
    placed = jr.field(jr.f32, shape=(3,))
    with pytest.raises(ValueError, match="already placed"):
        jr.root.dense(jr.i, 4).place(placed)
    with pytest.raises(NotImplementedError, match="sparse"):
        jr.root.pointer(jr.i, 4)
    with pytest.raises(TypeError, match="place\\(\\) takes fields"):
        jr.root.dense(jr.i, 4).place(3)


def test_a_loop_over_the_level_above_a_field_runs_over_its_indices():
    x = jr.field(jr.i32)
    jr.root.dense(jr.ij, (3, 7)).dense(jr.ij, (2, 4)).place(x)

    @jr.kernel
    def iterate():
        for i, j in x.parent():       # Taichi's test_struct_for_intermediate.py
            x[i, j] += i * 100 + j

    iterate()
    i, j = np.indices((6, 28))
    np.testing.assert_array_equal(x.to_numpy(), i * 100 + j)
    assert x.parent().shape == (6, 28)
    with pytest.raises(NotImplementedError, match=r"parent\(2\)"):
        x.parent(2)
