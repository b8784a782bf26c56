"""A kernel or func annotated with a return type that has no return statement: an error in
Taichi's words."""
import pytest

import jitrt as jr


def test_a_return_type_without_a_return_is_an_error_in_taichis_words():
    @jr.func
    def bar() -> jr.i32:
        pass

    @jr.kernel
    def uses_bar() -> jr.i32:
        return bar()

    @jr.kernel
    def no_return() -> jr.i32:
        pass

    with pytest.raises(jr.KernelCompileError, match="Function has a return type but does not "
                                                    "have a return statement"):
        uses_bar()
    with pytest.raises(jr.KernelSyntaxError, match="Kernel has a return type but does not "
                                                   "have a return statement"):
        no_return()
