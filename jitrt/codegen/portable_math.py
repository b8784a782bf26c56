"""Portable math: sin, cos, tan, exp, log, tanh and pow as plain LLVM IR.

Stage: codegen. For targets with no math library to link (AMDGPU without ROCm's device
libraries: LLVM cannot lower f64 transcendental intrinsics there, nor tan or tanh at all, and
stops the process when asked to). `define(module, fn, ty)` adds `jitrt_<fn>_<f32|f64>` to
the module (internal, so unused ones vanish) and returns it. Everything is computed in f64:
the f32 functions widen, call the f64 one and round once.

Methods (error bounds measured against numpy in tests/test_portable_math.py, on the CPU,
where this same IR compiles too):
- exp: x = k ln2 + r, |r| <= ln2/2 (two-part ln2), a degree-13 Taylor polynomial for
  e^r - 1, scaled by 2^k in two exact steps (gradual underflow included);
- log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = f - s (f - R(s^2)) with f = m - 1,
  s = f / (2 + f) (an odd series in s), plus e ln2 in two parts;
- sin, cos, tan: x = k pi/2 + r with a four-part pi/2 (Cody-Waite; accurate while
  |x| < 2^19 pi/2, losing precision gradually beyond: there is no Payne-Hanek reduction),
  Taylor polynomials on |r| <= pi/4, the quadrant from k mod 4;
- tanh: e / (e + 2) with e = e^(2|x|) - 1 (the polynomial itself for small |x|), the sign
  restored; 1 beyond |x| = 22;
- pow: exp(y log|x|) with C's special cases (negative x needs an integer y; an odd y keeps
  the sign); its relative error grows with |y log|x||;
- atan: |x| > 1 through pi/2 - atan(1/|x|), then above tan(pi/12) through
  pi/6 + atan((x sqrt3 - 1) / (x + sqrt3)), then an odd Taylor series to x^27; atan2 from it
  with the quadrant and signed zeros of C's atan2; asin and acos as atan2 of x and
  sqrt((1 - x)(1 + x));
- sinh and cosh from exp (sinh of |x| < 0.34 from the e^x - 1 polynomial, no cancellation).
"""
from __future__ import annotations

import math

from llvmlite import ir

from .declare import declare

F64, F32, I64 = ir.DoubleType(), ir.FloatType(), ir.IntType(64)
FUNCTIONS = ("sin", "cos", "tan", "exp", "log", "tanh", "pow", "asin", "acos", "atan", "atan2",
             "sinh", "cosh")
TWO_ARGUMENTS = ("pow", "atan2")

LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11,
        2.02226624871116645580e-21, 8.47842766036889956997e-32)


