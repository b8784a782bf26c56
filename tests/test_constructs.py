"""Every kernel construct of the foundation, checked against numpy (or Python) on random inputs.

Each test launches real kernels on the CPU backend and compares the data they produce with an
independent computation on the host. Inputs come from seeded generators and are never all zero,
so a kernel that does nothing (or the wrong thing) fails.
"""
import math

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray

F32 = {"rtol": 2e-6, "atol": 1e-6}
F64 = {"rtol": 1e-13, "atol": 1e-13}


def nonzero_ints(rng, lo, hi, n, dtype):
    v = rng.integers(lo, hi, n).astype(dtype)
    v[v == 0] = 1
    return v


# ---- loops ----------------------------------------------------------------------------------

def test_range_loop_over_ndarray_shape(rng):
    @jr.kernel
    def affine(a: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.f32, ndim=1), k: jr.f32):
        for i in range(a.shape[0]):
            out[i] = a[i] * k + i

    a = rng.standard_normal(1000).astype(np.float32)
    out = np.zeros_like(a)
    affine(a, out, 1.5)
    np.testing.assert_allclose(out, a * np.float32(1.5) + np.arange(1000, dtype=np.float32), **F32)


def test_range_with_begin_and_end(rng):
    @jr.kernel
    def middle(a: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i32, ndim=1), lo: jr.i32):
        for i in range(lo, a.shape[0] - 2):
            out[i] = a[i] * 3

    a = rng.integers(-1000, 1000, 64).astype(np.int32)
    out = np.full(64, -7, np.int32)
    middle(a, out, 5)
    expect = np.full(64, -7, np.int32)
    expect[5:62] = a[5:62] * 3
    np.testing.assert_array_equal(out, expect)


def test_ndrange_with_begin_end_extents(rng):
    @jr.kernel
    def box(a: nd(dtype=jr.f64, ndim=2), out: nd(dtype=jr.f64, ndim=2)):
        for i, j in jr.ndrange((1, a.shape[0] - 1), (2, a.shape[1])):
            out[i, j] = a[i - 1, j] + a[i + 1, j - 2] * j

    a = rng.standard_normal((37, 23))
    out = np.full_like(a, 9.0)
    box(a, out)
    expect = np.full_like(a, 9.0)
    for i in range(1, 36):
        for j in range(2, 23):
            expect[i, j] = a[i - 1, j] + a[i + 1, j - 2] * j
    np.testing.assert_allclose(out, expect, **F64)


def test_ndrange_three_axes_with_plain_extents(rng):
    @jr.kernel
    def cube(out: nd(dtype=jr.i32, ndim=3)):
        for i, j, k in jr.ndrange(out.shape[0], out.shape[1], out.shape[2]):
            out[i, j, k] = i * 10000 + j * 100 + k

    out = np.full((5, 7, 9), -1, np.int32)
    cube(out)
    i, j, k = np.indices(out.shape)
    np.testing.assert_array_equal(out, i * 10000 + j * 100 + k)


def test_for_over_field_and_2d_field(rng):
    x = jr.field(jr.f32, shape=(300,))
    g = jr.field(jr.i32, shape=(13, 17))
    src = rng.standard_normal(300).astype(np.float32)

    @jr.kernel
    def fill(k: jr.f32):
        for i in x:
            x[i] = x[i] * k - i
        for i, j in g:
            g[i, j] = i * j - j

    x.from_numpy(src)
    fill(2.5)
    np.testing.assert_allclose(x.to_numpy(), src * np.float32(2.5) - np.arange(300), **F32)
    i, j = np.indices((13, 17))
    np.testing.assert_array_equal(g.to_numpy(), i * j - j)


def test_inner_loop_bounds_read_data(rng):
    @jr.kernel
    def tri(counts: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i64, ndim=1)):
        for i in range(counts.shape[0]):
            acc = 0
            for k in range(counts[i]):
                acc += k * k
            out[i] = acc

    counts = rng.integers(0, 50, 200).astype(np.int32)
    out = np.full(200, -1, np.int64)
    tri(counts, out)
    np.testing.assert_array_equal(out, [sum(k * k for k in range(c)) for c in counts])


def test_static_range_unrolls_and_static_if_picks_branch(rng):
    @jr.kernel
    def poly(a: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.f32, ndim=1), square: jr.template()):
        for i in range(a.shape[0]):
            acc = 0.0
            for p in jr.static(range(3)):
                acc += a[i] ** p * (p + 1)       # p is a compile-time int: 1 + 2a + 3a^2
            if jr.static(square):
                acc = acc * acc
            out[i] = acc

    a = rng.uniform(-2, 2, 100).astype(np.float32)
    out = np.zeros_like(a)
    poly(a, out, False)
    base = 1 + 2 * a + 3 * a * a
    np.testing.assert_allclose(out, base, **F32)
    poly(a, out, True)
    np.testing.assert_allclose(out, base * base, rtol=1e-5)


def test_static_loop_over_tuple_of_fields(rng):
    fa, fb = jr.field(jr.i32, shape=(10,)), jr.field(jr.i32, shape=(10,))

    @jr.kernel
    def fill_both():
        for i in range(10):
            for k, f in jr.static(enumerate((fa, fb))):
                f[i] = i * (k + 2)

    fill_both()
    np.testing.assert_array_equal(fa.to_numpy(), np.arange(10) * 2)
    np.testing.assert_array_equal(fb.to_numpy(), np.arange(10) * 3)


