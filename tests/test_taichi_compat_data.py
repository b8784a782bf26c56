"""Python-scope data features published Taichi programs (DiffTaichi, Taichi's examples) use:
vector/matrix element access on the host, `jr.root.lazy_grad()`, dense layouts over any
axes, placing `x.grad` explicitly, `Field.n`/`.m` and `jr.rgb_to_hex`. Expected values are
what Taichi 1.7.4 prints for the same programs (/tmp/difftaichi_trial/t_repro_*.py)."""
import numpy as np
import pytest

import jitrt as jr


# ---- 1. host access to one vector/matrix element -----------------------------------------
def test_vector_element_write_read_and_write_through():
    a = jr.Vector.field(2, jr.f32, shape=(4, 3))
    gen = a.gen
    a[0, 1] = [1.0, 2.0]
    assert a.gen == gen + 1
    np.testing.assert_array_equal(a[0, 1].to_numpy(), [1.0, 2.0])
    assert str(a[0, 1]) == "[1. 2.]"                 # what Taichi prints
    assert a[0, 1][1] == 2.0 and a[0, 1].y == 2.0 and a[0, 1, 1] == 2.0
    np.testing.assert_array_equal(a.to_numpy()[0, 1], [1.0, 2.0])
    np.testing.assert_array_equal(a.to_numpy()[0, 0], [0.0, 0.0])
    s = jr.Vector.field(2, jr.f32, shape=())
    s[None] = [0.1, 0.5]
    gen = s.gen
    s[None][0] -= 1.0                                 # read-modify-write through the proxy
    assert s.gen == gen + 1
    assert s[None][0] == pytest.approx(-0.9) and s[None][0] == np.float32(0.1) - np.float32(1)
    e = a[2, 2]
    e.x = 5.0
    e[1] += 3.0
    np.testing.assert_array_equal(a.to_numpy()[2, 2], [5.0, 3.0])
    a[2, 2] = 7.0                                     # a scalar fills every component
    np.testing.assert_array_equal(e.to_numpy(), [7.0, 7.0])   # a view: sees the field now
    np.testing.assert_array_equal(e + 1, [8.0, 8.0])
    np.testing.assert_array_equal(2 * e - np.ones(2), [13.0, 13.0])
    assert len(e) == 2 and list(e) == [7.0, 7.0] and e.n == 2
    a[1, 0] = a[2, 2]                                 # an element as a value
    np.testing.assert_array_equal(a.to_numpy()[1, 0], [7.0, 7.0])
    assert a[1, 0].norm() == pytest.approx(7 * 2 ** 0.5)


