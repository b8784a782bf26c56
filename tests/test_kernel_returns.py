"""A kernel returns as a func does (Taichi's rules): inside `if jr.static(...)` and `jr.static`
loops (what follows is not compiled), inside run-time `if`s, `return None` and a bare
`return`; a return inside a run-time loop is a located error."""
import numpy as np
import pytest

import jitrt as jr


def test_returns_inside_static_ifs_and_loops():
    @jr.kernel
    def pick(a: jr.template()) -> jr.i32:
        if jr.static(a == 1):
            return 1
        elif jr.static(a == 2):
            return 2
        return 3

    @jr.kernel
    def squares() -> jr.i32:
        s = 0
        for i in jr.static(range(10)):
            s += i * i
            if jr.static(i == 8):
                return s

    assert [pick(1), pick(2), pick(7)] == [1, 2, 3]
    assert squares() == 204


def test_returns_inside_run_time_ifs_convert_to_the_annotation():
    @jr.kernel
    def k(x: jr.f32) -> jr.math.ivec2:
        if x > 0:
            return jr.Vector([x, 1.0])
        return jr.Vector([0, -1])

    np.testing.assert_array_equal(k(2.7), [2, 1])
    np.testing.assert_array_equal(k(-1.0), [0, -1])


def test_void_returns_and_return_none():
    x = jr.field(jr.i32, shape=())

    @jr.kernel
    def k(stop: jr.template()):
        x[None] = 1
        if jr.static(stop):
            return
        x[None] = 2

    @jr.kernel
    def none():
        x[None] = 5
        return None

    k(True)
    assert x[None] == 1
    k(False)
    assert x[None] == 2
    none()
    assert x[None] == 5


def test_a_return_inside_a_run_time_loop_is_an_error():
    @jr.kernel
    def k() -> jr.i32:
        for i in range(10):
            return i

    with pytest.raises(jr.KernelCompileError,
                       match="Return inside non-static if/for is not supported"):
        k()


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
