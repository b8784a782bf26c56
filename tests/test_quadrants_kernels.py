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
    flag = np.ones((), np.int32)
    loop(flag)                       # runs (tests/test_graph_do_while.py): once, then flag is 0
    assert flag[()] == 0


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


def test_fill_sets_every_component_in_kernels():
    """`x[i, j].fill(s)` on an element of a vector field (Genesis's forward kinematics),
    `a[i].fill(s)` on an ndarray of vectors, and `v.fill(s)` / `m.fill(s)` on locals set
    every component, converted to the element's type."""
    x = jr.Vector.field(3, jr.f32, shape=(4, 2))
    vec2 = jr.types.vector(2, jr.f32)

    @jr.kernel
    def k(a: jr.types.ndarray(dtype=vec2, ndim=1)) -> jr.f32:
        for i, j in x:
            x[i, j].fill(i + 0.5)
        for i in a:
            a[i].fill(2)
        v = jr.Vector([1.0, 2.0, 3.0])
        v.fill(7)
        m = jr.Matrix([[1, 2], [3, 4]])
        m.fill(5)
        return v.sum() + m.sum() + m[1, 0]

    a = jr.ndarray(vec2, shape=(3,))
    assert k(a) == 46.0
    assert x.to_numpy()[:, 1, :].tolist() == [[0.5] * 3, [1.5] * 3, [2.5] * 3, [3.5] * 3]
    assert a.to_numpy().tolist() == [[2.0, 2.0]] * 3


def test_slices_of_vectors_and_matrices():
    """`m[i, :]` with a run-time i (Genesis's forward kinematics), `m[:, j]`, `v[a:b]` reads;
    `m[i, :] = row`, `v[a:b] += w` (static bounds, Genesis's FEM solver) and `x[i][1:] = w`
    stores; Python's rules for bounds and dropped axes."""
    x = jr.Matrix.field(3, 3, jr.f32, shape=2)
    y = jr.Vector.field(3, jr.f32, shape=2)

    @jr.kernel
    def k() -> jr.f32:
        m = jr.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        for i in range(2):
            x[i] = m
            y[i] = m[i + 1, :]
        y[1][1:] = m[:, 2][:2]
        w = jr.Vector.zero(jr.f32, 6)
        for i in jr.static(range(2)):
            w[i * 3: i * 3 + 3] += m[:, i]
        w[4:] = w[0:2]
        return w[0] + w[3] * 10 + w[4] * 100 + w[5] * 1000 + x[1][1:, 0].sum() * 1e4

    assert k() == 1 + 20 + 100 + 4000 + 11e4
    assert y.to_numpy().tolist() == [[4, 5, 6], [7, 3, 6]]


def test_bad_slices_are_located_errors():
    @jr.kernel
    def k(n: jr.i32) -> jr.f32:
        v = jr.Vector([1.0, 2.0, 3.0])
        return v[0:n].sum()

    with pytest.raises(jr.KernelCompileError, match="slice of a vector or matrix needs "
                       "bounds known at compile time"):
        k(2)


def test_shapes_and_compile_time_tuples_unpack():
    """`n, m = a.shape` of an ndarray (Genesis's broadphase) and of a field, `p, q = (2, 3)`
    from a global tuple."""
    f = jr.field(jr.i32, shape=(4, 5))
    pair = (2, 3)

    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=2)) -> jr.i32:
        n, m = a.shape
        fn, fm = f.shape
        p, q = pair
        return n * 1000 + m * 100 + fn * 10 + fm + p * q * 10000

    assert k(np.zeros((6, 7), np.float32)) == 60000 + 6000 + 700 + 40 + 5


def test_conditional_expressions_with_vector_arms():
    """`x[(j, i) if i > j else (i, j)]` (Genesis's narrowphase) and `v if c else 0.0`: the
    arms are selected component by component."""
    x = jr.field(jr.i32, shape=(3, 3))
    for i in range(3):
        for j in range(3):
            x[i, j] = 10 * i + j

    @jr.kernel
    def k(i: jr.i32, j: jr.i32) -> jr.i32:
        v = jr.Vector([1.0, 2.0])
        w = v if i > j else 0.0
        return x[(j, i) if i > j else (i, j)] + jr.cast(w.sum(), jr.i32) * 100

    assert k(2, 1) == 12 + 300
    assert k(0, 2) == 2


