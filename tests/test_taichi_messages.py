"""Error messages carry the phrase Taichi's own message has (programs and tests written for
Taichi match it), around jitrt's place (file:line:col and a caret) and advice."""
import numpy as np
import pytest

import jitrt as jr


def compile_error(kernel, *args, kind=jr.KernelCompileError):
    with pytest.raises(kind) as info:
        kernel(*args)
    err = info.value
    assert f"{__file__}:" in str(err) and "^" in str(err), str(err)
    return err


def test_a_funcs_call_errors_use_taichis_words():
    @jr.func
    def f(a, b, c=3):
        return a + b + c

    @jr.kernel
    def missing() -> jr.i32:
        return f(1, c=3)

    @jr.kernel
    def unknown() -> jr.i32:
        return f(1, 2, 3, d=3)

    @jr.kernel
    def too_many() -> jr.i32:
        return f(1, 2, 3, 4)

    @jr.kernel
    def twice() -> jr.i32:
        return f(1, a=3, b=3)

    for kernel, words in [(missing, "Parameter `b` missing"),
                          (unknown, "Unexpected argument 'd'"),
                          (too_many, "Too many arguments: it takes 3, got 4"),
                          (twice, "Multiple values for argument 'a'")]:
        err = compile_error(kernel, kind=jr.TaichiSyntaxError)
        assert f"calling @jr.func 'f': {words}" in str(err), str(err)


def test_a_kernels_call_errors_use_taichis_words():
    @jr.kernel
    def k(a: jr.i32, b: jr.i32) -> jr.i32:
        return a + b
    for call, words in [(lambda: k(b=2), "Parameter `a : i32` missing"),
                        (lambda: k(1, 2, c=2), "Unexpected argument 'c'"),
                        (lambda: k(1, 2, 3), "Too many arguments"),
                        (lambda: k(1, a=2), "Multiple values for argument 'a'")]:
        with pytest.raises(jr.TaichiSyntaxError) as info:
            call()
        assert f"kernel {k.qualname}: {words}" in str(info.value), str(info.value)


def test_unsupported_nodes_name_the_node_as_taichi_does():
    @jr.kernel
    def raises():
        raise ValueError()

    @jr.kernel
    def makes_a_set():
        s = {2, 4}  # noqa: F841
    err = compile_error(raises, kind=jr.TaichiSyntaxError)
    assert 'Unsupported node "Raise": Raise statements are not supported' in str(err)
    err = compile_error(makes_a_set, kind=jr.TaichiSyntaxError)
    assert 'Unsupported node "Set"' in str(err)


def test_a_function_defined_in_a_kernel_or_func_names_its_decorator():
    @jr.kernel
    def k():
        def inner():
            pass

    @jr.func
    def f():
        def inner():
            pass

    @jr.kernel
    def calls_f():
        f()
    err = compile_error(k, kind=jr.TaichiSyntaxError)
    assert "Function definition is not allowed in 'jr.kernel': define 'inner'" in str(err)
    err = compile_error(calls_f, kind=jr.TaichiSyntaxError)
    assert "Function definition is not allowed in 'jr.func'" in str(err)


def test_assigning_a_kernel_argument_and_breaking_a_parallel_loop_use_taichis_words():
    @jr.kernel
    def assigns(a: jr.template()):
        a = 5  # noqa: F841

    @jr.kernel
    def breaks():
        for i in range(10):
            break
    err = compile_error(assigns, 1, kind=jr.TaichiSyntaxError)
    assert 'Kernel argument "a" is immutable in the kernel' in str(err)
    err = compile_error(breaks, kind=jr.TaichiSyntaxError)
    assert "Cannot break in the outermost loop" in str(err)


B = jr.field(jr.i32, shape=())
C = jr.field(jr.i32, shape=())


