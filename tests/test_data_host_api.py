"""Taichi's Python-scope data API on jitrt's fields and ndarrays (issue 29): `copy_from` for
every field class and ndarray, host access to struct elements (`s[i].a`, `s[i]["a"]`).
Expected values are what the same Taichi 1.7.4 calls give."""
import numpy as np
import pytest

import jitrt as jr


# ---- copy_from ---------------------------------------------------------------------------
def test_copy_from_converts_and_pairs_elements_by_position_across_offsets():
    x = jr.field(jr.f32, shape=8, offset=4)
    y = jr.field(jr.i32, shape=8, offset=-4)
    y[-4], y[3] = 7, 9
    gen = x.gen
    x.copy_from(y)
    assert x.gen == gen + 1                   # a host write: caches see it
    assert x[4] == 7.0 and x[11] == 9.0 and x.dtype == jr.f32
    assert y.to_numpy().tolist() == [7, 0, 0, 0, 0, 0, 0, 9]     # the source is unchanged
    f = jr.field(jr.i32, shape=3)
    g = jr.field(jr.f32, shape=3)
    g.from_numpy(np.array([1.75, -2.5, 3.0], np.float32))
    f.copy_from(g)                            # float -> int truncates, as a kernel's store
    assert f.to_numpy().tolist() == [1, -2, 3]


def test_copy_from_vector_and_matrix_fields_and_ndarrays():
    a = jr.Vector.field(3, jr.f32, shape=4)
    b = jr.Vector.field(3, jr.f32, shape=4)
    b[2] = (1, 2, 3)
    a.copy_from(b)
    assert a[2].to_numpy().tolist() == [1, 2, 3]
    m = jr.Matrix.ndarray(2, 2, jr.i32, 5)
    k = jr.Matrix.ndarray(2, 2, jr.i32, 5)
    k[4][1, 0] = 3
    m.copy_from(k)
    assert m[4][1, 0] == 3 and m[0][0, 0] == 0


def test_copy_from_refuses_what_is_not_a_buffer_of_the_same_shape():
    x = jr.field(jr.f32, shape=(2, 3))
    with pytest.raises(TypeError, match="a field copies from another field, got ndarray"):
        x.copy_from(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="got Ndarray"):
        x.copy_from(jr.ndarray(jr.f32, (2, 3)))
    for shape in [(2,), (2, 2), (2, 3, 4)]:
        with pytest.raises(ValueError, match=r"has shape .* this field \(2, 3\)"):
            x.copy_from(jr.field(jr.f32, shape=shape))
    v = jr.Vector.field(2, jr.f32, shape=(2, 3))
    with pytest.raises(ValueError, match=r"element \(2,\)"):
        x.copy_from(v)


# ---- struct fields at Python scope ---------------------------------------------------------
def test_struct_element_members_read_and_write_through():
    C = jr.types.struct(i=jr.i32, f=jr.f32, v=jr.types.vector(3, jr.f32))
    x = C.field(shape=4)
    gen = x.i.gen
    x[1].i = 2
    assert x.i.gen == gen + 1
    x[2]["f"] = 1.5
    x[3].v = (1, 2, 3)
    x[3].v[0] = 5
    assert (x[1].i, x[2]["f"], x[3].v[2], x[3].v[0]) == (2, 1.5, 3.0, 5.0)
    assert x.i.to_numpy().tolist() == [0, 2, 0, 0]
    x[0] = {"i": 4, "f": 0.5, "v": (1, 1, 1)}
    assert x[0].to_dict()["v"].tolist() == [1, 1, 1] and x[0].i == 4
    s = jr.Struct.field({"a": jr.i32, "b": jr.i32}, shape=())
    s[None].a = 2
    assert s[None].a == 2 and s.a[None] == 2
    with pytest.raises(AttributeError, match="struct has no member 'c'"):
        s[None].c = 1


def test_struct_field_copy_from_and_element_read_in_a_kernel():
    C = jr.types.struct(i=jr.i32, f=jr.f32)
    x, y = C.field(shape=16), C.field(shape=16)
    x[1].i = 2
    y[0].f = 1.0
    y[2].i = 3
    x.copy_from(y)
    assert (x[0].f, x[1].i, x[2].i) == (1.0, 0, 3)
    with pytest.raises(TypeError, match="struct field copies from another struct field"):
        x.copy_from(y.i)
    out = jr.field(jr.i32, shape=())

    @jr.kernel
    def read():
        out[None] = x[2].i * 10

    read()
    assert out[None] == 30