def test_empty_and_reversed_ranges_run_zero_times():
    hits = jr.field(jr.i32, shape=())

    @jr.kernel
    def none_(lo: jr.i32, hi: jr.i32, n: jr.i64):
        for i in range(lo, hi):
            hits[None] += 1
        for i, j in jr.ndrange((lo, hi), 3):
            hits[None] += 100
        for i in range(3):
            for j in range(lo, hi):             # a serial inner loop
                hits[None] += 10000
        for i in range(n):                     # an i64 bound
            hits[None] += 1000000

    none_(5, 2, 0)                             # begin > end: nothing runs
    assert hits[None] == 0
    none_(2, 5, 2)
    assert hits[None] == 3 + 9 * 100 + 9 * 10000 + 2 * 1000000


def test_tasks_run_in_order_and_capture_kernel_scope_locals(rng):
    @jr.kernel
    def pipeline(a: nd(dtype=jr.f64, ndim=1), b: nd(dtype=jr.f64, ndim=1), k: jr.f64) -> jr.f64:
        scale = k * 2                          # serial task; read by the parallel task below
        for i in range(a.shape[0]):
            b[i] = a[i] * scale
        first = b[0] + 1                       # runs after the first loop has finished
        for i in range(a.shape[0]):
            b[i] = b[i] + first
        return b[a.shape[0] - 1]

    a = rng.standard_normal(10_000)
    b = np.zeros_like(a)
    last = pipeline(a, b, 1.5)
    expect = a * 3 + (a[0] * 3 + 1)
    np.testing.assert_allclose(b, expect, **F64)
    assert last == b[-1]


# ---- control flow -----------------------------------------------------------------------------

