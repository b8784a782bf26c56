"""Python-scope vectors and matrices behave as Taichi's `ti.Vector`/`ti.Matrix` objects
(jitrt/host_matrix.py): methods, numpy interop and result types, element types, and use in
kernels (as arguments and as captured constants)."""
import operator

import numpy as np
import pytest

import jitrt as jr


@pytest.fixture(autouse=True)
def _program():
    jr.init(arch=jr.cpu)


def test_construction_and_element_types():
    v = jr.Vector([1, 2])
    assert isinstance(v, jr.Vector) and isinstance(v, jr.Matrix)
    assert (v.n, v.m) == (2, 1) and v.get_shape() == (2,)
    assert v.dtype == np.int64                      # numpy's inference, as Taichi's entries
    assert jr.Vector([1, 2], dt=jr.f32).dtype == np.float32
    assert jr.Vector([1, 2], jr.f64).dtype == np.float64
    assert jr.Vector([1, 2], dtype=jr.i32).dtype == np.int32
    m = jr.Matrix([[1, 2, 3], [4, 5, 6]])
    assert isinstance(m, jr.Matrix) and not isinstance(m, jr.Vector)
    assert (m.n, m.m, len(m)) == (2, 3, 2)
    with pytest.raises(TypeError, match="list, tuple or numpy array"):
        jr.Vector(3)
    with pytest.raises(ValueError, match="shape"):
        jr.Matrix(np.zeros((2, 2, 2)))


def test_to_numpy_to_list_and_iteration():
    m = jr.Matrix([[2, 3, 4], [5, 6, 7]])
    out = m.to_numpy()
    assert type(out) is np.ndarray and out.tolist() == [[2, 3, 4], [5, 6, 7]]
    out[0, 0] = 99                                   # a copy
    assert m[0, 0] == 2
    assert list(m) == [[2, 3, 4], [5, 6, 7]] and m.to_list() == [[2, 3, 4], [5, 6, 7]]
    v = jr.Vector([2, 3])
    assert list(v) == [2, 3] and len(v) == 2
    assert np.asarray(v).tolist() == [2, 3]
    assert str(v) == "[2 3]" and repr(v) == "[2 3]"
    assert {v: 1}[v] == 1                            # hashable by identity, as in Taichi


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.matmul])
def test_arithmetic_gives_matrices(op):
    a, b = np.array([[1., 2.], [3., 4.]]), np.array([[5., 6.], [7., 8.]])
    for left, right in ((jr.Matrix(a), jr.Matrix(b)), (jr.Matrix(a), b), (a, jr.Matrix(b))):
        c = op(left, right)
        assert isinstance(c, jr.Matrix), (op, type(left), type(right))
        np.testing.assert_allclose(c.to_numpy(), op(a, b))
    np.testing.assert_allclose((2 * jr.Matrix(a)).to_numpy(), 2 * a)
    np.testing.assert_allclose((jr.Matrix(a) - 1).to_numpy(), a - 1)


def test_matrix_vector_product_is_a_vector():
    mv = jr.Matrix([[1, 2], [3, 4]]) @ jr.Vector([1, 1])
    assert isinstance(mv, jr.Vector) and mv.tolist() == [3, 7]
    m = jr.Matrix([[1, 2], [3, 4]])
    m += jr.Matrix([[1, 1], [1, 1]])
    assert isinstance(m, jr.Matrix) and m.to_list() == [[2, 3], [4, 5]]


