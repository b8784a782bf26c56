"""`while jr.graph.do_while(flag):` in a `@jr.kernel(graph=True)` kernel (Quadrants' device-side
loop over a kernel's tasks), run as a host-side do-while over the kernel's parts."""
import numpy as np
import pytest

import jitrt as jr


def test_do_while_repeats_until_the_flag_is_zero(arch):
    x = jr.field(jr.i32, shape=8)

    @jr.kernel(graph=True)
    def count(flag: jr.types.ndarray(jr.i32, ndim=0), out: jr.types.ndarray(jr.i32, ndim=1)):
        for i in range(8):                       # once, before the loop
            x[i] = 0
        while jr.graph.do_while(flag):
            for i in range(8):
                x[i] += i
            for _ in range(1):
                flag[()] = max(flag[()] - 1, 0)
        for i in range(8):                       # once, after it
            out[i] = x[i] * 10

    flag = jr.ndarray(jr.i32, shape=())
    flag[()] = 3
    out = jr.ndarray(jr.i32, shape=8)
    count(flag, out)
    assert flag[()] == 0
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 3 * 10)
    flag[()] = 0                                 # a do-while: the body runs once even so
    count(flag, out)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 10)
    assert flag[()] == 0


def test_nested_do_while_and_numpy_flags(arch):
    total = jr.field(jr.i32, shape=())

    @jr.kernel(graph=True)
    def nested(outer: jr.types.ndarray(jr.i32, ndim=0), inner: jr.types.ndarray(jr.i32, ndim=0),
               n: jr.i32):
        total[None] = 0
        while jr.graph.do_while(outer):
            inner[()] = n
            while jr.graph.do_while(inner):
                total[None] += 1
                inner[()] -= 1
            outer[()] -= 1

    outer = jr.ndarray(jr.i32, shape=())
    inner = jr.ndarray(jr.i32, shape=())
    outer[()] = 4
    nested(outer, inner, 5)
    assert total[None] == 20
    assert outer[()] == 0 and inner[()] == 0


def test_do_while_refusals(arch):
    with pytest.raises(jr.KernelSyntaxError, match="assigned in another part"):
        @jr.kernel(graph=True)
        def crosses(flag: jr.types.ndarray(jr.i32, ndim=0)):
            s = 1
            while jr.graph.do_while(flag):
                flag[()] = s - 1

    with pytest.raises(jr.KernelSyntaxError, match="name of a 0-d i32 ndarray parameter"):
        @jr.kernel(graph=True)
        def not_a_param(flag: jr.types.ndarray(jr.i32, ndim=0)):
            while jr.graph.do_while(flag[()]):
                flag[()] = 0

    @jr.kernel
    def nested_in_for(flag: jr.types.ndarray(jr.i32, ndim=0)):
        for i in range(2):
            while jr.graph.do_while(flag):
                flag[()] = 0

    flag = jr.ndarray(jr.i32, shape=())
    with pytest.raises(jr.KernelCompileError, match="top level of a @jr.kernel"):
        nested_in_for(flag)