def test_if_elif_else(rng):
    @jr.kernel
    def classify(a: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            if a[i] < -0.5:
                out[i] = -1
            elif a[i] > 0.5:
                out[i] = 1
            else:
                out[i] = 0
            if a[i] > 1.5:
                out[i] += 10

    a = rng.uniform(-2, 2, 500).astype(np.float32)
    out = np.full(500, 99, np.int32)
    classify(a, out)
    expect = np.where(a < -0.5, -1, np.where(a > 0.5, 1, 0)) + np.where(a > 1.5, 10, 0)
    np.testing.assert_array_equal(out, expect)


def collatz_steps(v: int) -> int:
    steps = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def test_while_in_serial_inner_loop(rng):
    @jr.kernel
    def collatz(a: nd(dtype=jr.i64, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            steps = 0
            while v != 1:
                if v % 2 == 0:
                    v = v // 2
                else:
                    v = 3 * v + 1
                steps += 1
            out[i] = steps

    a = rng.integers(1, 10_000, 300).astype(np.int64)
    out = np.zeros(300, np.int32)
    collatz(a, out)
    np.testing.assert_array_equal(out, [collatz_steps(int(v)) for v in a])


@jr.func
def above(v, limit):
    twice = v * 2
    return twice > limit


def test_while_whose_condition_inlines_a_func(rng):
    @jr.kernel
    def halve(a: nd(dtype=jr.f64, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            n = 0
            while above(v, 1.0):
                v = v / 2
                n += 1
            out[i] = n

    a = rng.uniform(0.1, 1000, 200)
    out = np.full(200, -1, np.int32)
    halve(a, out)
    expect = []
    for v in a:
        n = 0
        while v * 2 > 1.0:
            v, n = v / 2, n + 1
        expect.append(n)
    np.testing.assert_array_equal(out, expect)


def test_break_and_continue_in_serial_loops(rng):
    @jr.kernel
    def scan(a: nd(dtype=jr.i32, ndim=2), first_neg: nd(dtype=jr.i32, ndim=1),
             odd_sum: nd(dtype=jr.i32, ndim=1)):
        for r in range(a.shape[0]):
            first_neg[r] = -1
            for c in range(a.shape[1]):
                if a[r, c] < 0:
                    first_neg[r] = c
                    break
            s = 0
            for c in range(a.shape[1]):
                if a[r, c] % 2 == 0:
                    continue
                s += a[r, c]
            k = 0
            while True:                      # break out of a while
                k += 1
                if k >= 3:
                    break
            odd_sum[r] = s + k

    a = rng.integers(-20, 100, (50, 40)).astype(np.int32)
    a[7] = np.abs(a[7])                      # one row without a negative entry
    first_neg, odd_sum = np.zeros(50, np.int32), np.zeros(50, np.int32)
    scan(a, first_neg, odd_sum)
    expect_first = [int(np.argmax(row < 0)) if (row < 0).any() else -1 for row in a]
    np.testing.assert_array_equal(first_neg, expect_first)
    np.testing.assert_array_equal(odd_sum, [row[row % 2 == 1].sum() + 3 for row in a])


def test_loop_config_serialize_runs_outer_loop_in_order(rng):
    @jr.kernel
    def cumsum(a: nd(dtype=jr.i64, ndim=1), out: nd(dtype=jr.i64, ndim=1)):
        acc = 0
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            acc += a[i]
            out[i] = acc

    a = rng.integers(-1000, 1000, 50_000).astype(np.int64)   # > grain: would be split if parallel
    out = np.zeros_like(a)
    cumsum(a, out)
    np.testing.assert_array_equal(out, np.cumsum(a))


# ---- locals and types -------------------------------------------------------------------------

def test_local_type_inference(rng):
    @jr.kernel
    def locals_(a: nd(dtype=jr.i32, ndim=1), f: nd(dtype=jr.f32, ndim=1),
                oi: nd(dtype=jr.i32, ndim=1), of: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            n = 3                 # int literal: i32
            n = n + a[i]          # stays i32
            n //= 2
            x = 0.5               # float literal: f32
            x += a[i]             # the int is promoted into the f32 local
            y: jr.f32 = a[i]      # declared type
            p, q = n, x           # tuple assignment evaluates the right side first
            p, q = p + 1, q * 2
            oi[i] = p
            of[i] = q + y + f[i] / 2

    a = rng.integers(-100, 100, 64).astype(np.int32)
    f = rng.standard_normal(64).astype(np.float32)
    oi, of = np.zeros(64, np.int32), np.zeros(64, np.float32)
    locals_(a, f, oi, of)
    np.testing.assert_array_equal(oi, (3 + a) // 2 + 1)
    np.testing.assert_allclose(of, (0.5 + a) * 2 + a + f / 2, **F32)


def test_int_true_division_gives_float(rng):
    @jr.kernel
    def div(a: nd(dtype=jr.i32, ndim=1), b: nd(dtype=jr.i32, ndim=1),
            out: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            out[i] = a[i] / b[i]

    a = rng.integers(-1000, 1000, 100).astype(np.int32)
    b = nonzero_ints(rng, -50, 50, 100, np.int32)
    out = np.zeros(100, np.float32)
    div(a, b, out)
    np.testing.assert_allclose(out, a / b, rtol=1e-6)


# ---- arithmetic with Python semantics ---------------------------------------------------------

@jr.kernel
def divmod_kernel(a: nd(ndim=1), b: nd(ndim=1), q: nd(ndim=1), r: nd(ndim=1)):
    for i in range(a.shape[0]):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_int_floordiv_and_mod_floor_like_python(dt, rng):
    info = np.iinfo(dt)
    a = rng.integers(max(info.min, -10_000), min(info.max, 10_000), 4000, endpoint=True).astype(dt)
    b = rng.integers(max(info.min, -37), 38, 4000).astype(dt)
    b[b == 0] = 7
    if info.min < 0:
        assert (a < 0).any() and (b < 0).any()
    q, r = np.zeros_like(a), np.zeros_like(a)
    divmod_kernel(a, b, q, r)
    np.testing.assert_array_equal(q, np.floor_divide(a, b))
    np.testing.assert_array_equal(r, np.mod(a, b))
    for k in range(200):   # and with Python's own ints
        assert (int(q[k]), int(r[k])) == divmod(int(a[k]), int(b[k]))


def test_int_division_by_zero_gives_zero(rng):
    # Documented choice (codegen/emit_expr.py): x // 0 and x % 0 give 0 instead of trapping.
    a = rng.integers(-1000, 1000, 100).astype(np.int32)
    b = np.zeros(100, np.int32)
    q, r = np.full(100, 5, np.int32), np.full(100, 5, np.int32)
    divmod_kernel(a, b, q, r)
    np.testing.assert_array_equal(q, 0)
    np.testing.assert_array_equal(r, 0)
    ua, ub = a.astype(np.uint16), np.zeros(100, np.uint16)
    uq, ur = np.full(100, 5, np.uint16), np.full(100, 5, np.uint16)
    divmod_kernel(ua, ub, uq, ur)
    np.testing.assert_array_equal(uq, 0)
    np.testing.assert_array_equal(ur, 0)


def test_int_min_divided_by_minus_one_wraps(rng):
    lo = np.iinfo(np.int32).min
    a = np.array([lo, lo, -7, 7], np.int32)
    b = np.array([-1, 1, -1, -1], np.int32)
    q, r = np.zeros(4, np.int32), np.full(4, 3, np.int32)
    divmod_kernel(a, b, q, r)
    np.testing.assert_array_equal(q, [lo, lo, 7, -7])      # 2**31 wraps to INT_MIN, no trap
    np.testing.assert_array_equal(r, [0, 0, 0, 0])


def test_floordiv_and_mod_with_constants_and_folding(rng):
    @jr.kernel
    def consts(a: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i32, ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] // 3
            out[1, i] = a[i] % -3
            out[2, i] = -7 // 2 + (-7 % 2) * 100      # folded at compile time: -4 + 100
            out[3, i] = 7 // -2 + (7 % -2) * 100      # -4 - 100

    a = rng.integers(-100, 100, 50).astype(np.int32)
    out = np.zeros((4, 50), np.int32)
    consts(a, out)
    np.testing.assert_array_equal(out[0], a // 3)
    np.testing.assert_array_equal(out[1], a % -3)
    np.testing.assert_array_equal(out[2], -7 // 2 + (-7 % 2) * 100)
    np.testing.assert_array_equal(out[3], 7 // -2 + (7 % -2) * 100)


def test_float_floordiv_and_mod_floor_like_python(rng):
    a = rng.uniform(-50, 50, 2000)
    b = rng.uniform(0.5, 7, 2000) * rng.choice([-1.0, 1.0], 2000)
    q, r = np.zeros_like(a), np.zeros_like(a)
    divmod_kernel(a, b, q, r)
    np.testing.assert_array_equal(q, np.floor(a / b))
    np.testing.assert_allclose(r, np.mod(a, b), rtol=1e-12, atol=1e-12)
    assert ((r == 0) | (np.sign(r) == np.sign(b))).all()    # Python: the sign of the divisor
    for k in range(100):
        assert q[k] == a[k] // b[k]
        assert math.isclose(r[k], a[k] % b[k], rel_tol=1e-12, abs_tol=1e-12)


def test_int_arithmetic_wraps_like_numpy(rng):
    @jr.kernel
    def arith(a: nd(ndim=1), b: nd(ndim=1), out: nd(ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] + b[i]
            out[1, i] = a[i] - b[i]
            out[2, i] = a[i] * b[i]
            out[3, i] = -a[i]

    for dt in (np.int8, np.int32, np.uint16, np.int64):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, 300, endpoint=True).astype(dt)
        b = rng.integers(info.min, info.max, 300, endpoint=True).astype(dt)
        out = np.zeros((4, 300), dt)
        arith(a, b, out)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(out, np.stack([a + b, a - b, a * b, -a]), err_msg=str(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_arithmetic_and_mixed_precision(dt, rng):
    @jr.kernel
    def farith(a: nd(ndim=1), b: nd(ndim=1), c: nd(dtype=jr.f64, ndim=1), out: nd(ndim=2),
               wide: nd(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] + b[i]
            out[1, i] = a[i] - b[i] * 2
            out[2, i] = a[i] * b[i]
            out[3, i] = a[i] / b[i]
            out[4, i] = -a[i] + 1
            wide[i] = a[i] * c[i]             # f32 * f64 promotes to f64

    tol = F32 if dt == np.float32 else F64
    a, b = rng.standard_normal(300).astype(dt), rng.uniform(0.5, 2, 300).astype(dt)
    c = rng.standard_normal(300) * 1e-9 + 1
    out, wide = np.zeros((5, 300), dt), np.zeros(300)
    farith(a, b, c, out, wide)
    np.testing.assert_allclose(out, np.stack([a + b, a - b * 2, a * b, a / b, -a + 1]), **tol)
    np.testing.assert_allclose(wide, a.astype(np.float64) * c, **F64)


# ---- comparisons, logic, ternary ------------------------------------------------------------

def test_comparisons_including_chained_and_nan(rng):
    @jr.kernel
    def cmp(a: nd(ndim=1), b: nd(ndim=1), c: nd(ndim=1), out: nd(dtype=jr.i32, ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] < b[i]
            out[1, i] = a[i] <= b[i]
            out[2, i] = a[i] > b[i]
            out[3, i] = a[i] >= b[i]
            out[4, i] = a[i] == b[i]
            out[5, i] = a[i] != b[i]
            out[6, i] = a[i] < b[i] <= c[i]
            out[7, i] = a[i] != b[i] != c[i] > a[i]

    for dt in (np.int32, np.uint8, np.float64):
        a = rng.integers(0, 6, 500).astype(dt)
        b = rng.integers(0, 6, 500).astype(dt)
        c = rng.integers(0, 6, 500).astype(dt)
        if dt == np.float64:
            a[:20] = np.nan
            b[10:30] = np.nan
        out = np.full((8, 500), 7, np.int32)
        cmp(a, b, c, out)
        expect = np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b, (a < b) & (b <= c),
                           (a != b) & (b != c) & (c > a)]).astype(np.int32)
        np.testing.assert_array_equal(out, expect, err_msg=str(dt))


def test_and_or_not(rng):
    # comparisons and `not` give 0/1 (i32); `and`/`or` give an operand, as Python does.
    @jr.kernel
    def logic(a: nd(dtype=jr.i32, ndim=1), b: nd(dtype=jr.f32, ndim=1),
              out: nd(dtype=jr.i32, ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] > 0 and b[i] > 0
            out[1, i] = a[i] > 0 or b[i] > 0
            out[2, i] = not a[i]
            out[3, i] = int(a[i] and b[i])             # b[i] where a[i] != 0, else a[i]
            out[4, i] = not (a[i] < 0 or b[i] < 0) and a[i] != 3
            if a[i] or b[i]:
                out[5, i] = 1
            else:
                out[5, i] = 0

    a = rng.integers(-3, 4, 400).astype(np.int32)
    b = rng.integers(-2, 3, 400).astype(np.float32)
    out = np.full((6, 400), 7, np.int32)
    logic(a, b, out)
    expect = np.stack([(a > 0) & (b > 0), (a > 0) | (b > 0), a == 0, np.where(a != 0, b, a),
                       ~((a < 0) | (b < 0)) & (a != 3), (a != 0) | (b != 0)]).astype(np.int32)
    np.testing.assert_array_equal(out, expect)


def test_and_or_short_circuit_guards_an_access(rng):
    # `i + 1 < n and a[i + 1] > 0` must not read a[n]: Python never evaluates the right side.
    @jr.kernel
    def next_positive(a: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            j = i + 1
            if j < a.shape[0] and a[j] > 0:
                out[i] = 1
            else:
                out[i] = 0
            if j >= a.shape[0] or a[j] < 0:
                out[i] += 10

    a = rng.integers(-5, 6, 300).astype(np.int32)
    out = np.full(300, 7, np.int32)
    next_positive(a, out)
    nxt = np.append(a[1:], 0)
    expect = np.where(nxt > 0, 1, 0)
    expect += np.where((np.arange(300) == 299) | (nxt < 0), 10, 0)
    np.testing.assert_array_equal(out, expect)


def test_ternary(rng):
    @jr.kernel
    def pick(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.i32, ndim=1),
             out: nd(dtype=jr.f32, ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] if a[i] > b[i] else -b[i] * 0.5
            out[1, i] = a[i + 1] if i + 1 < a.shape[0] else 42.0   # only the chosen arm runs

    a = rng.uniform(-5, 5, 300).astype(np.float32)
    b = rng.integers(-5, 5, 300).astype(np.int32)
    out = np.zeros((2, 300), np.float32)
    pick(a, b, out)
    np.testing.assert_allclose(out[0], np.where(a > b, a, -b * 0.5), **F32)
    np.testing.assert_array_equal(out[1], np.append(a[1:], 42.0))


# ---- bit operations ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint8])
def test_bit_operations_and_shifts(dt, rng):
    @jr.kernel
    def bits(a: nd(ndim=1), b: nd(ndim=1), s: nd(ndim=1), out: nd(ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] & b[i]
            out[1, i] = a[i] | b[i]
            out[2, i] = a[i] ^ b[i]
            out[3, i] = ~a[i]
            out[4, i] = a[i] << s[i]
            out[5, i] = a[i] >> s[i]
            out[6, i] = (a[i] & 0x0F) | 0x40

    info = np.iinfo(dt)
    nbits = info.bits
    a = rng.integers(info.min, info.max, 500, endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, 500, endpoint=True).astype(dt)
    s = rng.integers(0, nbits, 500).astype(dt)
    out = np.zeros((7, 500), dt)
    bits(a, b, s, out)
    expect = np.stack([a & b, a | b, a ^ b, ~a, np.left_shift(a, s), np.right_shift(a, s),
                       (a & dt(0x0F)) | dt(0x40)])
    np.testing.assert_array_equal(out, expect)
    if info.min < 0:
        assert (out[5][a < 0] < 0).all()    # >> on signed ints is arithmetic, as in Python


def test_shift_amount_is_masked_to_the_bit_width():
    # Documented choice (codegen/emit_expr.py): shift amounts are masked (C-like), not Python's
    # unbounded shifts: 1 << 33 on an i32 is 1 << 1.
    @jr.kernel
    def shift(s: jr.i32) -> jr.i32:
        one = 1
        return one << s

    assert shift(33) == 2
    assert shift(5) == 32


# ---- conversions and builtins -----------------------------------------------------------------

def test_int_float_abs_min_max(rng):
    @jr.kernel
    def conv(a: nd(dtype=jr.i32, ndim=1), f: nd(dtype=jr.f32, ndim=1),
             oi: nd(dtype=jr.i32, ndim=2), of: nd(dtype=jr.f32, ndim=2)):
        for i in range(a.shape[0]):
            oi[0, i] = int(f[i])                      # truncates toward zero
            oi[1, i] = abs(a[i])
            oi[2, i] = min(a[i], 7)
            oi[3, i] = max(a[i], -a[i] + 3, 5)
            oi[4, i] = min(a[i], a[i] * 2, -a[i])
            oi[5, i] = int(abs(f[i]) * 10)
            of[0, i] = float(a[i]) / 3
            of[1, i] = abs(f[i])
            of[2, i] = min(f[i], a[i])                # mixed: promoted to f32
            of[3, i] = max(f[i], 0.25, -f[i] * 2)

    a = rng.integers(-100, 100, 400).astype(np.int32)
    f = rng.uniform(-20, 20, 400).astype(np.float32)
    oi, of = np.zeros((6, 400), np.int32), np.zeros((4, 400), np.float32)
    conv(a, f, oi, of)
    np.testing.assert_array_equal(oi[0], np.trunc(f).astype(np.int32))
    np.testing.assert_array_equal(oi[1], np.abs(a))
    np.testing.assert_array_equal(oi[2], np.minimum(a, 7))
    np.testing.assert_array_equal(oi[3], np.maximum(np.maximum(a, -a + 3), 5))
    np.testing.assert_array_equal(oi[4], np.minimum(np.minimum(a, a * 2), -a))
    np.testing.assert_array_equal(oi[5], (np.abs(f) * np.float32(10)).astype(np.int32))
    np.testing.assert_allclose(of[0], a.astype(np.float32) / 3, **F32)
    np.testing.assert_array_equal(of[1], np.abs(f))
    np.testing.assert_array_equal(of[2], np.minimum(f, a.astype(np.float32)))
    np.testing.assert_array_equal(of[3], np.maximum(np.maximum(f, 0.25), -f * 2))


def test_float_to_int_conversion_saturates():
    # Documented choice (codegen/emit_expr.py): float -> int saturates and NaN gives 0.
    @jr.kernel
    def to_i8(f: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.i8, ndim=1)):
        for i in range(f.shape[0]):
            out[i] = jr.cast(f[i], jr.i8)

    f = np.array([1e10, -1e10, np.nan, 100.9, -100.9], np.float32)
    out = np.zeros(5, np.int8)
    to_i8(f, out)
    np.testing.assert_array_equal(out, [127, -128, 0, 100, -100])


def test_cast_between_dtypes(rng):
    @jr.kernel
    def casts(f: nd(dtype=jr.f64, ndim=1), a: nd(dtype=jr.i64, ndim=1),
              o16: nd(dtype=jr.i16, ndim=1), ou8: nd(dtype=jr.u8, ndim=1),
              of32: nd(dtype=jr.f32, ndim=1), of64: nd(dtype=jr.f64, ndim=1)):
        for i in range(f.shape[0]):
            o16[i] = jr.cast(f[i], jr.i16)
            ou8[i] = jr.cast(a[i], jr.u8)             # integer narrowing wraps
            of32[i] = jr.cast(f[i], dtype=jr.f32)
            of64[i] = jr.f64(a[i]) / 7                 # a dtype called like a function casts

    f = rng.uniform(-3e4, 3e4, 300)
    a = rng.integers(-2**40, 2**40, 300)
    o16, ou8 = np.zeros(300, np.int16), np.zeros(300, np.uint8)
    of32, of64 = np.zeros(300, np.float32), np.zeros(300)
    casts(f, a, o16, ou8, of32, of64)
    np.testing.assert_array_equal(o16, np.trunc(f).astype(np.int16))
    np.testing.assert_array_equal(ou8, a.astype(np.uint8))
    np.testing.assert_array_equal(of32, f.astype(np.float32))
    np.testing.assert_allclose(of64, a / 7, **F64)


# ---- math functions ----------------------------------------------------------------------------

@jr.kernel
def math_kernel(x: nd(ndim=1), y: nd(ndim=1), e: nd(ndim=1), out: nd(ndim=2)):
    for i in range(x.shape[0]):
        out[0, i] = jr.sin(x[i])
        out[1, i] = jr.cos(x[i])
        out[2, i] = jr.tan(x[i])
        out[3, i] = jr.exp(x[i])
        out[4, i] = jr.log(y[i])
        out[5, i] = jr.sqrt(y[i])
        out[6, i] = jr.tanh(x[i])
        out[7, i] = jr.floor(x[i] * 3)
        out[8, i] = jr.ceil(x[i] * 3)
        out[9, i] = jr.pow(y[i], e[i])
        out[10, i] = y[i] ** e[i]
        out[11, i] = x[i] ** 2 + x[i] ** 3
        out[12, i] = y[i] ** -2
        out[13, i] = y[i] ** 0.5
        out[14, i] = math.sin(x[i]) + math.sqrt(y[i])   # Python's math functions map too


def math_expect(x, y, e):
    return np.stack([np.sin(x), np.cos(x), np.tan(x), np.exp(x), np.log(y), np.sqrt(y),
                     np.tanh(x), np.floor(x * 3), np.ceil(x * 3), y ** e, y ** e,
                     x ** 2 + x ** 3, y ** -2.0, np.sqrt(y), np.sin(x) + np.sqrt(y)])


@pytest.mark.parametrize("dt,tol", [(np.float32, {"rtol": 1e-5, "atol": 1e-5}),
                                    (np.float64, {"rtol": 1e-12, "atol": 1e-12})])
def test_math_functions(dt, tol, rng):
    x = rng.uniform(-1.4, 1.4, 1000).astype(dt)       # tan stays away from its poles
    y = rng.uniform(0.1, 10, 1000).astype(dt)
    e = rng.uniform(-2, 2, 1000).astype(dt)
    out = np.zeros((15, 1000), dt)
    math_kernel(x, y, e, out)
    expect = math_expect(x.astype(np.float64), y.astype(np.float64), e.astype(np.float64))
    for k in range(15):
        np.testing.assert_allclose(out[k], expect[k], err_msg=f"row {k}", **tol)


def test_math_on_ints_uses_default_float_and_int_power(rng):
    @jr.kernel
    def imath(a: nd(dtype=jr.i32, ndim=1), p: nd(dtype=jr.i32, ndim=1),
              of: nd(dtype=jr.f32, ndim=1), oi: nd(dtype=jr.i32, ndim=2)):
        for i in range(a.shape[0]):
            of[i] = jr.sqrt(a[i])
            oi[0, i] = a[i] ** 3                    # constant exponent: integer multiplies
            oi[1, i] = a[i] ** p[i]                 # run-time exponent, result cast back to int

    a = rng.integers(1, 30, 200).astype(np.int32)
    p = rng.integers(0, 5, 200).astype(np.int32)
    of, oi = np.zeros(200, np.float32), np.zeros((2, 200), np.int32)
    imath(a, p, of, oi)
    np.testing.assert_allclose(of, np.sqrt(a), **F32)
    np.testing.assert_array_equal(oi[0], a ** 3)
    np.testing.assert_array_equal(oi[1], [int(v) ** int(k) for v, k in zip(a, p)])


# ---- atomics ----------------------------------------------------------------------------------

def test_atomics_return_old_values_serially():
    s = jr.field(jr.i32, shape=())
    sf = jr.field(jr.f64, shape=())
    olds = jr.field(jr.i32, shape=(5,))
    oldf = jr.field(jr.f64, shape=(5,))

    @jr.kernel
    def run():
        olds[0] = jr.atomic_max(s[None], 5)
        olds[1] = jr.atomic_max(s[None], 4)
        olds[2] = jr.atomic_min(s[None], -2)
        olds[3] = jr.atomic_add(s[None], 10)
        olds[4] = jr.atomic_sub(s[None], 3)
        oldf[0] = jr.atomic_max(sf[None], 2.5)
        oldf[1] = jr.atomic_max(sf[None], -4.0)
        oldf[2] = jr.atomic_min(sf[None], -1.25)
        oldf[3] = jr.atomic_add(sf[None], 0.5)
        oldf[4] = jr.atomic_sub(sf[None], 0.25)

    s[None] = 3
    sf[None] = 1.5
    run()
    assert olds.to_numpy().tolist() == [3, 5, 5, -2, 8]
    assert s[None] == 5
    assert oldf.to_numpy().tolist() == [1.5, 2.5, 2.5, -1.25, -0.75]
    assert sf[None] == -1.0


def test_atomic_add_old_values_are_distinct_in_parallel():
    n = 200_000
    counter = jr.field(jr.i32, shape=())

    @jr.kernel
    def claim(order: nd(dtype=jr.i32, ndim=1)):
        for i in range(order.shape[0]):
            slot = jr.atomic_add(counter[None], 1)
            order[slot] = i

    order = np.full(n, -1, np.int32)
    claim(order)
    assert counter[None] == n
    np.testing.assert_array_equal(np.sort(order), np.arange(n))


def test_parallel_atomic_min_max_match_numpy(rng):
    lo_i, hi_i = jr.field(jr.i32, shape=()), jr.field(jr.i32, shape=())
    lo_f, hi_f = jr.field(jr.f32, shape=()), jr.field(jr.f32, shape=())
    hi_u = jr.field(jr.u32, shape=())

    @jr.kernel
    def extremes(a: nd(dtype=jr.i32, ndim=1), f: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            jr.atomic_min(lo_i[None], a[i])
            jr.atomic_max(hi_i[None], a[i])
            jr.atomic_min(lo_f[None], f[i])
            jr.atomic_max(hi_f[None], f[i])
            jr.atomic_max(hi_u[None], jr.cast(a[i], jr.u32))   # unsigned order: -1 is largest

    a = rng.integers(-10**9, 10**9, 100_000).astype(np.int32)
    f = rng.standard_normal(100_000).astype(np.float32)
    lo_i[None], hi_i[None] = 2**31 - 1, -2**31
    lo_f[None], hi_f[None] = 1e30, -1e30
    hi_u[None] = 0
    extremes(a, f)
    assert (lo_i[None], hi_i[None]) == (a.min(), a.max())
    assert (lo_f[None], hi_f[None]) == (f.min(), f.max())
    assert hi_u[None] == a.astype(np.uint32).max()


def test_plus_equals_from_parallel_loop_is_atomic(rng):
    si = jr.field(jr.i64, shape=())
    sf = jr.field(jr.f64, shape=())
    s32 = jr.field(jr.f32, shape=())
    hist = jr.field(jr.i32, shape=(16,))

    @jr.kernel
    def total(a: nd(dtype=jr.i32, ndim=1), f: nd(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            si[None] += a[i]
            sf[None] -= f[i]
            s32[None] += f[i]
            hist[a[i] % 16] += 1

    n = 100_000
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    f = rng.uniform(0, 1, n)
    total(a, f)
    assert si[None] == a.astype(np.int64).sum()
    assert math.isclose(sf[None], -f.sum(), rel_tol=1e-10)
    assert math.isclose(s32[None], f.sum(), rel_tol=1e-3)
    np.testing.assert_array_equal(hist.to_numpy(), np.bincount(a % 16, minlength=16))


def test_atomic_on_ndarray_element(rng):
    @jr.kernel
    def scatter(idx: nd(dtype=jr.i32, ndim=1), w: nd(dtype=jr.f64, ndim=1),
                acc: nd(dtype=jr.f64, ndim=1)):
        for i in range(idx.shape[0]):
            jr.atomic_add(acc[idx[i]], w[i])

    idx = rng.integers(0, 50, 30_000).astype(np.int32)
    w = rng.standard_normal(30_000)
    acc = np.zeros(50)
    scatter(idx, w, acc)
    np.testing.assert_allclose(acc, np.bincount(idx, weights=w, minlength=50), rtol=1e-9,
                               atol=1e-9)


# ---- shapes, returns, 0-d fields ----------------------------------------------------------------

def test_shape_of_each_axis(rng):
    @jr.kernel
    def shapes(a: nd(dtype=jr.f32, ndim=3), out: nd(dtype=jr.i32, ndim=1)):
        out[0] = a.shape[0]
        out[1] = a.shape[1]
        out[2] = a.shape[2]
        out[3] = a.shape[0] * a.shape[1] * a.shape[2]

    out = np.zeros(4, np.int32)
    a = rng.standard_normal((3, 5, 7)).astype(np.float32)
    shapes(a, out)
    assert out.tolist() == [3, 5, 7, 105]
    shapes(np.ones((2, 9, 4), np.float32), out)       # same specialization, new shape
    assert out.tolist() == [2, 9, 4, 72]


def test_scalar_return_values(rng):
    acc = jr.field(jr.f32, shape=())

    @jr.kernel
    def mean(a: nd(dtype=jr.f32, ndim=1)) -> jr.f32:
        acc[None] = 0.0
        for i in range(a.shape[0]):
            acc[None] += a[i]
        return acc[None] / a.shape[0]

    @jr.kernel
    def count_neg(a: nd(dtype=jr.i32, ndim=1)) -> jr.i32:
        n = 0
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            if a[i] < 0:
                n += 1
        return n

    @jr.kernel
    def affine(k: jr.f64, b: jr.i64) -> jr.f64:
        return k * b + 0.25

    f = rng.standard_normal(5000).astype(np.float32)
    assert math.isclose(mean(f), f.mean(), rel_tol=1e-4, abs_tol=1e-5)
    a = rng.integers(-5, 5, 333).astype(np.int32)
    r = count_neg(a)
    assert type(r) is int and r == (a < 0).sum()
    assert affine(1.5, 10**12) == 1.5 * 10**12 + 0.25


def test_unsigned_64_bit_return_through_both_launch_paths():
    @jr.kernel
    def echo(v: jr.u64) -> jr.u64:
        return v

    big = 2**64 - 3
    assert echo(big) == big
    assert echo(big) == big                   # the fast path
    assert echo.bind(big)() == big            # a bound launch


def test_zero_dim_field_read_write(rng):
    s = jr.field(jr.f64, shape=())
    x = jr.field(jr.f64, shape=(100,))

    @jr.kernel
    def scale():
        for i in x:
            x[i] = x[i] * s[None]
        s[None] = s[None] + 1

    v = rng.standard_normal(100)
    x.from_numpy(v)
    s[None] = 2.5
    scale()
    np.testing.assert_allclose(x.to_numpy(), v * 2.5, **F64)
    assert s[None] == 3.5


# ---- kernels defined in functions, @jr.func ----------------------------------------------------

def test_closure_kernel_sees_local_field_and_nested_kernels_are_separate(rng):
    def make(scale):
        y = jr.field(jr.i32, shape=(20,))

        @jr.kernel
        def fill():
            for i in y:
                y[i] = i * scale
        return y, fill

    y2, fill2 = make(2)
    y5, fill5 = make(5)
    fill2()
    fill5()
    np.testing.assert_array_equal(y2.to_numpy(), np.arange(20) * 2)
    np.testing.assert_array_equal(y5.to_numpy(), np.arange(20) * 5)


@jr.func
def sq(v):
    return v * v


@jr.func
def sum_sq(a, b):
    return sq(a) + sq(b)                    # a func calling a func


@jr.func
def inc_by_value(v):
    v += 100                                # changes the func's own copy only
    return v


@jr.func
def inc_by_ref(v: jr.template()):
    v += 100                                # changes the caller's local


@jr.func
def store_into(dst: jr.template(), i, j, value):
    dst[i, j] = value


@jr.func
def clamp(v, lo, hi):
    r = v
    if r < lo:  # noqa: PLR1730 - an if inside an inlined func is the point
        r = lo
    if r > hi:  # noqa: PLR1730
        r = hi
    return r


def test_func_inlining_by_value_by_reference_and_nested(rng):
    out = jr.field(jr.f32, shape=(6, 200))

    @jr.kernel
    def use(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            w = inc_by_value(v)
            out[0, i] = v
            out[1, i] = w
            u = a[i]
            inc_by_ref(u)
            out[2, i] = u
            out[3, i] = sum_sq(a[i], b[i])
            store_into(out, 4, i, clamp(a[i], -0.5, 0.5))
            out[5, i] = clamp(b[i] * 2, -1, 1)

    a = rng.standard_normal(200).astype(np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    use(a, b)
    o = out.to_numpy()
    np.testing.assert_array_equal(o[0], a)
    np.testing.assert_allclose(o[1], a + 100, **F32)
    np.testing.assert_allclose(o[2], a + 100, **F32)
    np.testing.assert_allclose(o[3], a * a + b * b, **F32)
    np.testing.assert_array_equal(o[4], np.clip(a, -0.5, 0.5))
    np.testing.assert_array_equal(o[5], np.clip(b * 2, -1, 1))


@jr.func
def store_at(dst: jr.template(), i, value):
    dst[i] = value


def test_func_with_template_field_and_ndarray_arguments(rng):
    f = jr.field(jr.i32, shape=(64,))

    @jr.kernel
    def both(a: nd(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            store_at(f, i, a[i] * 2)
            store_at(a, i, a[i] + sq(i))

    a = rng.integers(-100, 100, 64).astype(np.int32)
    orig = a.copy()
    both(a)
    np.testing.assert_array_equal(f.to_numpy(), orig * 2)
    np.testing.assert_array_equal(a, orig + np.arange(64) ** 2)


def test_funcs_run_as_plain_python_outside_kernels():
    assert sum_sq(3, 4) == 25
    assert clamp(7, 0, 5) == 5


# ---- dtypes ----------------------------------------------------------------------------------

ALL_DTYPES = [jr.i8, jr.i16, jr.i32, jr.i64, jr.u8, jr.u16, jr.u32, jr.u64, jr.f32, jr.f64]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: d.name)
def test_every_dtype_round_trips(dt, rng):
    fld = jr.field(dt, shape=(256,))

    @jr.kernel
    def copy_add(src: nd(dtype=dt, ndim=1), k: dt, ret: nd(dtype=dt, ndim=1)):
        for i in range(src.shape[0]):
            fld[i] = src[i] + k
        ret[0] = k

    npdt = dt.np
    if dt.is_float:
        src = rng.standard_normal(256).astype(npdt) * npdt.type(1e3)
        k = 0.375
    else:
        info = np.iinfo(npdt)
        src = rng.integers(info.min, info.max, 256, endpoint=True, dtype=npdt)
        src[:2] = info.min, info.max        # the extremes survive the trip
        k = int(info.max)                    # the largest scalar argument this dtype takes
    ret = np.zeros(1, npdt)
    copy_add(src, k, ret)
    assert ret[0] == k
    with np.errstate(over="ignore"):
        expect = src + npdt.type(k)
    np.testing.assert_array_equal(fld.to_numpy(), expect)
    assert fld.to_numpy().dtype == npdt


def test_f64_keeps_double_precision(rng):
    @jr.kernel
    def fine(a: nd(dtype=jr.f64, ndim=1), out: nd(dtype=jr.f64, ndim=2)):
        for i in range(a.shape[0]):
            out[0, i] = a[i] + 1e-10            # a literal next to f64 is f64
            out[1, i] = a[i] * 0.1
            out[2, i] = jr.sin(a[i]) ** 2 + jr.cos(a[i]) ** 2 - 1

    a = 1 + rng.uniform(0, 1, 500)
    out = np.zeros((3, 500))
    fine(a, out)
    np.testing.assert_allclose(out[0] - a, 1e-10, rtol=1e-5)     # lost entirely in f32
    np.testing.assert_allclose(out[1], a * 0.1, rtol=1e-15)
    assert np.abs(out[2]).max() < 1e-15


def test_default_fp_f64_makes_literals_double():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)

    @jr.kernel
    def tiny() -> jr.f64:
        t = 0.1
        return t + 1e-12

    assert tiny() == 0.1 + 1e-12


# ---- large launches ----------------------------------------------------------------------------

def test_large_parallel_range_matches_numpy(rng):
    n = 1 << 20
    hits = jr.field(jr.i32, shape=(n,))

    @jr.kernel
    def big(a: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            out[i] = a[i] * 2.0 + jr.sqrt(jr.cast(i, jr.f32))
            hits[i] += 1

    a = rng.standard_normal(n).astype(np.float32)
    out = np.zeros_like(a)
    big(a, out)
    np.testing.assert_allclose(out, a * 2 + np.sqrt(np.arange(n, dtype=np.float32)), rtol=1e-6,
                               atol=1e-5)
    np.testing.assert_array_equal(hits.to_numpy(), 1)      # every index ran exactly once
    big(a, out)
    np.testing.assert_array_equal(hits.to_numpy(), 2)


def test_large_2d_ndrange_with_more_threads(rng):
    jr.init(arch=jr.cpu, offline_cache=False, num_threads=4, parallel_grain=512)

    @jr.kernel
    def grid(a: nd(dtype=jr.i64, ndim=2), out: nd(dtype=jr.i64, ndim=2)):
        for i, j in jr.ndrange((0, a.shape[0]), (1, a.shape[1])):
            out[i, j] = a[i, j] - a[i, j - 1] + i

    a = rng.integers(-10**6, 10**6, (700, 900))
    out = np.zeros_like(a)
    grid(a, out)
    expect = np.zeros_like(a)
    expect[:, 1:] = np.diff(a, axis=1) + np.arange(700)[:, None]
    np.testing.assert_array_equal(out, expect)
