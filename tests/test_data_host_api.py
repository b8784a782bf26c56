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


# ---- fill, to_numpy(keep_dims, dtype), from_numpy of vector columns/rows ----------------------
def test_fill_with_an_element_value_or_a_number():
    m = jr.Matrix.field(2, 3, jr.i32, shape=(4, 7))
    mat = jr.Matrix([[0, 1, 2], [2, 3, 4]])
    gen = m.gen
    m.fill(mat)
    assert m.gen == gen + 1 and (m[3, 6] == mat).all()
    x = jr.ndarray(jr.types.vector(2, jr.f32), (5, 5))
    x.fill(1.0)
    assert x[2, 2].to_numpy().tolist() == [1.0, 1.0]
    x.fill(jr.types.vector(2, jr.f32)(2.0, 4.0))
    assert x[3, 3].to_numpy().tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match=r"the value has shape \(3,\); an element has shape "
                                         r"\(2,\)"):
        x.fill([1, 2, 3])


def test_to_numpy_keep_dims_and_dtype_and_from_numpy_of_a_column():
    vec = jr.Vector.field(3, jr.i32, shape=(4, 7))
    vec.from_numpy(np.arange(84, dtype=np.int32).reshape(4, 7, 3, 1))
    assert vec[1, 2].to_numpy().tolist() == [27, 28, 29]
    vec.from_numpy(np.ones((4, 7, 1, 3), np.int32))
    assert vec.to_numpy().shape == (4, 7, 3)
    assert vec.to_numpy(keep_dims=True).shape == (4, 7, 3, 1)
    mat = jr.Matrix.field(3, 4, jr.i32, shape=(2,))
    assert mat.to_numpy(keep_dims=True).shape == (2, 3, 4)
    assert vec.to_numpy(dtype=jr.f64).dtype == np.float64


# ---- Python-scope vectors: pieces end to end, swizzles --------------------------------------
def test_vector_constructor_lays_pieces_end_to_end():
    v = jr.math.vec3([0, 1], 2)
    assert v.tolist() == [0, 1, 2] and isinstance(v, jr.Vector)
    vec3i = jr.types.vector(3, jr.i32)
    assert vec3i(4.8, jr.types.vector(2, jr.f32)(3.2)).tolist() == [4, 3, 3]
    with pytest.raises(ValueError, match="has 3 components, got 4 values"):
        jr.math.vec3([0, 1], [2, 3])


def test_python_scope_swizzles_read_and_write():
    v = jr.math.vec3(1, 2, 3)
    assert v.x == 1 and v.b == 3 and v.zyx.tolist() == [3, 2, 1]
    assert isinstance(v.xy, jr.Vector) and v.xxxx.tolist() == [1, 1, 1, 1]
    v.rgb += 1
    v.zy = (10, 20)
    assert v.tolist() == [2, 20, 10]
    v.stp = 0
    assert v.tolist() == [0, 0, 0]
    with pytest.raises(AttributeError, match="swizzle 'w' reaches component 3 of a vector "
                                             "of 3"):
        v.w
    with pytest.raises(AttributeError, match="has no attribute 'xr'"):
        v.xr
    w = jr.math.vec2(1, 2)
    assert not hasattr(w, "z")
    with pytest.raises(jr.TaichiSyntaxError, match=r"vec2 only has attributes=\('x', 'y'\), "
                                                   r"got=\('x', 'y', 'z'\)"):
        w.xyz = [1, 2, 3]            # assigning past the vector: Taichi's syntax error
    with pytest.raises(jr.TaichiSyntaxError, match=r"got=\('z',\)"):
        w.z = 3
    with pytest.raises(ValueError, match="value len does not match the swizzle pattern=xy: 2 "
                                         r"component\(s\), got 3 value\(s\)") as info:
        w.xy = [1, 2, 3]
    assert isinstance(info.value, jr.TaichiRuntimeError) and w.tolist() == [1, 2]


# ---- order= and declaration errors ---------------------------------------------------------
def test_order_is_checked_and_kept_values_are_the_same():
    a = jr.field(jr.i32, shape=(4, 3, 2), order="kji")
    b = jr.Vector.field(2, jr.i32, shape=(4, 3), order="ji")
    assert a.layout == (2, 1, 0) and b.layout == (1, 0)

    @jr.kernel
    def fill():
        for i, j, k in a:
            a[i, j, k] = i * 100 + j * 10 + k
        for i, j in b:
            b[i, j] = [i, j]

    fill()
    assert a[3, 2, 1] == 321 and a.to_numpy()[1, 2, 0] == 120
    assert b[3, 1].to_numpy().tolist() == [3, 1]


@pytest.mark.parametrize("make,message", [
    (lambda: jr.field(jr.f32, shape=3, order="ij"),
     "The dimensionality of shape and order must be the same"),
    (lambda: jr.field(jr.f32, shape=None, order="i"), "shape cannot be None when order is set"),
    (lambda: jr.Vector.field(3, jr.f32, shape=(3, 4, 3), order="iii"),
     "The axes in order must be different"),
    (lambda: jr.Matrix.field(2, 2, jr.f32, shape=(3, 4, 3), order="ijl"),
     "Invalid axis 'l' in order 'ijl': a field of 3 axes takes 'ijk'"),
    (lambda: jr.field(jr.f32, shape=3, offset=(3, 4)),
     "The dimensionality of shape and offset must be the same"),
    (lambda: jr.Vector.field(3, jr.f32, shape=None, offset=(3,)),
     "shape cannot be None when offset is set"),
])
def test_declaration_errors_are_compile_errors_and_value_errors_at_the_users_line(make,
                                                                                 message):
    with pytest.raises(jr.TaichiCompilationError, match=message) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert info.value.filename == __file__         # the lambda's line in this file
    assert "lambda: jr." in str(info.value)


# ---- x.fill(v) inside kernels ----------------------------------------------------------------
def test_fill_in_a_kernel_at_the_top_and_inside_a_loop():
    val = jr.field(jr.i32, shape=(4, 7), offset=(-2, 3))
    m = jr.Matrix.field(2, 3, jr.i32, shape=5)

    @jr.kernel
    def top(v: jr.i32, w: jr.types.matrix(2, 3, jr.i32)):
        val.fill(v)
        m.fill(w)

    @jr.kernel
    def looped():
        jr.loop_config(serialize=True)     # (a parallel outer loop would race: any of 10..12)
        for i in range(3):
            m.fill(i + 10)            # a number: every component

    gen = val.gen
    top(3, jr.Matrix([[4, 5, 6], [6, 7, 8]]))
    assert val.gen > gen and (val.to_numpy() == 3).all()
    assert m[4].to_numpy().tolist() == [[4, 5, 6], [6, 7, 8]]
    looped()
    assert (m.to_numpy() == 12).all()


def test_python_scope_field_methods_in_a_kernel_are_named():
    x = jr.field(jr.f32, shape=3)
    y = jr.field(jr.f32, shape=3)

    @jr.kernel
    def k():
        x.copy_from(y)

    with pytest.raises(jr.KernelCompileError, match=r"copy_from\(\) of a field runs at Python "
                                                    r"scope only .*fields have fill\(\)"):
        k()
