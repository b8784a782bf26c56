"""print() and assert in kernels: print writes through the C runtime's stdout (CPU) or the
device's printf (CUDA); assert is compiled in with jr.init(debug=True) and raises
KernelRuntimeError with its message and location at the next synchronisation."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def show(a: nd(dtype=jr.f32, ndim=1), k: jr.i64):
    for i in range(1):
        print("a0 =", a[0], "k:", k, jr.math.vec2(1.5, -2.0), sep=" ", end=";\n")
        print(100 % 7, "100%")


def test_print(capfd):
    show(np.array([3.25], np.float32), -7)
    jr.sync()                         # on a GPU the device's printf buffer comes out here
    out = capfd.readouterr().out
    assert "a0 = 3.250000 k: -7 [1.500000, -2.000000];\n" in out   # %f, as Taichi (CUDA too)
    assert "2 100%\n" in out


@jr.kernel
def checked(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        assert a[i] >= 0, "a must be non-negative"
        a[i] = jr.sqrt(a[i])


@jr.kernel
def checked_plain(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        assert a[i] < 10
        a[i] += 1.0


def test_assert_needs_debug_mode(arch):
    a = np.array([4.0, -1.0], np.float32)
    checked(a)                                  # debug off: not checked (as in Taichi)
    assert a[0] == 2.0 and np.isnan(a[1])
    jr.init(arch=arch, debug=True, offline_cache=False)
    checked(np.array([4.0, 9.0], np.float32))
    with pytest.raises(jr.KernelRuntimeError,
                       match=r"assertion failed at .*test_debug_aids.py:\d+:\d+: a must be "
                             "non-negative") as info:
        checked(np.array([4.0, -9.0], np.float32))
    assert "assert a[i] >= 0" in str(info.value)
    with pytest.raises(jr.KernelRuntimeError, match=r"assertion failed .*: a\[i\] < 10"):
        checked_plain(np.array([40.0], np.float32))
    checked(np.array([1.0], np.float32))        # the program stays usable


def test_assert_message_must_be_a_constant_string():
    jr.init(debug=True, offline_cache=False)

    @jr.kernel
    def k(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            assert a[i] > 0, a[i]
    with pytest.raises(jr.KernelCompileError, match="assert message must be a string"):
        k(np.ones(2, np.float32))
