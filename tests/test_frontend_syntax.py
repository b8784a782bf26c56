"""Python syntax that kernels accept as Taichi does: comprehensions, dicts, the walrus, chained
and unpacking assignments, `jr.static(a, b)`, Python's `all`/`any`/`len`/`sum` and the
`operator` module, `jr.func(f)` applied in a kernel, formatted strings in `print`."""
import operator

import numpy as np
import pytest

import jitrt as jr


# ---- calls of Python's functions ------------------------------------------------------------

def test_func_applied_in_the_kernel_inlines_a_plain_function():
    out = jr.field(jr.f32, shape=4)

    def f(i):
        return i * 0.5 + 1.0

    @jr.kernel
    def fill():
        for i in range(4):
            out[i] = jr.sqrt(jr.func(f)(jr.cast(i, jr.f32)))

    fill()
    np.testing.assert_allclose(out.to_numpy(), np.sqrt(np.arange(4) * 0.5 + 1.0), rtol=1e-6)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.iadd,
                                operator.floordiv, operator.matmul])
def test_operator_functions_are_their_operators(op):
    a, b = np.array([[7, 8], [9, 10]]), np.array([[2, 3], [4, 5]])
    r = jr.Matrix.field(2, 2, jr.i32, shape=())
    m1 = jr.Matrix(a.tolist())

    @jr.kernel
    def run():
        r[None] = op(m1, jr.Matrix([[2, 3], [4, 5]]))

    run()
    np.testing.assert_array_equal(r[None].to_numpy(), op(a, b))


def test_all_any_len_sum_of_vectors():
    @jr.kernel
    def k(a: jr.f32) -> jr.i32:
        v = jr.Vector([1.0, 2.0, a])
        m = jr.Matrix([[1, 1, 1], [2, 2, 2]])
        code = 0
        if all(v > 0):
            code += 1
        if any(v == 3.0):
            code += 10
        return code + 100 * len(v) + 1000 * len(m) + 10000 * sum(m)

    assert k(3.0) == 1 + 10 + 300 + 2000 + 90000
    assert k(-1.0) == 300 + 2000 + 90000


# ---- assignments --------------------------------------------------------------------------

def test_chained_assignment_evaluates_the_value_once():
    @jr.kernel
    def k() -> jr.i32:
        a = 1
        b = 1
        a = b = a + b
        (c, d) = (e, f) = (3, 4)
        return a * 100000 + b * 10000 + c * 1000 + d * 100 + e * 10 + f

    assert k() == 223434


def test_unpacking_a_constant_list_a_shape_and_a_static_tuple():
    a, b, c = (jr.field(jr.f32, ()) for _ in range(3))
    d = jr.field(jr.f32, (2, 3, 4))
    values = [5, 6, 7]

    @jr.kernel
    def from_list():
        a[None], b[None], c[None] = values

    @jr.kernel
    def from_shape():
        a[None], b[None], c[None] = d.shape

    @jr.kernel
    def from_static(x: jr.f32):
        u, w = jr.static(b, a)
        u[None] = x
        w[None] = -x

    from_list()
    assert (a[None], b[None], c[None]) == (5, 6, 7)
    from_shape()
    assert (a[None], b[None], c[None]) == (2, 3, 4)
    from_static(1.5)
    assert (a[None], b[None]) == (-1.5, 1.5)


def test_unpacking_the_wrong_count_is_a_compile_error():
    values = [1, 2, 3]

    @jr.kernel
    def k() -> jr.i32:
        p, q = values
        return p + q

    with pytest.raises(jr.KernelCompileError, match="cannot unpack 3 values into 2 targets"):
        k()


def test_walrus_assigns_and_gives_the_value():
    @jr.kernel
    def k(x: jr.i32) -> jr.i32:
        b = 2 + (a := x * 5)
        b += a
        return b

    assert k(1) == 12


# ---- comprehensions and dicts --------------------------------------------------------------

def test_comprehensions_unroll_over_compile_time_sequences_and_matrix_rows():
    @jr.func
    def identity(dt, n: jr.template()):
        return jr.Matrix([[jr.cast(int(i == j), dt) for j in range(n)] for i in range(n)])

    @jr.kernel
    def k(n: jr.template(), s: jr.i32) -> jr.i32:
        a = identity(jr.i32, n) * s
        firsts = [row[0] for row in a]
        flat = [x for row in a for x in row if jr.static(True)]
        odd = {i: i * i for i in range(n) if i % 2}
        total = 0
        for i in jr.static(range(n)):
            total += firsts[i] + flat[i * n + i] * 10
            if jr.static(i % 2):
                total += odd[i] * 100
        return total

    assert k(4, 3) == 3 + 4 * 3 * 10 + (1 + 9) * 100


