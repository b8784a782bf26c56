"""Corners of Taichi's kernel language its own test suite reaches (issue 29): `jr.lang.ops`,
`f(*v)` in kernels, `and`/`or` of vectors, bool vector literals, ... each checked on values a
user sees, with jitrt's own kernels."""
import numpy as np
import pytest

import jitrt as jr


# ---- jr.lang.ops: the operators as functions ------------------------------------------------
def test_lang_ops_at_python_scope_are_element_wise_on_vectors():
    ops = jr.lang.ops
    assert ops.logical_not(jr.Vector([2, 0])).to_numpy().tolist() == [False, True]
    assert ops.abs(jr.Vector([-0.5, 0.25])).to_numpy().tolist() == [0.5, 0.25]
    assert ops.add(jr.Vector([1, 2]), jr.Vector([3, 4])).to_numpy().tolist() == [4, 6]
    assert ops.mod(-7, 3) == 2 and ops.bit_sar(-8, 1) == -4 and ops.cmp_lt(1, 2)
    assert ops.sin is jr.sin and ops.atomic_add is jr.atomic_add and ops.max is jr.max


def test_lang_ops_in_kernels():
    ops = jr.lang.ops
    offsets = [jr.Vector([1, 2]), jr.Vector([2, 3])]

    @jr.kernel
    def k(a: jr.i32, b: jr.i32) -> jr.types.vector(8, jr.i32):
        v = ops.add(jr.Vector([4, 5]), jr.static(offsets)[1])
        return jr.Vector([ops.logical_not(a), ops.logical_and(a, b), ops.logical_or(a, b),
                          ops.ifte(a, 7, 9), ops.bit_sar(-8, 1), ops.mod(-7, 3), v[0], v[1]])

    assert k(0, 5).tolist() == [1, 0, 5, 9, -4, 2, 6, 8]
    assert k(3, 5).tolist() == [0, 5, 3, 7, -4, 2, 6, 8]


def test_lang_ops_missing_name_says_so():
    with pytest.raises(AttributeError, match=r"jitrt\.lang\.ops\.frexp is not in jitrt"):
        jr.lang.ops.frexp  # noqa: B018


def test_lang_ops_logic_takes_its_arity():
    @jr.kernel
    def k(a: jr.i32) -> jr.i32:
        return jr.lang.ops.logical_and(a)

    with pytest.raises(jr.KernelCompileError, match=r"logical_and\(\) takes 2 positional"):
        k(1)


# ---- f(*v) in kernels ---------------------------------------------------------------------
def test_starred_arguments_unpack_vectors_tuples_and_matrix_rows():
    @jr.func
    def digits(a, b, c):
        return a * 100 + b * 10 + c

    @jr.kernel
    def k(x: jr.i32) -> jr.types.vector(3, jr.i32):
        a = jr.Vector([1, 2, 3])
        b = jr.Vector([4, x, 6])
        m = jr.Matrix([[1, 2], [3, 4]])
        return jr.Vector([jr.min(*a, *b), jr.max(*b, *(7, 1)),
                          digits(*jr.Vector([x, 2]), 3) + jr.math.dot(*m)])

    assert k(0).tolist() == [0, 7, 23 + 11]
    assert k(9).tolist() == [1, 9, 923 + 11]


def test_starred_argument_of_a_scalar_is_an_error():
    @jr.kernel
    def k(x: jr.i32) -> jr.i32:
        return jr.max(*x)

    with pytest.raises(jr.KernelCompileError, match=r"\*x in a call unpacks a vector.*got a "
                       r"run-time i32 value"):
        k(1)


# ---- and / or of vectors ------------------------------------------------------------------
def test_and_or_of_vectors_are_per_component_truths():
    @jr.kernel
    def k(s: jr.i32) -> jr.types.matrix(4, 4, jr.i32):
        a = jr.Vector([2, 2, 0, 0])
        b = jr.Vector([1, 0, 1, 0])
        return jr.Matrix([a or b, a and b, s and b, a or s])

    assert k(0).tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]]
    assert k(3).tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]]


def test_and_of_vectors_of_different_shapes_is_an_error():
    @jr.kernel
    def k() -> jr.i32:
        v = jr.Vector([1, 2]) and jr.Vector([1, 2, 3])
        return v[0]

    with pytest.raises(jr.KernelCompileError, match=r"'and' of a vector/matrix of shape "
                       r"\(2,\) and one of shape \(3,\)"):
        k()