def c(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def horner(b: ir.IRBuilder, x: ir.Value, coefs: list[float]) -> ir.Value:
    """coefs[0] + x (coefs[1] + x (...)), the last coefficient innermost."""
    acc: ir.Value = c(coefs[-1])
    for k in reversed(coefs[:-1]):
        acc = b.fadd(c(k), b.fmul(x, acc))
    return acc


def unary(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """A call of the f64 intrinsic `llvm.<name>.f64` (every target lowers floor, fabs, sqrt)."""
    return b.call(declare(b.module, f"llvm.{name}.f64", F64, (F64,)), [x])


def floor(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return unary(b, "floor", x)


def fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return unary(b, "fabs", x)


def is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def pow2(b: ir.IRBuilder, j: ir.Value) -> ir.Value:
    """2^j for an i64 j in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(j, ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)


def expm1_small(b: ir.IRBuilder, r: ir.Value) -> ir.Value:
    """e^r - 1 for |r| <= ln2/2 (Taylor to r^13)."""
    return b.fmul(r, horner(b, r, [1.0 / math.factorial(k) for k in range(1, 14)]))


def clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    """x limited to [lo, hi] (NaN becomes hi)."""
    x = b.select(b.fcmp_ordered("<", x, c(hi)), x, c(hi))
    return b.select(b.fcmp_ordered(">", x, c(lo)), x, c(lo))


def body_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    xc = clamp(b, x, -750.0, 710.0)
    k = floor(b, b.fadd(b.fmul(xc, c(1.0 / math.log(2.0))), c(0.5)))
    r = b.fsub(b.fsub(xc, b.fmul(k, c(LN2_HI))), b.fmul(k, c(LN2_LO)))
    e = b.fadd(c(1.0), expm1_small(b, r))
    ki = b.fptosi(k, I64)
    k1 = b.ashr(ki, ir.Constant(I64, 1))
    scaled = b.fmul(b.fmul(e, pow2(b, k1)), pow2(b, b.sub(ki, k1)))
    return b.select(is_nan(b, x), x, scaled)


def body_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    tiny = b.fcmp_ordered("<", x, c(2.0 ** -1022))
    xs = b.select(tiny, b.fmul(x, c(2.0 ** 54)), x)
    bits = b.bitcast(xs, I64)
    e = b.sub(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 1023))
    e = b.sub(e, b.select(tiny, ir.Constant(I64, 54), ir.Constant(I64, 0)))
    mant = b.or_(b.and_(bits, ir.Constant(I64, (1 << 52) - 1)), ir.Constant(I64, 1023 << 52))
    m = b.bitcast(mant, F64)
    big = b.fcmp_ordered(">", m, c(math.sqrt(2.0)))
    m = b.select(big, b.fmul(m, c(0.5)), m)
    e = b.add(e, b.zext(big, I64))
    f = b.fsub(m, c(1.0))
    s = b.fdiv(f, b.fadd(c(2.0), f))
    z = b.fmul(s, s)
    big_r = b.fmul(z, horner(b, z, [2.0 / (2 * k + 1) for k in range(1, 12)]))
    log_m = b.fsub(f, b.fmul(s, b.fsub(f, big_r)))
    ef = b.sitofp(e, F64)
    result = b.fadd(b.fmul(ef, c(LN2_HI)), b.fadd(log_m, b.fmul(ef, c(LN2_LO))))
    result = b.select(b.fcmp_ordered("==", x, c(math.inf)), x, result)
    result = b.select(b.fcmp_ordered("==", x, c(0.0)), c(-math.inf), result)
    return b.select(b.fcmp_unordered("<", x, c(0.0)), c(math.nan), result)


def reduce_quarter(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(r, q): x = k pi/2 + r with |r| <= pi/4 and q = k mod 4 (an i64)."""
    k = floor(b, b.fadd(b.fmul(x, c(2.0 / math.pi)), c(0.5)))
    r = x
    for part in PIO2:
        r = b.fsub(r, b.fmul(k, c(part)))
    q = b.fsub(k, b.fmul(c(4.0), floor(b, b.fmul(k, c(0.25)))))
    q = b.select(b.fcmp_ordered("<", fabs(b, q), c(4.0)), q, c(0.0))    # NaN, inf
    return r, b.fptosi(q, I64)


def sin_small(b: ir.IRBuilder, r: ir.Value, z: ir.Value) -> ir.Value:
    coefs = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(1, 9)]
    return b.fadd(r, b.fmul(b.fmul(r, z), horner(b, z, coefs)))


def cos_small(b: ir.IRBuilder, z: ir.Value) -> ir.Value:
    coefs = [(-1.0) ** k / math.factorial(2 * k) for k in range(2, 10)]
    return b.fsub(c(1.0), b.fsub(b.fmul(z, c(0.5)), b.fmul(b.fmul(z, z), horner(b, z, coefs))))


def by_quadrant(b: ir.IRBuilder, q: ir.Value, values: list[ir.Value]) -> ir.Value:
    out = values[0]
    for k in (1, 2, 3):
        out = b.select(b.icmp_signed("==", q, ir.Constant(I64, k)), values[k], out)
    return out


def trig(b: ir.IRBuilder, x: ir.Value, which: str) -> ir.Value:
    r, q = reduce_quarter(b, x)
    z = b.fmul(r, r)
    s, co = sin_small(b, r, z), cos_small(b, z)
    if which == "sin":
        out = by_quadrant(b, q, [s, co, b.fneg(s), b.fneg(co)])
    elif which == "cos":
        out = by_quadrant(b, q, [co, b.fneg(s), b.fneg(co), s])
    else:
        odd = b.trunc(q, ir.IntType(1))
        out = b.select(odd, b.fneg(b.fdiv(co, s)), b.fdiv(s, co))
    finite = b.fcmp_ordered("<", fabs(b, x), c(math.inf))
    return b.select(finite, out, c(math.nan))


def body_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ax = fabs(b, x)
    t = b.fmul(c(2.0), ax)
    e = b.select(b.fcmp_ordered("<", t, c(0.34)), expm1_small(b, t),
                 b.fsub(body_exp(b, t), c(1.0)))
    mag = b.fdiv(e, b.fadd(e, c(2.0)))
    mag = b.select(b.fcmp_ordered(">", ax, c(22.0)), c(1.0), mag)
    out = b.select(b.fcmp_ordered("<", x, c(0.0)), b.fneg(mag), mag)
    return b.select(is_nan(b, x), x, out)


def body_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    ax = fabs(b, x)
    r = body_exp(b, b.fmul(y, body_log(b, ax)))
    integral = b.fcmp_ordered("==", floor(b, y), y)
    half = b.fmul(y, c(0.5))
    odd = b.and_(integral, b.fcmp_ordered("!=", floor(b, half), half))
    negative = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))   # -0 included
    r = b.select(b.and_(negative, odd), b.fneg(r), r)
    finite_negative = b.and_(b.fcmp_ordered("<", x, c(0.0)),
                             b.fcmp_ordered(">", x, c(-math.inf)))
    r = b.select(b.and_(finite_negative, b.not_(integral)), c(math.nan), r)
    r = b.select(b.fcmp_ordered("==", x, c(1.0)), c(1.0), r)
    return b.select(b.fcmp_ordered("==", y, c(0.0)), c(1.0), r)


