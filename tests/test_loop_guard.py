"""`JITRT_LOOP_GUARD=N`, the option `loop_guard` (passes/loop_guard.py): a `while` loop past N
iterations records a fault naming its line and leaves the loop, so a kernel that would spin
forever raises instead."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def spin(x: nd(dtype=jr.i32, ndim=1)):
    for i in range(x.shape[0]):
        while x[i] >= 0:          # x[1] stays 7: never ends without the guard
            if i == 0:
                x[i] = x[i] - 1


@jr.kernel
def ends(x: nd(dtype=jr.i32, ndim=1)):
    for i in range(x.shape[0]):
        while x[i] > 0:
            x[i] = x[i] - 1


ENV = "JITRT_LOOP_GUARD"


def guarded_program(monkeypatch, arch, text):
    monkeypatch.setenv(ENV, text)
    return jr.init(arch=arch, offline_cache=False, enable_fallback=False)


def test_a_spinning_loop_is_named(monkeypatch, arch):
    guarded_program(monkeypatch, arch, "1000")
    x = np.array([5, 7], np.int32)
    with pytest.raises(jr.KernelAssertionError,
                       match=r"a while loop at .*test_loop_guard.py:15 ran more than 1000 "
                             r"iterations \(JITRT_LOOP_GUARD\)"):
        spin(x)
        jr.sync()
    assert x[0] == -1


def test_a_loop_that_ends_is_unchanged(monkeypatch, arch):
    guarded_program(monkeypatch, arch, "1000")
    x = np.array([5, 700], np.int32)
    ends(x)
    jr.sync()
    np.testing.assert_array_equal(x, [0, 0])


@pytest.mark.cpu_only
@pytest.mark.parametrize("text", ["0", "-3", "many"])
def test_a_bad_limit_is_refused_by_name(monkeypatch, text):
    with pytest.raises(ValueError, match="JITRT_LOOP_GUARD"):
        guarded_program(monkeypatch, "cpu", text)
