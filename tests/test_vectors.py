"""Vectors and matrices (jr.Vector, jr.Matrix, jr.math.vec3, fields and ndarrays of them):
results against numpy, gradients against finite differences, and the errors of misuse."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
N = 16


def rand(rng, *shape, dtype=np.float64):
    return rng.uniform(-1, 1, shape).astype(dtype)


def test_vector_fields_store_components_as_trailing_dimensions():
    x = jr.Vector.field(3, jr.f32, shape=N)
    m = jr.Matrix.field(2, 3, jr.f64, shape=(4, 5))
    y = jr.field(jr.math.vec2, shape=N)
    a = jr.Vector.ndarray(4, jr.i32, shape=(7,))
    assert x.to_numpy().shape == (N, 3) and x.element_shape == (3,)
    assert m.to_numpy().shape == (4, 5, 2, 3) and m.dtype == jr.f64
    assert y.to_numpy().shape == (N, 2) and y.dtype == jr.f32       # the default float
    assert a.to_numpy().shape == (7, 4) and a.dtype == jr.i32
    assert jr.types.vector(3, jr.f32) == jr.types.vector(3, "f32")
    assert repr(jr.types.matrix(2, 2, jr.f64)) == "jr.types.matrix(2, 2, f64)"
    with pytest.raises(TypeError, match="vector size"):
        jr.types.vector(0, jr.f32)


def test_element_access_arithmetic_and_methods(rng):
    x = jr.Vector.field(3, jr.f64, shape=N)
    out = jr.field(jr.f64, shape=(N, 12))

    @jr.kernel
    def k(a: nd(dtype=jr.types.vector(3, jr.f64), ndim=1)):
        for i in x:
            u, v = x[i], a[i]
            w = u * 2.0 - v / 4.0 + 1.0                  # broadcasting of scalars
            c = u.cross(v)
            out[i, 0] = u.dot(v)
            out[i, 1] = c[0] + c.y * 10.0 + c[2] * 100.0    # from 0: c[-1] is refused, as in Taichi
            out[i, 2] = w.norm()
            out[i, 3] = w.normalized().norm_sqr()
            out[i, 4] = (u @ v) - jr.math.dot(u, v)     # 0
            out[i, 5] = w.sum() + w.max() * 10.0 + w.min() * 100.0
            out[i, 6] = jr.sin(u).sum() + abs(v).sum()
            p, q, r = w                                 # unpacking
            out[i, 7] = p - q * r
            out[i, 8] = x[i][1] + a[i].z
            out[i, 9] = jr.math.length(jr.math.cross(u, v))
            t = w.xy                                    # a swizzle is a 2-vector
            out[i, 10] = t[0] * t[1]
            out[i, 11] = (u > 0.0).sum() + (v < u).any() * 10
    xv, av = rand(rng, N, 3), rand(rng, N, 3)
    x.from_numpy(xv)
    k(av)
    got = out.to_numpy()
    w = xv * 2 - av / 4 + 1
    c = np.cross(xv, av)
    want = np.stack([
        (xv * av).sum(1), c[:, 0] + c[:, 1] * 10 + c[:, 2] * 100, np.linalg.norm(w, axis=1),
        np.ones(N), np.zeros(N), w.sum(1) + w.max(1) * 10 + w.min(1) * 100,
        np.sin(xv).sum(1) + np.abs(av).sum(1), w[:, 0] - w[:, 1] * w[:, 2], xv[:, 1] + av[:, 2],
        np.linalg.norm(c, axis=1), w[:, 0] * w[:, 1],
        (xv > 0).sum(1) + (av < xv).any(1) * 10], 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_matrix_methods(size, rng):
    m = jr.Matrix.field(size, size, jr.f64, shape=N)
    v = jr.Vector.field(size, jr.f64, shape=N)
    inv = jr.Matrix.field(size, size, jr.f64, shape=N)
    mv = jr.Vector.field(size, jr.f64, shape=N)
    scalars = jr.field(jr.f64, shape=(N, 3))

    @jr.kernel
    def k():
        for i in m:
            a = m[i]
            inv[i] = a.inverse()
            mv[i] = a @ v[i] + a.transpose() @ v[i] - (a.T @ v[i])
            scalars[i, 0] = a.determinant()
            scalars[i, 1] = a.trace()
            scalars[i, 2] = (a @ a.inverse()).trace()      # size
    mval = rand(rng, N, size, size) + 2 * np.eye(size)
    vval = rand(rng, N, size)
    m.from_numpy(mval)
    v.from_numpy(vval)
    k()
    np.testing.assert_allclose(inv.to_numpy(), np.linalg.inv(mval), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mv.to_numpy(), np.einsum("nij,nj->ni", mval, vval),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scalars.to_numpy()[:, 0], np.linalg.det(mval), rtol=1e-10)
    np.testing.assert_allclose(scalars.to_numpy()[:, 1], np.trace(mval, axis1=1, axis2=2))
    np.testing.assert_allclose(scalars.to_numpy()[:, 2], size, rtol=1e-10)


def test_stores_locals_funcs_and_static_loops(rng):
    x = jr.Vector.field(3, jr.f32, shape=N)
    y = jr.Vector.field(3, jr.f32, shape=N)
    m = jr.Matrix.field(2, 2, jr.f32, shape=N)
    total = jr.Vector.field(3, jr.f32, shape=())

    @jr.func
    def reflect(d, n):
        return d - 2.0 * d.dot(n) * n

    @jr.kernel
    def k():
        for i in x:
            v = jr.math.vec3(x[i].x, 0.0, 1.0)
            v[1] = x[i][2] * 2.0                # a component of a local
            v += jr.Vector([1.0, 1.0, 1.0])
            for c in jr.static(range(3)):
                v[c] = v[c] * (c + 1)
            y[i] = reflect(v, jr.math.vec3(0.0, 1.0, 0.0))
            y[i][0] = y[i][0] + 100.0           # one component of a field element
            y[i][2] += 0.5
            m[i] = [[1.0, 2.0], [3.0, 4.0]]
            m[i][1] = jr.math.vec2(v[0], v[1])  # a row
            total[None] += x[i]                 # atomic per component
    xv = rand(rng, N, 3, dtype=np.float32)
    x.from_numpy(xv)
    k()
    v = np.stack([xv[:, 0] + 1, 2 * xv[:, 2] + 1, np.full(N, 2.0)], 1) * [1, 2, 3]
    n = np.array([0, 1, 0.0])
    r = v - 2 * (v @ n)[:, None] * n
    r[:, 0] += 100
    r[:, 2] += 0.5
    np.testing.assert_allclose(y.to_numpy(), r, rtol=1e-5)
    np.testing.assert_allclose(m.to_numpy()[:, 0], np.tile([1.0, 2.0], (N, 1)))
    np.testing.assert_allclose(m.to_numpy()[:, 1], v[:, :2], rtol=1e-6)
    np.testing.assert_allclose(total.to_numpy(), xv.sum(0), rtol=1e-4, atol=1e-5)


def test_gradients_through_vectors_match_finite_differences(rng):
    x = jr.Vector.field(3, jr.f64, shape=N, needs_grad=True)
    m = jr.Matrix.field(3, 3, jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            v = x[i] * 2.0 + jr.Vector([1.0, 2.0, 3.0])
            a = m[i]
            r = a @ v
            loss[None] += r.dot(v.cross(x[i])) + a.inverse().trace() + v.normalized().x

    xv, mv = rand(rng, N, 3), rand(rng, N, 3, 3) + 3 * np.eye(3)

    def value(xv, mv):
        v = xv * 2 + np.array([1, 2, 3.0])
        r = np.einsum("nij,nj->ni", mv, v)
        return ((r * np.cross(v, xv)).sum(1) + np.trace(np.linalg.inv(mv), axis1=1, axis2=2)
                + v[:, 0] / np.linalg.norm(v, axis=1)).sum()
    x.from_numpy(xv)
    m.from_numpy(mv)
    with jr.ad.Tape(loss=loss):
        k()
    assert loss[None] == pytest.approx(value(xv, mv), rel=1e-12)
    eps = 1e-6
    for arr, grad in ((xv, x.grad.to_numpy()), (mv, m.grad.to_numpy())):
        num = np.zeros_like(arr)
        for idx in np.ndindex(*arr.shape):
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args = (plus, mv) if arr is xv else (xv, plus)
            back = (minus, mv) if arr is xv else (xv, minus)
            num[idx] = (value(*args) - value(*back)) / (2 * eps)
        np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-6)


def test_ndarray_of_vectors_checks_trailing_dimensions():
    @jr.kernel
    def norms(a: nd(dtype=jr.math.vec3, ndim=1), out: nd(dtype=jr.f32, ndim=1)):
        for i in range(out.shape[0]):
            out[i] = a[i].norm()
    a = np.ones((5, 3), np.float32)
    out = np.zeros(5, np.float32)
    norms(a, out)
    np.testing.assert_allclose(out, np.sqrt(3), rtol=1e-6)
    with pytest.raises(jr.KernelArgError, match=r"trailing dimensions \(3,\)"):
        norms(np.ones((5, 4), np.float32), out)        # the fast path re-checks
    with pytest.raises(jr.KernelArgError, match=r"3 elements with ndim=1 .*shape=\(5,\)"):
        norms(np.ones(5, np.float32), out)


def _shape_mismatch():
    for i in range(4):
        v = jr.math.vec3(1.0, 2.0, 3.0) + jr.math.vec2(1.0, 2.0)  # noqa: F841


def _float_index(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(4):
        v = jr.math.vec3(1.0, 2.0, 3.0)
        a[i] = v[a[i]]


def _vector_into_scalar(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(4):
        a[i] = jr.math.vec2(1.0, 2.0)


def _wrong_arity():
    for i in range(4):
        v = jr.math.vec3(1.0, 2.0)  # noqa: F841


def _not_square():
    for i in range(4):
        d = jr.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).determinant()  # noqa: F841


MISUSE = [(_shape_mismatch, "do not match"), (_float_index, "index must be an integer"),
          (_vector_into_scalar, "into one element"), (_wrong_arity, "needs 3 components"),
          (_not_square, "square matrix")]


@pytest.mark.parametrize("fn,words", MISUSE, ids=[m[0].__name__ for m in MISUSE])
def test_misuse_is_a_located_compile_error(fn, words):
    kernel = jr.kernel(fn)
    args = (np.zeros(4, np.float32),) if fn.__code__.co_argcount else ()
    with pytest.raises(jr.KernelCompileError, match=words) as info:
        kernel(*args)
    assert info.value.line > fn.__code__.co_firstlineno


def test_struct_fields(rng):
    particle = jr.types.struct(pos=jr.math.vec3, vel=jr.math.vec3, mass=jr.f32)
    ps = particle.field(shape=N, needs_grad=False)
    tags = jr.Struct.field({"weight": jr.f64, "id": jr.i32}, shape=(4,))
    assert repr(particle).startswith("jr.types.struct(pos=")

    @jr.kernel
    def step(dt: jr.f32):
        for i in ps:
            ps[i].vel += jr.math.vec3(0.0, -9.8, 0.0) * dt
            ps[i].pos = ps[i].pos + ps[i].vel * dt
            ps[i].mass = ps[i].mass * 2.0
        for j in tags:
            tags[j].id = j * 3
            tags[j].weight += 0.5
    pos, vel = rand(rng, N, 3, dtype=np.float32), rand(rng, N, 3, dtype=np.float32)
    ps.from_numpy({"pos": pos, "vel": vel, "mass": np.ones(N, np.float32)})
    step(0.1)
    got = ps.to_numpy()
    vel2 = vel + np.array([0, -0.98, 0], np.float32)
    np.testing.assert_allclose(got["vel"], vel2, rtol=1e-6)
    np.testing.assert_allclose(got["pos"], pos + vel2 * np.float32(0.1), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got["mass"], 2.0)
    np.testing.assert_array_equal(ps.mass.to_numpy(), 2.0)         # a member is a field
    assert tags.to_numpy()["id"].tolist() == [0, 3, 6, 9]
    assert tags.to_numpy()["weight"].tolist() == [0.5] * 4
    with pytest.raises(KeyError, match="colour"):
        tags.from_numpy({"colour": np.zeros(4)})
    with pytest.raises(TypeError):
        jr.types.struct(a="not a dtype")

    @jr.kernel
    def bad():
        for j in tags:
            tags[j].colour = 1
    with pytest.raises(jr.KernelCompileError, match="no member 'colour'"):
        bad()


def test_kernels_return_vectors_and_matrices(arch):
    @jr.kernel
    def total(a: nd(dtype=jr.f32, ndim=1)) -> jr.math.vec3:
        s = jr.math.vec3(0.0)
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            s += jr.math.vec3(a[i], a[i] * 2.0, 1.0)
        return s

    @jr.kernel
    def fixed() -> jr.types.matrix(2, 2, jr.i32):
        return jr.Matrix([[1, 2], [3, 4]])

    @jr.kernel
    def wrong() -> jr.math.vec2:
        return jr.math.vec3(1.0, 2.0, 3.0)
    got = total(np.arange(4, dtype=np.float32))
    assert got.tolist() == [6.0, 12.0, 4.0] and got.dtype == np.float32
    assert fixed().tolist() == [[1, 2], [3, 4]]
    bound = total.bind(np.ones(3, np.float32))
    first = bound()
    first[0] = 99.0                                  # a copy: the next result is unaffected
    assert bound().tolist() == [3.0, 6.0, 3.0]
    with pytest.raises(jr.KernelCompileError, match=r"return shape \(2,\)"):
        wrong()


def test_kernels_return_tuples(arch):
    """`-> (jr.f32, jr.i32, jr.math.vec3)` or `-> tuple[...]`: a tuple of Python scalars and
    numpy arrays, as Taichi's multiple return values."""
    @jr.kernel
    def stats(a: nd(dtype=jr.f32, ndim=1)) -> (jr.f32, jr.i32, jr.math.vec3):
        s = 0.0
        m = 0
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            s += a[i]
            m = max(m, int(a[i]))
        return s, m, jr.Vector([1.0, 2.0, s])

    @jr.kernel
    def constants() -> tuple[jr.f64, int]:
        return 1.5, 7

    @jr.kernel
    def short() -> (jr.f32, jr.f32):
        return 1.0, 2.0, 3.0
    s, m, v = stats(np.arange(5, dtype=np.float32))
    assert (s, m) == (10.0, 4) and type(s) is float and type(m) is int
    assert v.tolist() == [1.0, 2.0, 10.0]
    assert constants() == (1.5, 7)
    with pytest.raises(jr.KernelCompileError, match="return 2 values"):
        short()


