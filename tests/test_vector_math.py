"""The CPU's own f32 sin, cos, tan, exp, log and pow and f64 sin, cos, tan, exp and log
(codegen/vector_math.py), through kernels as a user writes them: f32 values against numpy's
float64 functions rounded to f32, f64 values against numpy's 80-bit long double functions,
counted in units in the last place (ulp), over wide ranges and the special values; and the
loops that call them vectorize."""
import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import jitrt as jr
from jitrt.codegen import vector_math as vm

nd = jr.types.ndarray
F32 = nd(dtype=jr.f32, ndim=1)


@jr.kernel
def k_sin(x: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.sin(x[i])


@jr.kernel
def k_cos(x: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.cos(x[i])


@jr.kernel
def k_tan(x: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.tan(x[i])


@jr.kernel
def k_exp(x: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.exp(x[i])


@jr.kernel
def k_log(x: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.log(x[i])


@jr.kernel
def k_pow(x: F32, e: F32, y: F32):
    for i in range(x.shape[0]):
        y[i] = jr.pow(x[i], e[i])


KERNELS = {"sin": k_sin, "cos": k_cos, "tan": k_tan, "exp": k_exp, "log": k_log}
NUMPY = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "log": np.log}
# the worst cases measured on every f32 of each range (docs/performance.md); the results do not
# depend on the vector width, so these hold on any x86-64
BOUND = {"sin": 2, "cos": 2, "tan": 1, "exp": 1, "log": 1, "pow": 1}
TRIG_EXACT = 2.0 ** 26 * math.pi / 2        # the reduction is accurate below this


def run(fn, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    KERNELS[fn](x, y)
    return y


def reference(fn, x):
    with np.errstate(all="ignore"):
        return NUMPY[fn](x.astype(np.float64)).astype(np.float32)


def ulp_distance(got, want):
    """How many f32 values lie between got and want (0 where both are the same special)."""
    def order(a):
        i = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0, np.abs(order(got) - order(want)))


def trig_inputs(rng):
    n = 200_000
    sign = rng.choice([-1.0, 1.0], n)
    near = (np.arange(1, 100_000) * (np.pi / 2)).astype(np.float32)   # x close to k pi/2
    return np.concatenate([
        rng.uniform(-10, 10, n), rng.uniform(-1e5, 1e5, n),
        sign * np.exp(rng.uniform(math.log(1e-30), math.log(TRIG_EXACT), n)),
        near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(np.inf)),
        -near, [1e-45, -1e-45, 1e-38, 0.7853982, 1.5707964, 3.1415927, 52.0, 1e5, -1e5]],
    ).astype(np.float32)


def positive_floats(rng, n):
    """Positive finite f32 spread evenly over their bit patterns (subnormals included)."""
    return rng.integers(1, 0x7F800000, n, dtype=np.uint32).view(np.float32)


def inputs(fn, rng):
    if fn in ("sin", "cos", "tan"):
        return trig_inputs(rng)
    if fn == "exp":        # below -103.97 the result rounds to 0, above 88.72 it overflows
        return np.concatenate([rng.uniform(-104, 89, 400_000), rng.uniform(-1, 1, 100_000),
                               rng.uniform(-103.98, -87.3, 100_000)]).astype(np.float32)
    return np.concatenate([positive_floats(rng, 400_000),
                           1 + rng.uniform(-0.3, 0.42, 100_000),
                           1 + rng.uniform(-1e-5, 1e-5, 100_000)]).astype(np.float32)


@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", sorted(KERNELS))
def test_matches_numpy_in_ulps(fn, rng):
    x = inputs(fn, rng)
    got, want = run(fn, x), reference(fn, x)
    err = ulp_distance(got, want)
    worst = int(err.argmax())
    assert err.max() <= BOUND[fn], (fn, x[worst], got[worst], want[worst], err.max())


@pytest.mark.cpu_only
def test_trig_is_odd_and_even(rng):
    x = trig_inputs(rng)
    np.testing.assert_array_equal(run("sin", -x), -run("sin", x))
    np.testing.assert_array_equal(run("tan", -x), -run("tan", x))
    np.testing.assert_array_equal(run("cos", -x), run("cos", x))


SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45,
                     1.17549435e-38, 3.4028235e38, -3.4028235e38, 88.72283, 88.72284, -87.33655,
                     -103.97208, -103.97209, -104.0, -200.0, 200.0, 0.5, 2.0], np.float32)


@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", sorted(KERNELS))
def test_special_values(fn):
    got, want = run(fn, SPECIALS), reference(fn, SPECIALS)
    if fn in ("sin", "cos", "tan"):              # past the reduction's range: see below
        far = np.abs(SPECIALS) > TRIG_EXACT
        got, want = got[~far], want[~far]
    assert (np.isnan(got) == np.isnan(want)).all(), list(zip(SPECIALS, got, want))
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), \
        list(zip(SPECIALS, got, want))
    assert ulp_distance(got, want).max() <= BOUND[fn], list(zip(SPECIALS, got, want))


