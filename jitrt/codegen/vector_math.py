"""Vector math: f32 sin, cos, tan, exp, log and pow and f64 sin, cos, tan, exp and log as
straight-line LLVM IR for the CPU.

Stage: codegen. `define(module, fn, ty)` adds `jitrt_vmath_<fn>_f32` (or `_f64`) to the module
(internal and alwaysinline, so it is inlined where called and vanishes when unused) and
returns it; `provides(fn, ty)` says whether there is one. The CPU target
(`targets.Target.math_function`) uses these instead of `llvm.<fn>.f32` / `.f64`, which LLVM
lowers to a call of libm's `sinf` / `sin` etc. per element, so a loop with math never
vectorized. Every body here is branch-free (selects, integer tricks on the bits, no loops, no
calls but the intrinsics `llvm.fabs`, `llvm.floor` and `llvm.roundeven`, which are
instructions on x86-64 with SSE4.1 and on AArch64; the f64 bodies use only `fabs`), so the
loop vectorizer widens a loop that calls it. No FMA: every operation is rounded on its own,
so results are the same on every x86-64 whatever the vector width. Nothing is cached beyond
the module.

f32 methods (errors against numpy's float64 functions rounded to f32 are checked in
tests/test_vector_math.py; docs/performance.md records the measured figures):
- sin, cos, tan: x = k pi/2 + r with k = roundeven(x 2/pi), in f64, pi/2 in two parts (a
  27-bit head, so k * head is exact for |k| < 2^26, and the rounded rest): accurate for
  |x| < 2^26 pi/2 ~ 1.05e8. Beyond that the reduction's absolute error grows as about
  |x| 2^-53 (1e-4 at |x| = 1e12); there is no Payne-Hanek reduction. For |x| >= 2^48
  (TRIG_HUGE) sin and tan return a zero of x's sign and cos returns 1. r is rounded to f32
  and sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) (S, C of degree 2); k mod 4
  picks one of them and the sign. tan evaluates the same polynomials in f64 and divides
  once. inf and NaN give NaN.
- exp: x clamped to [-104, 89] (NaN kept), x = k ln2 + r with |r| <= ln2/2 in f32 (ln2 in
  two parts, the first of 16 bits so k ln2_hi is exact), e^r = 1 + r + r^2 E(r) (E of
  degree 4), scaled by 2^k in two steps of 2^(k/2) so that overflow gives inf and small
  results round once into the subnormals.
- log: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23 first),
  log(1 + f) = f - f^2/2 + f^3 L(f) with f = m - 1 (L of degree 7), plus e ln2 in two
  parts; 0 -> -inf, inf -> inf, negative or NaN -> NaN.
- pow: exp(y log|x|) in f64 (the product reaches ~100 in magnitude, where f32 would lose
  several ulp): log m = 2s + s z P(z), s = f / (2 + f), z = s^2 (P of degree 3), exp
  reduced as above with Q of degree 5, rounded to f32 once; C's special cases as in
  portable_math (x = 1 or y = 0 give 1, a negative x needs an integral y and an odd y keeps
  its sign, pow(-1, +-inf) = 1).
The polynomials are jitrt's own minimax fits (Remez exchange on the relative error of the
whole function over the reduced interval; S's coefficients were rounded to f32 one at a time,
refitting the later ones, the other f32 sets rounded as fitted). Relative errors with the
stored coefficients: S 4.0e-9, C 9.8e-10 on |r| <= pi/4; E 3.8e-9 on |r| <= ln2/2; L 6.1e-9;
P 7.9e-12; Q 5.3e-11 (half an ulp of f32 is 3e-8 to 6e-8 relative).

f64 methods (FUNCTIONS64; errors against numpy's 80-bit long double functions are checked in
the tests): the same reductions, with the rounding errors that matter carried as a second
f64 (exact two-sums, and Dekker's product where one is needed, as there is no FMA):
- sin, cos, tan: k as above (by the 1.5 2^52 trick), pi/2 in four parts (PIO2_F64), the first
  three of 27 bits so that k times each is exact for |k| <= 2^26, subtracted with exact
  two-sums: r = rh + rl to ~2^-115, which keeps an ulp where x is within 2^-60 of a multiple
  of pi/2 (the closest double below 1e8 to one is 29 pi/2 rounded). Accurate for
  |x| <= 2^26 pi/2 ~ 1.05e8; beyond, k times the head is rounded and the absolute error grows
  as about |x| 2^-53 (1e-7 at 1e9, 0.016 at 2^47); TRIG_HUGE, zeros, inf and NaN as in f32.
  sin r = rh + rh z S(z) + rl (1 - z/2), cos r = 1 - z/2 + z^2 C(z) - rh rl with z = rh^2
  and the rounding error of 1 - z/2 kept (S, C of degree 5). tan divides the two, kept as
  head + tail, and corrects the quotient q by the residual (n - q d) / d, whose main part
  q d_head is an exact product.
- exp: x clamped to [-746, 710], ln2 in two parts (a 42-bit head: k ln2_hi exact for
  |k| < 2^11), the rounding error of r carried; e^r = 1 + r + r^2 E(r) (E of degree 10)
  with 1 + r kept exact; scaled by 2^k in two steps, as in f32.
- log: m and f as in f32 (subnormals scaled by 2^54), s = f / (2 + f), z = s^2:
  log(1 + f) = 2 atanh s = 2s + s z Q(z) (Q of degree 6), written as
  f - (f^2/2 - s (f^2/2 + z Q(z))) since 2s = f - s f, so that the exact f leads; the
  rounding error of e ln2_hi + f is kept.
- pow (body_pow64; not in FUNCTIONS64, so not used: see there): log|x| to ~2^-64 as
  hi + lo: m taken relative to the nearest b of 2^(j/8), j = -4..4 (selects between
  constants), log m = log b + 2 atanh s with s = (m - b) / (m + b) as hi + lo and
  2 atanh s = 2s + s z T(z) (Taylor, degree 4: |s| <= 0.0217); y times log's head as an
  exact product, then e^(hi + lo) by exp's path; C's special cases as in f32.
The f64 polynomials are jitrt's own minimax fits too (Remez exchange in 60-digit decimal
arithmetic, weighted by the relative error of the whole function, the coefficients rounded
to f64 one at a time, refitting the later ones). Errors with the stored coefficients,
relative to the function: S 3.7e-18, C 5.7e-20, E 7.2e-19, Q 1.3e-18 (half an ulp of f64 is
5.6e-17 to 1.1e-16 relative).
"""
from __future__ import annotations

