"""Quadrants 1.3.3's kernel-side names (what Genesis's kernels use): raw_mod, outer,
static_assert, the math constants, tests and bit counts, dt= constructors, the bitwise
atomics and atomic_exchange, loop_config(name=), graph.do_while."""
import math

import numpy as np
import pytest

import jitrt as jr


def test_raw_mod_is_cs_remainder():
    a = np.array([-7, 7, -7, 7, 6, -6], np.int32)
    b = np.array([3, 3, -3, -3, 3, 3], np.int32)
    x = np.array([-7.5, 7.5, -7.5, 5.25], np.float32)
    y = np.array([2.0, -2.0, -2.0, 0.5], np.float32)
    ri, rf = np.zeros(6, np.int32), np.zeros(4, np.float32)

    @jr.kernel
    def k(a: jr.types.ndarray(), b: jr.types.ndarray(), x: jr.types.ndarray(),
          y: jr.types.ndarray(), ri: jr.types.ndarray(), rf: jr.types.ndarray()):
        for i in range(6):
            ri[i] = jr.raw_mod(a[i], b[i])
        for i in range(4):
            rf[i] = jr.raw_mod(x[i], y[i])
    k(a, b, x, y, ri, rf)
    np.testing.assert_array_equal(ri, np.fmod(a, b))     # the sign of the dividend
    np.testing.assert_array_equal(rf, np.fmod(x, y))
    assert jr.raw_mod(-7, 3) == -1                       # in Python too


@pytest.mark.parametrize("dtype", [jr.i32, jr.u32, jr.i64])
def test_bit_counts(dtype):
    bits = 64 if dtype is jr.i64 else 32
    values = np.array([0, 1, 8, 0xF0F0, -1 if dtype.is_signed else 2**32 - 1, 2**30 + 6],
                      dtype.np)
    out = np.zeros((len(values), 3), np.int32)

    @jr.kernel
    def k(v: jr.types.ndarray(), out: jr.types.ndarray()):
        for i in range(v.shape[0]):
            out[i, 0] = jr.math.popcnt(v[i])
            out[i, 1] = jr.math.clz(v[i])
            out[i, 2] = jr.math.ffs(v[i])
    k(values, out)
    for (pop, lead, first), v in zip(out, values.tolist()):
        u = v % (1 << bits)                              # the unsigned bit pattern
        assert pop == bin(u).count("1")
        assert lead == bits - u.bit_length()
        assert first == ((u & -u).bit_length() if u else 0)
    with pytest.raises(NotImplementedError, match="no Python fallback"):
        jr.math.popcnt(3)


def test_math_constants_tests_and_outer():
    out = np.zeros(6, np.float32)
    flags = np.zeros(4, np.int32)
    m = np.zeros((2, 3), np.float32)

    @jr.kernel
    def k(x: jr.types.ndarray(), out: jr.types.ndarray(), flags: jr.types.ndarray(),
          m: jr.types.ndarray()):
        for _ in range(1):
            q = x[0] / x[1]                     # 0/0: nan
            flags[0] = jr.math.isnan(q)
            flags[1] = jr.math.isinf(x[2] / x[1])
            flags[2] = jr.math.isnan(x[2])
            flags[3] = jr.math.isinf(jr.math.inf)
            out[0] = jr.math.pi
            out[1] = jr.math.radians(180.0)
            out[2] = jr.math.degrees(jr.math.pi)
            out[3] = jr.math.inf
            out[4] = -jr.math.inf
            out[5] = jr.math.e
            o = jr.outer(jr.Vector([1.0, 2.0]), jr.Vector([3.0, 4.0, 5.0]))
            for r in jr.static(range(2)):
                for c in jr.static(range(3)):
                    m[r, c] = o[r, c]
    k(np.array([0.0, 0.0, 1.0], np.float32), out, flags, m)
    assert flags.tolist() == [1, 1, 0, 1]
    np.testing.assert_allclose(out, [math.pi, math.pi, 180.0, np.inf, -np.inf, math.e],
                               rtol=1e-6)
    np.testing.assert_array_equal(m, np.outer([1, 2], [3, 4, 5]))
    assert jr.math.radians(90.0) == pytest.approx(math.pi / 2)       # plain Python outside


def test_constructors_take_dt():
    out = np.zeros(9, np.float64)
    ints = np.zeros(2, np.int32)

    @jr.kernel
    def k(out: jr.types.ndarray(), ints: jr.types.ndarray()):
        for _ in range(1):
            eye = jr.Matrix.identity(dt=jr.f64, n=3)
            v = jr.Vector([7, 3], dt=jr.i32)
            w = jr.Vector([0.5, 1.5], dt=jr.f32)
            ints[0] = v[0] // v[1]                   # integer components: floor division
            ints[1] = jr.i32(w[1] * 2)
            for r in jr.static(range(3)):
                for c in jr.static(range(3)):
                    out[r * 3 + c] = eye[r, c]
    k(out, ints)
    np.testing.assert_array_equal(out.reshape(3, 3), np.eye(3))
    assert ints.tolist() == [2, 3]
    host = jr.Vector([1, 2], dt=jr.f32)
    assert host.dtype == np.float32


def test_bitwise_atomics_and_exchange():
    b = np.array([0, 0, -1, 5], np.int32)
    f = np.array([7.0, 0.0], np.float32)
    old = np.zeros(1, np.float32)

    @jr.kernel
    def k(b: jr.types.ndarray(), f: jr.types.ndarray(), old: jr.types.ndarray()):
        for i in range(8):
            jr.atomic_or(b[0], 1 << i)
            jr.atomic_xor(b[1], 3 << i)
            jr.atomic_and(b[2], ~(1 << i))
        for _ in range(1):
            old[0] = jr.atomic_exchange(f[0], 2.5)
            f[1] = jr.atomic_exchange(b[3], 9)
    k(b, f, old)
    xor = 0
    for i in range(8):
        xor ^= 3 << i
    assert b.tolist() == [255, xor, -256, 9]
    assert old[0] == 7.0 and f.tolist() == [2.5, 5.0]