def test_templates_over_vector_and_matrix_fields():
    v = jr.Vector.field(3, jr.f32, shape=4)
    m = jr.Matrix.field(2, 2, jr.f32, shape=4)

    @jr.kernel
    def scale(f: jr.template(), s: jr.f32):
        for i in f:
            f[i] = f[i] * s
    v.fill(1.0)
    m.fill(2.0)
    scale(v, 2.0)
    scale(m, 3.0)
    np.testing.assert_array_equal(v.to_numpy(), 2.0)
    np.testing.assert_array_equal(m.to_numpy(), 6.0)
    assert isinstance(v, jr.MatrixField) and not isinstance(v, jr.ScalarField)  # as in Taichi


def test_self_assignment_reads_the_whole_matrix_first():
    """`S = J.T @ S @ J` on a matrix local: every component of the right side is read
    before any component of S is written (was: later components read updated ones)."""
    out, A, J = (jr.Matrix.field(3, 3, jr.f64, shape=()) for _ in range(3))
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (3, 3))
    j = np.linalg.qr(rng.uniform(-1, 1, (3, 3)))[0]
    A.from_numpy(a)
    J.from_numpy(j)

    @jr.kernel
    def k():
        S = A[None]
        R = J[None]
        S = R.transpose() @ S @ R
        v = jr.Vector([S[0, 0], S[1, 1], S[2, 2]])
        v = jr.Vector([v[2], v[0], v[1]])          # a permutation of itself
        S[0, 0], S[1, 1], S[2, 2] = v[0], v[1], v[2]
        out[None] = S

    k()
    expected = j.T @ a @ j
    expected[0, 0], expected[1, 1], expected[2, 2] = expected[2, 2], expected[0, 0], \
        expected[1, 1]
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=1e-12, atol=1e-14)