def test_bool_vector_literal_is_zero_one():
    @jr.kernel
    def k() -> jr.types.vector(4, jr.i32):
        a = jr.Vector([True, True, False, False])
        return a + jr.Vector([False, True, True, False])

    assert k().tolist() == [1, 2, 1, 0]



# ---- Taichi's init options read back ------------------------------------------------------
def test_ignored_taichi_options_read_back_as_given(monkeypatch):
    monkeypatch.delenv("TI_FLATTEN_IF", raising=False)
    with pytest.warns(UserWarning, match="print_ir"):
        jr.init(print_ir=True, check_out_of_bound=False)
    cfg = jr.lang.impl.current_cfg()
    assert cfg.print_ir is True and cfg.check_out_of_bound is False
    # Taichi's defaults where nothing was given, Taichi's TI_<NAME> variables read
    assert cfg.advanced_optimization is True and cfg.verbose is True and cfg.flatten_if is False
    monkeypatch.setenv("TI_FLATTEN_IF", "1")
    jr.init()
    assert jr.lang.impl.current_cfg().flatten_if is True
    with pytest.raises(AttributeError, match="'Config' object has no attribute 'no_such'"):
        jr.lang.impl.current_cfg().no_such  # noqa: B018


# ---- vectors and matrices of up to 1024 components -----------------------------------------
@pytest.mark.no_gpu_builds
def test_a_100_component_vector_passes_indexes_reduces_and_returns():
    # past 32 components, run-time indices halve before their select chains and reductions
    # keep a running local (an expression never grows with the length)
    vec = jr.types.vector(100, jr.i32)

    @jr.kernel
    def k(a: vec) -> vec:
        out = vec(0)
        total = 0
        for i in range(100):           # run-time indices: reads and writes
            total += a[i]
            out[99 - i] = a[i]
        out[0] = total - a.sum()       # 0: the loop's sum and the unrolled one agree
        out[1] = any(a > 98) + (a >= 0).all() * 10 + a.max() * 100
        return out

    got = k(vec(list(range(100))))
    assert got[0] == 0 and got[1] == 1 + 10 + 9900
    assert got[2:].tolist() == list(range(97, -1, -1))


def test_more_than_1024_components_is_a_clear_error():
    assert jr.types.matrix(32, 32, jr.f32).n == 32          # 1024: the largest
    assert jr.types.vector(1024, jr.f32).n == 1024
    with pytest.raises(TypeError, match=r"a 1025-component vector is larger than jitrt's "
                       r"vectors and matrices, which have at most 1024 components.*field or "
                       r"an ndarray"):
        jr.types.vector(1025, jr.i32)
    with pytest.raises(TypeError, match=r"a 33 x 32 matrix is larger"):
        jr.Matrix.field(33, 32, jr.f32, shape=4)


# ---- Tape.calls / Tape.modes --------------------------------------------------------------
def test_tape_calls_and_modes_list_the_recorded_launches():
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def step(k: jr.f32):
        for i in x:
            loss[None] += x[i] * k

    with jr.ad.Tape(loss=loss) as tape:
        step(1.0)
        step(2.0)
        assert [args for _, args in tape.calls] == [(1.0,), (2.0,)]
    assert [kernel for kernel, _ in tape.calls] == [step, step]
    assert tape.modes == [jr.ad.AutodiffMode.NONE] * 2
    assert x.grad.to_numpy().tolist() == [3.0] * 4


# ---- small names of Taichi's objects ------------------------------------------------------
def test_taichi_object_names():
    assert jr.f32.to_string() == str(jr.f32) and jr.u8.to_string() == str(jr.u8)
    assert jr.field(jr.f32, shape=(2, 3), name="a")._name == "a"
    assert jr.field(jr.math.vec3, shape=2, name="b")._name == "b"
    v = jr.types.vector(3, jr.f32)([0, 1, 2])
    assert v.entries.dtype == np.float32 and v.entries.tolist() == [0.0, 1.0, 2.0]
    assert jr.types.matrix(2, 2, jr.i32)([[0, 1], [2, 3]]).entries.dtype == np.int32
    a, b = jr.ndarray(jr.i32, 8), jr.Vector.ndarray(10, jr.f64, 5)
    assert (a._get_element_size(), a._get_nelement()) == (4, 8)
    assert (b._get_element_size(), b._get_nelement()) == (80, 5)