def test_identity_and_membership_are_tested_inside_static_only():
    @jr.kernel
    def is_():
        a = B is C  # noqa: F841

    @jr.kernel
    def is_not():
        a = B is not C  # noqa: F841

    @jr.kernel
    def in_():
        a = B in C  # noqa: F841

    @jr.kernel
    def not_in():
        a = B not in C  # noqa: F841
    for kernel, name in [(is_, "Is"), (is_not, "IsNot"), (in_, "In"), (not_in, "NotIn")]:
        err = compile_error(kernel, kind=jr.TaichiSyntaxError)
        assert f'"{name}" is only supported inside `jr.static`' in str(err)

    @jr.kernel
    def chooses(t: jr.template()) -> jr.i32:
        r = 0
        if jr.static(t in (jr.i32, jr.u32)):
            r = 1
        elif jr.static(t is None or t not in (jr.f32,)):
            r = 2
        return r
    assert [chooses(jr.i32), chooses(None), chooses(jr.i64), chooses(jr.f32)] == [1, 2, 2, 0]


def test_a_loop_variable_that_names_an_existing_variable_is_refused():
    @jr.kernel
    def reuses() -> jr.i32:
        i = 0
        for _ in range(1):
            for i in range(10):
                pass
        return i           # Python's answer is 9; the loop's variable is its own

    @jr.kernel
    def reuses_in_struct_for():
        j = 0  # noqa: F841
        for i, j in jr.ndrange(2, 2):
            pass

    @jr.kernel
    def two_loops_one_name() -> jr.i32:
        s = 0
        for _ in range(1):
            for i in range(3):
                s += i
            for i in range(4):
                s += i
        return s
    for kernel, name in [(reuses, "i"), (reuses_in_struct_for, "j")]:
        err = compile_error(kernel, kind=jr.TaichiSyntaxError)
        assert f"Variable '{name}' is already declared in the outer scope and cannot be used " \
            "as loop variable" in str(err)
    assert two_loops_one_name() == 9


def test_nested_static_is_refused():
    @jr.kernel
    def k() -> jr.i32:
        s = 0
        for i in jr.static(jr.static(range(2))):
            s += i
        return s
    err = compile_error(k, kind=jr.TaichiSyntaxError)
    assert "'jr.static' cannot be nested" in str(err)


def test_a_wrong_scalar_or_array_argument_uses_taichis_words():
    @jr.kernel
    def takes_int(a: jr.i32):
        pass

    @jr.kernel
    def takes_array(a: jr.types.ndarray()):
        pass

    class Thing:
        pass
    with pytest.raises(jr.TaichiRuntimeTypeError) as info:
        takes_int(1.2)
    assert "Argument (0,) (type=<class 'float'>) cannot be converted into required type " \
        "i32; argument 'a': expected an integer (i32), got float 1.2" in str(info.value)
    for value, shown in [(1.2, "got 1.2; "), (Thing(), "got <")]:
        with pytest.raises(jr.TaichiRuntimeTypeError) as info:
            takes_array(value)
        assert f"Invalid type for argument a, {shown}" in str(info.value)
        assert "argument 'a': expected an ndarray" in str(info.value)


def test_a_typed_literal_must_be_of_its_types_kind_and_range():
    @jr.kernel
    def int_as_float():
        a = jr.f32(0)  # noqa: F841

    @jr.kernel
    def float_as_int():
        a = jr.i32(0.0)  # noqa: F841

    @jr.kernel
    def negative_unsigned():
        a = jr.u16(-1)  # noqa: F841

    @jr.kernel
    def past_default_ip():
        b = 0x80000000  # noqa: F841

    @jr.kernel
    def two_values():
        a = jr.f64(1, x=2)  # noqa: F841

    @jr.kernel
    def fits() -> jr.f64:
        return jr.u32(4294967295) + jr.i8(-128) + jr.f64(-2.5) + jr.i64(0x80000000)
    for kernel, words in [
            (int_as_float, "Integer literals must be annotated with a integer type. For type "
             "casting, use `jr.cast`."),
            (float_as_int, "Floating-point literals must be annotated with a floating-point "
             "type. For type casting, use `jr.cast`."),
            (negative_unsigned, "Integer literal -1 exceeded the range of specified dtype: "
             "u16 (0 to 65535)"),
            (past_default_ip, "Integer literal 2147483648 exceeded the range of default_ip: "
             "i32")]:
        err = compile_error(kernel, kind=jr.TaichiTypeError)
        assert words in str(err), str(err)
    err = compile_error(two_values, kind=jr.TaichiSyntaxError)
    assert "A primitive type can only decorate a single expression" in str(err)
    assert fits() == 4294967295 - 128 - 2.5 + 2**31