def test_comprehension_of_constants_is_a_python_list():
    @jr.kernel
    def k(x: jr.f32) -> jr.f32:
        m = jr.Matrix([[0.0] * 3 for _ in range(2)])
        v = jr.Vector([x * k for k in [1, 2, 3]])
        return m[1, 2] + v[2] + sum([k for k in range(5)])

    assert k(2.0) == 6.0 + 10


def test_dict_display_of_run_time_values_reads_them_once():
    a = jr.field(jr.f32, shape=2)

    @jr.kernel
    def k(u: jr.i32) -> jr.f32:
        x = {"foo": 2 + u, "bar": 3 + a[0], **{"baz": 1}}
        a[0] = 100.0                       # x["bar"] was read before
        return x["foo"] * 100 + x["bar"] + x["baz"]

    a[0] = 0.5
    assert k(2) == pytest.approx(403.5 + 1)


def test_dict_with_run_time_keys_keeps_one_entry_per_key_read():
    x = jr.field(jr.i32, shape=8)

    @jr.kernel
    def k() -> jr.i32:
        a = {x[j]: x[j] + j for j in range(100) if j > 2 if j < 5}   # Taichi's example
        b = {x[0]: 1, x[0]: 2}        # two reads: two keys, as Taichi's expression keys
        n = sum([key * 1000 for key, _ in a.items()])
        return sum(a.values()) + len(b) * 100 + n + sum(b.keys())

    x.from_numpy(np.arange(8, dtype=np.int32) * 2)
    assert k() == (6 + 3) + (8 + 4) + 200 + (6 + 8) * 1000


def test_missing_dict_key_and_run_time_comprehension_are_compile_errors():
    @jr.kernel
    def missing(key: jr.template()) -> jr.i32:
        d = {1: 2, 3: 4}
        return d[key]

    assert missing(3) == 4
    with pytest.raises(jr.KernelCompileError, match="key 2 is not in the dict"):
        missing(2)

    @jr.kernel
    def runtime_range(n: jr.i32) -> jr.i32:
        return sum([i for i in range(n)])

    with pytest.raises(jr.KernelCompileError, match="length known at compile time"):
        runtime_range(3)


# ---- formatted strings in print -----------------------------------------------------------

@pytest.mark.cpu_only
def test_print_of_format_strings_uses_printf_specs(capfd):
    m = jr.Matrix.field(2, 2, jr.f32, shape=())

    @jr.func
    def inc(x):
        return x + 1

    @jr.kernel
    def show(i: jr.i32, f: jr.f32):
        m[None][0, 0] = -1.0
        print(f"qwe {inc(1):d} {(inc(2) * 2 - 1):.10d} {i} {f:.1f} {4} {True} {1.23}")
        print("{:.2} {name:i} {value:d}".format(f, name=999, value=i))
        print("{2:d} {1:.2} {:.10}".format(3, 2, 1))  # noqa: F525 (Taichi numbers {} apart)
        print(f"{m[None]:.2f} {m[None] = :e}")
        print("%d and %.2f and %s" % (i, f, "text"))
        w = jr.Matrix([[20.0, 300.0], [4000.0, 7e6]], jr.f32)
        print(f"{w:g}")

    show(123, 4.56)
    out = capfd.readouterr().out
    assert out == ("qwe 2 0000000005 123 4.6 4 True 1.23\n"
                   "4.56 999 123\n"
                   "1 02 0000000003\n"
                   "[[-1.00, 0.00], [0.00, 0.00]] m[None] = [[-1.000000e+00, 0.000000e+00], "
                   "[0.000000e+00, 0.000000e+00]]\n"
                   "123 and 4.56 and text\n"
                   "[[20, 300], [4000, 7e+06]]\n")