import math

from llvmlite import ir

from .declare import declare

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)
FUNCTIONS = ("sin", "cos", "tan", "exp", "log", "pow")

# sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4
SIN = (-0.166666552, 0.00833218824, -0.000195180852)
COS = (0.041666653, -0.00138876506, 2.44633229e-05)
# pi/2 = PIO2_1 + PIO2_2: a 27-bit head (k PIO2_1 exact for |k| < 2^26) and the rounded rest
# (their sum is off by 1.6e-26)
PIO2_1, PIO2_2 = float.fromhex("0x1.921fb54p+0"), float.fromhex("0x1.10b4611a62633p-30")
TRIG_HUGE = 2.0 ** 48          # from here on the reduction's error could pass ~0.03
MAGIC64 = 1.5 * 2.0 ** 52     # v + MAGIC64 rounds v to an integer, kept in the low mantissa
MAGIC32 = 1.5 * 2.0 ** 23     # bits (|v| < 2^51); the same in f32 (|v| < 2^22)
# e^r = 1 + r + r^2 E(r) on |r| <= ln2/2; ln2 = LN2_HI + LN2_LO (16-bit head)
EXP = (0.49999994, 0.166665196, 0.0416684076, 0.00836891402, 0.00138141913)
LN2_HI, LN2_LO = 0.693145751953125, 1.42860677e-06
# log(1 + f) = f - f^2/2 + f^3 L(f) on sqrt(1/2) - 1 <= f < sqrt(2) - 1
LOG = (0.333333313, -0.250008225, 0.200012341, -0.166232988, 0.142015532, -0.131605819,
       0.127633289, -0.0763565749)
# f64 pieces of pow: log m = 2s + s z P(z), z = s^2 <= 0.0295; e^r = 1 + r + r^2 Q(r)
LOG64 = (0.66666665754211163, 0.40000339851271782, 0.28535986673526353, 0.23618725243153671)
EXP64 = (0.50000000687856117, 0.16666665855436044, 0.04166629087571827,
         0.0083334989345047739, 0.001394496599497759, 0.00019790038691894544)

# f64. pow has a body (body_pow64, within 1.25 ulp) but is left out: 1.14x libm's speed with
# 4 lanes (AVX2), 0.58x with 2 (SSE); docs/performance.md has the figures
FUNCTIONS64 = ("sin", "cos", "tan", "exp", "log")
# sin r = r + r^3 SIN_F64(r^2), cos r = 1 - r^2/2 + r^4 COS_F64(r^2), |r| <= pi/4
SIN_F64 = (-0.1666666666666663, 0.00833333333332184, -0.00019841269829358528,
           2.7557313538514234e-06, -2.505073438925756e-08, 1.589543328934976e-10)
COS_F64 = (0.041666666666666595, -0.0013888888888873338, 2.4801587288997475e-05,
           -2.7557314215294703e-07, 2.0875705114056235e-09, -1.135873271084822e-11)
# pi/2 in four parts, the first three of at most 27 significant bits (k times each is exact
# for |k| <= 2^26), the last rounded: their sum is pi/2 to 2.5e-43 (2^-141.8)
PIO2_F64 = (float.fromhex("0x1.921fb54p+0"), float.fromhex("0x1.10b461p-30"),
            float.fromhex("0x1.a626330p-58"), float.fromhex("0x1.45c06e0e68948p-86"))
