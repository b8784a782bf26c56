"""A loop at the top level of a func called at the kernel's outermost scope is an outermost
loop (parallel), as in Quadrants 1.3.3 and Taichi: Genesis's kernels are one func call each
(`kernel_detection` -> `func_detection`), whose loops over environments and bodies jitrt
ran in one serial task. A call inside an `if` or a loop keeps the func's loops serial."""
import numpy as np
import pytest

import jitrt as jr

ND = jr.types.ndarray


def tasks(kernel) -> list[str]:
    return [t.kind for t in next(iter(kernel.handles.values())).plan.tasks]


@jr.func
def scale_all(a: jr.template(), s: jr.f32):
    for i in range(a.shape[0]):
        a[i] = a[i] * s


@jr.func
def total(a: jr.template()) -> jr.f32:
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@jr.func
def nested(a: jr.template()):
    scale_all(a, 2.0)


def test_a_func_loop_at_the_outermost_scope_runs_in_parallel():
    x = jr.field(jr.f32, shape=(300,))
    out = jr.field(jr.f32, shape=())

    @jr.kernel
    def k():
        nested(x)                    # a func calling a func: still the outermost scope
        out[None] = total(x)

    x.from_numpy(np.arange(300, dtype=np.float32))
    k()
    assert tasks(k).count("parallel") == 2        # before: one serial task
    np.testing.assert_allclose(x.to_numpy(), 2.0 * np.arange(300))
    assert out[None] == pytest.approx(2.0 * 299 * 300 / 2)


def test_a_func_loop_under_an_if_or_a_loop_stays_serial():
    x = jr.field(jr.f32, shape=(8,))

    @jr.kernel
    def k(flag: jr.i32):
        if flag > 0:
            scale_all(x, 3.0)
        n = 0
        while n < 2:                 # a serial loop of the kernel's own
            scale_all(x, 0.5)
            n += 1

    x.fill(4.0)
    k(1)
    assert tasks(k) == ["serial"]
    np.testing.assert_allclose(x.to_numpy(), 3.0)


def test_break_in_a_func_loop_at_the_outermost_scope_is_refused_as_in_quadrants():
    x = jr.field(jr.f32, shape=(8,))

    @jr.func
    def first_negative():
        for i in range(x.shape[0]):
            if x[i] < 0:
                break

    @jr.kernel
    def k():
        first_negative()

    with pytest.raises(jr.KernelSyntaxError, match="Cannot break in the outermost loop"):
        k()

    @jr.kernel
    def inside_a_loop():
        for _ in range(1):
            first_negative()

    inside_a_loop()                  # a serial loop of the caller's: the func's may break