def test_vector_methods():
    v = jr.Vector([3.0, 4.0])
    assert v.norm() == pytest.approx(5.0) and v.norm_sqr() == pytest.approx(25.0)
    assert v.norm_inv() == pytest.approx(0.2)
    np.testing.assert_allclose(v.normalized().to_numpy(), [0.6, 0.8])
    assert v.dot(jr.Vector([1.0, 2.0])) == pytest.approx(11.0)
    assert jr.Vector([1, 2]).cross(jr.Vector([3, 4])) == -2          # 2-D: a number
    c = jr.Vector([1, 0, 0]).cross([0, 1, 0])
    assert isinstance(c, jr.Vector) and c.tolist() == [0, 0, 1]
    o = jr.Vector([1, 2]).outer_product(jr.Vector([3, 4]))
    assert isinstance(o, jr.Matrix) and o.to_list() == [[3, 4], [6, 8]]
    t = jr.Vector([1, 2]).transpose()                # Taichi: a 1 x n matrix
    assert isinstance(t, jr.Matrix) and t.to_list() == [[1, 2]]
    assert jr.Vector([1.5, 2.5]).cast(jr.i32).tolist() == [1, 2]
    with pytest.raises(ValueError, match="two vectors of one size"):
        v.dot([1.0, 2.0, 3.0])


def test_matrix_methods():
    m = jr.Matrix([[1.0, 2.0], [3.0, 4.0]])
    assert m.trace() == pytest.approx(5.0)
    assert m.determinant() == pytest.approx(-2.0)
    np.testing.assert_allclose((m @ m.inverse()).to_numpy(), np.eye(2), atol=1e-12)
    assert m.transpose().to_list() == [[1.0, 3.0], [2.0, 4.0]]
    assert jr.Matrix.diag(2, 5.0).to_list() == [[5.0, 0.0], [0.0, 5.0]]
    assert jr.Matrix.rows([jr.Vector([1, 2]), [3, 4]]).to_list() == [[1, 2], [3, 4]]
    assert jr.Matrix.cols([[1, 2], [3, 4]]).to_list() == [[1, 3], [2, 4]]
    with pytest.raises(ValueError, match="square"):
        jr.Matrix([[1, 2, 3], [4, 5, 6]]).inverse()


def test_vector_types_at_python_scope_follow_default_fp():
    assert jr.math.vec3(1, 2, 3).dtype == np.float32
    assert isinstance(jr.math.vec3(1, 2, 3), jr.Vector)
    assert jr.math.ivec2(1, 2).dtype == np.int32
    assert jr.math.vec2(7).tolist() == [7.0, 7.0]
    assert isinstance(jr.math.mat2(1, 2, 3, 4), jr.Matrix)
    with pytest.raises(ValueError, match="has 3 components, got 2"):
        jr.math.vec3(1, 2)
    jr.init(arch=jr.cpu, default_fp=jr.f64)
    assert jr.math.vec3(1, 2, 3).dtype == np.float64


def test_field_elements_compute_as_matrices():
    t1 = jr.Matrix.field(2, 2, dtype=jr.i32, shape=())
    t2 = jr.Matrix.field(2, 2, dtype=jr.i32, shape=())
    a, b = np.array([[1, 2], [3, 4]]), np.array([[5, 6], [7, 8]])
    t1[None], t2[None] = a.tolist(), b.tolist()
    for op in (operator.add, operator.sub, operator.matmul):
        c = op(t1[None], t2[None])
        assert isinstance(c, jr.Matrix)
        np.testing.assert_array_equal(c.to_numpy(), op(a, b))
    assert t1[None].transpose().to_list() == [[1, 3], [2, 4]]
    assert t1[None].determinant() == pytest.approx(-2.0)
    v = jr.Vector.field(2, jr.f32, shape=())
    v[None] = jr.Vector([3, 4])
    assert all(v[None] == jr.Vector([3, 4]))
    assert v[None].normalized().tolist() == pytest.approx([0.6, 0.8])


def test_python_scope_vectors_in_kernels():
    gravity = jr.Vector([0.0, -9.8])
    out = jr.Vector.field(2, jr.f32, shape=2)

    @jr.kernel
    def k(w: jr.types.vector(2, jr.f32)):
        out[0] = gravity * 2
        out[1] = w

    k(jr.Vector([1.5, 2.5]))
    np.testing.assert_allclose(out.to_numpy(), [[0.0, -19.6], [1.5, 2.5]], rtol=1e-6)
    k(jr.math.vec2(3, 4))
    np.testing.assert_allclose(out.to_numpy()[1], [3.0, 4.0])


