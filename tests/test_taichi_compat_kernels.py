"""Kernel-language spellings of published Taichi programs (DiffTaichi, Taichi's FEM/PBF
examples): vector atomics, `Matrix.diag/rows/cols`, `jr.min/max/abs`, `normalized(eps)` and
class-called methods, numpy arrays as constant vectors, `x.n`/`x.m` of fields. Values are the
ones Taichi 1.7.4 prints for the same programs; gradients are checked against finite
differences; misuse is a located KernelCompileError."""
import pathlib

import numpy as np
import pytest

import jitrt as jr

GRAVITY = jr.Vector([0, -40])          # at Python scope: a numpy array (as Taichi's programs)
BALL = np.array([[0.5, 0.0], [1.0, 2.0]])
EPS = 1e-6


def finite_difference(value, arr):
    num = np.zeros_like(arr)
    for idx in np.ndindex(*arr.shape):
        plus, minus = arr.copy(), arr.copy()
        plus[idx] += EPS
        minus[idx] -= EPS
        num[idx] = (value(plus) - value(minus)) / (2 * EPS)
    return num


# ---- 1. atomics on whole vector elements -------------------------------------------------------
def test_atomic_add_on_a_vector_element_is_element_wise():
    v = jr.Vector.field(2, jr.f32, shape=2)
    old = jr.Vector.field(2, jr.f32, shape=3)
    m = jr.Matrix.field(2, 2, jr.i32, shape=())

    @jr.kernel
    def k():
        for i in range(3):
            d = jr.Vector([1.0, 2.0])
            jr.atomic_add(v[1], d)                        # Taichi prints [[0 0] [3 6]]
        for i in range(3):
            old[i] = jr.atomic_add(v[0], [1.0, 10.0])     # the old vector
        jr.atomic_sub(m[None], jr.Matrix([[1, 2], [3, 4]]))
        jr.atomic_max(m[None], -2)                        # a scalar is broadcast

    k()
    np.testing.assert_array_equal(v.to_numpy(), [[3, 30], [3, 6]])
    olds = sorted(map(tuple, old.to_numpy()))
    assert olds == [(0, 0), (1, 10), (2, 20)]
    np.testing.assert_array_equal(m.to_numpy(), [[-1, -2], [-2, -2]])


def test_atomics_on_a_component_or_a_row_of_an_element():
    v = jr.Vector.field(2, jr.f32, shape=2)
    m = jr.Matrix.field(2, 2, jr.i32, shape=())
    olds = jr.field(jr.i32, shape=4)

    @jr.kernel
    def k():
        for i in range(4):
            jr.atomic_add(v[1][0], 1.5)
            olds[i] = jr.atomic_add(m[None][1], jr.Vector([1, 2]))[1]

    k()
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0], [6, 0]])
    np.testing.assert_array_equal(m.to_numpy(), [[0, 0], [4, 8]])
    assert sorted(olds.to_numpy()) == [0, 2, 4, 6]


def test_atomic_min_max_on_vector_elements_and_plus_equals():
    lo = jr.Vector.field(3, jr.f64, shape=())
    hi = jr.Vector.field(3, jr.f64, shape=())
    acc = jr.Vector.field(3, jr.f64, shape=())
    data = np.random.default_rng(1).uniform(-5, 5, (64, 3))
    a = jr.Vector.field(3, jr.f64, shape=64)
    a.from_numpy(data)
    lo.fill(1e9)
    hi.fill(-1e9)

    @jr.kernel
    def k():
        for i in a:
            jr.atomic_min(lo[None], a[i])
            jr.atomic_max(hi[None], a[i])
            acc[None] += a[i]

    k()
    np.testing.assert_array_equal(lo.to_numpy(), data.min(0))
    np.testing.assert_array_equal(hi.to_numpy(), data.max(0))
    np.testing.assert_allclose(acc.to_numpy(), data.sum(0), rtol=1e-12)