# e^r = 1 + r + r^2 EXP_F64(r) on |r| <= ln2/2; ln2 = LN2_HI_F64 (42 bits) + LN2_LO_F64
EXP_F64 = (0.5, 0.16666666666666682, 0.041666666666666095, 0.008333333333317075,
           0.0013888888889114974, 0.00019841269896297102, 2.480158692731193e-05,
           2.7557234937829373e-06, 2.7557581562430537e-07, 2.511201313095423e-08,
           2.082665786523339e-09)
LN2_HI_F64 = float.fromhex("0x1.62e42fefa38p-1")
LN2_LO_F64 = float.fromhex("0x1.ef35793c7673p-45")
# log(1 + f) = 2s + s z LOG_F64(z), s = f / (2 + f), z = s^2 <= 0.0295
LOG_F64 = (0.6666666666666735, 0.39999999999409136, 0.2857142874378151, 0.2222219841461056,
           0.18183573331261288, 0.15313801562455187, 0.147986188973571)

# pow's log: b_j = 2^(j/8) rounded (j = -4..4), log b_j as hi + lo, the edges 2^((2j+1)/16)
# between them, and 2 atanh(s) = 2s + s z POW_ATANH(z) (Taylor: 2 / (2n + 3))
POW_B = tuple(float.fromhex(h) for h in (
    "0x1.6a09e667f3bcdp-1", "0x1.8ace5422aa0dbp-1", "0x1.ae89f995ad3adp-1",
    "0x1.d5818dcfba487p-1", "0x1p+0", "0x1.172b83c7d517bp+0", "0x1.306fe0a31b715p+0",
    "0x1.4bfdad5362a27p+0", "0x1.6a09e667f3bcdp+0"))
POW_LOG_B = tuple((float.fromhex(h), float.fromhex(lo)) for h, lo in (
    ("-0x1.62e42fefa39eep-2", "0x1.716fdfdbc882ep-60"),
    ("-0x1.0a2b23f3bab74p-2", "-0x1.5751ada17658p-56"),
    ("-0x1.62e42fefa39f1p-3", "0x1.1be94b9b38e2ep-60"),
    ("-0x1.62e42fefa39fp-4", "-0x1.fec65b690debdp-58"), ("0x0p+0", "0x0p+0"),
    ("0x1.62e42fefa39f1p-4", "0x1.c6dfce592b4bap-59"),
    ("0x1.62e42fefa39eep-3", "0x1.43cf36d08a40cp-64"),
    ("0x1.0a2b23f3bab73p-2", "0x1.baf64d5d7033bp-59"),
    ("0x1.62e42fefa39fp-2", "0x1.c2e0e1b1548c2p-56")))
POW_EDGES = tuple(float.fromhex(h) for h in (
    "0x1.7a11473eb0187p-1", "0x1.9c49182a3f09p-1", "0x1.c199bdd85529cp-1",
    "0x1.ea4afa2a490dap-1", "0x1.0b5586cf9890fp+0", "0x1.2387a6e756238p+0",
    "0x1.3dea64c123422p+0", "0x1.5ab07dd485429p+0"))
POW_ATANH = (2 / 3, 2 / 5, 2 / 7, 2 / 9, 2 / 11)


def f32(v: float) -> ir.Constant:
    return ir.Constant(F32, v)