def test_a_matrix_local_has_one_type():
    """Constants in a literal adapt to its typed components: an f64 entry makes every entry
    f64, so a later f64 assignment to a position that first held 0.0 is not rounded."""
    out = jr.Matrix.field(2, 2, jr.f64, shape=())

    @jr.kernel
    def k(c: jr.f64, s: jr.f64):
        J = jr.Matrix([[c, 0.0], [0.0, 1.0]])
        J = jr.Matrix([[c, s], [s, c]])
        out[None] = J

    k(0.1, 0.3)
    np.testing.assert_array_equal(out.to_numpy(), [[0.1, 0.3], [0.3, 0.1]])


def test_cast_of_a_vector_is_element_wise():
    """`jr.cast(v, dtype)` of a vector casts each component, as Taichi's `ti.cast` and
    `v.cast(dtype)` do."""
    x = jr.Vector.field(2, jr.f32, shape=4)

    @jr.kernel
    def k() -> jr.i32:
        b = jr.cast(x[0] * 10.0 + 2.5, jr.i32)
        c = x[1].cast(jr.i32)
        return b[0] + b[1] * 100 + c[0] * 10000

    x.from_numpy(np.array([[0.16, 0.55], [3.7, 0.0], [0, 0], [0, 0]], np.float32))
    assert k() == 4 + 8 * 100 + 3 * 10000