def test_messages_of_names_static_returns_and_operators_use_taichis_words():
    @jr.kernel
    def unknown_name():
        a + 1  # noqa: F821

    @jr.kernel
    def runtime_static(v: jr.f32):
        if jr.static(v > 0.5):
            pass

    @jr.kernel
    def runtime_static_assert(v: jr.f32):
        jr.static_assert(v, "no")

    @jr.kernel
    def returns_in_a_loop() -> jr.i32:
        for i in range(10):
            return i

    @jr.func
    def no_return() -> jr.i32:
        pass

    @jr.kernel
    def calls_no_return() -> jr.i32:
        return no_return()

    @jr.kernel
    def kernel_no_return() -> jr.i32:
        pass

    @jr.kernel
    def bitwise_float(x: jr.f32) -> jr.f32:
        return 1 & x

    @jr.kernel
    def invert_float(x: jr.f32) -> jr.f32:
        return ~x
    for kernel, args, kind, words in [
            (unknown_name, (), jr.TaichiNameError, 'Name "a" is not defined'),
            (runtime_static, (1.0,), jr.TaichiCompilationError, "must be compile-time "
             "constants"),
            (runtime_static_assert, (1.0,), jr.TaichiTypeError, "Static assert with "
             "non-static condition"),
            (returns_in_a_loop, (), jr.TaichiSyntaxError, "Return inside non-static if/for "
             "is not supported"),
            (calls_no_return, (), jr.TaichiSyntaxError, "Function has a return type but does "
             "not have a return statement"),
            (kernel_no_return, (), jr.TaichiSyntaxError, "Kernel has a return type but does "
             "not have a return statement"),
            (bitwise_float, (1.0,), jr.TaichiTypeError, "unsupported operand type(s) for '&'"),
            (invert_float, (1.0,), jr.TaichiTypeError, "'~' takes integral inputs only, "
             "however 'f32' is provided")]:
        err = compile_error(kernel, *args, kind=kind)
        assert words in str(err), str(err)


def test_vector_shape_and_index_messages_use_taichis_words():
    f = jr.Vector.field(4, dtype=jr.i32, shape=())

    @jr.kernel
    def wrong_shape():
        f[None] = jr.Vector([1, 2, 3])

    @jr.kernel
    def two_indices() -> jr.i32:
        v = jr.Vector([1, 2, 3, 4])
        return v[0, 0]

    @jr.kernel
    def transposed() -> jr.f32:
        x = jr.Vector([1.0, 2.0])
        return (x @ x.transpose())[0, 0]
    err = compile_error(wrong_shape, kind=jr.TaichiTypeError)
    assert "cannot assign '[Tensor (3) i32]' to '[Tensor (4) i32]'" in str(err)
    err = compile_error(two_indices, kind=jr.TaichiIndexError)
    assert "Expected 1 indices, got 2" in str(err)
    err = compile_error(transposed, kind=jr.TaichiTypeError)
    assert "`transpose()` cannot apply to a vector. If you want something like " \
        "`a @ b.transpose()`, write `a.outer_product(b)` instead." in str(err)


def test_out_of_bounds_accesses_say_out_of_bound_access_and_are_assertion_errors():
    x = jr.field(jr.f32, shape=3)

    @jr.kernel
    def read(a: jr.types.ndarray(dtype=jr.f32, ndim=1), i: jr.i32) -> jr.f32:
        return a[i]
    with pytest.raises(jr.KernelBoundsError, match="Out of bound access: index 4 out of "
                       "bounds on axis 0 of 'a'"):
        read(np.zeros(3, np.float32), 4)
    for access in (lambda: x.__setitem__(3, 1.0), lambda: x[3]):
        with pytest.raises(AssertionError) as info:     # Taichi's debug build raises it
            access()
        assert isinstance(info.value, IndexError) and "index 3 is out of bounds" in \
            str(info.value)