def test_matrix_one_in_kernels():
    c = jr.Matrix.field(2, 3, dtype=jr.f32, shape=2)

    @jr.kernel
    def fill():
        c[0] = jr.Matrix.one(jr.f32, 2, 3) * 2
        c[1] = jr.Matrix.one(int, 2, 3) - jr.Matrix.zero(jr.f32, 2, 3)

    fill()
    assert c.to_numpy().tolist() == [[[2.0] * 3] * 2, [[1.0] * 3] * 2]


# ---- ndarray(boundary="clamp") ------------------------------------------------------------
def test_clamped_ndarray_indices_stay_inside():
    @jr.kernel
    def read(x: jr.types.ndarray(boundary="clamp"), k: jr.i32) -> jr.f32:
        return x[k]

    @jr.kernel
    def write(x: jr.types.ndarray(dtype=jr.f32, ndim=1, boundary="clamp"), k: jr.i32):
        x[k] = 7.0

    x = jr.ndarray(jr.f32, shape=3)
    x.from_numpy(np.array([0.0, 1.0, 2.0], np.float32))
    assert [read(x, k) for k in (-2, -1, 0, 3, 4)] == [0.0, 0.0, 0.0, 2.0, 2.0]
    write(x, 10)
    write(x, -5)
    assert x.to_numpy().tolist() == [7.0, 1.0, 7.0]


def test_clamped_ndarray_components_clamp_their_flat_position():
    @jr.kernel
    def vec(x: jr.types.ndarray(boundary="clamp"), k: jr.i32) -> jr.f32:
        return x[1, 2][k]

    @jr.kernel
    def mat(x: jr.types.ndarray(boundary="clamp"), i: jr.i32, j: jr.i32) -> jr.f32:
        return x[1, 2][i, j]

    v = jr.ndarray(jr.math.vec2, shape=(3, 3))
    m = jr.ndarray(jr.math.mat2, shape=(3, 3))
    v[1, 2] = [1, 2]
    m[1, 2] = [[1, 2], [3, 4]]
    assert (vec(v, -1), vec(v, 5)) == (1.0, 2.0)
    # (i, j) -> i * 2 + j, clamped into 0..3, as Taichi does: (2, 0) reads (1, 1)
    assert [mat(m, *ij) for ij in ((-1, 0), (1, -1), (2, 0), (0, 5))] == [1.0, 2.0, 4.0, 4.0]


def test_boundary_takes_unsafe_or_clamp():
    with pytest.raises(ValueError, match="boundary must be 'unsafe' or 'clamp', got 'wrap'"):
        jr.types.ndarray(boundary="wrap")


# ---- numpy 0-d arrays are numbers in kernels ----------------------------------------------
def test_numpy_0d_arrays_are_numbers_in_kernels():
    x = jr.field(jr.f32, shape=8)
    begin = (np.ones(1) * 3).astype(np.int32).reshape(())
    end = np.array(6)
    scale = np.array(2.5)

    @jr.kernel
    def fill() -> jr.i32:
        for i in range(begin, end):
            x[i] = i * scale
        return np.array(3, dtype=np.int32) + np.full((), 2, dtype=np.int64)

    assert fill() == 5
    assert x.to_numpy().tolist() == [0, 0, 0, 7.5, 10, 12.5, 0, 0]


# ---- integers given as bit patterns of their width ----------------------------------------
def test_integer_arguments_take_the_bit_patterns_of_their_width():
    @jr.kernel
    def k(a: jr.i8, b: jr.u32, v: jr.types.vector(2, jr.u8)) -> jr.types.vector(4, jr.i64):
        return jr.Vector([a, b, v[0], v[1]], jr.i64)

    assert k(255, -1, [-1, 200]).tolist() == [-1, 4294967295, 255, 200]
    assert k(-128, 7, [0, 0]).tolist()[:2] == [-128, 7]
    with pytest.raises(jr.KernelArgError, match=r"argument 'a': expected a i8 in \[-128, 255\] "
                       r"\(a 8-bit pattern.*got 256"):
        k(256, 0, [0, 0])
    with pytest.raises(jr.KernelArgError, match=r"argument 'v'"):
        k(0, 0, [256, 0])


def test_host_writes_of_integer_bit_patterns():
    a, b = jr.field(jr.i8, shape=1), jr.field(jr.u8, shape=1)
    a[0], b[0] = 255, -128
    assert (a[0], b[0]) == (-1, 128)
    out = jr.field(jr.u32, shape=2)

    @jr.kernel
    def widen():
        out[0] = jr.cast(a[0], jr.u32)
        out[1] = jr.cast(b[0], jr.u32)

    widen()
    assert out.to_numpy().tolist() == [0xFFFFFFFF, 128]
    with pytest.raises(OverflowError):
        a[0] = 256