@pytest.mark.parametrize("body,kind,message", [
    ('print("{:u}".format(i))', jr.KernelTypeError, "'u' doesn't match 'i32'."),
    ('print(f"{f:d}")', jr.KernelTypeError, "'d' doesn't match 'f32'."),
    ('print("{0} {1}".format(1, 2, 3))', jr.KernelSyntaxError,
     r"Expected 2 positional argument\(s\), but received 3 instead."),
    ('print("{k}".format())', jr.KernelSyntaxError, "Keyword 'k' not found."),
    ('print("{}".format(i, k=i))', jr.KernelSyntaxError, "Keyword 'k' not used."),
    ('print(f"{f:>5}")', jr.KernelSyntaxError, "'>5' is not a valid printf format specifier"),
    ('s = f"{i}"', jr.KernelCompileError, "a formatted string with run-time values"),
])
def test_bad_format_strings_are_compile_errors(body, kind, message, tmp_path):
    path = tmp_path / "kernel_src.py"
    path.write_text(f"import jitrt as jr\n\n\n@jr.kernel\ndef k(i: jr.i32, f: jr.f32):\n"
                    f"    {body}\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(kind, match=message) as info:
        namespace["k"](1, 2.0)
    assert info.value.line == 6


# ---- control flow ---------------------------------------------------------------------------

def test_continue_in_the_parallel_loop_ends_the_iteration():
    x = jr.field(jr.i32, shape=64)

    @jr.kernel
    def run():
        for i in range(64):
            for j in range(3):
                if j == 1:
                    continue              # the inner loop's
                x[i] += j
            if i % 2 == 0:
                if i % 4 == 0:
                    continue              # the parallel loop's
            x[i] = -x[i]

    run()
    want = np.array([2 if i % 4 == 0 else -2 for i in range(64)])
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_break_and_continue_in_static_loops_act_while_unrolling():
    a = jr.field(jr.i32, shape=8)

    @jr.kernel
    def k():
        for i in jr.static(range(8)):
            a[i] = 3
            if jr.static(i == 2):
                continue
            if jr.static(i >= 5):
                break
            a[i] = 5

    k()
    np.testing.assert_array_equal(a.to_numpy(), [5, 5, 3, 5, 5, 3, 0, 0])

    @jr.kernel
    def runtime_condition(v: jr.i32):
        for i in jr.static(range(3)):
            if v > i:
                break

    with pytest.raises(jr.KernelSyntaxError, match="inside a non-static `if`"):
        runtime_condition(1)


def test_kernel_returns_under_static_ifs_and_loops():
    @jr.kernel
    def pick(a: jr.template()) -> jr.i32:
        if jr.static(a == 1):
            return 10
        elif jr.static(a == 2):
            return 20
        return 30

    @jr.kernel
    def squares() -> jr.i32:
        s = 0
        for i in jr.static(range(10)):
            s += i * i
            if jr.static(i == 8):
                return s

    @jr.kernel
    def nothing():
        return None

    assert (pick(1), pick(2), pick(7)) == (10, 20, 30)
    assert squares() == 204
    nothing()

    @jr.kernel
    def runtime_return(v: jr.i32) -> jr.i32:
        if v > 0:
            return 1
        return 2

    with pytest.raises(jr.KernelCompileError, match="Return inside non-static if/for"):
        runtime_return(1)


def test_grouped_loop_over_an_ndarray_and_a_numpy_array():
    @jr.kernel
    def fill(a: jr.types.ndarray()):
        for idx in jr.grouped(a):
            for j, k in jr.ndrange(2, 2):
                a[idx][j, k] = j * 10 + k + idx[0] * 100

    m = jr.Matrix.ndarray(2, 2, jr.i32, shape=(3, 2))
    fill(m)
    got = m.to_numpy()
    assert got.shape == (3, 2, 2, 2)
    np.testing.assert_array_equal(got[2, 1], [[200, 201], [210, 211]])

    @jr.kernel
    def index(a: jr.types.ndarray(dtype=jr.f32, ndim=2)):
        for idx in jr.grouped(a):
            a[idx] = idx[0] * 10 + idx[1]

    x = np.zeros((2, 3), np.float32)
    index(x)
    np.testing.assert_array_equal(x, [[0, 1, 2], [10, 11, 12]])


def test_slices_of_vectors_and_matrices_read_and_write():
    @jr.kernel
    def read(i: jr.i32) -> jr.types.vector(5, jr.i32):
        c = jr.Vector([0, 1, 2, 3, 4, 5, 6])
        m = jr.Matrix([[1, 2, 3], [4, 5, 6]])
        every_other = c[:6:2]               # 0 2 4 (bounds from 0, as in Taichi)
        column = m[:, i]                    # a run-time index beside a slice
        return jr.Vector([every_other[2], column[0], column[1], m[1:, 1:][0, 1], c[5:][0]])

    np.testing.assert_array_equal(read(1), [4, 2, 5, 6, 5])

    @jr.kernel
    def write(i: jr.i32) -> jr.types.matrix(3, 4, jr.i32):
        mat = jr.Matrix([[1, 1, 1, 1] for _ in range(3)])
        mat[:, 0] = jr.Vector([7, 8, 9])
        mat[i, 1:3] = jr.Vector([5, 6])
        mat[:2, 3] += jr.Vector([10, 20])
        return mat

    np.testing.assert_array_equal(write(2), [[7, 1, 1, 11], [8, 1, 1, 21], [9, 5, 6, 1]])

    @jr.kernel
    def variable_bound(i: jr.i32) -> jr.i32:
        c = jr.Vector([0, 1, 2, 3])
        return c[i:][0]

    with pytest.raises(jr.KernelCompileError, match="bounds known at compile time"):
        variable_bound(1)


# ---- formatted assert messages --------------------------------------------------------------

def test_assert_messages_show_run_time_values(arch):
    jr.init(arch=arch, debug=True, offline_cache=False)
    x = jr.field(jr.i32, shape=16)

    @jr.kernel
    def percent():
        for i in x:
            assert x[i] == 0, "x[%d] expect=%d got=%d" % (i, 0, x[i])

    @jr.kernel
    def fstring(y: jr.f32, z: jr.f64):
        assert y < 0, f"y = {y}, z = {z:.3f}"

    @jr.kernel
    def too_many(a: jr.i32, b: jr.i32, c: jr.i32):
        assert a < 0, f"{a} {b} {c}"

    x[10] = 42
    with pytest.raises(jr.KernelAssertionError, match=r"x\[10\] expect=0 got=42\n"):
        percent()
        jr.sync()
    with pytest.raises(jr.KernelAssertionError, match=r"y = 0.1, z = -2.500\n"):
        fstring(0.1, -2.5)
        jr.sync()
    x[10] = 0
    percent()
    jr.sync()
    with pytest.raises(jr.KernelCompileError, match="at most 2 run-time values, got 3"):
        too_many(1, 2, 3)


def test_stpq_swizzles_and_vectors_of_a_static_list():
    offsets = [jr.Vector([1, 2]), jr.Vector([2, 3])]
    x = jr.Vector.field(3, dtype=jr.i32, shape=(8, 8))

    @jr.kernel
    def k() -> jr.i32:
        v = jr.math.vec3(1, 2, 3)
        v.p = 7
        ind = jr.Vector([4, 5]) + jr.static(offsets)[0]
        x[ind] = [100, 10, 1]
        return int(v.s * 100 + v.t * 10 + v.stp[2])

    assert k() == 127
    np.testing.assert_array_equal(x[5, 7].to_numpy(), [100, 10, 1])


def test_static_assignment_of_a_run_time_local_or_an_element_is_an_error():
    @jr.kernel
    def rebind() -> jr.i32:
        a = 1
        a = jr.static(2)
        return a

    @jr.kernel
    def element():
        a = jr.static([1, 2, 3])
        a[0] = jr.static(2)

    @jr.kernel
    def twice() -> jr.i32:
        a = jr.static(2)
        a = jr.static(3)
        return a

    assert twice() == 3
    with pytest.raises(jr.KernelCompileError, match="Recreating variables is not allowed"):
        rebind()
    with pytest.raises(jr.KernelCompileError, match="cannot be used on elements"):
        element()


def test_fill_sets_every_component_of_a_vector_local():
    @jr.kernel
    def k(s: jr.f32) -> jr.f32:
        m = jr.Matrix([[0.0 for _ in range(4)] for _ in range(5)])
        m.fill(s)
        v = jr.Vector([1, 2, 3])
        v.fill(7)
        return m.sum() + v.sum()

    assert k(1.5) == 20 * 1.5 + 21


def test_static_of_a_run_time_value_says_what_it_needs():
    @jr.kernel
    def k(val: jr.f32) -> jr.i32:
        r = 0
        if jr.static(val > 0.5):
            r = 1
        return r

    with pytest.raises(jr.KernelCompileError, match="must be compile-time constants"):
        k(1.0)


def test_a_list_display_times_an_int_repeats_its_items():
    calls = jr.field(jr.i32, shape=())

    @jr.kernel
    def k(x: jr.f32) -> jr.f32:
        v = jr.Vector([x] * 3)                            # [x, x, x], as in Python
        w = jr.Vector(2 * [jr.atomic_add(calls[None], 1) * 1.0, x])   # read once
        u = jr.Vector([x, 1.0]) * 2                       # a vector: element-wise
        return v.sum() * 1000 + w.sum() * 100 + u.sum()

    assert k(2.0) == 6000 + 400 + 6
    assert calls[None] == 1