def test_atomic_add_of_vectors_differentiates_like_the_scalar_form(rng):
    n = 8
    x = jr.Vector.field(2, jr.f64, shape=n, needs_grad=True)
    total = jr.Vector.field(2, jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def gather():
        for i in x:
            jr.atomic_add(total[None], x[i] * x[i][0])
            jr.atomic_sub(total[None], jr.Vector([x[i][1], 0.5]))

    @jr.kernel
    def reduce():
        loss[None] += total[None][0] * 3.0 + total[None][1] ** 2

    def value(xv):
        t = (xv * xv[:, :1]).sum(0) - np.array([xv[:, 1].sum(), 0.5 * n])
        return t[0] * 3.0 + t[1] ** 2

    xv = rng.uniform(-1, 1, (n, 2))
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        gather()
        reduce()
    assert loss[None] == pytest.approx(value(xv), rel=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(value, xv), rtol=1e-6,
                               atol=1e-6)


# ---- 2. and 5. Matrix.diag, Matrix.rows, Matrix.cols ------------------------------------------
def test_matrix_diag_rows_and_cols():
    out = jr.Matrix.field(2, 2, jr.f32, shape=())
    cols = jr.Matrix.field(2, 3, jr.f32, shape=2)

    @jr.kernel
    def k(s: jr.f32):
        out[None] = jr.Matrix.diag(dim=2, val=1) + jr.Matrix.diag(2, s)

    @jr.kernel
    def build():
        a = jr.Vector([1.0, 2.0])
        b = jr.Vector([3.0, 4.0])
        out[None] = jr.Matrix.cols([a, b])                      # Taichi: [[1 3] [2 4]]
        cols[0] = jr.Matrix.rows([[1.0, 2.0, 3.0], jr.Vector([4.0, 5.0, 6.0])])
        cols[1] = jr.Matrix.cols([a, b, a + b])

    k(1.5)
    np.testing.assert_array_equal(out.to_numpy(), [[2.5, 0], [0, 2.5]])
    build()
    np.testing.assert_array_equal(out.to_numpy(), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(cols.to_numpy(), [[[1, 2, 3], [4, 5, 6]],
                                                    [[1, 3, 4], [2, 4, 6]]])


# ---- 3. jr.min, jr.max, jr.abs (and Python's min/max/abs) -------------------------------------
def test_min_max_abs_scalars_vectors_and_any_number_of_arguments():
    @jr.kernel
    def k(a: jr.f32, b: jr.f32) -> jr.types.vector(2, jr.f32):
        return jr.Vector([jr.min(a, b), jr.max(a, b)])          # Taichi: (1.0, 3.0)

    @jr.kernel
    def absolute(v: jr.f32) -> jr.f32:
        return jr.abs(v)                                        # Taichi: 2.5

    @jr.kernel
    def many(a: jr.i32) -> jr.types.matrix(4, 3, jr.i32):
        x = jr.Vector([0, 1, 2])
        y = jr.Vector([3, 4, 5])
        return jr.Matrix.rows([jr.max(x, y, 4), jr.min(x, y, 1), max(x, a, 1),
                               jr.abs(jr.math.min(x - 5, -a))])

    assert tuple(k(3.0, 1.0)) == (1.0, 3.0)
    assert absolute(-2.5) == 2.5
    np.testing.assert_array_equal(many(2), [[4, 4, 5], [0, 1, 1], [2, 2, 2], [5, 4, 3]])
    assert jr.min(3, 1, 2) == 1 and jr.max(np.array([1, 5]), 3).tolist() == [3, 5]
    assert jr.abs(-2) == 2 and jr.math.max is jr.max


def test_min_max_abs_gradients_match_finite_differences(rng):
    n = 6
    x = jr.Vector.field(3, jr.f64, shape=n, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            w = jr.max(v, 0.1, v.zyx * 0.5)
            loss[None] += jr.min(v, -v.yzx).sum() + w.dot(jr.abs(v)) + abs(v[0]) * \
                max(v[1], v[2]) + jr.min(v[0], v[1], v[2])

    def value(xv):
        w = np.maximum(np.maximum(xv, 0.1), xv[:, ::-1] * 0.5)
        other = -xv[:, [1, 2, 0]]
        return (np.minimum(xv, other).sum() + (w * np.abs(xv)).sum()
                + (np.abs(xv[:, 0]) * np.maximum(xv[:, 1], xv[:, 2])).sum() + xv.min(1).sum())

    xv = rng.uniform(-1, 1, (n, 3))
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        k()
    assert loss[None] == pytest.approx(value(xv), rel=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(value, xv), rtol=1e-6,
                               atol=1e-6)


# ---- 4. normalized(eps), norm(eps), and methods called through the class ----------------------
def test_normalized_with_eps_and_class_called_methods():
    out = jr.Vector.field(2, jr.f32, shape=3)
    s = jr.field(jr.f64, shape=4)

    @jr.kernel
    def k():
        d = jr.Vector([3.0, 4.0])
        out[0] = jr.Vector.normalized(d, 1e-6)
        out[1] = d.normalized(1e-6)
        out[2] = jr.Vector.normalized(d) * jr.Vector.dot(d, d)

    @jr.kernel
    def norms():
        d = jr.Vector([3.0, 4.0])
        m = jr.Matrix([[1.0, 2.0], [3.0, 4.0]])
        s[0] = d.norm(11.0)
        s[1] = d.norm_inv(11.0)
        s[2] = jr.Matrix.determinant(m) + jr.Matrix.trace(m)
        s[3] = jr.Matrix.transpose(m)[0, 1] + d.normalized(5.0)[1]

    k()
    # Taichi 1.7.4 prints [[0.5999999 0.79999983] [0.5999999 0.79999983]]
    np.testing.assert_array_equal(out.to_numpy()[:2],
                                  np.float32([[0.5999999, 0.79999983]] * 2))
    np.testing.assert_allclose(out.to_numpy()[2], [15, 20], rtol=1e-6)
    norms()
    np.testing.assert_allclose(s.to_numpy(), [6, 1 / 6, 3, 3 + 0.4], rtol=1e-6)


# ---- 6. numpy arrays as constant vectors; static grouped ndrange ------------------------------
def test_python_scope_vectors_are_constant_vectors():
    vel = jr.Vector.field(2, jr.f32, shape=())
    out = jr.field(jr.f64, shape=3)
    offset = jr.Vector([1.5, 2.5])

    @jr.kernel
    def k():
        acc = jr.Vector([1.0, 1.0])
        vel[None] += 1.0 * (acc + GRAVITY)                    # Taichi: [1 -39]
        out[0] = (BALL @ offset).sum() + BALL[1, 1]           # a closure value and a global
        out[1] = GRAVITY.norm() + jr.static(BALL.shape[0])
        g = GRAVITY                                           # an integer local vector
        out[2] = g[1] // 3
        for c in jr.static(BALL[0]):                          # numpy numbers
            out[2] += c * 2

    k()
    np.testing.assert_array_equal(vel.to_numpy(), [1, -39])
    np.testing.assert_allclose(out.to_numpy(), [0.75 + 1.5 + 5 + 2, 42, -14 + 1])


def test_static_grouped_ndrange_gives_constant_integer_vectors():
    out = jr.field(jr.i32, shape=2)

    @jr.kernel
    def k():
        cell = jr.Vector([5, 7])
        s = jr.Vector([0, 0])
        w = 0
        for offs in jr.static(jr.grouped(jr.ndrange((-1, 2), (-1, 2)))):
            s += (cell + offs) - cell
            w += (cell + offs)[0] * (offs[1] + 2)
        out[0] = s[0] + s[1]                                  # Taichi: 0
        out[1] = w

    k()
    assert out[0] == 0
    assert out[1] == sum((5 + a) * (b + 2) for a in (-1, 0, 1) for b in (-1, 0, 1))


def test_changing_a_global_vector_changes_the_kernel(tmp_path):
    source = ("import jitrt as jr\n"
              "G = jr.Vector([0.0, -1.0])\n"
              "out = jr.Vector.field(2, jr.f32, shape=())\n"
              "def make():\n"
              "    @jr.kernel\n"
              "    def k():\n"
              "        out[None] = G * 2\n"
              "    return k\n")
    path = tmp_path / "global_vector_prog.py"
    path.write_text(source)
    namespace: dict = {"__name__": "global_vector_prog", "__file__": str(path)}
    exec(compile(source, str(path), "exec"), namespace)
    jr.init(offline_cache=True, offline_cache_dir=str(tmp_path / "cache"))
    namespace["make"]()()
    jr.sync()                               # (the entry lands with the optimised copy)
    first = sorted(pathlib.Path(tmp_path / "cache").glob("*.jkc"))
    assert namespace["out"].to_numpy().tolist() == [0, -2]
    namespace["G"] = jr.Vector([3.0, 4.0])
    namespace["make"]()()                   # the same source, another value: another entry
    jr.sync()
    assert namespace["out"].to_numpy().tolist() == [6, 8]
    assert len(sorted(pathlib.Path(tmp_path / "cache").glob("*.jkc"))) > len(first)


# ---- 7. x.n and x.m of fields ------------------------------------------------------------------
def test_field_n_and_m_in_kernels():
    pos = jr.Vector.field(2, jr.f32, shape=4)
    mat = jr.Matrix.field(2, 3, jr.f32, shape=())
    out = jr.field(jr.i32, shape=4)

    @jr.kernel
    def k():
        for i in range(4):
            for j in jr.static(range(pos.n)):
                pos[i][j] = 1.0                               # Taichi: [1 1]
        out[0], out[1], out[2], out[3] = pos.n, pos.m, mat.n, mat.m

    k()
    np.testing.assert_array_equal(pos.to_numpy()[0], [1, 1])
    np.testing.assert_array_equal(out.to_numpy(), [2, 1, 2, 3])


# ---- errors ------------------------------------------------------------------------------------
s_field = jr.field(jr.f32, shape=4)
v_field = jr.Vector.field(2, jr.f32, shape=4)


def _min_one_argument(a: jr.f32):
    s_field[0] = jr.min(a)


def _max_shapes(a: jr.f32):
    s_field[0] = jr.max(jr.Vector([1.0, 2.0]), jr.Vector([1.0, 2.0, 3.0]))[0] + a


def _diag_runtime_dim(a: jr.f32):
    m = jr.Matrix.diag(int(a), 1.0)
    s_field[0] = m[0, 0]


def _diag_arity(a: jr.f32):
    m = jr.Matrix.diag(2)
    s_field[0] = m[0, 0] + a


def _cols_of_scalars(a: jr.f32):
    m = jr.Matrix.cols([a, a])
    s_field[0] = m[0, 0]


def _atomic_vector_into_component(a: jr.f32):
    jr.atomic_add(s_field[1], jr.Vector([a, a]))


def _atomic_shape(a: jr.f32):
    jr.atomic_add(v_field[0], jr.Vector([a, a, a]))


def _normalized_vector_eps(a: jr.f32):
    v_field[0] = jr.Vector([a, a]).normalized(jr.Vector([a, a]))


def _scalar_field_n(a: jr.f32):
    for j in jr.static(range(s_field.n)):
        s_field[j] = a


def _big_numpy_global(a: jr.f32):
    s_field[0] = BIG + a


BIG = np.zeros(100)

MISUSE = [(_min_one_argument, "needs at least 2 arguments"), (_max_shapes, "differ"),
          (_diag_runtime_dim, "dim must be an integer"), (_diag_arity, "takes 2 arguments"),
          (_cols_of_scalars, "list of vectors"), (_atomic_vector_into_component,
                                                  "needs a whole vector element"),
          (_atomic_shape, "does not match"), (_normalized_vector_eps, "eps must be a scalar"),
          (_scalar_field_n, "scalar elements"), (_big_numpy_global, "up to 64 numbers")]


@pytest.mark.parametrize("fn,words", MISUSE, ids=[m[0].__name__ for m in MISUSE])
def test_misuse_is_a_located_compile_error(fn, words):
    kernel = jr.kernel(fn)
    with pytest.raises(jr.KernelCompileError, match=words) as info:
        kernel(1.0)
    assert info.value.line > fn.__code__.co_firstlineno


def test_loop_config_parallelize_as_taichi():
    """`parallelize=1` serializes the next loop (a scan works); larger counts are accepted."""
    out = jr.ndarray(jr.i32, shape=(6,))

    @jr.kernel
    def scan(o: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        jr.loop_config(parallelize=1)
        for i in range(1, o.shape[0]):
            o[i] = o[i] + o[i - 1]
        jr.loop_config(parallelize=8)
        for i in range(o.shape[0]):
            o[i] += 0

    out.fill(1)
    scan(out)
    assert out.to_numpy().tolist() == [1, 2, 3, 4, 5, 6]

    @jr.kernel
    def bad(o: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        jr.loop_config(parallelize=0)
        for i in range(o.shape[0]):
            o[i] = 0

    with pytest.raises(jr.KernelCompileError, match="parallelize"):
        bad(out)


def test_struct_for_over_an_ndarray_argument_and_lazy_dual():
    """`for i in arr` loops over an ndarray argument's shape (as over a field); fields declared
    without a shape have a dual that can be placed, or given by jr.root.lazy_dual()."""
    arr = jr.ndarray(jr.f32, shape=(3, 4))

    @jr.kernel
    def fill(a: jr.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    fill(arr)
    np.testing.assert_array_equal(arr.to_numpy(), np.add.outer(np.arange(3) * 10, np.arange(4)))
    x, y = jr.field(jr.f32), jr.field(jr.f32)
    jr.root.dense(jr.i, 1).place(x, x.dual, y, y.dual)

    @jr.kernel
    def square():
        y[0] = x[0] * x[0]

    x[0] = 3.0
    with jr.ad.FwdMode(loss=y, param=x):
        square()
    assert y.dual[0] == 6.0
    z, w = jr.field(jr.f32, shape=()), jr.field(jr.f32, shape=())
    with pytest.raises(ValueError, match="needs_dual"):
        jr.ad.FwdMode(loss=w, param=z)
    jr.root.lazy_dual()

    @jr.kernel
    def cube():
        w[None] = z[None] * z[None] * z[None]

    z[None] = 2.0
    with jr.ad.FwdMode(loss=w, param=z):
        cube()
    assert w.dual[None] == 12.0