def atan_positive(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    """atan(a) for a >= 0 (inf included)."""
    inv = b.fcmp_ordered(">", a, c(1.0))
    t = b.select(inv, b.fdiv(c(1.0), a), a)
    far = b.fcmp_ordered(">", t, c(2.0 - math.sqrt(3.0)))          # tan(pi/12)
    sqrt3 = c(math.sqrt(3.0))
    t = b.select(far, b.fdiv(b.fsub(b.fmul(t, sqrt3), c(1.0)), b.fadd(t, sqrt3)), t)
    z = b.fmul(t, t)
    series = b.fadd(t, b.fmul(b.fmul(t, z),
                              horner(b, z, [(-1.0) ** k / (2 * k + 1) for k in range(1, 14)])))
    series = b.fadd(b.select(far, c(math.pi / 6), c(0.0)), series)
    return b.select(inv, b.fsub(c(math.pi / 2), series), series)


def body_atan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    r = atan_positive(b, fabs(b, x))
    out = b.select(b.fcmp_ordered("<", x, c(0.0)), b.fneg(r), r)
    return b.select(is_nan(b, x), x, out)


def copysign(b: ir.IRBuilder, mag: ir.Value, sign_of: ir.Value) -> ir.Value:
    bits = b.and_(b.bitcast(mag, I64), ir.Constant(I64, (1 << 63) - 1))
    sign = b.and_(b.bitcast(sign_of, I64), ir.Constant(I64, 1 << 63))
    return b.bitcast(b.or_(bits, sign), F64)


def body_atan2(b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    """C's atan2: the angle of (x, y) in [-pi, pi], signed zeros and infinities included."""
    ay, ax = fabs(b, y), fabs(b, x)
    both_inf = b.and_(b.fcmp_ordered("==", ay, c(math.inf)), b.fcmp_ordered("==", ax, c(math.inf)))
    ratio = b.select(both_inf, c(1.0), b.fdiv(ay, ax))      # 0/0 -> nan: handled below
    base = atan_positive(b, ratio)
    base = b.select(b.fcmp_ordered("==", ay, c(0.0)), c(0.0), base)
    x_negative = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))   # -0 too
    angle = b.select(x_negative, b.fsub(c(math.pi), base), base)
    out = copysign(b, angle, y)
    return b.select(b.or_(is_nan(b, x), is_nan(b, y)), b.fadd(x, y), out)


