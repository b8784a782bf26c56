"""Denormal floats: a kernel's float constants that round to a denormal of their type are 0.0
with their sign, as Taichi's (made on a host thread that flushes denormals); run-time
arithmetic keeps IEEE gradual underflow (docs/porting.md, "Denormal floats")."""
import numpy as np

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def constants_f32(out: nd(dtype=jr.f32, ndim=1)):
    out[0] = 1e-45                    # a literal that is a denormal f32
    out[1] = 1e-10 * 1e-35            # folded at compile time into one
    out[2] = -1e-45                   # the sign stays
    out[3] = jr.f32(1e-40)
    out[4] = 1.2e-38                  # the smallest normal numbers are kept
    out[5] = 1e-50                    # below every denormal: 0 as in IEEE


@jr.kernel
def constants_f64(out: nd(dtype=jr.f64, ndim=1)):
    out[0] = 1e-323
    out[1] = -5e-324
    x = 1e-300                        # a default_fp (f32) local: 0
    y = 1e-23
    out[2] = x * y
    out[3] = 2.3e-308


@jr.kernel
def run_time(out: nd(dtype=jr.f32, ndim=1), s: jr.f32):
    out[0] = s * 1e-5                 # computed at run time: a denormal result stays
    out[1] = -s * 1e-5


def test_denormal_constants_are_signed_zeros():
    out = np.full(6, 7.0, np.float32)
    constants_f32(out)
    assert out.tolist()[:4] == [0.0, 0.0, 0.0, 0.0]
    assert np.signbit(out[2]) and not np.signbit(out[0])
    assert out[4] == np.float32(1.2e-38) and out[5] == 0.0
    out64 = np.full(4, 7.0)
    constants_f64(out64)
    assert out64.tolist() == [0.0, -0.0, 0.0, 2.3e-308]
    assert np.signbit(out64[1])


def test_run_time_results_keep_gradual_underflow():
    out = np.zeros(2, np.float32)
    run_time(out, 1e-36)
    expect = np.float32(1e-36) * np.float32(1e-5)
    assert expect != 0 and out.tolist() == [expect, -expect]