def test_atomic_misuse_is_a_located_error_and_bitwise_atomics_work_on_locals():
    @jr.kernel
    def on_float(f: jr.types.ndarray()):
        for i in range(2):
            jr.atomic_or(f[i], 1)

    @jr.kernel
    def on_local(f: jr.types.ndarray()):
        for i in range(2):
            s = 0
            jr.atomic_or(s, 1)
            f[i] = s
    with pytest.raises(jr.KernelCompileError, match=r"jr.atomic_or\(\) needs an integer "
                                                    "element, got f32"):
        on_float(np.zeros(2, np.float32))
    f = np.zeros(2, np.int32)
    on_local(f)                        # on a local: s = s | 1, as in Taichi
    np.testing.assert_array_equal(f, [1, 1])

    @jr.kernel
    def exchange_local(f: jr.types.ndarray()):
        for i in range(2):
            s = 0
            jr.atomic_exchange(s, 1)
            f[i] = s
    with pytest.raises(jr.KernelCompileError, match=r"jr.atomic_exchange\(\) takes a field "
                                                    "or ndarray element"):
        exchange_local(np.zeros(2, np.int32))


def test_static_assert():
    @jr.kernel
    def k(a: jr.types.ndarray(), n: jr.template()):
        jr.static_assert(n > 2, "n must exceed 2")
        for i in range(n):
            a[i] = i
    a = np.zeros(4, np.int32)
    k(a, 4)
    assert a.tolist() == [0, 1, 2, 3]
    with pytest.raises(jr.KernelCompileError, match="static assertion failed: n must exceed 2"):
        k(a, 1)
    with pytest.raises(AssertionError, match="outside"):
        jr.static_assert(False, "outside")


def test_loop_config_name_and_graph_do_while():
    @jr.kernel
    def named(a: jr.types.ndarray()):
        jr.loop_config(name="fill", block_dim=64)
        for i in range(a.shape[0]):
            a[i] = 4

    @jr.kernel
    def bad_name(a: jr.types.ndarray()):
        jr.loop_config(name=3)
        for i in range(a.shape[0]):
            a[i] = 4

    @jr.kernel(graph=True)
    def loop(flag: jr.types.ndarray(jr.i32, ndim=0)):
        while jr.graph.do_while(flag):
            flag[()] = 0
    a = np.zeros(3, np.int32)
    named(a)
    assert a.tolist() == [4, 4, 4]
    with pytest.raises(jr.KernelCompileError, match=r"loop_config\(name=...\) must be a string"):
        bad_name(a)
    with pytest.raises(jr.KernelCompileError, match=r"jr.graph.do_while\(\) is not supported"):
        loop(np.ones((), np.int32))


def test_bool_parameters_and_returns():
    @jr.kernel
    def k(a: jr.types.ndarray(), flag: bool) -> tuple[bool, bool]:
        for i in range(a.shape[0]):
            a[i] = flag
        return a[0] > 0, a[0] == 0
    a = np.zeros(2, np.int32)
    assert tuple(k(a, True)) == (1, 0) and a.tolist() == [1, 1]
    assert tuple(k(a, False)) == (0, 1)


def test_a_numpy_bool_array_is_an_ndarray_of_u8():
    """Genesis passes numpy bool arrays (`links_is_fixed`); Quadrants reads them as u1."""
    @jr.kernel
    def k(flags: jr.types.ndarray(), out: jr.types.ndarray()):
        for i in range(flags.shape[0]):
            out[i] = flags[i] * 10
            flags[i] = out[i] == 0
    flags, out = np.array([True, False, True]), np.zeros(3, np.int32)
    for _ in range(2):                        # the second launch takes the fast path
        k(flags, out)
    assert out.tolist() == [0, 10, 0] and flags.tolist() == [True, False, True]


def test_a_loop_variable_belongs_to_its_loop():
    """As in Quadrants (Genesis's kernel_init_link_fields): a name that was a grouped index
    vector in one loop is a new scalar in the next."""
    f = jr.field(jr.i32, shape=(3,))

    @jr.kernel
    def k(out: jr.types.ndarray()):
        for I_l in jr.grouped(f):
            f[I_l] = I_l[0] * 10
        for i, j in jr.ndrange(3, 2):
            I_l = i
            out[i, j] = f[I_l] + j
    out = np.zeros((3, 2), np.int32)
    k(out)
    assert out.tolist() == [[0, 1], [10, 11], [20, 21]]


def test_a_static_assignment_binds_the_compile_time_value():
    """`BW = qd.static(is_backward)` then `W(i, v, BW)` into a func's template parameter read
    by `qd.static(cond)` (Genesis's forward kinematics): the name is the value itself, as in
    Taichi's static assignment, numbers and bools included."""
    x = jr.field(jr.f32, shape=4)

    @jr.func
    def write_if(i, value, cond: jr.template()):
        if jr.static(cond):
            x[i] = value
        return value

    @jr.kernel
    def k(is_backward: jr.template()):
        flag = jr.static(is_backward)
        w = jr.static(write_if)
        for i in range(4):
            w(i, 2.0, flag)

    k(False)
    assert x.to_numpy().tolist() == [0, 0, 0, 0]
    k(True)
    assert x.to_numpy().tolist() == [2, 2, 2, 2]