def test_field_and_template_argument_messages_use_taichis_words():
    with pytest.raises(jr.FloatDtypeError, match="i32 is not supported for field with "
                       "`needs_grad=True` or `needs_dual=True`"):
        jr.field(jr.i32, shape=2, needs_grad=True)

    @jr.kernel
    def takes_template(a: jr.template()):
        pass
    with pytest.raises(jr.TaichiRuntimeTypeError, match=r"Ndarray shouldn't be passed in via "
                       r"`jr.template\(\)`"):
        takes_template(jr.ndarray(jr.f32, shape=3))


def test_static_assign_decompositions_and_ndrange_bounds_use_taichis_words():
    m = jr.Matrix.field(1, 1, jr.f32, shape=())

    @jr.kernel
    def static_element():
        a = jr.static([1, 2, 3])
        a[0] = jr.static(2)

    @jr.kernel
    def polar_1x1():
        jr.polar_decompose(m[None], jr.f32)

    @jr.kernel
    def float_bounds():
        for i in jr.ndrange((1.1, 10.5)):
            pass

    @jr.kernel
    def float_static_bounds():
        for i in jr.static(jr.ndrange(0.1, 0.2)):
            pass
    err = compile_error(static_element, kind=jr.TaichiSyntaxError)
    assert "Static assign cannot be used on elements in arrays" in str(err)
    err = compile_error(polar_1x1)
    assert "Polar decomposition only supports 2D and 3D matrices." in str(err)
    for kernel in (float_bounds, float_static_bounds):
        err = compile_error(kernel, kind=jr.TaichiTypeError)
        assert "Every argument of ndrange should be an integer scalar or a tuple/list of " \
            "(int, int)" in str(err)
    assert list(jr.ndrange([1, 3], 2)) == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_an_ndarray_of_the_wrong_element_type_names_both_as_taichi_does():
    @jr.kernel
    def takes_f32(arr: jr.types.ndarray(dtype=jr.f32)):
        pass
    with pytest.raises(jr.KernelArgError) as info:
        takes_f32(jr.ndarray(jr.types.vector(3, jr.i32), shape=(12, 4)))
    assert "argument 'arr': expected an ndarray of f32, got Ndarray dtype=i32" in \
        str(info.value)
    assert "(Expect element type f32 for argument arr, but get [Tensor (3) i32])" in \
        str(info.value)


def test_iterating_a_field_at_python_scope_is_refused():
    x = jr.field(jr.i32, shape=3)
    x[1] = 5
    with pytest.raises(NotImplementedError, match="Struct for is only available in Taichi "
                       "scope"):
        for _ in x:
            pass
    assert np.asarray(x).tolist() == [0, 5, 0]

    @jr.kernel
    def total() -> jr.i32:
        s = 0
        for i in x:
            s += x[i]
        return s
    assert total() == 5


def test_arithmetic_on_a_whole_field_is_an_unsupported_operand():
    x = jr.field(jr.i32, shape=())

    @jr.kernel
    def scaled() -> jr.i32:
        return 2 * x
    err = compile_error(scaled, kind=jr.TaichiTypeError)
    assert "unsupported operand type(s) for '*': ScalarField" in str(err)
    assert "is a field, not a value; index it (x[None], x[i])" in str(err)


