"""Compile-time rules that keep kernels from returning silently wrong numbers.

- a local read where Python could raise NameError (assigned only in some branches, or only in
  a loop body that may run zero times) is a compile error at the read;
- a float stored into an integer target is truncated toward zero with a jr.CastWarning (Taichi's
  rule); a constant must fit its target; a kernel's return value converts to its annotation;
- integer shifts, powers and divisions follow the rule in docs/usage.md ("Integer arithmetic");
- constant expressions are evaluated with Python's semantics, bounded in size;
- a kernel with thousands of unrolled statements compiles (static unrolling is linear).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitrt as jr

ND = jr.types.ndarray


def compile_error(kernel, *args) -> str:
    with pytest.raises(jr.KernelCompileError) as info:
        kernel(*args)
    return str(info.value)


# ---- possibly-unbound locals ----------------------------------------------------------------

def test_local_assigned_in_one_branch_is_an_error_at_the_read():
    @jr.kernel
    def k(n: jr.i32) -> jr.f32:
        if n > 0:
            v = 1.0
        return v

    text = compile_error(k, 1)
    assert "local 'v' may be read before it is assigned" in text
    assert "return v" in text and "^" in text and "test_semantics_strict.py" in text


def test_local_assigned_only_in_a_loop_body_is_an_error_after_the_loop():
    @jr.kernel
    def k(n: jr.i32) -> jr.i32:
        for i in range(n):
            w = i
        return w

    assert "local 'w' may be read before it is assigned" in compile_error(k, 0)


def test_a_per_element_local_does_not_leak_into_the_next_element():
    @jr.kernel
    def k(out: ND(dtype=jr.f32, ndim=1)):
        for i in range(out.shape[0]):
            if i % 2 == 0:
                v = i * 1.0
            out[i] = v              # odd i: the previous element's v in the old behaviour

    assert "local 'v'" in compile_error(k, np.zeros(4, np.float32))


def test_locals_assigned_on_every_path_are_fine():
    @jr.kernel
    def k(n: jr.i32) -> jr.f32:
        if n > 0:
            v = 1.0
        else:
            v = 2.0
        w = 0.0
        jr.loop_config(serialize=True)
        for i in range(n):
            w = w + v
        j = 0
        while j < 3:
            if j == 1:
                u = 5.0  # noqa: F841
                break
            j += 1
        return w

    assert k(3) == 3.0 and k(0) == 0.0


def test_static_loops_and_funcs_keep_their_assignments():
    @jr.func
    def twice(a):
        b = a * 2
        return b

    @jr.kernel
    def k() -> jr.i32:
        for i in jr.static(range(2)):
            t = i
        return twice(t)

    assert k() == 2


# ---- float into integer, constants that do not fit -------------------------------------------

def test_float_literal_into_an_integer_array_truncates_with_a_warning():
    @jr.kernel
    def k(o: ND(dtype=jr.i32, ndim=1)):
        for i in range(o.shape[0]):
            o[i] = -2.9

    o = np.zeros(2, np.int32)
    with pytest.warns(jr.CastWarning, match=r"may lose precision: i32 <- f32"):
        k(o)
    assert o.tolist() == [-2, -2]


def test_integral_float_literal_into_an_integer_converts_silently():
    @jr.kernel
    def k(o: ND(dtype=jr.i32, ndim=1)):
        for i in range(o.shape[0]):
            o[i] = 1.0

    o = np.zeros(2, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", jr.CastWarning)
        k(o)
    assert o.tolist() == [1, 1]


def test_float_added_into_an_integer_field_converts_the_value_first():
    f = jr.field(jr.i32, shape=())

    @jr.kernel
    def k():
        for i in range(10):
            f[None] += 1.7          # atomic add of int(1.7) == 1, as in Taichi

    with pytest.warns(jr.CastWarning):
        k()
    assert f[None] == 10


def test_float_added_into_an_integer_local_converts_the_value_first():
    @jr.kernel
    def k() -> jr.i32:
        v = -1
        v += 0.5                    # -1 + int(0.5), not int(-0.5)
        v -= 0.5
        return v

    with pytest.warns(jr.CastWarning):
        assert k() == -1


def test_rebinding_an_integer_local_to_a_float_truncates():
    @jr.kernel
    def k(x: jr.f32) -> jr.i32:
        v = 1
        v = x * 2.0
        return v

    with pytest.warns(jr.CastWarning, match=r"i32 <- f32"):
        assert k(-1.3) == -2


def test_nan_constant_into_an_integer_is_an_error():
    nan = float("nan")

    @jr.kernel
    def k(o: ND(dtype=jr.i32, ndim=1)):
        o[0] = nan

    assert "cannot store the float nan as i32" in compile_error(k, np.zeros(1, np.int32))


def test_return_value_converts_to_the_annotation_silently():
    @jr.kernel
    def lit() -> jr.i32:
        return 2.7

    @jr.kernel
    def run_time(x: jr.f32) -> jr.i32:
        return x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", jr.CastWarning)
        assert lit() == 2
        assert run_time(1.6) == 3
        assert run_time(-1.6) == -3


def test_constant_that_does_not_fit_its_target_is_an_error():
    @jr.kernel
    def k(o: ND(dtype=jr.i32, ndim=1)):
        for i in range(o.shape[0]):
            o[i] = 2 ** 40

    @jr.kernel
    def u(o: ND(dtype=jr.u8, ndim=1)):
        for i in range(o.shape[0]):
            o[i] = -1

    assert "the constant 1099511627776 does not fit i32" in compile_error(k, np.zeros(2, np.int32))
    assert "the constant -1 does not fit u8" in compile_error(u, np.zeros(2, np.uint8))


# ---- integer arithmetic rule -----------------------------------------------------------------

@jr.kernel
def shl(x: jr.i32, s: jr.i32) -> jr.i32:
    return x << s


@jr.kernel
def shr(x: jr.i32, s: jr.i32) -> jr.i32:
    return x >> s


@jr.kernel
def ipow(x: jr.i32, p: jr.i32) -> jr.i32:
    return x ** p


@jr.kernel
def floordiv(x: jr.i32, y: jr.i32) -> jr.i32:
    return x // y


@jr.kernel
def mod(x: jr.i32, y: jr.i32) -> jr.i32:
    return x % y


def test_run_time_shift_counts_are_taken_modulo_the_width():
    assert shl(1, 3) == 8 and shl(1, 31) == -2 ** 31
    assert shl(1, 40) == 1 << 8           # 40 mod 32
    assert shl(1, -1) == -2 ** 31         # -1 mod 32 = 31
    assert shr(-16, 2) == -4              # arithmetic on signed types
    assert shr(256, 40) == 1


def test_constant_shift_counts_outside_the_width_are_errors():
    @jr.kernel
    def k(x: jr.i32) -> jr.i32:
        return x << 40

    @jr.kernel
    def neg() -> jr.i32:
        return 1 << -1

    assert "shift count 40 is outside 0..31 for i32" in compile_error(k, 1)
    assert "negative shift count" in compile_error(neg)


@pytest.mark.parametrize("x,p", [(2, 10), (3, 0), (-3, 3), (7, 5), (2, 31), (2, 32), (5, 13),
                                 (1, -5), (-1, -3), (-1, -4), (2, -1), (0, -1), (0, 0), (-2, 1)])
def test_run_time_integer_power_is_exact_and_wraps(x, p):
    if p >= 0:   # exact, wrapped to 32 bits
        expect = int(np.array(x ** p % 2 ** 32).astype(np.uint32).view(np.int32))
    else:
        expect = {1: 1, -1: (-1) ** (-p)}.get(x, 0)   # trunc(1 / x**-p); 0 ** -k is 0
    assert ipow(x, p) == expect


def test_negative_constant_exponent_gives_a_float_as_in_python():
    @jr.kernel
    def k(x: jr.i32) -> jr.f32:
        return x ** -1

    @jr.kernel
    def truncated(x: jr.i32) -> jr.i32:
        return x ** -1

    assert k(4) == pytest.approx(0.25)
    assert truncated(4) == 0            # the f32 0.25 converted to the annotation


def test_division_rules():
    assert floordiv(7, 2) == 3 and floordiv(-7, 2) == -4 and mod(-7, 2) == 1
    assert floordiv(5, 0) == 0 and mod(5, 0) == 0                 # no trap, documented
    assert floordiv(-2 ** 31, -1) == -2 ** 31 and mod(-2 ** 31, -1) == 0   # wraps, no SIGFPE


def test_constant_expressions_follow_python_and_are_bounded():
    @jr.kernel
    def huge() -> jr.i32:
        return 2 ** 100000

    @jr.kernel
    def zero_div() -> jr.i32:
        return 1 // 0

    @jr.kernel
    def fits() -> jr.i64:
        return (1 << 40) + 2 ** 3

    assert "too large" in compile_error(huge)
    assert "by zero" in compile_error(zero_div)
    assert fits() == (1 << 40) + 8


# ---- frontend traps --------------------------------------------------------------------------

def test_generator_expressions_unroll_and_a_run_time_one_is_named():
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def k() -> jr.f32:
        return sum(x[i] for i in range(4))

    @jr.kernel
    def runtime(n: jr.i32) -> jr.f32:
        return sum(x[i] for i in range(n))

    x.from_numpy(np.arange(4, dtype=np.float32))
    assert k() == 6.0
    text = compile_error(runtime, 4)
    assert "comprehension" in text and "sum" not in text.split("\n")[0]


def test_value_of_a_func_without_return_is_named():
    x = jr.field(jr.f32, shape=(4,))

    @jr.func
    def store(v):
        x[0] = v

    @jr.kernel
    def k() -> jr.f32:
        return store(1.0) + 1.0

    assert "@jr.func 'store', which returns no value" in compile_error(k)


# ---- static unrolling and constant indices -----------------------------------------------------

@pytest.mark.no_gpu_builds     # ~45 s more for PTX + AMDGPU; the frontend is what it tests
def test_two_thousand_unrolled_statements_compile_and_run():
    n = 2000
    x = jr.field(jr.f32, shape=(n,))

    @jr.kernel
    def unrolled():
        for i in jr.static(range(n)):
            x[i] = x[i] * 2.0 + i

    unrolled()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(n, dtype=np.float32))


def test_constant_index_out_of_bounds_is_reported_not_written():
    x = jr.field(jr.f32, shape=(4,))
    y = jr.field(jr.f32, shape=(8,))

    @jr.kernel
    def k():
        x[5] = 1.0
        x[-1] = 2.0

    with pytest.raises(jr.KernelRuntimeError, match=r"index 5 out of bounds on axis 0"):
        k()
        jr.sync()                    # GPUs report a fault at the next synchronisation
    assert (x.to_numpy() == 0).all() and (y.to_numpy() == 0).all()


# ---- a Tape whose loop-bound data changes while it records ------------------------------------

def test_tape_refuses_a_kernel_that_writes_its_own_loop_bounds():
    x = jr.field(jr.f32, shape=(4,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def consume(cnt: ND(dtype=jr.i32, ndim=1)):
        for i in range(cnt.shape[0]):
            v = x[i]
            n = cnt[i]                     # traced through a local
            for _ in range(n):
                v = v * 1.5
            loss[None] += v
            cnt[i] = 0                     # the trip count the reverse pass would replay

    @jr.kernel
    def reads(cnt: ND(dtype=jr.i32, ndim=1)):
        for i in range(cnt.shape[0]):
            v = x[i]
            for _ in range(cnt[i]):
                v = v * 1.5
            loss[None] += v

    @jr.kernel
    def zero(cnt: ND(dtype=jr.i32, ndim=1)):
        for i in range(cnt.shape[0]):
            cnt[i] = 0

    x.fill(1.0)
    cnt = jr.ndarray(jr.i32, (4,))
    cnt.fill(2)
    with pytest.raises(jr.AutodiffError, match=r"consume reads argument 'cnt' in a loop bound"):
        with jr.ad.Tape(loss=loss):
            consume(cnt)
    cnt.fill(2)
    with pytest.raises(jr.AutodiffError, match=r"reads reads argument 'cnt'.*zero"):
        with jr.ad.Tape(loss=loss):
            reads(cnt)
            zero(cnt)
    cnt.fill(2)
    with jr.ad.Tape(loss=loss):      # written before it is read: the counts stay as recorded
        zero(cnt)
        reads(cnt)
    np.testing.assert_allclose(x.grad.to_numpy(), 1.0)
    cnt.fill(2)
    with jr.ad.Tape(loss=loss):
        reads(cnt)
    np.testing.assert_allclose(x.grad.to_numpy(), 2.25)