def test_matrix_element_access():
    m = jr.Matrix.field(2, 3, jr.f64, shape=4)
    m[1] = [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(m[1].to_numpy(), [[1, 2, 3], [4, 5, 6]])
    assert m[1][1, 2] == 6.0 and m[1, 1, 2] == 6.0
    m[1][0, 0] += 10.0
    m[1][1][2] = -1.0                                 # a row of the element, written through
    np.testing.assert_array_equal(m[1][1].to_numpy(), [4, 5, -1])
    np.testing.assert_array_equal(m.to_numpy()[1], [[11, 2, 3], [4, 5, -1]])
    np.testing.assert_array_equal(m[1] @ np.ones(3), [16.0, 8.0])
    assert (m.n, m.m, m[0].n, m[0].m) == (2, 3, 2, 3)


def test_element_kernels_see_host_writes_and_host_sees_kernel_writes():
    v = jr.Vector.field(3, jr.f32, shape=5)

    @jr.kernel
    def double():
        for i in v:
            v[i] = v[i] * 2.0
    v[3] = [1.0, 2.0, 3.0]
    double()
    np.testing.assert_array_equal(v[3].to_numpy(), [2.0, 4.0, 6.0])
    e = v[3]
    double()
    assert e[2] == 12.0                               # the view reads the field now


def test_element_access_errors_are_clear():
    a = jr.Vector.field(2, jr.f32, shape=(4, 3), name="a")
    with pytest.raises(ValueError, match=r"a\[\(0, 1\)\] = \.\.\.: a vector element has shape "
                                         r"\(2,\), got a value of shape \(3,\)"):
        a[0, 1] = [1.0, 2.0, 3.0]
    with pytest.raises(IndexError, match=r"give 2 index\(es\) for an element or 3 for one "
                                         r"component, not 1"):
        a[0]
    with pytest.raises(IndexError, match="out of bounds for axis 1 with extent 3"):
        a[0, 3]
    with pytest.raises(IndexError, match="component index 2 is out of range"):
        a[0, 1][2]
    with pytest.raises(IndexError, match="at most 1 index"):
        a[0, 1][0, 0]
    m = jr.Matrix.field(2, 2, jr.f32, shape=3, name="m")
    with pytest.raises(ValueError, match=r"a matrix element has shape \(2, 2\)"):
        m[0] = [1.0, 2.0]
    with pytest.raises(ValueError, match="cannot take a value of shape"):
        m[0][1] = [1.0, 2.0, 3.0]
    s = jr.Vector.field(2, jr.f32, shape=(), name="s")
    with pytest.raises(IndexError, match=r"use x\[None\]"):
        s[0, 0]
    x = jr.field(jr.f32, shape=(4,), name="x")        # scalar fields are unchanged
    x[2] = 3.0
    assert x[2] == 3.0 and isinstance(x[2], float)
    with pytest.raises(IndexError, match=r"x has 1 dimension\(s\)"):
        x[1, 1]
    with pytest.raises(AttributeError, match="holds scalars"):
        x.n
    with pytest.raises(AttributeError, match="holds scalars"):
        x.m


# ---- 2. lazy_grad -------------------------------------------------------------------------
def test_lazy_grad_gives_placed_fields_a_gradient():
    x = jr.field(jr.f32)
    loss = jr.field(jr.f32)
    shaped = jr.field(jr.f32, shape=4)                # Taichi gives it a gradient too
    count = jr.field(jr.i32)
    jr.root.dense(jr.i, 4).place(x, count)
    jr.root.place(loss)
    jr.root.lazy_grad()
    assert x.needs_grad and loss.needs_grad and shaped.needs_grad and shaped.grad.shape == (4,)
    assert count.grad is None

    @jr.kernel
    def f():
        for i in x:
            loss[None] += x[i] ** 2 + shaped[i]
    for i in range(4):
        x[i] = i + 1
    with jr.ad.Tape(loss):
        f()
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0, 6.0, 8.0])   # Taichi's values
    np.testing.assert_allclose(shaped.grad.to_numpy(), [1.0] * 4)


def test_fields_placed_after_lazy_grad_are_not_losses():
    jr.root.lazy_grad()
    late = jr.field(jr.f32, name="late")
    jr.root.place(late)
    assert not late.needs_grad and late.grad is not None and late.grad.implicit
    with pytest.raises(ValueError, match="'late' was created without needs_grad=True"):
        jr.ad.Tape(late)
    jr.root.lazy_grad()                               # called again: now it is one
    jr.ad.Tape(late)


# ---- 3. dense layouts over any axes -------------------------------------------------------
def test_dense_axes_are_the_axes_used_in_axis_order():
    x, y, z = jr.field(jr.f32), jr.field(jr.f32), jr.field(jr.f32)
    v = jr.Vector.field(2, jr.f32)
    jr.root.dense(jr.k, 4).dense(jr.l, 3).place(x, v)
    jr.root.dense(jr.l, 5).place(y)
    jr.root.dense(jr.l, 4).dense(jr.i, 3).place(z)
    assert x.shape == (4, 3) and y.shape == (5,) and z.shape == (3, 4)
    assert v.shape == (4, 3) and v.element_shape == (2,) and v.to_numpy().shape == (4, 3, 2)

    @jr.kernel
    def fill():
        for a, b in z:
            z[a, b] = a * 10 + b
    fill()
    np.testing.assert_array_equal(z.to_numpy(), np.add.outer(np.arange(3) * 10, np.arange(4)))
    with pytest.raises(ValueError, match="axes are jr.i"):
        jr.root.dense((9,), 4)


