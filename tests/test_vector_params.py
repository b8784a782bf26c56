"""Vector and matrix kernel parameters (`z: jr.math.vec2`, `jr.types.matrix(2, 2, jr.f64)`):
values against numpy, a fresh value at every launch, the default float type, gradients of
the other arguments against finite differences, bound launches, and the errors of bad values."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


def test_vector_and_matrix_parameters_take_lists_tuples_and_arrays():
    out = jr.field(jr.f64, shape=8)

    @jr.kernel
    def k(u: jr.types.vector(3, jr.f64), m: jr.types.matrix(2, 3, jr.f64), iv: jr.math.ivec2,
          r: jr.math.mat2):
        for _ in range(1):
            w = m @ u
            out[0], out[1] = w[0], w[1]
            out[2] = u.dot(u)
            out[3] = iv[0] * 10 + iv[1]
            out[4] = float(iv.sum())
            out[5] = r.determinant()
            out[6] = r[1, 0]
            out[7] = m[1, 2]

    rng = np.random.default_rng(1)
    for _ in range(3):
        u, m, iv, r = rng.normal(size=3), rng.normal(size=(2, 3)), rng.integers(-9, 9, 2), \
            rng.normal(size=(2, 2))
        for args in ((u, m, iv, r),                                   # numpy arrays
                     (list(u), m.tolist(), tuple(iv.tolist()), r.tolist()),  # (nested) lists
                     (jr.Vector(u), jr.Matrix(m), jr.math.ivec2(*iv), jr.math.mat2(r))):
            k(*args)
            w = m @ u
            expect = [w[0], w[1], u @ u, iv[0] * 10 + iv[1], iv.sum(), np.linalg.det(r),
                      r[1, 0], m[1, 2]]
            np.testing.assert_allclose(out.to_numpy()[:3], expect[:3], rtol=1e-12)
            assert out.to_numpy()[3:5].tolist() == expect[3:5]
            np.testing.assert_allclose(out.to_numpy()[5], expect[5], rtol=1e-5)  # mat2: f32
            assert out.to_numpy()[6] == np.float32(r[1, 0])
            assert out.to_numpy()[7] == m[1, 2]
    assert len(k.handles) == 1           # the values are not part of the specialization
    f = jr.Vector.field(3, jr.f64, shape=2)   # an element of a vector field (Python scope)
    f[1] = [1.0, 2.0, 3.0]
    k(f[1], np.ones((2, 3)), (0, 0), np.eye(2))
    assert out.to_numpy()[:3].tolist() == [6.0, 6.0, 14.0]


def test_every_launch_sees_the_new_values():
    """No value is remembered between launches: tuples (which the native launcher takes),
    lists, the same numpy array changed in place, launched many times in a row, mixed."""
    out = jr.field(jr.f64, shape=9)

    @jr.kernel
    def k(z: jr.math.vec3, m: jr.types.matrix(2, 2, jr.f64), n: jr.types.vector(2, jr.i64)):
        for _ in range(1):
            out[0], out[1], out[2] = z[0], z[1], z[2]
            out[3], out[4], out[5], out[6] = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
            out[7], out[8] = float(n[0]), float(n[1])

    arr, mat = np.zeros(3, np.float32), np.zeros((2, 2))
    for t in range(60):
        zt, mt, nt = (t, -t, 2 * t), ((t, 1.5 * t), (-t, 0.25 * t)), (t, -7 * t)
        if t % 4 == 0:
            arr[:] = zt                      # the same objects, new contents
            mat[:] = mt
            k(arr, mat, np.array(nt))
        elif t % 4 == 1:
            k(list(zt), [list(r) for r in mt], list(nt))
        else:                                # exact tuples of exact numbers
            k(tuple(float(x) for x in zt), mt, nt)
        assert out.to_numpy().tolist() == [*zt, *mt[0], *mt[1], *nt], t
    k((1.0, 2.0, 3.0), ((1.0, 2.0), (3.0, 4.0)), (True, 2 ** 40))   # a bool, a large int
    assert out.to_numpy().tolist() == [1, 2, 3, 1, 2, 3, 4, 1, 2 ** 40]


def test_numpy_values_of_every_layout_and_dtype():
    """C-contiguous float64/float32 (int64/int32) arrays are read by the native launcher;
    other dtypes, byte orders and strides go through the Python launcher: the same values."""
    out = jr.field(jr.f64, shape=6)

    @jr.kernel
    def k(z: jr.types.vector(2, jr.f64), m: jr.types.matrix(2, 2, jr.f32),
          n: jr.types.vector(2, jr.i32)):
        for _ in range(1):
            out[0], out[1] = z[0], z[1]
            out[2], out[3] = m[0, 1], m[1, 0]
            out[4], out[5] = float(n[0]), float(n[1])

    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    for t in range(3):
        for z, mt, n in ((np.array([t, 0.5]), m + t, np.array([t, -t])),
                         (np.array([t, 0.5], np.float32), (m + t).astype(np.float32),
                          np.array([t, -t], np.int32)),
                         (np.arange(4.0)[::2] + t, np.asfortranarray(m + t),
                          np.array([t, -t], np.int16)),
                         (np.array([t, 0.5], ">f8"), (m + t).astype(np.float16),
                          np.array([t, -t], np.int64)[::-1][::-1]),
                         (np.array([t, 0.5], np.float64), (m + t).tolist(), (t, -t))):
            k(z, mt, n)
            want = [float(z[0]), float(z[1]), float(np.float32(np.asarray(mt)[0][1])),
                    float(np.float32(np.asarray(mt)[1][0])), float(n[0]), float(n[1])]
            assert out.to_numpy().tolist() == want, (t, z, mt, n)
    with pytest.raises(jr.KernelArgError, match=r"argument 'n': expected components in"):
        k(np.zeros(2), m, np.array([0, 2 ** 40]))          # int64 out of the i32 range
    with pytest.raises(jr.KernelArgError, match=r"argument 'n': expected a vector of 2 i32 "
                       r"\(integer\) components"):
        k(np.zeros(2), m, np.array([0.0, 1.0]))             # floats for an int vector


def test_a_vector_type_without_dtype_takes_default_fp(arch):
    out = jr.field(jr.f64, shape=2)

    @jr.kernel
    def k(z: jr.math.vec2):
        for _ in range(1):
            out[0], out[1] = z[0], z[1]

    k([0.1, 0.2])
    assert out.to_numpy().tolist() == [float(np.float32(0.1)), float(np.float32(0.2))]
    jr.init(arch=arch, default_fp=jr.f64, offline_cache=False, enable_fallback=False)
    out64 = jr.field(jr.f64, shape=2)

    @jr.kernel
    def k64(z: jr.math.vec2):
        for _ in range(1):
            out64[0], out64[1] = z[0], z[1]

    k64([0.1, 0.2])
    assert out64.to_numpy().tolist() == [0.1, 0.2]


def test_gradients_of_the_other_arguments_match_finite_differences():
    """`.grad` takes the same arguments; a vector parameter is a constant of the adjoint (as a
    scalar parameter is): it gets no gradient."""
    n = 6
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k(x: nd(dtype=jr.f64, ndim=2), z: jr.types.vector(2, jr.f64),
          m: jr.types.matrix(2, 2, jr.f64)):
        for i in range(x.shape[0]):
            v = jr.Vector([x[i, 0], x[i, 1]])
            w = m @ (v * z)
            loss[None] += jr.sin(w[0]) * w[1] + v.dot(z)

    def value(xv, z, m):
        w = (xv * z) @ m.T
        return float((np.sin(w[:, 0]) * w[:, 1] + xv @ z).sum())

    rng = np.random.default_rng(7)
    xv, z, m = rng.normal(size=(n, 2)), rng.normal(size=2), rng.normal(size=(2, 2))
    x = jr.ndarray(jr.f64, shape=(n, 2), needs_grad=True)
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        k(x, z, m)
    assert loss[None] == pytest.approx(value(xv, z, m), rel=1e-12)
    eps, num = 1e-6, np.zeros_like(xv)
    for idx in np.ndindex(*xv.shape):
        plus, minus = xv.copy(), xv.copy()
        plus[idx] += eps
        minus[idx] -= eps
        num[idx] = (value(plus, z, m) - value(minus, z, m)) / (2 * eps)
    np.testing.assert_allclose(x.grad.to_numpy(), num, rtol=1e-6, atol=1e-8)
    # an explicit .grad launch with other vector values uses those values
    x.grad.fill(0)
    z2 = z * 3
    loss.grad[None] = 1
    k.grad(x, tuple(z2), m.tolist())
    num2 = np.zeros_like(xv)
    for idx in np.ndindex(*xv.shape):
        plus, minus = xv.copy(), xv.copy()
        plus[idx] += eps
        minus[idx] -= eps
        num2[idx] = (value(plus, z2, m) - value(minus, z2, m)) / (2 * eps)
    np.testing.assert_allclose(x.grad.to_numpy(), num2, rtol=1e-6, atol=1e-8)


def test_func_parameters_annotated_with_vector_types():
    out = jr.field(jr.f64, shape=2)

    @jr.func
    def f(v: jr.math.vec2, m: jr.types.matrix(2, 2, jr.f64)):
        return (m @ v).sum()

    @jr.kernel
    def k(z: jr.types.vector(2, jr.f64)):
        for _ in range(1):
            out[0] = f(z, jr.Matrix([[1.0, 0.0], [0.0, 2.0]]))
            out[1] = f([1.0, 2.0], jr.Matrix([[0.0, 1.0], [1.0, 0.0]]))

    k([3.0, 4.0])
    assert out.to_numpy().tolist() == [11.0, 3.0]


def test_an_integer_vector_component_as_a_loop_bound():
    out = jr.field(jr.i32, shape=2)

    @jr.kernel
    def k(n: jr.math.ivec2):
        for i in range(n[0]):
            jr.atomic_add(out[0], 1)
        for i in range(n[1]):
            jr.atomic_add(out[1], i)

    k((5, 4))
    assert out.to_numpy().tolist() == [5, 6]
    k([2, 3])
    assert out.to_numpy().tolist() == [7, 9]


def test_an_adstack_bound_from_a_vector_component_is_a_clear_compile_error():
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k(n: jr.math.ivec2):
        for i in x:
            v = x[i]
            for _ in range(n[0]):
                v = jr.sin(v)
            loss[None] += v

    k((3, 0))
    with pytest.raises(jr.KernelCompileError, match=r"n\[0\].*component of a vector parameter"):
        k.grad((3, 0))


def test_bound_launches_and_set_arg():
    out = jr.field(jr.f32, shape=2)

    @jr.kernel
    def k(z: jr.math.vec2, s: jr.f32):
        for _ in range(1):
            out[0], out[1] = z[0] * s, z[1] * s

    launch = k.bind((1.0, 2.0), 3.0)
    launch()
    assert out.to_numpy().tolist() == [3.0, 6.0]
    launch.set_arg("z", np.array([5.0, 7.0]))
    launch()
    assert out.to_numpy().tolist() == [15.0, 21.0]
    with pytest.raises(jr.KernelArgError, match="'z'"):
        launch.set_arg("z", [1.0])


@pytest.mark.parametrize("name, bad, pattern", [
    ("z", [1.0, 2.0, 3.0], r"a vector of 2 f32 components .* got list .*\(shape \(3,\)\)"),
    ("z", np.zeros((2, 2)), r"a vector of 2 f32 components .*\(shape \(2, 2\)\)"),
    ("z", ("a", "b"), r"a vector of 2 f32 components .* got tuple \('a', 'b'\)"),
    ("z", None, r"a vector of 2 f32 components .* got NoneType"),
    ("z", [1.0, [2.0, 3.0]], r"a vector of 2 f32 components .* got list"),     # ragged
    ("m", np.eye(3), r"a matrix of 2x2 f64 components .*\(shape \(3, 3\)\)"),
    ("m", [1.0, 2.0, 3.0, 4.0], r"a matrix of 2x2 f64 components .*\(shape \(4,\)\)"),
    ("iv", [1.5, 2], r"a vector of 2 i32 \(integer\) components"),
    ("iv", [1, 2 ** 40], r"components in \[-2147483648, 4294967295\] \(i32\)"),
    # exact tuples: the native launcher checks them first, then hands them on
    ("z", (1.0, 2.0, 3.0), r"a vector of 2 f32 components .*\(shape \(3,\)\)"),
    ("m", ((1.0, 2.0), (3.0,)), r"a matrix of 2x2 f64 components .* got tuple"),
    ("iv", (1, 2 ** 40), r"components in \[-2147483648, 4294967295\] \(i32\)"),
    ("iv", (1, 2.0), r"a vector of 2 i32 \(integer\) components"),
])
def test_bad_values_name_the_kernel_and_parameter(name, bad, pattern):
    out = jr.field(jr.f64, shape=1)

    @jr.kernel
    def k(z: jr.math.vec2, m: jr.types.matrix(2, 2, jr.f64), iv: jr.math.ivec2):
        for _ in range(1):
            out[0] = z[0] + m[0, 0] + iv[0]

    good = {"z": [1.0, 2.0], "m": np.eye(2), "iv": (1, 2)}
    k(**good)
    k(*good.values())         # the fast path is installed: the bad value goes through it
    with pytest.raises(jr.KernelArgError,
                       match=rf"kernel .*\.k: argument '{name}': expected " + pattern):
        k(*{**good, name: bad}.values())
    k(*good.values())         # and the kernel still runs
    assert out[0] == 1.0 + 1.0 + 1


def test_numpy_scalars_and_bools_as_scalar_and_vector_arguments():
    """Values the slow path accepts reach the generated launcher as Python numbers (a numpy
    bool for an int parameter once sent the launch back and forth without end)."""
    @jr.kernel
    def k(n: jr.i32, z: jr.math.ivec2, f: jr.f32) -> jr.i32:
        return n + z[0] * 10 + z[1] * 100 + int(f * 1000)

    for _ in range(3):
        assert k(np.True_, np.array([True, False]), np.float32(0.5)) == 1 + 10 + 500
        assert k(np.int64(2), [np.int16(3), 4], 0.25) == 2 + 30 + 400 + 250