def test_a_shape_beyond_a_kernels_index_or_not_of_integers_is_invalid():
    for shape in (2**31, (1, 2**31), 1.5, (1, 0.5), -1):
        with pytest.raises(jr.InvalidShapeError, match="is not a valid shape for ndarray") as \
                info:
            jr.ndarray(jr.i32, shape=shape)
        assert isinstance(info.value, jr.TaichiRuntimeError)     # what Taichi raises
    with pytest.raises(TypeError, match="is not a valid shape for field"):
        jr.field(jr.f32, shape=(2, "3"))
    with pytest.raises(ValueError, match="negative extent"):
        jr.field(jr.f32, shape=(2, -3))
    assert jr.field(jr.i32, shape=(2**31 - 1, 0)).shape == (2**31 - 1, 0)   # ndarrays: 1 up


def test_a_compile_time_number_is_typed_by_the_dtype_call():
    N = 3

    @jr.kernel
    def wide() -> jr.u64:
        return jr.u64(2**64 - 1)

    @jr.kernel
    def shifted() -> jr.i64:
        return jr.i64(2**40) + 1

    @jr.kernel
    def converted() -> jr.f32:
        return jr.f32(N) + jr.i32(2.5 * 2)

    @jr.kernel
    def too_big() -> jr.i32:
        return jr.i32(2**40)
    assert (wide(), shifted(), converted()) == (2**64 - 1, 2**40 + 1, 8.0)
    err = compile_error(too_big, kind=jr.TaichiTypeError)
    assert "Integer literal 1099511627776 exceeded the range of specified dtype: i32" in \
        str(err)


def test_break_in_a_static_loop_says_so_in_taichis_words():
    @jr.kernel
    def breaks() -> jr.i32:
        s = 0
        for i in jr.static(range(5)):
            x = 0.1
            if x == 0.0:
                break
            s += i
        return s
    err = compile_error(breaks, kind=jr.TaichiSyntaxError)
    assert "You are trying to `break` a static `for` loop" in str(err)


def test_rounding_an_integer_and_not_of_a_float_are_type_errors_as_in_taichi():
    @jr.kernel
    def floor_int(k: jr.i32) -> jr.f32:
        a = k + 1
        return jr.floor(a)

    @jr.kernel
    def round_vec(k: jr.i32) -> jr.f32:
        return jr.round(jr.Vector([k, 2]))[0]

    @jr.kernel
    def not_float(x: jr.f32) -> jr.i32:
        return not x

    @jr.kernel
    def allowed(x: jr.f32, k: jr.i32) -> jr.f32:      # constants, floats, ints compared
        return jr.floor(3) + jr.ceil(x) + jr.sin(k) * 0 + (not k) + (not (x == 0))

    err = compile_error(floor_int, 1, kind=TypeError)
    assert isinstance(err, jr.TaichiTypeError)
    assert "'floor' takes real inputs only, however 'i32' is provided" in str(err)
    assert "'round' takes real inputs only" in str(compile_error(round_vec, 1))
    err = compile_error(not_float, 1.0, kind=jr.TaichiTypeError)
    assert "'not' takes integral inputs only, however 'f32' is provided" in str(err)
    assert allowed(1.5, 0) == 3 + 2 + 1 + 1


def test_slices_with_variables_and_mismatched_if_expressions_use_taichis_words():
    @jr.kernel
    def slice_var(i: jr.i32) -> jr.i32:
        a = jr.Vector([1, 2, 3, 4])
        b = a[i::2]
        return b[0]

    @jr.kernel
    def mixed(k: jr.i32) -> jr.f32:
        a = jr.math.vec2(1.0, 1.0)
        c = jr.math.vec3(1.0, 1.0, 2.0)
        d = a if k else c
        return d[0]

    err = compile_error(slice_var, 1, kind=jr.TaichiCompilationError)
    assert "Taichi does not support variables in slice now" in str(err)
    err = compile_error(mixed, 1, kind=jr.TaichiTypeError)
    assert "Cannot broadcast tensor to tensor: the two sides of an if-expression have " \
        "different shapes ((2,) and (3,))" in str(err)