def around(v, count=3):
    """The f32 nearest v and `count` neighbours on each side."""
    x = np.float32(v)
    below, above = [x], [x]
    for _ in range(count):
        below.append(np.nextafter(below[-1], np.float32(-np.inf)))
        above.append(np.nextafter(above[-1], np.float32(np.inf)))
    return below[:0:-1] + above


@pytest.mark.cpu_only
def test_exp_overflow_and_subnormals():
    overflow = around(math.log(3.4028234663852886e38))       # the largest f32
    to_zero = around(math.log(2.0 ** -150))                  # half the smallest subnormal
    normal = around(math.log(2.0 ** -126))
    x = np.array(overflow + to_zero + normal + [-100.0, -90.0, -103.5], np.float32)
    got, want = run("exp", x), reference("exp", x)
    assert np.isinf(got[:7]).any() and np.isfinite(got[:7]).any()       # both sides of each
    assert (got[7:14] == 0).any() and (got[7:14] > 0).any()               # threshold
    assert ulp_distance(got, want).max() <= BOUND["exp"], list(zip(x, got, want))
    big = run("exp", np.array([1e30, np.inf, -1e30, -np.inf, np.nan], np.float32))
    assert big[0] == big[1] == np.inf and big[2] == big[3] == 0 and np.isnan(big[4])


@pytest.mark.cpu_only
def test_log_edges():
    x = np.array([0.0, -0.0, -1.0, -1e-45, -np.inf, np.inf, np.nan, 1e-45, 1e-40, 1.17549435e-38,
                  1.0, np.nextafter(np.float32(1), np.float32(2)),
                  np.nextafter(np.float32(1), np.float32(0)), 3.4028235e38], np.float32)
    got = run("log", x)
    assert got[0] == -np.inf and got[1] == -np.inf
    assert np.isnan(got[2:5]).all() and got[5] == np.inf and np.isnan(got[6])
    assert got[10] == 0 and not np.signbit(got[10])
    assert ulp_distance(got[7:], reference("log", x[7:])).max() <= 1


@pytest.mark.cpu_only
def test_trig_far_arguments(rng):
    """Past 2^26 pi/2 the reduction loses accuracy gradually (absolute error about |x| 2^-53);
    from 2^48 on, sin and tan give a zero of x's sign and cos gives 1; never inf."""
    far = np.exp(rng.uniform(math.log(TRIG_EXACT), math.log(2.0 ** 47.9), 100_000)) \
        * rng.choice([-1.0, 1.0], 100_000)
    x = far.astype(np.float32)
    for fn in ("sin", "cos"):
        got = run(fn, x).astype(np.float64)
        want = NUMPY[fn](x.astype(np.float64))
        assert (np.abs(got) <= 1).all()
        assert (np.abs(got - want) <= np.abs(x.astype(np.float64)) * 2.0 ** -50 + 1e-7).all()
    huge = np.array([2.0 ** 48, -2.0 ** 48, 1e20, -3.4028235e38, 3.4028235e38], np.float32)
    np.testing.assert_array_equal(run("cos", huge), np.ones(5, np.float32))
    for fn in ("sin", "tan"):
        got = run(fn, huge)
        assert (got == 0).all() and (np.signbit(got) == np.signbit(huge)).all()
    for fn in ("sin", "cos", "tan"):
        assert np.isnan(run(fn, np.array([np.inf, -np.inf, np.nan], np.float32))).all()


