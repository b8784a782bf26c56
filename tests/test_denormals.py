"""Denormal float results flush to zero in CPU kernels, as in Taichi (codegen/denormals.py):
constants, folded constants and run-time results on the launching thread and in the thread
pool; Python-scope code (numpy) keeps IEEE gradual underflow."""
import numpy as np
import pytest

import jitrt as jr

pytestmark = pytest.mark.cpu_only       # GPU code keeps IEEE results (docs/usage.md)

nd = jr.types.ndarray


@jr.kernel
def tiny_f32(out: nd(dtype=jr.f32, ndim=1), s: jr.f32):
    out[0] = 1e-45                    # a denormal constant
    out[1] = 1e-10 * 1e-35            # folded while compiling
    out[2] = s * 1e-5                 # at run time, on the launching thread
    out[3] = -s * 1e-5                # the sign stays
    out[4] = s * 10.0                 # a normal result is unchanged


@jr.kernel
def tiny_f64(out: nd(dtype=jr.f64, ndim=1), s: jr.f64, t: jr.f64):
    out[0] = 1e-323
    x = 1e-300
    y = 1e-23
    out[1] = x * y
    out[2] = s * t


@jr.kernel
def tiny_parallel(x: nd(dtype=jr.f32, ndim=1), s: jr.f32):
    for i in x:                       # the thread pool's workers run most chunks
        x[i] = s * 1e-5 + (i % 2) * 1e-30


def test_denormal_results_flush_to_zero_in_kernels():
    out = np.full(5, 7.0, np.float32)
    tiny_f32(out, 1e-36)
    assert out[:4].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert np.signbit(out[3]) and out[4] == np.float32(1e-36) * np.float32(10.0)
    out64 = np.full(3, 7.0)
    tiny_f64(out64, 1e-300, 1e-23)
    assert out64.tolist() == [0.0, 0.0, 0.0]
    x = np.full(1 << 18, 7.0, np.float32)
    tiny_parallel(x, 1e-36)
    assert (x[0::2] == 0).all() and (x[1::2] == np.float32(1e-30)).all()


def test_python_scope_keeps_gradual_underflow_after_a_launch():
    tiny_f32(np.zeros(5, np.float32), 1e-36)
    assert np.float32(1e-38) * np.float32(1e-5) > 0      # the caller's mode came back
    assert 1e-300 * 1e-23 > 0
    assert jr.ndarray(jr.f32, shape=1).to_numpy()[0] == 0