def test_python_functions_with_compile_time_arguments_run_while_compiling():
    """`qd.static(qd.lang.impl.get_runtime().default_fp == qd.f32)` (Genesis's support
    field), `math.comb(5, 2)`: run in Python at compile time; with a run-time argument,
    a located error says why."""
    from jitrt.quadrants.lang import impl

    @jr.kernel
    def k(x: jr.f32) -> jr.f32:
        y = x
        if jr.static(impl.get_runtime().default_fp == jr.f32):
            y = x + math.comb(5, 2)
        below = jr.static(float(np.nextafter(np.float32(math.pi), np.float32(0.0))))
        return y + below + int(x) * 0

    below_pi = float(np.nextafter(np.float32(math.pi), np.float32(0.0)))
    assert k(1.0) == np.float32(11.0 + below_pi)

    @jr.kernel
    def bad(x: jr.f32) -> jr.f32:
        return math.comb(x, 2)

    with pytest.raises(jr.KernelCompileError, match="arguments must be known at compile time"):
        bad(1.0)


def test_list_literals_repeat_and_concatenate_as_in_python():
    """`qd.Vector([-1e20] * 12, dt=...)` (Genesis's narrowphase) and `[a, b] + [c]`: a list of
    compile-time values is a Python list, as in Taichi."""

    @jr.kernel
    def k() -> jr.f32:
        a = jr.Vector([-1.5] * 4, dt=jr.f32)
        b = jr.Vector([1.0, 2.0] + [3.0])
        return a.sum() * 10 + b.sum() + a.n * 100 + b.n * 1000

    assert k() == -60 + 6 + 400 + 3000


def test_a_name_reassigned_with_another_shape_in_a_later_block_is_a_new_local():
    """Genesis's narrowphase: `corner` is a vec3 in one block and a vec2 in a later one. In
    Taichi a name first assigned in a block is local to it, so the second is a new local;
    a read after branches that gave it different shapes is refused, never mixed."""

    @jr.kernel
    def k(a: jr.i32, b: jr.i32) -> jr.f32:
        s = 0.0
        if a > 0:
            for i in range(2):
                corner = jr.Vector([1.0, 2.0, 3.0])
                s += corner.sum()
        if b > 0:
            for i in range(3):
                corner = jr.Vector([10.0, 20.0])
                s += corner.sum()
        return s

    assert (k(1, 1), k(0, 1), k(1, 0)) == (102.0, 90.0, 12.0)

    @jr.kernel
    def mixed(a: jr.i32) -> jr.f32:
        if a > 0:
            y = jr.Vector([1.0, 2.0, 3.0])
        else:
            y = jr.Vector([1.0, 2.0])
        return y.sum()

    with pytest.raises(jr.KernelCompileError, match="'y'"):
        mixed(1)


def test_a_name_repeated_in_one_unpacking_keeps_its_last_part():
    """`v1, _, _ = f(...)` with parts of different shapes (Genesis's box contact)."""

    @jr.func
    def parts(x):
        return jr.Vector([x, 2 * x, 3 * x]), jr.Vector([x, x, x]), 7

    @jr.kernel
    def k(x: jr.f32) -> jr.f32:
        v1, _, _ = parts(x)
        a, a = 1.0, 2.0
        return v1.sum() + _ * 10 + a * 100

    assert k(1.0) == 6 + 70 + 200


def test_static_enumerate_of_run_time_values_unrolls():
    """`for k, c in qd.static(enumerate((i_x, i_y)))` (Genesis's contact code): each item is
    a run-time value bound for its unrolled iteration."""

    @jr.kernel
    def k(a: jr.i32, b: jr.f32) -> jr.f32:
        s = 0.0
        for idx, c in jr.static(enumerate((a, b, 2))):
            s += c * 10 ** idx
        for u, w in jr.static(zip((a, b), (b, a))):
            s += u * w * 1000
        return s

    assert k(3, 0.5) == 3 + 5 + 200 + 3000
