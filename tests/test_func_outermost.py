"""A func called in a kernel's outermost scope has parallel outermost loops, as in Taichi and
Quadrants (docs/usage.md, "Parallel and serial loops"); a func called elsewhere does not."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


def task_kinds(kernel) -> list[str]:
    text = jr.debug.kernel_ir(kernel)[0]
    return [line.split()[2].rstrip(":") for line in text.splitlines()
            if line.strip().startswith("task ")]


@jr.func
def add_to_all(a, k):
    for i in range(a.shape[0]):
        a[i] += k


@jr.func
def two_steps(a):
    add_to_all(a, 1.0)
    for i in jr.static(range(2)):     # unrolled in place: still outermost
        add_to_all(a, 10.0)


@jr.kernel
def outermost(a: nd(dtype=jr.f32, ndim=1)):
    two_steps(a)


@jr.kernel
def under_if(a: nd(dtype=jr.f32, ndim=1), flag: jr.i32):
    if flag > 0:
        add_to_all(a, 1.0)


@jr.kernel
def summed(a: nd(dtype=jr.f32, ndim=1)) -> jr.f32:
    s = 0.0
    s = total(a, s)
    return s


@jr.func
def total(a, s):
    for i in range(a.shape[0]):
        s += a[i]                 # a reduction of the kernel-scope local, as in Taichi
    return s


def test_loops_of_outermost_funcs_are_tasks():
    a = np.zeros(1000, np.float32)
    outermost(a)
    np.testing.assert_array_equal(a, 21.0)
    assert task_kinds(outermost).count("parallel") == 3   # (serial tasks copy `k`)


def test_loops_under_a_run_time_if_stay_serial():
    a = np.zeros(8, np.float32)
    under_if(a, 1)
    np.testing.assert_array_equal(a, 1.0)
    assert "parallel" not in task_kinds(under_if)


def test_reduction_in_an_outermost_func_loop():
    a = np.arange(1000, dtype=np.float32)
    assert summed(a) == pytest.approx(float(a.sum()))
    assert "parallel" in task_kinds(summed)


@jr.func
def configured(a):
    jr.loop_config(serialize=True)
    for i in range(a.shape[0]):
        a[i] = i


@jr.kernel
def serialized_in_func(a: nd(dtype=jr.f32, ndim=1)):
    configured(a)


@jr.func
def only_config():
    jr.loop_config(serialize=True)


@jr.kernel
def config_before_call(a: nd(dtype=jr.f32, ndim=1)):
    only_config()                 # the setting reaches the caller's next loop
    for i in range(a.shape[0]):
        a[i] = 2 * i


def test_loop_config_reaches_the_next_loop_across_funcs():
    a = np.zeros(4, np.float32)
    serialized_in_func(a)
    assert task_kinds(serialized_in_func) == ["serial"]
    config_before_call(a)
    np.testing.assert_array_equal(a, [0, 2, 4, 6])
    assert task_kinds(config_before_call) == ["serial"]