# ---- bool() in kernels ---------------------------------------------------------------------
def test_bool_of_run_time_values():
    @jr.func
    def truth(x: jr.u32) -> bool:
        return bool(x)

    @jr.kernel
    def k(big: jr.u32) -> jr.types.vector(5, jr.i32):
        v = bool(jr.Vector([0.0, 2.5]))
        return jr.Vector([truth(0), truth(big), bool(0.0), v[0], v[1]])

    assert k(4_294_967_295).tolist() == [0, 1, 0, 0, 1]


def test_if_expression_of_a_vector_condition_is_refused_as_in_taichi():
    @jr.kernel
    def k(a: jr.types.vector(2, jr.i32)) -> jr.types.vector(2, jr.i32):
        return 0 if a > 0 else a

    with pytest.raises(jr.KernelSyntaxError, match=r"scalar condition, got a vector/matrix of "
                       r"shape \(2,\).*Please use \"jr\.select\" instead"):
        k([1, -1])


# ---- grouped indices and ndrange extents ---------------------------------------------------
def test_index_vectors_index_matrices_and_0d_fields():
    x = jr.Matrix.field(2, 3, dtype=jr.f32, shape=4)
    val = jr.field(jr.i32, shape=())

    @jr.kernel
    def fill(a: jr.i32, b: jr.i32) -> jr.f32:
        for i in range(4):
            for ij in jr.static(jr.grouped(jr.ndrange(2, 3))):
                x[i][ij] = ij[0] + ij[1] * 10 + i
        for none in jr.static(jr.grouped(jr.ndrange())):     # one empty index
            val[none] = 42
        m = jr.Matrix([[1.0, 2.0], [3.0, 4.0]])
        return m[jr.Vector([a, b])] + m[jr.Vector([1, 0])]

    assert fill(0, 1) == 5.0
    assert val[None] == 42
    assert x.to_numpy()[3].tolist() == [[3, 13, 23], [4, 14, 24]]


def test_ndrange_extent_of_three_values_is_refused():
    @jr.kernel
    def k():
        for i in jr.ndrange((1, 2, 3)):
            pass

    with pytest.raises(jr.KernelSyntaxError, match=r"Every argument of ndrange should be a "
                       r"scalar or a tuple/list like \(begin, end\), got 3 values"):
        k()


# ---- Fortran-ordered numpy arguments -------------------------------------------------------
def test_a_transposed_numpy_array_is_copied_in_and_out():
    out = jr.field(jr.i32, shape=(3, 4))

    @jr.kernel
    def touch(arr: jr.types.ndarray()):
        for i, j in out:
            out[i, j] = arr[i, j]
            arr[i, j] += 100

    a = np.arange(12, dtype=np.int32).reshape(4, 3)
    for _ in range(2):                  # the second launch takes the fast path's way back
        a[:] = np.arange(12).reshape(4, 3)
        touch(a.T)
        assert out.to_numpy().tolist() == (a.T - 100).tolist()
        assert a.tolist() == (np.arange(12).reshape(4, 3) + 100).tolist()
    with pytest.raises(jr.KernelArgError, match=r"np\.ascontiguousarray"):
        touch(np.zeros((3, 8), np.int32)[:, ::2])
    with pytest.raises(ValueError, match="Non contiguous numpy arrays are not supported"):
        touch(np.zeros((3, 8), np.int32)[:, ::2])         # Taichi's kind: a ValueError


def test_atomic_on_a_value_is_refused_as_in_taichi():
    @jr.kernel
    def k():
        y = jr.Vector([1, 2, 3])
        jr.atomic_min([3, 2, 1], y)

    with pytest.raises(jr.KernelSyntaxError, match=r"cannot use a non-writable target as the "
                       r"first operand of 'jr\.atomic_min'"):
        k()


