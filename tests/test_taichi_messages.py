"""Error messages carry the phrase Taichi's own message has (programs and tests written for
Taichi match it), around jitrt's place (file:line:col and a caret) and advice."""
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
