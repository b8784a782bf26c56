"""Vector math: f32 sin, cos, tan, exp, log and pow as straight-line LLVM IR for the CPU.

Stage: codegen. `define(module, fn)` adds `jitrt_vmath_<fn>_f32` to the module (internal and
alwaysinline, so it is inlined where called and vanishes when unused) and returns it. The CPU
target (`targets.Target.math_function`) uses these for f32 instead of `llvm.<fn>.f32`, which
LLVM lowers to a call of libm's `sinf` etc. per element, so a loop with math never vectorized.
Every body here is branch-free (selects, integer tricks on the bits, no loops, no calls but
the intrinsics `llvm.fabs`, `llvm.floor` and `llvm.roundeven`, which are instructions on
x86-64 with SSE4.1 and on AArch64), so the loop vectorizer widens a loop that calls it. f64
keeps libm. Nothing is cached beyond the module.

Methods (errors against numpy's float64 functions rounded to f32 are checked in
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


def define(module: ir.Module, fn: str) -> ir.Function:
    """`jitrt_vmath_<fn>_f32` in `module` (defined once): one f32 argument, two for pow."""
    if fn not in FUNCTIONS:
        raise KeyError(f"no vector {fn}")
    name = f"jitrt_vmath_{fn}_f32"
    found = module.globals.get(name)
    if found is not None:
        return found  # type: ignore[return-value]
    nargs = 2 if fn == "pow" else 1
    func = ir.Function(module, ir.FunctionType(F32, [F32] * nargs), name)
    func.linkage = "internal"
    func.attributes.add("alwaysinline")     # inlined, so that a loop calling it vectorizes
    b = ir.IRBuilder(func.append_basic_block("entry"))
    if fn == "exp":
        out = body_exp(b, func.args[0])
    elif fn == "log":
        out = body_log(b, func.args[0])
    elif fn == "pow":
        out = body_pow(b, func.args[0], func.args[1])
    else:
        out = body_trig(b, func.args[0], fn)
    b.ret(out)
    return func