def test_comparing_python_scope_vectors_has_a_truth_value():
    v = jr.Vector([3, 4])
    assert v == [3, 4] and v == jr.Vector([3, 4]) and [3, 4] == v and np.array([3, 4]) == v
    assert not (v == [3, 5]) and v != [3, 5] and not (v != [3, 4])
    assert v < [4, 5] and not (v < [4, 4]) and v >= 3 and not (v > 3)
    m = jr.Matrix([[1, 2], [3, 4]])
    assert m == [[1, 2], [3, 4]] and not (m == [[1, 2], [3, 5]])
    assert (v == [3, 5]).tolist() == [True, False]      # still the element-wise array
    assert type(~(v == [3, 5])) is np.ndarray            # numpy operations: plain arrays
    got = (v < jr.Vector([5, 4])).to_numpy()             # Taichi's comparison Matrix has it
    assert got.dtype == np.bool_ and got.tolist() == [True, False]


def test_a_kernels_vector_or_matrix_result_is_a_python_scope_vector_or_matrix():
    @jr.kernel
    def vec() -> jr.math.vec3:
        return jr.math.vec3(1, 2, 3)

    @jr.kernel
    def pair() -> (jr.i32, jr.types.matrix(2, 2, jr.i32)):
        return 7, jr.Matrix([[1, 2], [3, 4]])

    r = vec()
    assert isinstance(r, jr.Vector) and r == [1.0, 2.0, 3.0] and not (r == [1.0, 2.0, 4.0])
    assert r.norm_sqr() == pytest.approx(14.0)
    s, m = pair()
    assert s == 7 and isinstance(m, jr.Matrix) and m == [[1, 2], [3, 4]]
    assert m.trace() == 5


def test_select_of_python_scope_vectors_is_a_vector():
    r = jr.select(jr.Vector([1, 0]), jr.Vector([2, 3]), jr.Vector([4, 5]))
    assert isinstance(r, jr.Vector) and r == jr.Vector([2, 5])
    assert type(jr.select(np.array([True, False]), 1, 2)) is np.ndarray


def test_trace_of_a_non_square_matrix_is_taichis_compilation_error():
    m = jr.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]])
    with pytest.raises(jr.TaichiCompilationError,
                       match=r"trace: expected a square matrix, got shape \(3, 2\)") as info:
        m.trace()
    assert isinstance(info.value, ValueError)

    @jr.kernel
    def k():
        x = jr.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]])
        print(x.trace())
    with pytest.raises(jr.TaichiCompilationError,
                       match=r"expected a square matrix, got shape \(3, 2\)"):
        k()


def test_a_python_scope_vector_is_a_template_compiled_in_by_value():
    @jr.kernel
    def compare(a: jr.template(), b: jr.template(), c: jr.template()):
        for i in jr.static(range(3)):
            c[i * 2] = a[i] < b[i]
            c[i * 2 + 1] = a[i] == b[i]

    a, b = jr.Vector([1, 1, 2]), jr.Vector([2, 1, 1])
    c = jr.field(jr.i32, shape=6)
    compare(a, b, c)
    assert c.to_numpy().tolist() == [1, 0, 0, 1, 0, 0]
    a[0] = 2                         # changed in place: the values compiled in are a copy
    compare(a, b, c)
    assert c.to_numpy().tolist() == [0, 1, 0, 1, 0, 0]
    compare(jr.Vector([1, 1, 2]), b, c)    # another object of the first values
    assert c.to_numpy().tolist() == [1, 0, 0, 1, 0, 0]

    @jr.kernel
    def norm(v: jr.template()) -> jr.f64:
        return v.norm()
    assert norm(jr.Vector([3.0, 4.0])) == 5.0 and norm(jr.Vector([6.0, 8.0])) == 10.0
