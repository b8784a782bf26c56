"""Frontend conveniences: numpy spellings of the builtins, and the printed IR of a kernel."""
from __future__ import annotations

import numpy as np

import jitrt as jr


def test_numpy_spellings_compile_like_jitrt_builtins():
    """Kernels ported from numpy code: np.sin, np.float32(...), np.abs, np.maximum, np.power."""
    y = jr.field(jr.f32, shape=(8,))

    @jr.kernel
    def k():
        for i in y:
            y[i] = np.sin(np.float32(i)) + np.abs(-1.0) + np.maximum(i, 2) + np.power(2.0, 2.0)

    k()
    i = np.arange(8)
    np.testing.assert_allclose(y.to_numpy(), np.sin(i) + 1 + np.maximum(i, 2) + 4, rtol=1e-6)


def test_kernel_ir_shows_the_adjoint_sweeps():
    x = jr.field(jr.f32, shape=(8,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def k(n: jr.i32):
        for i in x:
            v = x[i]
            for _ in range(n):
                v = jr.sin(v)
            loss[None] += v

    assert jr.debug.kernel_ir(k) == ()
    k.grad(3)
    (text,) = jr.debug.kernel_ir(k, grad=True)
    assert "push(" in text and "pop(" in text and "reversed(range(" in text
