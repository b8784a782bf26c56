"""Kernel-scope integers known at launch are inlined into their readers
(`passes/scope_values.py`): no serial task (on a GPU, no one-thread launch) is left for code
that only names them, and what the kernel computes is unchanged, also where the pass must
leave a local alone."""
import numpy as np

import jitrt as jr
from jitrt.types import ndarray as nd


def tasks_of(kernel) -> list[str]:
    (text,) = jr.debug.kernel_ir(kernel)
    return [line.split()[2].rstrip(":") for line in text.splitlines()
            if line.strip().startswith("task ")]


def test_locals_from_shapes_arguments_and_constants_leave_no_serial_task():
    x = jr.ndarray(jr.f32, (4, 3))
    f = jr.field(jr.i32, shape=(5, 2))

    @jr.func
    def prologue(a: jr.template()):
        b = a.shape[1]
        n = f.shape[0] * 2      # a field's shape: a constant
        return b, n

    @jr.kernel
    def fill(a: nd(dtype=jr.f32, ndim=2), c: jr.i32):
        b, n = prologue(a)
        m = n + c
        for i, j in jr.ndrange(a.shape[0], b):
            a[i, j] = i * b + j + m

    fill(x, 5)
    i, j = np.indices((4, 3))
    np.testing.assert_array_equal(x.to_numpy(), i * 3 + j + 15)
    assert tasks_of(fill) == ["parallel"]


def test_a_local_read_before_its_assignment_or_assigned_again_stays():
    out = jr.field(jr.i32, shape=(4,))

    @jr.kernel
    def order(c: jr.i32):
        k = 0
        for i in range(1):
            out[0] = k          # k's first value
        k = c + 1               # assigned again: stays a local
        for i in range(1):
            out[1] = k
        m = 7
        for m2 in range(2):
            m2 = m2 + m         # m is read; m2, a loop variable, is assigned in the loop
            out[2] += m2
        s = c * 2
        s += 1                  # an augmented assignment assigns again
        out[3] = s

    order(4)
    np.testing.assert_array_equal(out.to_numpy(), [0, 5, 7 + 8, 9])


def test_a_float_local_is_not_inlined():
    """Floats carry adjoints and tangents: the pass leaves them to the AD passes."""
    x = jr.field(jr.f32, shape=(3,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def energy(w: jr.f32):
        scale = w * 2.0
        n = x.shape[0]
        for i in range(n):
            loss[None] += scale * x[i] ** 2

    x.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    with jr.ad.Tape(loss=loss):
        energy(0.5)
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0, 6.0])
    assert tasks_of(energy)[0] == "serial"      # `scale` is still computed once, serially
