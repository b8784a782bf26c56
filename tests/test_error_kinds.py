"""Errors are instances of the built-in class Taichi's equivalent derives from (TypeError,
IndexError, SyntaxError, NameError, AssertionError, RuntimeError), under Taichi's names too,
and keep jitrt's messages: file:line:col and the source line with a caret."""
import numpy as np
import pytest

import jitrt as jr



def compile_error(kernel, *args):
    with pytest.raises(jr.KernelCompileError) as info:
        kernel(*args)
    err = info.value
    assert f"{__file__}:" in str(err) and "^" in str(err), str(err)
    return err


def test_taichi_names_are_jitrt_classes_with_taichis_bases():
    assert jr.TaichiCompilationError is jr.KernelCompileError
    pairs = [(jr.TaichiSyntaxError, SyntaxError), (jr.TaichiTypeError, TypeError),
             (jr.TaichiNameError, NameError), (jr.TaichiIndexError, IndexError),
             (jr.TaichiRuntimeError, RuntimeError), (jr.TaichiAssertionError, AssertionError),
             (jr.TaichiAssertionError, RuntimeError), (jr.TaichiRuntimeTypeError, TypeError),
             (jr.TaichiRuntimeTypeError, RuntimeError)]
    for cls, base in pairs:
        assert issubclass(cls, base) and issubclass(cls, jr.JitrtError), cls
    for cls in (jr.TaichiSyntaxError, jr.TaichiTypeError, jr.TaichiNameError,
                jr.TaichiIndexError):
        assert issubclass(cls, jr.TaichiCompilationError)


def test_a_name_that_is_not_defined_is_a_name_error():
    @jr.kernel
    def k():
        for i in range(2):
            print(undefined_name)  # noqa: F821
    err = compile_error(k)
    assert isinstance(err, NameError) and isinstance(err, jr.TaichiNameError)
    assert 'Name "undefined_name" is not defined' in str(err)


def test_a_constant_index_out_of_range_is_an_index_error():
    @jr.kernel
    def k() -> jr.f32:
        v = jr.Vector([1.0, 2.0])
        return v[5]
    err = compile_error(k)
    assert isinstance(err, IndexError) and isinstance(err, jr.TaichiIndexError)
    assert "out of range" in str(err)


def test_an_unsupported_construct_is_a_syntax_error():
    @jr.kernel
    def k():
        for i in range(2):
            pass
        else:
            pass
    err = compile_error(k)
    assert isinstance(err, SyntaxError) and isinstance(err, jr.TaichiSyntaxError)
    text = str(err)
    assert text.startswith(f'\nFile "{__file__}", line ') and \
        f"\n{__file__}:" in text and "for/else is not supported" in text


def test_a_value_of_the_wrong_type_is_a_type_error():
    @jr.kernel
    def k():
        s = 0.0
        s = jr.Vector([1.0, 2.0])  # noqa: F841
    err = compile_error(k)
    assert isinstance(err, TypeError) and isinstance(err, jr.TaichiTypeError)
    assert "scalar local" in str(err)


def test_a_failed_assert_is_an_assertion_error_and_a_runtime_error():
    jr.init(debug=True)
    a = jr.field(jr.i32, shape=2)

    @jr.kernel
    def k():
        for i in a:
            assert a[i] > 0, "a must be positive"
    with pytest.raises(AssertionError, match="a must be positive") as info:
        k()
    assert isinstance(info.value, jr.TaichiAssertionError) and isinstance(info.value,
                                                                        RuntimeError)


def test_an_index_out_of_bounds_is_an_index_error_and_taichis_assertion():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1), n: jr.i32):
        for i in range(1):
            a[n] = 1.0
    with pytest.raises(IndexError, match="index 9 out of bounds") as info:
        k(np.zeros(3, np.float32), 9)
    assert isinstance(info.value, jr.TaichiAssertionError)
    assert isinstance(info.value, jr.KernelRuntimeError)


def test_a_wrong_argument_is_taichis_runtime_type_error():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        pass
    with pytest.raises(jr.TaichiRuntimeTypeError) as info:
        k(np.zeros((2, 2), np.float32))
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
    assert isinstance(info.value, jr.KernelArgError)


def test_the_kind_follows_the_message_where_the_site_names_none():
    from jitrt.errors import compile_error_kind
    assert compile_error_kind("name 'q' is not defined") is jr.KernelNameError
    assert compile_error_kind("index 3 out of range for shape (2,)") is jr.KernelIndexError
    assert compile_error_kind("expected a number, got a tuple") is jr.KernelTypeError
    assert compile_error_kind("while/else is not supported in kernels") is jr.KernelSyntaxError
    assert compile_error_kind("trip count is not computable before the loop") \
        is jr.KernelCompileError


def test_a_bad_annotation_and_an_assigned_parameter_are_syntax_errors():
    with pytest.raises(jr.TaichiSyntaxError, match="cannot evaluate annotation"):
        @jr.kernel
        def k(a: "undefined_type"):  # noqa: F821
            pass

    @jr.kernel
    def assigns(a: jr.i32):
        a = 5  # noqa: F841
    err = compile_error(assigns, 1)
    assert isinstance(err, SyntaxError) and "cannot assign to parameter 'a'" in str(err)


def test_wrong_argument_counts_are_taichis_syntax_errors():
    @jr.kernel
    def k(a: jr.i32, b: jr.i32):
        pass
    for call, words in [(lambda: k(1, 2, 3),
                         r"Too many arguments: it takes 2 \(a : i32, b : i32\), got 3"),
                        (lambda: k(1), "Parameter `b : i32` missing"),
                        (lambda: k(1, c=2), "Unexpected argument 'c': it has no parameter 'c'")]:
        with pytest.raises(jr.TaichiSyntaxError, match=words) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, jr.KernelArgError)

    @jr.func
    def f(a, b):
        return a + b

    @jr.kernel
    def calls() -> jr.i32:
        return f(1, 2, 3)
    err = compile_error(calls)
    assert isinstance(err, SyntaxError) and "calling @jr.func 'f'" in str(err)
