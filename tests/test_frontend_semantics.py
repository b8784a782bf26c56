"""Frontend semantics that used to give silently wrong values (issues 29 and 30): `int`/`float`
follow default_ip/default_fp, Taichi's integer promotion, chained comparisons evaluate each
operand once, decorators under `@jr.kernel`, narrowing accumulations warn, `and`/`or` give an
operand, func parameters and returns convert to their annotations, reads before writes in
self-assignments, kernel parameter defaults, funcs with several returns."""
import jitrt as jr


def reinit(arch, **options):
    return jr.init(arch=arch, offline_cache=False, enable_fallback=False, **options)


# ---- int and float follow default_ip / default_fp -------------------------------------------

def test_float_and_int_return_annotations_follow_the_defaults(arch):
    reinit(arch, default_fp=jr.f64, default_ip=jr.i64)

    @jr.kernel
    def third() -> float:
        return 1 / 3

    @jr.kernel
    def past_i32(a: int) -> int:
        return a + 1

    @jr.kernel
    def both(x: float) -> tuple[float, int]:
        return x * 2, 2**31

    assert third() == 1 / 3                      # was 0.3333333432674408 (an f32)
    assert past_i32(2**31 - 1) == 2**31          # was -2147483648 (an i32)
    assert both(1 / 3) == (2 / 3, 2**31)


def test_int_vectors_follow_default_ip(arch):
    reinit(arch, default_ip=jr.i64)

    @jr.kernel
    def wide() -> jr.i64:
        v = jr.math.ivec2(2**31 - 1, 0)
        return v[0] + 1

    @jr.kernel
    def unsigned() -> jr.u64:
        u = jr.math.uvec3(0, 1, 2)
        return u[0] - 1

    @jr.kernel
    def param(p: jr.math.ivec2) -> jr.i64:
        return p[0] * p[1]

    assert wide() == 2**31                       # was -2147483648: ivec2 was always i32
    assert unsigned() == 2**64 - 1               # uvec3 is u64 when default_ip is 64 bits
    assert param((2**20, 2**20)) == 2**40
    assert jr.math.ivec2.field(shape=2).dtype == jr.i64
    reinit(arch)
    assert jr.math.ivec2.field(shape=2).dtype == jr.i32
    assert jr.math.uvec2.field(shape=2).dtype == jr.u32


# ---- integer promotion: Taichi's rule, the same for arithmetic and comparisons --------------

def test_mixed_signedness_promotes_to_the_unsigned_type_of_one_width():
    @jr.kernel
    def cmp64(u: jr.u64, s: jr.i64) -> jr.i32:
        return u > s

    @jr.kernel
    def add64(u: jr.u64, s: jr.i64) -> jr.u64:
        return u + s

    @jr.kernel
    def cmp32(u: jr.u32, s: jr.i32) -> jr.i32:
        return u < s

    @jr.kernel
    def add32(u: jr.u32, s: jr.i32) -> jr.u32:
        return u + s

    @jr.kernel
    def narrow(u: jr.u8, s: jr.i32) -> jr.i32:
        return u < s

    # u64 with i64 computes in u64, so -1 is 2**64 - 1 on both paths
    assert cmp64(2**63, -1) == 0
    assert add64(2**63, -1) == 2**63 - 1
    assert cmp32(5, -1) == 1                    # was 0 (both widened to i64)
    assert add32(5, -7) == 2**32 - 2
    assert narrow(200, -1) == 0                 # the wider signed type wins


def test_promotion_table():
    from jitrt.dtypes import promote
    assert promote(jr.i32, jr.u32) is jr.u32
    assert promote(jr.u64, jr.i64) is jr.u64
    assert promote(jr.u8, jr.i32) is jr.i32
    assert promote(jr.i64, jr.u32) is jr.i64
    assert promote(jr.f32, jr.i64) is jr.f32
    assert promote(jr.f32, jr.f64) is jr.f64