# ---- 4. placing x.grad explicitly ---------------------------------------------------------
def test_place_grad_explicitly():
    p = jr.field(dtype=jr.f32)
    jr.root.dense(jr.i, 8).place(p)
    assert p.grad is not None and not p.needs_grad    # placed with p, not asked for yet
    jr.root.dense(jr.i, 8).place(p.grad)
    assert p.shape == (8,) and p.grad.shape == (8,) and p.needs_grad   # Taichi: (8,) (8,)
    q = jr.Vector.field(3, jr.f64)
    jr.root.dense(jr.ij, (2, 5)).place(q.grad)        # the gradient first, as Taichi allows
    jr.root.dense(jr.ij, (2, 5)).place(q)
    assert q.grad.shape == (2, 5) and q.grad.element_shape == (3,) and q.needs_grad
    loss = jr.field(jr.f64)
    jr.root.place(loss, loss.grad)

    @jr.kernel
    def f():
        for i, j in q:
            loss[None] += q[i, j].dot(q[i, j])
    q.fill(1.5)
    with jr.ad.Tape(loss):
        f()
    np.testing.assert_allclose(q.grad.to_numpy(), np.full((2, 5, 3), 3.0))


def test_place_grad_errors():
    w = jr.field(jr.f32, name="w")
    jr.root.dense(jr.i, 8).place(w)
    with pytest.raises(ValueError, match=r"gradient 'w.grad' is already placed with shape "
                                         r"\(8,\), not \(4,\)"):
        jr.root.dense(jr.i, 4).place(w.grad)
    u = jr.field(jr.f32, name="u")
    jr.root.dense(jr.i, 4).place(u.grad)
    with pytest.raises(ValueError, match=r"its gradient was placed with shape \(4,\)"):
        jr.root.dense(jr.i, 5).place(u)
    with pytest.raises(TypeError, match="got None"):
        jr.root.place(jr.field(jr.f32, shape=3).grad)
    assert jr.field(jr.i32).grad is None              # integers have no gradient


def test_a_loss_whose_gradient_was_never_placed_is_refused():
    loss = jr.field(jr.f32, name="loss")
    jr.root.place(loss)
    with pytest.raises(ValueError, match="'loss' was created without needs_grad=True .*"
                                         "neither placed nor given by jr.root.lazy_grad"):
        jr.ad.Tape(loss)


# ---- 5. Field.n / Field.m, rgb_to_hex -----------------------------------------------------
def test_field_n_and_m():
    pos = jr.Vector.field(2, jr.f32, shape=4)
    mat = jr.Matrix.field(3, 2, jr.f32, shape=4)
    assert (pos.n, pos.m, mat.n, mat.m) == (2, 1, 3, 2)     # Taichi: a vector's m is 1
    pending = jr.Vector.field(4, jr.f32)
    assert pending.n == 4
    assert jr.Vector.ndarray(3, jr.f32, shape=2).n == 3


def test_rgb_to_hex():
    assert jr.rgb_to_hex([1.0, 0.5, 0.0]) == 0xFF7F00        # Taichi: 16744192
    assert jr.rgb_to_hex((0.0, 0.0, 1.0)) == 0x0000FF
    assert jr.rgb_to_hex((2.0, -1.0, 0.999)) == 0xFF00FE      # clipped, truncated
    out = jr.rgb_to_hex(np.array([[1.0, 0.0], [0.5, 0.2], [0.0, 1.0]]))   # (3, N)
    np.testing.assert_array_equal(out, [16744192, 13311])      # Taichi's values
    with pytest.raises(ValueError, match="red, green and blue along the first axis"):
        jr.rgb_to_hex([1.0, 0.5])


def test_an_ndarrays_element_type_is_taichis():
    b = jr.ndarray(jr.types.vector(3, jr.i32), shape=(4, 4))
    assert b.element_type.element_type() == jr.i32 and b.element_type.shape() == [3]
    c = jr.ndarray(jr.types.matrix(3, 4, jr.f32), shape=(2,))
    assert c.element_type.shape() == [3, 4] and repr(c.element_type) == "[Tensor (3, 4) f32]"
    assert c.element_type == jr.ndarray(jr.types.matrix(3, 4, jr.f32), shape=5).element_type
    assert c.element_type != b.element_type
    assert jr.ndarray(jr.f64, shape=3).element_type is jr.f64