def f64(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def horner(b: ir.IRBuilder, x: ir.Value, coefs: tuple[float, ...]) -> ir.Value:
    """coefs[0] + x (coefs[1] + x (...)) in the type of x."""
    const = f32 if x.type == F32 else f64
    acc: ir.Value = const(coefs[-1])
    for k in reversed(coefs[:-1]):
        acc = b.fadd(const(k), b.fmul(x, acc))
    return acc


def estrin(b: ir.IRBuilder, x: ir.Value, coefs: tuple[float, ...]) -> ir.Value:
    """The polynomial of horner, evaluated as pairs c_i + c_(i+1) x combined with x^2, x^4...:
    the same operations but a shorter chain of dependent ones."""
    const = f32 if x.type == F32 else f64
    terms: list[ir.Value] = [const(c) for c in coefs]
    terms = [b.fadd(terms[i], b.fmul(terms[i + 1], x)) if i + 1 < len(terms) else terms[i]
             for i in range(0, len(terms), 2)]
    power = x
    while len(terms) > 1:
        power = b.fmul(power, power)
        terms = [b.fadd(terms[i], b.fmul(terms[i + 1], power)) if i + 1 < len(terms)
                 else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def unary(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """`llvm.<name>` of x's type (fabs, floor, roundeven: instructions, which the vectorizer
    widens)."""
    suffix = "f32" if x.type == F32 else "f64"
    return b.call(declare(b.module, f"llvm.{name}.{suffix}", x.type, (x.type,)), [x])


def clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    """x limited to [lo, hi]; NaN stays NaN."""
    const = f32 if x.type == F32 else f64
    x = b.select(b.fcmp_ordered(">", x, const(hi)), const(hi), x)
    return b.select(b.fcmp_ordered("<", x, const(lo)), const(lo), x)


def flip_sign(b: ir.IRBuilder, v: ir.Value, flip: ir.Value) -> ir.Value:
    """v with its sign bit xored with bit 1 of the i32 `flip`."""
    bit = b.shl(b.and_(flip, ir.Constant(I32, 2)), ir.Constant(I32, 30))
    return b.bitcast(b.xor(b.bitcast(v, I32), bit), F32)


# ---- sin, cos, tan ------------------------------------------------------------------------
def reduce_quadrant(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(r, q): x = k pi/2 + r in f64 with |r| <= pi/4 (while |x| < TRIG_HUGE), q = k as an
    i32 (k mod 4 in its low two bits)."""
    xd = b.fpext(x, F64)
    v = b.fmul(xd, f64(2.0 / math.pi))
    k = unary(b, "roundeven", v)
    r = b.fsub(b.fsub(xd, b.fmul(k, f64(PIO2_1))), b.fmul(k, f64(PIO2_2)))
    # k's low bits, off the path to r: adding 1.5 2^52 rounds v as roundeven does and leaves
    # the integer in the low bits of the mantissa (|v| < 2^51)
    q = b.trunc(b.bitcast(b.fadd(v, f64(MAGIC64)), I64), I32)
    return r, q


def sin_cos(b: ir.IRBuilder, r: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(sin r, cos r) for |r| <= pi/4, evaluated in r's type."""
    const = f32 if r.type == F32 else f64
    z = b.fmul(r, r)
    s = b.fadd(r, b.fmul(b.fmul(r, z), horner(b, z, SIN)))
    c = b.fadd(const(1.0), b.fadd(b.fmul(z, const(-0.5)),
                                   b.fmul(b.fmul(z, z), horner(b, z, COS))))
    return s, c


def body_trig(b: ir.IRBuilder, x: ir.Value, which: str) -> ir.Value:
    rd, q = reduce_quadrant(b, x)
    odd = b.trunc(q, ir.IntType(1))
    if which == "tan":                               # in f64: one rounding of the ratio
        s, c = sin_cos(b, rd)
        num, den = b.select(odd, b.fneg(c), s), b.select(odd, s, c)
        out = b.fptrunc(b.fdiv(num, den), F32)
    else:
        s, c = sin_cos(b, b.fptrunc(rd, F32))
        if which == "sin":                           # s, c, -s, -c
            out = flip_sign(b, b.select(odd, c, s), q)
        else:                                        # c, -s, -c, s
            out = flip_sign(b, b.select(odd, s, c), b.add(q, ir.Constant(I32, 1)))
    # |x| >= TRIG_HUGE: sin and tan give x * 0 (a zero of x's sign), cos gives 1 + x * 0
    # (1); inf and NaN give NaN either way. So does x = +-0, whose sign the reduction loses
    # (-0 - -0 is +0). Decided from x, off the reduction's path.
    zero = b.fmul(x, f32(0.0))
    ax = unary(b, "fabs", x)
    edge = b.or_(b.fcmp_ordered(">=", ax, f32(TRIG_HUGE)), b.fcmp_ordered("==", ax, f32(0.0)))
    return b.select(edge, b.fadd(zero, f32(1.0)) if which == "cos" else zero, out)


# ---- exp, log -----------------------------------------------------------------------------
def pow2_f32(b: ir.IRBuilder, j: ir.Value) -> ir.Value:
    """2^j for an i32 j in [-126, 127]."""
    return b.bitcast(b.shl(b.add(j, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def body_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    xc = clamp(b, x, -104.0, 89.0)
    t = b.fadd(b.fmul(xc, f32(1.0 / math.log(2.0))), f32(MAGIC32))
    k = b.fsub(t, f32(MAGIC32))
    ki = b.sub(b.bitcast(t, I32), b.bitcast(f32(MAGIC32), I32))     # k in [-150, 128]
    r = b.fsub(b.fsub(xc, b.fmul(k, f32(LN2_HI))), b.fmul(k, f32(LN2_LO)))
    p = b.fadd(f32(1.0), b.fadd(r, b.fmul(b.fmul(r, r), horner(b, r, EXP))))
    k1 = b.ashr(ki, ir.Constant(I32, 1))
    return b.fmul(b.fmul(p, pow2_f32(b, k1)), pow2_f32(b, b.sub(ki, k1)))


def split_f32(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(f, e) with x = (1 + f) 2^e, 1 + f in [sqrt(1/2), sqrt(2)), e an f32, for x > 0
    (subnormals included)."""
    tiny = b.fcmp_ordered("<", x, f32(2.0 ** -126))
    bits = b.bitcast(b.select(tiny, b.fmul(x, f32(2.0 ** 23)), x), I32)
    e = b.sub(b.lshr(bits, ir.Constant(I32, 23)),
              b.select(tiny, ir.Constant(I32, 127 + 23), ir.Constant(I32, 127)))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, (1 << 23) - 1)),
                        ir.Constant(I32, 127 << 23)), F32)
    big = b.fcmp_ordered(">", m, f32(math.sqrt(2.0)))
    m = b.select(big, b.fmul(m, f32(0.5)), m)
    e = b.add(e, b.zext(big, I32))
    return b.fsub(m, f32(1.0)), b.sitofp(e, F32)


def log_specials(b: ir.IRBuilder, x: ir.Value, out: ir.Value) -> ir.Value:
    """C's log at inf, 0 and below 0 (and NaN), in x's type."""
    const = f32 if x.type == F32 else f64
    out = b.select(b.fcmp_ordered("==", x, const(math.inf)), x, out)
    out = b.select(b.fcmp_ordered("==", x, const(0.0)), const(-math.inf), out)
    return b.select(b.fcmp_unordered("<", x, const(0.0)), const(math.nan), out)


def body_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    f, e = split_f32(b, x)
    f2 = b.fmul(f, f)
    tail = b.fsub(b.fmul(b.fmul(f, f2), horner(b, f, LOG)), b.fmul(f2, f32(0.5)))
    out = b.fadd(b.fmul(e, f32(LN2_HI)), b.fadd(f, b.fadd(b.fmul(e, f32(LN2_LO)), tail)))
    return log_specials(b, x, out)


# ---- pow ----------------------------------------------------------------------------------
def log64(b: ir.IRBuilder, xd: ir.Value) -> ir.Value:
    """log of an f64 that came from an f32 (never subnormal), to about 1e-11 relative."""
    bits = b.bitcast(xd, I64)
    e = b.sub(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 1023))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I64, (1 << 52) - 1)),
                        ir.Constant(I64, 1023 << 52)), F64)
    big = b.fcmp_ordered(">", m, f64(math.sqrt(2.0)))
    m = b.select(big, b.fmul(m, f64(0.5)), m)
    e = b.sitofp(b.add(e, b.zext(big, I64)), F64)
    f = b.fsub(m, f64(1.0))
    s = b.fdiv(f, b.fadd(f64(2.0), f))
    z = b.fmul(s, s)
    log_m = b.fadd(b.fmul(s, f64(2.0)), b.fmul(b.fmul(s, z), horner(b, z, LOG64)))
    return log_specials(b, xd, b.fadd(b.fmul(e, f64(math.log(2.0))), log_m))


def exp64(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """e^v in f64 to about 1e-10 relative (plenty before rounding to f32), v clamped to
    [-200, 200]."""
    vc = clamp(b, v, -200.0, 200.0)
    t = b.fadd(b.fmul(vc, f64(1.0 / math.log(2.0))), f64(MAGIC64))
    k = b.fsub(t, f64(MAGIC64))
    ki = b.sub(b.bitcast(t, I64), b.bitcast(f64(MAGIC64), I64))
    r = b.fsub(vc, b.fmul(k, f64(math.log(2.0))))      # |k ln2| <= 200: error ~2e-14
    p = b.fadd(f64(1.0), b.fadd(r, b.fmul(b.fmul(r, r), horner(b, r, EXP64))))
    scale = b.bitcast(b.shl(b.add(ki, ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)
    return b.fmul(p, scale)


def body_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    ax = unary(b, "fabs", x)
    out = b.fptrunc(exp64(b, b.fmul(b.fpext(y, F64), log64(b, b.fpext(ax, F64)))), F32)
    integral = b.fcmp_ordered("==", unary(b, "floor", y), y)
    half = b.fmul(y, f32(0.5))
    odd = b.and_(integral, b.fcmp_ordered("!=", unary(b, "floor", half), half))
    negative = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))    # -0 included
    out = b.select(b.and_(negative, odd), b.fneg(out), out)
    finite_negative = b.and_(b.fcmp_ordered("<", x, f32(0.0)),
                             b.fcmp_ordered(">", x, f32(-math.inf)))
    out = b.select(b.and_(finite_negative, b.not_(integral)), f32(math.nan), out)
    one = b.or_(b.fcmp_ordered("==", x, f32(1.0)),
                b.and_(b.fcmp_ordered("==", ax, f32(1.0)),
                       b.fcmp_ordered("==", unary(b, "fabs", y), f32(math.inf))))
    out = b.select(one, f32(1.0), out)
    return b.select(b.fcmp_ordered("==", y, f32(0.0)), f32(1.0), out)


# ---- f64: sin, cos, tan, exp, log ---------------------------------------------------------
def two_sum(b: ir.IRBuilder, u: ir.Value, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(s, e): s = u + v rounded and e its exact rounding error (u + v = s + e), for any
    u, v (six operations, no assumption on their sizes)."""
    s = b.fadd(u, v)
    v_part = b.fsub(s, u)
    return s, b.fadd(b.fsub(u, b.fsub(s, v_part)), b.fsub(v, v_part))


def flip_sign64(b: ir.IRBuilder, v: ir.Value, flip: ir.Value) -> ir.Value:
    """v with its sign bit xored with bit 1 of the i32 `flip`."""
    bit = b.shl(b.zext(b.and_(flip, ir.Constant(I32, 2)), I64), ir.Constant(I64, 62))
    return b.bitcast(b.xor(b.bitcast(v, I64), bit), F64)


def reduce_quadrant64(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(rh, rl, q): x = k pi/2 + rh + rl with |rh| <= pi/4 and rl below half an ulp of rh,
    q = k as an i32 (k mod 4 in its low two bits). rh + rl is x - k pi/2 to about 2^-115
    while |k| <= 2^26 (|x| up to 2^26 pi/2 ~ 1.05e8); past that, k PIO2_F64[0] is rounded."""
    v = b.fmul(x, f64(2.0 / math.pi))
    t = b.fadd(v, f64(MAGIC64))                 # roundeven(v) in the low mantissa bits
    k = b.fsub(t, f64(MAGIC64))
    q = b.trunc(b.bitcast(t, I64), I32)
    p1, p2, p3, p4 = (f64(-c) for c in PIO2_F64)
    r1 = b.fadd(x, b.fmul(k, p1))               # exact: k p1 is, and x is near it
    r2, e2 = two_sum(b, r1, b.fmul(k, p2))      # k p2 and k p3 are exact too
    r3, e3 = two_sum(b, r2, b.fmul(k, p3))
    tail = b.fadd(b.fadd(e2, e3), b.fmul(k, p4))
    rh = b.fadd(r3, tail)                       # |r3| >= |tail|: the error is tail's low part
    return rh, b.fsub(tail, b.fsub(rh, r3)), q


def sin_cos64(b: ir.IRBuilder, rh: ir.Value, rl: ir.Value
              ) -> tuple[tuple[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]:
    """sin and cos of rh + rl for |rh| <= pi/4 (rl a correction below half an ulp of rh),
    each as an unevaluated sum (head, tail) with |tail| < |head| / 8."""
    z = b.fmul(rh, rh)
    # sin = rh + rh z S(z) + rl (1 - z/2)
    s_tail = b.fadd(rl, b.fmul(z, b.fsub(b.fmul(rh, estrin(b, z, SIN_F64)),
                                         b.fmul(rl, f64(0.5)))))
    # cos = 1 - z/2 + z^2 C(z) - rh rl, with the rounding error of 1 - z/2 carried
    hz = b.fmul(z, f64(0.5))
    w = b.fsub(f64(1.0), hz)
    lost = b.fsub(b.fsub(f64(1.0), w), hz)      # exact: 1 >= hz
    rest = b.fsub(b.fmul(b.fmul(z, z), estrin(b, z, COS_F64)), b.fmul(rh, rl))
    return (rh, s_tail), (w, b.fadd(lost, rest))


def split27(b: ir.IRBuilder, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(hi, lo) = v with hi of at most 26 significant bits, so that products of two his and
    of hi and lo are exact (Veltkamp's splitting; |v| < 2^995)."""
    c = b.fmul(v, f64(2.0 ** 27 + 1))
    hi = b.fsub(c, b.fsub(c, v))
    return hi, b.fsub(v, hi)


def two_product(b: ir.IRBuilder, u: ir.Value, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(p, e): p = u v rounded and e its rounding error (Dekker's product, no FMA)."""
    p = b.fmul(u, v)
    (uh, ul), (vh, vl) = split27(b, u), split27(b, v)
    e = b.fadd(b.fadd(b.fadd(b.fsub(b.fmul(uh, vh), p), b.fmul(uh, vl)), b.fmul(ul, vh)),
               b.fmul(ul, vl))
    return p, e


def divide64(b: ir.IRBuilder, num: tuple[ir.Value, ir.Value],
             den: tuple[ir.Value, ir.Value]) -> ir.Value:
    """(nh + nl) / (dh + dl) to about half an ulp: the rounded quotient q, corrected by the
    residual (nh + nl - q (dh + dl)) / d, whose main part q dh is an exact product."""
    (nh, nl), (dh, dl) = num, den
    inv = b.fdiv(f64(1.0), b.fadd(dh, dl))
    q = b.fmul(b.fadd(nh, nl), inv)
    p, p_err = two_product(b, q, dh)
    residual = b.fadd(b.fsub(b.fsub(nh, p), p_err), b.fsub(nl, b.fmul(q, dl)))
    return b.fadd(q, b.fmul(residual, inv))


def body_trig64(b: ir.IRBuilder, x: ir.Value, which: str) -> ir.Value:
    rh, rl, q = reduce_quadrant64(b, x)
    odd = b.trunc(q, ir.IntType(1))
    (sh, sl), (ch, cl) = sin_cos64(b, rh, rl)
    if which == "tan":                               # s / c or -c / s
        num = (b.select(odd, b.fneg(ch), sh), b.select(odd, b.fneg(cl), sl))
        out = divide64(b, num, (b.select(odd, sh, ch), b.select(odd, sl, cl)))
    elif which == "sin":                             # s, c, -s, -c
        out = flip_sign64(b, b.select(odd, b.fadd(ch, cl), b.fadd(sh, sl)), q)
    else:                                            # c, -s, -c, s
        out = flip_sign64(b, b.select(odd, b.fadd(sh, sl), b.fadd(ch, cl)),
                          b.add(q, ir.Constant(I32, 1)))
    # as in f32: |x| >= TRIG_HUGE and +-0 give x * 0 (sin, tan) or 1 + x * 0 (cos)
    zero = b.fmul(x, f64(0.0))
    ax = unary(b, "fabs", x)
    edge = b.or_(b.fcmp_ordered(">=", ax, f64(TRIG_HUGE)), b.fcmp_ordered("==", ax, f64(0.0)))
    return b.select(edge, b.fadd(zero, f64(1.0)) if which == "cos" else zero, out)


def pow2_f64(b: ir.IRBuilder, j: ir.Value) -> ir.Value:
    """2^j for an i64 j in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(j, ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)


def exp_f64(b: ir.IRBuilder, v: ir.Value, v_lo: ir.Value) -> ir.Value:
    """e^(v + v_lo) for an f64 v and a correction v_lo below an ulp of v (dropped where v is
    past the range, which is clamped to [-746, 710] so that large v give 0 or inf)."""
    vc = clamp(b, v, -746.0, 710.0)
    t = b.fadd(b.fmul(vc, f64(1.0 / math.log(2.0))), f64(MAGIC64))
    k = b.fsub(t, f64(MAGIC64))
    ki = b.sub(b.bitcast(t, I64), b.bitcast(f64(MAGIC64), I64))    # in [-1076, 1025]
    r_hi = b.fsub(vc, b.fmul(k, f64(LN2_HI_F64)))                    # exact
    k_lo = b.fsub(b.fmul(k, f64(LN2_LO_F64)),
                  b.select(b.fcmp_ordered("==", vc, v), v_lo, f64(0.0)))
    r = b.fsub(r_hi, k_lo)
    r_lo = b.fsub(b.fsub(r_hi, r), k_lo)                             # r + r_lo = r_hi - k_lo
    one_r = b.fadd(f64(1.0), r)
    one_r_err = b.fadd(b.fsub(f64(1.0), one_r), r)                   # exact: 1 >= |r|
    tail = b.fadd(b.fmul(b.fmul(r, r), estrin(b, r, EXP_F64)), r_lo)
    p = b.fadd(one_r, b.fadd(one_r_err, tail))
    k1 = b.ashr(ki, ir.Constant(I64, 1))
    return b.fmul(b.fmul(p, pow2_f64(b, k1)), pow2_f64(b, b.sub(ki, k1)))


def split_f64(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(m, e): x = m 2^e with m in [sqrt(1/2), sqrt(2)], e an f64, for a positive finite x
    (subnormals included)."""
    tiny = b.fcmp_ordered("<", x, f64(2.0 ** -1022))
    bits = b.bitcast(b.select(tiny, b.fmul(x, f64(2.0 ** 54)), x), I64)
    e = b.sub(b.lshr(bits, ir.Constant(I64, 52)),
              b.select(tiny, ir.Constant(I64, 1023 + 54), ir.Constant(I64, 1023)))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I64, (1 << 52) - 1)),
                        ir.Constant(I64, 1023 << 52)), F64)
    big = b.fcmp_ordered(">", m, f64(math.sqrt(2.0)))
    return b.select(big, b.fmul(m, f64(0.5)), m), b.sitofp(b.add(e, b.zext(big, I64)), F64)


def body_log64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    m, ef = split_f64(b, x)
    f = b.fsub(m, f64(1.0))                                          # exact
    # log(1 + f) = 2 atanh s = 2s + s z Q(z), s = f / (2 + f), z = s^2; as 2s = f - s f,
    # that is f - (f^2/2 - s (f^2/2 + z Q(z))): f exact, the rest small
    s = b.fdiv(f, b.fadd(f64(2.0), f))
    z = b.fmul(s, s)
    hfsq = b.fmul(b.fmul(f, f), f64(0.5))
    corr = b.fadd(b.fmul(s, b.fadd(hfsq, b.fmul(z, estrin(b, z, LOG_F64)))),
                  b.fmul(ef, f64(LN2_LO_F64)))
    e_hi = b.fmul(ef, f64(LN2_HI_F64))                               # exact
    head = b.fadd(e_hi, f)
    head_err = b.fadd(b.fsub(e_hi, head), f)         # exact: |e_hi| >= |f| unless e = 0
    out = b.fadd(head, b.fsub(head_err, b.fsub(hfsq, corr)))
    return log_specials(b, x, out)


# ---- f64 pow --------------------------------------------------------------------------------
def log_dd(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """log x as hi + lo to about 2^-64 relative, for a positive finite x. x = m 2^e, then m
    is taken relative to the nearest of POW_B (2^(j/8), j = -4..4, picked by selects):
    log m = log b + 2 atanh s, s = (m - b) / (m + b), |s| <= 0.0217, s kept as hi + lo and
    2 atanh s = 2s + s z T(z), z = s^2, T(z) = sum 2 z^n / (2n + 3) (Taylor, degree 4)."""
    m, ef = split_f64(b, x)
    bb, log_hi, log_lo = f64(POW_B[0]), f64(POW_LOG_B[0][0]), f64(POW_LOG_B[0][1])
    for edge, bj, (hj, lj) in zip(POW_EDGES, POW_B[1:], POW_LOG_B[1:]):
        above = b.fcmp_ordered(">", m, f64(edge))
        bb = b.select(above, f64(bj), bb)
        log_hi, log_lo = b.select(above, f64(hj), log_hi), b.select(above, f64(lj), log_lo)
    u = b.fsub(m, bb)                                # exact: m / b in [0.9, 1.1]
    v, v_lo = two_sum(b, m, bb)
    inv = b.fdiv(f64(1.0), v)
    s_hi = b.fmul(u, inv)
    p, p_err = two_product(b, s_hi, v)               # u - p is exact
    s_lo = b.fmul(b.fsub(b.fsub(b.fsub(u, p), p_err), b.fmul(s_hi, v_lo)), inv)
    z = b.fmul(s_hi, s_hi)
    small = b.fadd(b.fadd(b.fmul(b.fmul(s_hi, z), estrin(b, z, POW_ATANH)),
                          b.fmul(s_lo, f64(2.0))),
                   b.fadd(b.fmul(ef, f64(LN2_LO_F64)), log_lo))
    h1, l1 = two_sum(b, b.fmul(ef, f64(LN2_HI_F64)), log_hi)    # e ln2_hi is exact
    h2, l2 = two_sum(b, h1, b.fmul(s_hi, f64(2.0)))
    low = b.fadd(b.fadd(l1, l2), small)
    hi = b.fadd(h2, low)
    return hi, b.fsub(low, b.fsub(hi, h2))


def body_pow64(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """exp(y log|x|) with y log|x| as hi + lo (an exact product of y and log's head), then
    C's special cases as in f32's body_pow."""
    ax = unary(b, "fabs", x)
    log_hi, log_lo = log_dd(b, ax)
    p_hi, p_err = two_product(b, y, log_hi)
    p_lo = b.fadd(p_err, b.fmul(y, log_lo))
    # 0, inf and NaN x, and |y| >= 2^900 (then |y log|x|| > 2^846 unless x = 1): one product
    ordinary = b.and_(b.and_(b.fcmp_ordered(">", ax, f64(0.0)),
                             b.fcmp_ordered("<", ax, f64(math.inf))),
                      b.fcmp_ordered("<", unary(b, "fabs", y), f64(2.0 ** 900)))
    plain = b.fmul(y, log_specials(b, ax, log_hi))
    out = exp_f64(b, b.select(ordinary, p_hi, plain), b.select(ordinary, p_lo, f64(0.0)))
    integral = b.fcmp_ordered("==", unary(b, "floor", y), y)
    half = b.fmul(y, f64(0.5))
    odd = b.and_(integral, b.fcmp_ordered("!=", unary(b, "floor", half), half))
    negative = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))    # -0 included
    out = b.select(b.and_(negative, odd), b.fneg(out), out)
    finite_negative = b.and_(b.fcmp_ordered("<", x, f64(0.0)),
                             b.fcmp_ordered(">", x, f64(-math.inf)))
    out = b.select(b.and_(finite_negative, b.not_(integral)), f64(math.nan), out)
    one = b.or_(b.fcmp_ordered("==", x, f64(1.0)),
                b.and_(b.fcmp_ordered("==", ax, f64(1.0)),
                       b.fcmp_ordered("==", unary(b, "fabs", y), f64(math.inf))))
    out = b.select(one, f64(1.0), out)
    return b.select(b.fcmp_ordered("==", y, f64(0.0)), f64(1.0), out)


def provides(fn: str, ty: ir.Type) -> bool:
    """Whether `define(module, fn, ty)` exists (read at each call: emptying FUNCTIONS or
    FUNCTIONS64 in a process gives back the libm lowering, as the benchmarks do)."""
    if isinstance(ty, ir.FloatType):
        return fn in FUNCTIONS
    return isinstance(ty, ir.DoubleType) and fn in FUNCTIONS64


def define(module: ir.Module, fn: str, ty: ir.Type = F32) -> ir.Function:
    """`jitrt_vmath_<fn>_f32` or `_f64` in `module` (defined once): one argument of type
    `ty`, two for pow."""
    if not provides(fn, ty):
        raise KeyError(f"no vector {fn} for {ty}")
    name = f"jitrt_vmath_{fn}_{'f32' if ty == F32 else 'f64'}"
    found = module.globals.get(name)
    if found is not None:
        return found  # type: ignore[return-value]
    nargs = 2 if fn == "pow" else 1
    func = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name)
    func.linkage = "internal"
    func.attributes.add("alwaysinline")     # inlined, so that a loop calling it vectorizes
    b = ir.IRBuilder(func.append_basic_block("entry"))
    x = func.args[0]
    if ty == F64 and fn == "exp":
        out = exp_f64(b, x, f64(0.0))
    elif ty == F64 and fn == "log":
        out = body_log64(b, x)
    elif ty == F64 and fn == "pow":
        out = body_pow64(b, x, func.args[1])
    elif ty == F64:
        out = body_trig64(b, x, fn)
    elif fn == "exp":
        out = body_exp(b, x)
    elif fn == "log":
        out = body_log(b, x)
    elif fn == "pow":
        out = body_pow(b, x, func.args[1])
    else:
        out = body_trig(b, x, fn)
    b.ret(out)
    return func