POW_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, np.inf, -np.inf, np.nan, 1e-45,
               -1e-45, 3.4028235e38]
POW_EXPONENT = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, 1e10, -1e10,
                16777216.0, 16777217.0, np.inf, -np.inf, np.nan, 150.0, -150.0]


def run_pow(x, y):
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    out = np.empty_like(x)
    k_pow(x, y, out)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    return out, want


@pytest.mark.cpu_only
def test_pow_special_cases_follow_c():
    x, y = (a.ravel() for a in np.meshgrid(POW_SPECIAL, POW_EXPONENT))
    got, want = run_pow(x, y)
    cases = list(zip(x, y, got, want))
    assert (np.isnan(got) == np.isnan(want)).all(), [c for c in cases if np.isnan(c[2]) !=
                                                      np.isnan(c[3])]
    same_sign = (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    assert same_sign.all(), [c for c, s in zip(cases, same_sign) if not s]
    err = ulp_distance(got, want)
    assert err.max() <= BOUND["pow"], [c for c, e in zip(cases, err) if e > BOUND["pow"]]


@pytest.mark.cpu_only
def test_pow_matches_numpy(rng):
    n = 100_000
    x = np.concatenate([rng.uniform(0, 100, n), rng.uniform(-10, 10, n),
                        np.exp(rng.uniform(-80, 80, n)), 1 + rng.uniform(-1e-3, 1e-3, n),
                        positive_floats(rng, n)])
    y = np.concatenate([rng.uniform(-20, 20, n), np.round(rng.uniform(-40, 40, n)),
                        rng.uniform(-1.2, 1.2, n), rng.uniform(-8e4, 8e4, n),
                        rng.uniform(-2, 2, n)])
    got, want = run_pow(x, y)
    err = ulp_distance(got, want)
    worst = int(err.argmax())
    assert err.max() <= BOUND["pow"], (x[worst], y[worst], got[worst], want[worst])
    assert np.isfinite(want).sum() > 4 * n       # the ranges mostly give finite results


@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", ["sin", "cos", "tan", "exp", "log", "pow"])
def test_loops_with_math_vectorize(fn):
    """No libm call is left in the optimised IR and the loop uses vector types (the width
    depends on the host: any x86-64 has SSE2)."""
    x = np.ones(64, np.float32)
    if fn == "pow":
        text = jr.debug.optimized_ir(k_pow, x, x, x)
    else:
        text = jr.debug.optimized_ir(KERNELS[fn], x, x)
    assert re.search(r"<\d+ x float>", text)
    assert not re.search(rf"@(llvm\.)?{fn}(f|\.f32|\.v\d+f32)?\(", text), fn


# pi and ln 2 to 60 digits, for the split constants
PI = Fraction("3.14159265358979323846264338327950288419716939937510582097494459")
LN2 = Fraction("0.693147180559945309417232121458176568075500134360255254120680009")


def significant_bits(v: float) -> int:
    mantissa = Fraction(v).numerator
    while mantissa % 2 == 0:
        mantissa //= 2
    return mantissa.bit_length()


@pytest.mark.cpu_only
def test_reduction_constants():
    """k * head must be exact (the reductions rely on it) and head + tail must be pi/2 and
    ln 2 to well below what the results can show."""
    assert significant_bits(vm.PIO2_1) <= 27                   # exact for |k| < 2^26
    assert abs(Fraction(vm.PIO2_1) + Fraction(vm.PIO2_2) - PI / 2) < Fraction(1, 2 ** 84)
    assert significant_bits(vm.LN2_HI) <= 16                   # exact for |k| <= 255
    lo = Fraction(float(np.float32(vm.LN2_LO)))                # as the f32 IR constant
    assert abs(Fraction(vm.LN2_HI) + lo - LN2) < Fraction(1, 2 ** 44)
    assert significant_bits(vm.LN2_HI_F64) <= 42                 # exact for |k| < 2^11
    assert abs(Fraction(vm.LN2_HI_F64) + Fraction(vm.LN2_LO_F64) - LN2) < Fraction(1, 2 ** 95)
    assert all(significant_bits(p) <= 27 for p in vm.PIO2_F64[:3])     # exact for |k| <= 2^26
    assert abs(sum(map(Fraction, vm.PIO2_F64)) - PI / 2) < Fraction(1, 2 ** 140)



@pytest.mark.cpu_only
def test_pow64_log_table():
    """pow's f64 log: each b is 2^(j/8) to an ulp, log b = hi + lo to 2^-100 relative, and
    the edges lie between neighbouring bs."""
    with localcontext() as ctx:
        ctx.prec = 60
        for j, b, (hi, lo) in zip(range(-4, 5), vm.POW_B, vm.POW_LOG_B):
            assert abs(b - 2.0 ** (j / 8)) <= math.ulp(b)
            exact = Decimal(b).ln()
            assert abs(Decimal(hi) + Decimal(lo) - exact) <= abs(exact) * Decimal(2) ** -100
    assert all(lo < edge < hi for lo, edge, hi in zip(vm.POW_B, vm.POW_EDGES, vm.POW_B[1:]))

# ---- f64 --------------------------------------------------------------------------------------
F64 = nd(dtype=jr.f64, ndim=1)


@jr.kernel
def k64_sin(x: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.sin(x[i])


@jr.kernel
def k64_cos(x: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.cos(x[i])


@jr.kernel
def k64_tan(x: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.tan(x[i])


@jr.kernel
def k64_exp(x: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.exp(x[i])


@jr.kernel
def k64_log(x: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.log(x[i])


@jr.kernel
def k64_pow(x: F64, e: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.pow(x[i], e[i])


KERNELS64 = {"sin": k64_sin, "cos": k64_cos, "tan": k64_tan, "exp": k64_exp, "log": k64_log}
# the largest error against the exact value, in ulps of the result: measured maxima (sin 0.90,
# cos 0.88, tan 1.31, exp 0.80, log 0.84 on 1e7 inputs per range, docs/performance.md) with a
# margin; the results do not depend on the vector width, so these hold on any x86-64
BOUND64 = {"sin": 1.0, "cos": 1.0, "tan": 1.5, "exp": 1.0, "log": 1.0}
TRIG_EXACT64 = 2.0 ** 26 * math.pi / 2      # the f64 reduction is exact to ~2^-115 below this
extended = pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63,
                              reason="needs numpy's 80-bit long double for the reference")


def run64(fn, x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.empty_like(x)
    KERNELS64[fn](x, y)
    return y


def exact_error(got, x, fn):
    """|got - fn(x)| in ulps of the f64 nearest fn(x), fn evaluated in long double (64-bit
    mantissa: its own error is ~2^-11 of an f64 ulp); 0 where both are the same special."""
    with np.errstate(all="ignore"):
        want = NUMPY[fn](np.asarray(x, np.longdouble))
        exponent = np.maximum(np.frexp(np.abs(want))[1] - 1, -1022)
        err = np.abs(got.astype(np.longdouble) - want) / np.ldexp(np.longdouble(1),
                                                                   exponent - 52)
        same = (got == want.astype(np.float64)) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0, err).astype(np.float64)


def ulp_distance64(got, want):
    """How many f64 values lie between got and want (0 where both are the same special)."""
    def order(a):
        i = np.asarray(a, np.float64).view(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0, np.abs(order(got) - order(want)))


def inputs64(fn, rng):
    n = 100_000
    if fn in ("sin", "cos", "tan"):
        near = np.arange(1, 40_000) * (np.pi / 2)                  # x close to k pi/2
        k = rng.integers(2 ** 17, 2 ** 26, n)                     # up to TRIG_EXACT64
        return np.concatenate([
            rng.uniform(-10, 10, n), rng.uniform(-1e5, 1e5, n),
            rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(math.log(1e-300),
                                                            math.log(TRIG_EXACT64), n)),
            near, np.nextafter(near, 0), -np.nextafter(near, np.inf), k * (np.pi / 2),
            [29 * np.pi / 2, 5e-324, -5e-324, 1e-300, 0.7853981633974483, 1e5, -1e5]])
    if fn == "exp":     # above 709.78 it overflows; below -708.40 the result is subnormal
        return np.concatenate([rng.uniform(-746, 710, n), rng.uniform(-1, 1, n),
                               rng.uniform(-745.2, -708.3, n), rng.uniform(-1e-8, 1e-8, n)])
    return np.concatenate([rng.integers(1, 0x7FF0000000000000, n, dtype=np.int64).view(
        np.float64), 1 + rng.uniform(-0.3, 0.42, n), 1 + rng.uniform(-1e-7, 1e-7, n),
        rng.integers(1, 2 ** 52, n // 10, dtype=np.int64).view(np.float64)])


@extended
@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", sorted(KERNELS64))
def test_f64_within_bound_of_exact(fn, rng):
    x = inputs64(fn, rng)
    got = run64(fn, x)
    err = exact_error(got, x, fn)
    worst = int(err.argmax())
    assert err.max() <= BOUND64[fn], (fn, x[worst], got[worst], err.max())


@pytest.mark.cpu_only
def test_f64_trig_is_odd_and_even(rng):
    x = inputs64("sin", rng)
    np.testing.assert_array_equal(run64("sin", -x), -run64("sin", x))
    np.testing.assert_array_equal(run64("tan", -x), -run64("tan", x))
    np.testing.assert_array_equal(run64("cos", -x), run64("cos", x))


SPECIALS64 = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324,
                       2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
                       709.782712893384, 709.7827128933841, -708.3964185322641,
                       -745.1332191019411, -745.1332191019412, -746.0, -1000.0, 1000.0, 0.5,
                       2.0, 1e-300], np.float64)


@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", sorted(KERNELS64))
def test_f64_special_values(fn):
    """NaN, infinities, zeros, subnormals and the overflow thresholds as numpy's float64
    functions give them (C's results), signs of zero included, to an ulp elsewhere."""
    x = SPECIALS64
    if fn in ("sin", "cos", "tan"):
        x = x[~(np.abs(x) > TRIG_EXACT64)]
    got = run64(fn, x)
    with np.errstate(all="ignore"):
        want = NUMPY[fn](x)
    cases = list(zip(x, got, want))
    assert (np.isnan(got) == np.isnan(want)).all(), cases
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), cases
    assert (got[np.isinf(want)] == want[np.isinf(want)]).all(), cases
    assert ulp_distance64(got, want).max() <= 1, cases


def around64(v, count=3):
    """The f64 nearest v and `count` neighbours on each side."""
    x = np.float64(v)
    below, above = [x], [x]
    for _ in range(count):
        below.append(np.nextafter(below[-1], -np.inf))
        above.append(np.nextafter(above[-1], np.inf))
    return below[:0:-1] + above


@extended
@pytest.mark.cpu_only
def test_f64_exp_overflow_and_subnormals():
    overflow = around64(709.782712893384)              # log of the largest f64
    to_zero = around64(-745.1332191019411)             # log of half the smallest subnormal
    normal = around64(-708.3964185322641)              # log of the smallest normal
    x = np.array(overflow + to_zero + normal + [-740.0, -720.0, -745.0], np.float64)
    got = run64("exp", x)
    assert np.isinf(got[:7]).any() and np.isfinite(got[:7]).any()       # both sides of each
    assert (got[7:14] == 0).any() and (got[7:14] > 0).any()               # threshold
    assert exact_error(got, x, "exp").max() <= BOUND64["exp"], list(zip(x, got))
    big = run64("exp", np.array([1e300, np.inf, -1e300, -np.inf, np.nan]))
    assert big[0] == big[1] == np.inf and big[2] == big[3] == 0 and np.isnan(big[4])


@pytest.mark.cpu_only
def test_f64_log_edges():
    x = np.array([0.0, -0.0, -1.0, -5e-324, -np.inf, np.inf, np.nan, 5e-324, 1e-310,
                  2.2250738585072014e-308, 1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0),
                  1.7976931348623157e308])
    got = run64("log", x)
    assert got[0] == -np.inf and got[1] == -np.inf
    assert np.isnan(got[2:5]).all() and got[5] == np.inf and np.isnan(got[6])
    assert got[10] == 0 and not np.signbit(got[10])
    assert ulp_distance64(got[7:], np.log(x[7:])).max() <= 1


@extended
@pytest.mark.cpu_only
def test_f64_trig_far_arguments(rng):
    """Past 2^26 pi/2 the reduction loses accuracy gradually (absolute error about |x| 2^-53);
    from 2^48 on, sin and tan give a zero of x's sign and cos gives 1; never inf, never
    outside [-1, 1]."""
    x = np.exp(rng.uniform(math.log(TRIG_EXACT64), math.log(2.0 ** 47.9), 100_000)) \
        * rng.choice([-1.0, 1.0], 100_000)
    for fn in ("sin", "cos"):
        got = run64(fn, x)
        want = NUMPY[fn](x.astype(np.longdouble))
        assert (np.abs(got) <= 1).all()
        assert (np.abs(got - want) <= np.abs(x) * 2.0 ** -51 + 1e-16).all()
    huge = np.array([2.0 ** 48, -2.0 ** 48, 1e20, -1.7976931348623157e308, 1e300])
    np.testing.assert_array_equal(run64("cos", huge), np.ones(5))
    for fn in ("sin", "tan"):
        got = run64(fn, huge)
        assert (got == 0).all() and (np.signbit(got) == np.signbit(huge)).all()
    for fn in ("sin", "cos", "tan"):
        assert np.isnan(run64(fn, np.array([np.inf, -np.inf, np.nan]))).all()


@pytest.mark.cpu_only
@pytest.mark.parametrize("fn", sorted(KERNELS64))
def test_f64_loops_with_math_vectorize(fn):
    x = np.ones(64)
    text = jr.debug.optimized_ir(KERNELS64[fn], x, x)
    assert re.search(r"<\d+ x double>", text)
    assert not re.search(rf"@(llvm\.)?{fn}(\.f64|\.v\d+f64)?\(", text), fn


@pytest.mark.cpu_only
def test_f64_pow_keeps_libm(rng):
    """f64 pow has a vector body but is not used: libm's is as fast with AVX2 and faster
    with SSE (docs/performance.md)."""
    x, e = rng.uniform(0, 10, 1000), rng.uniform(-5, 5, 1000)
    y = np.empty_like(x)
    k64_pow(x, e, y)
    np.testing.assert_allclose(y, np.power(x, e), rtol=1e-15, atol=0)
    text = jr.debug.optimized_ir(k64_pow, x, e, y)
    assert "jitrt_vmath" not in text and re.search(r"@(llvm\.)?pow(\.f64)?\(", text)


@jr.kernel
def k64_pow_vm(x: F64, e: F64, y: F64):
    for i in range(x.shape[0]):
        y[i] = jr.pow(x[i], e[i])


@pytest.fixture
def pow64(monkeypatch):
    """vector_math's f64 pow, as if FUNCTIONS64 listed it, through a kernel of its own (the
    process loads one object per kernel text, so k64_pow may already be there with libm's)."""
    monkeypatch.setattr(vm, "FUNCTIONS64", vm.FUNCTIONS64 + ("pow",))

    def run(x, e):
        x, e = np.ascontiguousarray(x, np.float64), np.ascontiguousarray(e, np.float64)
        y = np.empty_like(x)
        k64_pow_vm(x, e, y)
        return y
    x = np.ones(64)
    text = jr.debug.optimized_ir(k64_pow_vm, x, x, x)
    assert re.search(r"<\d+ x double>", text) and not re.search(r"@(llvm\.)?pow(\.f64)?\(", text)
    return run


@extended
@pytest.mark.cpu_only
def test_f64_pow_body_within_bound_of_exact(pow64, rng):
    """Measured worst 1.24 ulp, where |y log x| is near 709 (log's error counts 709 times)."""
    n = 50_000
    near = np.exp(rng.uniform(-5, 5, n))
    x = np.concatenate([rng.uniform(0, 100, n), rng.uniform(-10, 10, n), near, near,
                        np.exp(rng.uniform(-700, 700, n)), 1 + rng.uniform(-1e-3, 1e-3, n),
                        rng.integers(1, 0x7FF0000000000000, n, dtype=np.int64).view(np.float64)])
    y = np.concatenate([rng.uniform(-20, 20, n), np.round(rng.uniform(-40, 40, n)),
                        rng.uniform(700, 709.7, n) * rng.choice([-1, 1], n) / np.log(near),
                        rng.uniform(-745, -708, n) / np.log(near), rng.uniform(-1.2, 1.2, n),
                        rng.uniform(-7e5, 7e5, n), rng.uniform(-2, 2, n)])
    got = pow64(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
        exponent = np.maximum(np.frexp(np.abs(want))[1] - 1, -1022)
        err = np.abs(got.astype(np.longdouble) - want) / np.ldexp(np.longdouble(1),
                                                                   exponent - 52)
        err = np.where((got == want.astype(np.float64)) | (np.isnan(got) & np.isnan(want)),
                       0, err).astype(np.float64)
    worst = int(err.argmax())
    assert err.max() <= 1.5, (x[worst], y[worst], got[worst], err.max())


POW64_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, np.inf, -np.inf, np.nan,
                 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
                 1.0000000000000002, 0.9999999999999999]
POW64_EXPONENT = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, 1e10, -1e10,
                  2.0 ** 53, 2.0 ** 53 - 1, 2.0 ** 52 + 1, np.inf, -np.inf, np.nan, 1075.0,
                  -1075.0, 1e300, -1e300]


@pytest.mark.cpu_only
def test_f64_pow_body_special_cases_follow_c(pow64):
    x, y = (a.ravel() for a in np.meshgrid(POW64_SPECIAL, POW64_EXPONENT))
    got = pow64(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    cases = list(zip(x, y, got, want))
    assert (np.isnan(got) == np.isnan(want)).all(), [c for c in cases if np.isnan(c[2]) !=
                                                      np.isnan(c[3])]
    same_sign = (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    assert same_sign.all(), [c for c, s in zip(cases, same_sign) if not s]
    err = ulp_distance64(got, want)
    assert err.max() <= 1, [c for c, e in zip(cases, err) if e > 1]


@pytest.mark.cpu_only
def test_f64_pow_body_exact_results_are_exact(pow64):
    """Powers that are representable come out exactly (their error is below half an ulp)."""
    cases = [(2.0, float(k)) for k in range(-1074, 1024)] + \
        [(3.0, float(k)) for k in range(34)] + [(10.0, float(k)) for k in range(23)] + \
        [(float(b), float(k)) for b in range(2, 200) for k in range(1, 8)
         if b ** k < 2 ** 53] + [(4.0, 0.5), (1e10, 0.5), (0.25, 0.5), (16.0, 0.25)]
    x, y = np.array(cases).T
    want = np.array([float(Fraction(int(a)) ** int(e)) if a == int(a) and e == int(e)
                     else math.sqrt(math.sqrt(a)) if e == 0.25 else math.sqrt(a)
                     for a, e in cases])
    np.testing.assert_array_equal(pow64(x, y), want)