# ---- jr.bit_cast ---------------------------------------------------------------------------
def test_bit_cast_reads_the_bits_as_another_type_of_the_width():
    x, y = jr.field(jr.i32, shape=()), jr.field(jr.f32, shape=())

    @jr.kernel
    def there_and_back() -> jr.types.vector(3, jr.i64):
        y[None] = jr.bit_cast(x[None], jr.f32)
        return jr.Vector([jr.bit_cast(y[None], jr.i32), jr.bit_cast(1.0, jr.i32),
                          jr.bit_cast(jr.f64(-0.0), jr.i64)], jr.i64)

    x[None] = 2333
    assert there_and_back().tolist() == [2333, 1065353216, -(1 << 63)]
    assert y[None] == np.array(2333, np.int32).view(np.float32)
    assert jr.lang.ops.bit_cast is jr.bit_cast


def test_bit_cast_needs_the_same_width():
    @jr.kernel
    def k() -> jr.f64:
        return jr.bit_cast(3, jr.f64)

    with pytest.raises(jr.KernelTypeError, match=r"jr\.bit_cast\(x, f64\): x is i32, 32 bits"):
        k()


# ---- floor/ceil/round with a dtype ---------------------------------------------------------
def test_rounding_functions_take_the_result_type():
    @jr.kernel
    def k(x: jr.f32) -> jr.types.vector(4, jr.u32):
        w = jr.floor(jr.Vector([x, -x]), jr.i32)
        return jr.Vector([jr.floor(x, jr.i32), jr.ceil(x, dtype=int), w[0], w[1]], jr.u32)

    assert k(-1.0).tolist() == [4294967295, 4294967295, 4294967295, 1]
    assert k(2.5).tolist() == [2, 3, 2, 4294967293]
    assert jr.floor(2.7, jr.i32) == 2 and isinstance(jr.floor(2.7, jr.i32), np.int32)
    assert isinstance(jr.floor(jr.Vector([1.5, -1.5]), jr.i32), jr.Vector)


# ---- jr.types.vector() / matrix() without a size as ndarray type hints ---------------------
def test_sizeless_vector_and_matrix_hints_take_any_length():
    @jr.kernel
    def total(x: jr.types.ndarray(dtype=jr.types.vector())) -> jr.f32:
        s = 0.0
        for i in x:
            s += x[i].sum()
        return s

    @jr.kernel
    def ones(x: jr.types.ndarray(dtype=jr.types.matrix())):
        for i in x:
            x[i] = 1.0

    v3, v2 = jr.ndarray(jr.math.vec3, 3), jr.ndarray(jr.math.vec2, 3)
    v3.fill(1.0)
    v2.fill(2.0)
    assert (total(v3), total(v2)) == (9.0, 12.0)
    m = jr.ndarray(jr.math.mat2, 3)
    ones(m)
    assert m.to_numpy().sum() == 12.0
    with pytest.raises(jr.KernelArgError, match=r"expected an ndarray of vectors"):
        total(m)
    with pytest.raises(TypeError, match=r"give both n and m"):
        jr.types.matrix(3)


# ---- jr.Matrix of a flat list; func vector parameters of the wrong length -------------------
def test_matrix_of_a_flat_list_is_a_vector_and_func_parameters_check_the_length():
    vec3 = jr.types.vector(3, jr.f32)

    @jr.func
    def scaled(a: vec3) -> vec3:
        return a * 2

    @jr.kernel
    def k() -> vec3:
        return scaled(jr.Matrix([3, 4, 5]))

    @jr.kernel
    def wrong() -> vec3:
        return scaled(jr.Matrix([3, 4]))

    assert k().tolist() == [6.0, 8.0, 10.0]
    with pytest.raises(jr.KernelSyntaxError, match=r"argument 'a' of 'scaled' is expected to "
                       r"be a Matrix with n 3, but got 2"):
        wrong()


def test_runtime_prog_config_is_the_current_configuration():
    jr.init(arch=jr.cpu, debug=True)
    cfg = jr.lang.impl.get_runtime().prog.config()
    assert cfg.arch == jr.cpu and cfg.arch != jr.cuda and cfg.debug is True


# ---- a user's container indexed at compile time --------------------------------------------
def test_user_container_items_are_taken_at_compile_time():
    class Table:
        def __init__(self, items):
            self.items = items

        def __getitem__(self, k):
            return self.items[k]

    table = Table([1, 2, 3])

    @jr.kernel
    def digits() -> jr.i32:
        s = 0
        for k in jr.static(range(3)):
            s += table[k] * 10 ** k
        return s

    @jr.kernel
    def run_time(k: jr.i32) -> jr.i32:
        return table[k]

    assert digits() == 321
    with pytest.raises(jr.KernelCompileError, match=r"cannot index Table .* with a run-time "
                       r"value"):
        run_time(1)