def test_ndrange_loop_variables_and_extents_use_taichis_words():
    @jr.kernel
    def one_var():
        for i in jr.ndrange(4, 4):
            pass

    @jr.kernel
    def three():
        for i in jr.ndrange((1, 2, 3)):
            pass

    err = compile_error(one_var, kind=jr.TaichiSyntaxError)
    assert "this loop needs 2 loop variable name(s): Ndrange for loop with number of the " \
        "loop variables not equal to the dimension of the ndrange is not supported" in str(err)
    err = compile_error(three, kind=jr.TaichiSyntaxError)
    assert "Every argument of ndrange should be a scalar or a tuple/list like (begin, end)" \
        in str(err)


def test_a_loop_that_breaks_inside_a_constant_non_static_if_runs_serially_as_in_taichi():
    @jr.kernel
    def first_100() -> jr.i32:
        a = 0
        if True:
            for i in range(1000):
                if i == 100:
                    break
                a += 1
        return a

    @jr.kernel
    def static_if() -> jr.i32:
        a = 0
        if jr.static(True):            # jr.static: the loop stays outermost, so no break
            for i in range(1000):
                if i == 100:
                    break
                a += 1
        return a

    assert first_100() == 100
    err = compile_error(static_if, kind=jr.TaichiSyntaxError)
    assert "Cannot break in the outermost loop" in str(err)


def test_an_ndarray_argument_that_does_not_fit_is_taichis_value_error():
    @jr.kernel
    def vec2(a: jr.types.ndarray(dtype=jr.types.vector(2, jr.i32))):
        pass

    @jr.kernel
    def flat(arr: jr.types.ndarray(ndim=1)):
        for i in arr:
            arr[i] = 0

    @jr.kernel
    def mats(arr: jr.types.ndarray(dtype=jr.math.mat3, ndim=2)):
        for i in jr.grouped(arr):
            arr[i] = arr[i] + 1.0

    @jr.kernel
    def ints(x: jr.types.ndarray(jr.i32, ndim=1)):
        for i in x:
            x[i] = i
    cases = [
        (vec2, jr.Matrix.ndarray(2, 3, jr.i32, shape=(4, 7)),
         r"required element type: VectorType\[2, i32\], but MatrixType\[2,3, i32\] is provided"),
        (flat, jr.ndarray(jr.f32, shape=(12, 13)),
         r"required ndim=1, but 2d ndarray with shape \(12, 13\) is provided"),
        (mats, np.zeros((2, 2, 2, 3), np.float32),
         r"required element_shape=\(3, 3\), array with element shape of \(2, 3\) is provided"),
        (mats, np.zeros((2, 2, 3), np.float32),
         r"required array has ndim=2 element_dim=2, array with 3 dimensions is provided"),
        (ints, np.arange(5), r"required array has dtype=i32, array with dtype=i64 is provided")]
    for kernel, arg, taichi in cases:
        with pytest.raises(ValueError, match="Invalid value for argument .* - " + taichi) as info:
            kernel(arg)
        assert isinstance(info.value, jr.KernelArgValueError)
        assert isinstance(info.value, jr.KernelArgError)        # jitrt's kind, as before
        assert "expected an ndarray" in str(info.value)          # and jitrt's words


def test_python_scope_index_count_and_slices_raise_taichis_kinds():
    x = jr.ndarray(dtype=jr.f32, shape=(4, 4))
    for key, taichi in ((0, "2d ndarray indexed with 1d indices"),
                        ((0, 0, 0), "2d ndarray indexed with 3d indices")):
        with pytest.raises(jr.TaichiIndexError, match=taichi) as info:
            x[key]
        assert isinstance(info.value, IndexError) and "2 dimension(s)" in str(info.value)
    f = jr.field(jr.i32, shape=(1, 2, 3))
    with pytest.raises(AssertionError, match="Slicing is not supported on ti.field"):
        f[0, 0] = 1
    g = jr.field(jr.i32, shape=(2, 2))
    with pytest.raises(TypeError, match=r"Detected illegal element of type: slice\. Please be "
                       "aware that slicing a ti.field is not supported so far") as info:
        g[0, :]
    assert isinstance(info.value, IndexError) and "on axis 1 is not an integer" in str(info.value)
