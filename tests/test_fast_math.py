"""`jr.init(fast_math=False)`: libm's math functions everywhere instead of jitrt's own
vectorizable ones (codegen/targets.py); a separate cache entry from the default."""
import math

import numpy as np
import pytest

import jitrt as jr


def sines(x: np.ndarray) -> np.ndarray:
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f64, ndim=1), out: jr.types.ndarray(dtype=jr.f64,
                                                                           ndim=1)):
        for i in range(a.shape[0]):       # a parallel loop body: where jitrt's own sin goes
            out[i] = jr.sin(a[i]) + jr.exp(a[i] * 0.25)
    out = np.zeros_like(x)
    k(x, out)
    return out


@pytest.mark.no_gpu_builds
def test_fast_math_false_gives_the_c_librarys_results_bit_for_bit(tmp_path):
    x = np.random.default_rng(3).uniform(-10.0, 10.0, 4096)
    libm = np.array([math.sin(v) + math.exp(v * 0.25) for v in x])   # the process's libm
    jr.init(offline_cache_dir=str(tmp_path), fast_math=False)
    np.testing.assert_array_equal(sines(x), libm)
    jr.init(offline_cache_dir=str(tmp_path))                         # default: jitrt's own
    own = sines(x)
    assert jr.debug.stats()["offline_cache_hits"] == 0    # not the fast_math=False entry
    np.testing.assert_allclose(own, libm, rtol=0, atol=1e-13)     # a few ulp of 12


def test_fast_math_is_a_boolean_option():
    with pytest.raises(jr.ConfigError, match="fast_math"):
        jr.init(fast_math="sometimes")


@pytest.mark.no_gpu_builds
def test_a_body_with_more_own_math_calls_than_the_bound_uses_the_c_library():
    """Past `MAX_OWN_MATH` calls in one parallel body, LLVM's time on the inlined own math
    grew faster than the body (issue 34: 1,500 sins took 42 s, 5x fast_math=False); such a
    body calls libm, so its results are the C library's bit for bit."""
    from jitrt.codegen.kernel_module import MAX_OWN_MATH
    terms = MAX_OWN_MATH + 1
    jr.init(offline_cache=False, default_fp=jr.f64)

    @jr.kernel
    def many(a: jr.types.ndarray(dtype=jr.f64, ndim=1), out: jr.types.ndarray(dtype=jr.f64,
                                                                              ndim=1)):
        for i in range(a.shape[0]):
            total = 0.0
            for k in jr.static(range(terms)):
                total += jr.sin(a[i] + k)
            out[i] = total

    x = np.random.default_rng(4).uniform(-10.0, 10.0, 512)
    out = np.zeros_like(x)
    many(x, out)
    expected = np.zeros_like(x)
    for j, v in enumerate(x):
        total = 0.0
        for k in range(terms):
            total += math.sin(v + k)
        expected[j] = total
    np.testing.assert_array_equal(out, expected)