def one_minus_square_root(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """sqrt((1 - x)(1 + x)): sqrt(1 - x^2) without cancellation near |x| = 1."""
    return unary(b, "sqrt", b.fmul(b.fsub(c(1.0), x), b.fadd(c(1.0), x)))


def body_sinh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    a = fabs(b, x)
    small = expm1_small(b, a)
    small = b.fmul(c(0.5), b.fadd(small, b.fdiv(small, b.fadd(small, c(1.0)))))
    e = body_exp(b, a)
    large = b.fmul(c(0.5), b.fsub(e, b.fdiv(c(1.0), e)))
    large = b.select(b.fcmp_ordered(">", a, c(700.0)), huge_half_exp(b, a), large)
    mag = b.select(b.fcmp_ordered("<", a, c(0.34)), small, large)
    out = copysign(b, mag, x)
    return b.select(is_nan(b, x), x, out)


def huge_half_exp(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    """e^a / 2 for a where e^a itself overflows but the half may not: (e^(a/2) / 2) e^(a/2)."""
    half = body_exp(b, b.fmul(a, c(0.5)))
    return b.fmul(b.fmul(half, c(0.5)), half)


def body_cosh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    a = fabs(b, x)
    e = body_exp(b, a)
    out = b.fmul(c(0.5), b.fadd(e, b.fdiv(c(1.0), e)))
    return b.select(b.fcmp_ordered(">", a, c(700.0)), huge_half_exp(b, a), out)


def define(module: ir.Module, fn: str, ty: ir.Type) -> ir.Function:
    """`jitrt_<fn>_<f32|f64>` in `module` (defined once), taking one argument (two for pow)."""
    if fn not in FUNCTIONS:
        raise KeyError(f"no portable {fn}")
    suffix = "f32" if isinstance(ty, ir.FloatType) else "f64"
    name = f"jitrt_{fn}_{suffix}"
    found = module.globals.get(name)
    if found is not None:
        return found  # type: ignore[return-value]
    nargs = 2 if fn in TWO_ARGUMENTS else 1
    func = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name)
    func.linkage = "internal"
    func.attributes.add("alwaysinline")     # so that a loop calling it can vectorize
    b = ir.IRBuilder(func.append_basic_block("entry"))
    args = [a if ty == F64 else b.fpext(a, F64) for a in func.args]
    if fn == "exp":
        out = body_exp(b, args[0])
    elif fn == "log":
        out = body_log(b, args[0])
    elif fn == "tanh":
        out = body_tanh(b, args[0])
    elif fn == "pow":
        out = body_pow(b, args[0], args[1])
    elif fn == "atan2":
        out = body_atan2(b, args[0], args[1])
    elif fn == "atan":
        out = body_atan(b, args[0])
    elif fn in ("asin", "acos"):
        root = one_minus_square_root(b, args[0])
        out = body_atan2(b, args[0], root) if fn == "asin" else body_atan2(b, root, args[0])
    elif fn == "sinh":
        out = body_sinh(b, args[0])
    elif fn == "cosh":
        out = body_cosh(b, args[0])
    else:
        out = trig(b, args[0], fn)
    b.ret(out if ty == F64 else b.fptrunc(out, F32))
    return func
