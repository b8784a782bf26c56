"""IR expressions -> LLVM IR (the expression family of the function emitter).

Stage: codegen. Python semantics are kept where C's differ: `//` and `%` floor, integer division
by zero gives 0 instead of trapping, float->int casts saturate, shifts are masked, `and`/`or`
and `a if c else b` evaluate lazily. Every global access is bounds-checked in every build: an
out-of-range access is skipped (a load gives 0; on CUDA its thread stops there) and the first
failing site is recorded in the context's error record for the host to report.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import numpy as np
from llvmlite import ir

from .. import dtypes
from ..dtypes import DataType
from ..frozen import frozen
from ..ir import nodes as n
from . import abi, check_facts, overflow
from .declare import declare
from .emitter_host import EmitterHost

if TYPE_CHECKING:
    from . import bounds

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)


def ll_type(dt: DataType) -> ir.Type:
    if dt.is_float:
        return ir.FloatType() if dt.bits == 32 else ir.DoubleType()
    return ir.IntType(dt.bits)


def const(dt: DataType, value: int | float) -> ir.Constant:
    if dt.is_float:
        return ir.Constant(ll_type(dt), float(value))
    return ir.Constant(ll_type(dt), int(value) & ((1 << dt.bits) - 1))


def flushed(dt: DataType, value: float) -> float:
    """A kernel's float constant of type `dt`: 0.0 with `value`'s sign when it rounds to a
    denormal of `dt`, else `value`. Taichi makes its constants (literals converted to their
    type, folded expressions) on a host thread whose x86 MXCSR / arm64 FPCR flushes denormal
    results to zero, so `x[0] = 1e-45` stores 0 into an f32 (docs/porting.md, "Denormal
    floats"); run-time arithmetic keeps IEEE gradual underflow."""
    typed = dt.np.type(value)
    if typed != 0 and abs(typed) < np.finfo(dt.np).tiny:
        return math.copysign(0.0, value)
    return value


@frozen
class Access:
    """A bounds-checked element address: `ok` says every index is inside its extent; `site`
    and `axes` ((inside, index) per axis) are what a failed access records. (`@frozen`, not
    a `NamedTuple`: that compiled each of its string annotations and its `__new__` at import,
    ~0.5 ms.)"""
    ok: ir.Value
    ptr: ir.Value
    site: int
    axes: list[tuple[ir.Value, ir.Value]]
    known: bool = False     # an earlier access made this check: a failure is recorded there
    narrow: bool = True     # every index has at most 32 bits (a deferred failure's index)


ICMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


class ExprEmitter(EmitterHost):
    builder: ir.IRBuilder

    # ---- context slots --------------------------------------------------------------------
    def slot_ptr(self, slot: int | ir.Value) -> ir.Value:
        idx = ir.Constant(I64, slot) if isinstance(slot, int) else slot
        return self.builder.gep(self.ctx_ptr, [idx])

    def written_slot_ptr(self, slot: int) -> ir.Value:
        """Where a launch writes one of `abi.DEVICE_WRITTEN`: the context, or the device's
        status block where the context is a read-only upload (`TargetTraits.status_block`)."""
        if not self.target.traits.status_block:
            return self.slot_ptr(slot)
        status = self.builder.inttoptr(self.load_slot(abi.SLOT_RUNTIME), I64.as_pointer())
        return self.builder.gep(status, [ir.Constant(I64, slot)])

    def load_slot(self, slot: int) -> ir.Value:
        """A context slot that no code changes during a launch (addresses, shapes, scalar
        arguments, capacities): loaded once, at function entry, marked `!invariant.load`, so
        the optimiser may hoist and vectorize around it (stores through data pointers cannot
        make LLVM reload it)."""
        cached = self.invariants.get(slot)
        if cached is None:
            with self.builder.goto_block(self.alloca_block):
                cached = self.builder.load(self.slot_ptr(slot))
                cached.set_metadata("invariant.load", self.module.add_metadata([]))
            self.invariants[slot] = cached
        return cached

    def from_slot(self, raw: ir.Value, dt: DataType) -> ir.Value:
        """Decode a 64-bit slot: floats are stored as double, ints extended to 64 bits."""
        if dt.is_float:
            d = self.builder.bitcast(raw, ir.DoubleType())
            return d if dt.bits == 64 else self.builder.fptrunc(d, ll_type(dt))
        return raw if dt.bits == 64 else self.builder.trunc(raw, ll_type(dt))

    def to_slot(self, v: ir.Value, dt: DataType) -> ir.Value:
        if dt.is_float:
            d = v if dt.bits == 64 else self.builder.fpext(v, ir.DoubleType())
            return self.builder.bitcast(d, I64)
        if dt.bits == 64:
            return v
        return self.builder.sext(v, I64) if dt.is_signed else self.builder.zext(v, I64)

    # ---- dispatch -------------------------------------------------------------------------
    def expr(self, e: n.Expr) -> ir.Value:
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Const(self, e: n.Const) -> ir.Value:
        if e.dtype.is_float:
            return const(e.dtype, flushed(e.dtype, float(e.value)))
        return const(e.dtype, e.value)

    def expr_Arg(self, e: n.Arg) -> ir.Value:
        return self.from_slot(self.load_slot(self.layout.arg_slot(e)), e.dtype)

    def expr_Local(self, e: n.Local) -> ir.Value:
        return self.builder.load(self.local_ptr(e.name, e.dtype))

    def expr_Shape(self, e: n.Shape) -> ir.Value:
        return self.builder.trunc(self.load_slot(self.layout.array_shape_slot(e.ref, e.axis)), I32)

    def expr_Cast(self, e: n.Cast) -> ir.Value:
        return self.convert(self.expr(e.x), e.x.dtype, e.dtype)

    def convert(self, v: ir.Value, src: DataType, dst: DataType) -> ir.Value:
        b = self.builder
        if src == dst:
            return v
        if src.is_float and dst.is_float:
            return b.fpext(v, ll_type(dst)) if dst.bits > src.bits else b.fptrunc(v, ll_type(dst))
        if src.is_float:  # saturating, NaN -> 0: never undefined behaviour
            kind = "fptosi" if dst.is_signed else "fptoui"
            fn = self.intrinsic(f"llvm.{kind}.sat.i{dst.bits}.{'f32' if src.bits == 32 else 'f64'}",
                                ll_type(dst), [ll_type(src)])
            return b.call(fn, [v])
        if dst.is_float:
            return b.sitofp(v, ll_type(dst)) if src.is_signed else b.uitofp(v, ll_type(dst))
        if dst.bits < src.bits:
            return b.trunc(v, ll_type(dst))
        if dst.bits > src.bits:
            return b.sext(v, ll_type(dst)) if src.is_signed else b.zext(v, ll_type(dst))
        return v

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn  # type: ignore[return-value]

    def truth(self, v: ir.Value, dt: DataType) -> ir.Value:
        if dt.is_float:
            return self.builder.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return self.builder.icmp_unsigned("!=", v, ir.Constant(v.type, 0))

    def expr_Unary(self, e: n.Unary) -> ir.Value:
        v = self.expr(e.x)
        b = self.builder
        if e.op == "neg":
            return b.fneg(v) if e.dtype.is_float else b.neg(v)
        if e.op == "not":
            return b.zext(b.not_(self.truth(v, e.x.dtype)), I32)
        if e.op == "bitcast":
            return b.bitcast(v, ll_type(e.dtype))
        return b.not_(v)

    def expr_Select(self, e: n.Select) -> ir.Value:
        """`a if cond else b` evaluates only the chosen arm, as Python does (`x[i] if i < n
        else 0` never reads x[n]); LLVM turns cheap arms back into a select."""
        b = self.builder
        c = self.truth(self.expr(e.cond), e.cond.dtype)
        self.conditional += 1
        with b.if_else(c) as (then, otherwise):
            with then:
                va, block_a = self.expr(e.a), b.block
            with otherwise:
                vb, block_b = self.expr(e.b), b.block
        self.conditional -= 1
        phi = b.phi(va.type)
        phi.add_incoming(va, block_a)
        phi.add_incoming(vb, block_b)
        return phi

    def expr_Binary(self, e: n.Binary) -> ir.Value:
        if e.op in ("and", "or"):
            return self.short_circuit(e)
        a, b_ = self.expr(e.a), self.expr(e.b)
        if e.overflow and overflow.can_check(e, self.target):     # jr.init(debug=True)
            return overflow.checked_binary(self, e, a, b_)
        return self.binary(e.op, a, b_, e.a.dtype, e.dtype)

    def short_circuit(self, e: n.Binary) -> ir.Value:
        """`a and b` / `a or b` on 0/1 operands: b is evaluated only when a does not decide, as
        in Python (`i < n and x[i] > 0` never reads x[n])."""
        b = self.builder
        a = self.expr(e.a)
        a_block = b.block
        undecided = b.icmp_unsigned("!=" if e.op == "and" else "==", a, ir.Constant(a.type, 0))
        self.conditional += 1
        with b.if_then(undecided):
            c, c_block = self.expr(e.b), b.block
        self.conditional -= 1
        phi = b.phi(a.type)
        phi.add_incoming(a, a_block)
        phi.add_incoming(c, c_block)
        return phi

    def binary(self, op: str, a: ir.Value, c: ir.Value, operand: DataType,
               result: DataType) -> ir.Value:
        b = self.builder
        if op in n.COMPARE_OPS:
            if operand.is_float:
                flag = b.fcmp_unordered(op, a, c) if op == "!=" else b.fcmp_ordered(op, a, c)
            elif operand.is_signed:
                flag = b.icmp_signed(op, a, c)
            else:
                flag = b.icmp_unsigned(op, a, c)
            return b.zext(flag, I32)
        if op in ("and", "or"):
            return b.and_(a, c) if op == "and" else b.or_(a, c)
        if operand.is_float:
            return self.float_binary(op, a, c, operand)
        return self.int_binary(op, a, c, operand)

    def float_binary(self, op: str, a: ir.Value, c: ir.Value, dt: DataType) -> ir.Value:
        b = self.builder
        simple = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}
        if op in simple:
            return simple[op](a, c, flags=self.float_flags(op, dt.bits))
        if op in ("min", "max"):
            pick_c = b.fcmp_ordered("<" if op == "min" else ">", c, a)
            return b.select(pick_c, c, a)
        floor = self.target.math_function(self.module, "floor", a.type, 1)
        q = b.call(floor, [b.fdiv(a, c)])
        if op == "//":
            return q
        if op == "%":
            return b.fsub(a, b.fmul(q, c))
        raise NotImplementedError(op)

    def float_flags(self, op: str, bits: int = 0) -> tuple[str, ...]:
        """The fast-math flags of a float operation `op` ("+", "-", "*", "/" or "sqrt") on
        `bits`-bit values (`Target.fast_arith`): none on the CPU, `contract` on a GPU's +, -,
        *, and `afn` on its f32 division and square root."""
        if not self.target.fast_arith:
            return ()
        if op in ("/", "sqrt"):
            return ("afn",) if bits == 32 else ()
        return ("contract",)

    def int_binary(self, op: str, a: ir.Value, c: ir.Value, dt: DataType) -> ir.Value:
        b = self.builder
        simple = {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor}
        if op in simple:
            return simple[op](a, c)
        if op in ("<<", ">>"):
            amount = b.and_(c, ir.Constant(c.type, dt.bits - 1))
            if op == "<<":
                return b.shl(a, amount)
            return b.ashr(a, amount) if dt.is_signed else b.lshr(a, amount)
        if op in ("min", "max"):
            cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
            return b.select(cmp("<" if op == "min" else ">", c, a), c, a)
        if op in ("//", "%"):
            return self.int_divmod(op, a, c, dt)
        raise NotImplementedError(op)

    def int_divmod(self, op: str, a: ir.Value, c: ir.Value, dt: DataType) -> ir.Value:
        """Python floor division / modulo; x // 0 and x % 0 give 0 (no trap)."""
        b = self.builder
        ty = a.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        is_zero = b.icmp_unsigned("==", c, zero)
        if not dt.is_signed:
            safe = b.select(is_zero, one, c)
            r = b.udiv(a, safe) if op == "//" else b.urem(a, safe)
            return b.select(is_zero, zero, r)
        minus_one = ir.Constant(ty, -1)
        is_m1 = b.icmp_signed("==", c, minus_one)  # INT_MIN / -1 traps on x86: avoid it
        safe = b.select(b.or_(is_zero, is_m1), one, c)
        q = b.sdiv(a, safe)
        r = b.srem(a, safe)
        # floor adjustment: if r != 0 and sign(r) != sign(c): q -= 1, r += c
        adjust = b.and_(b.icmp_signed("!=", r, zero),
                        b.icmp_signed("<", b.xor(r, safe), zero))
        if op == "//":
            q = b.select(adjust, b.sub(q, one), q)
            q = b.select(is_m1, b.neg(a), q)
            return b.select(is_zero, zero, q)
        r = b.select(adjust, b.add(r, safe), r)
        return b.select(b.or_(is_zero, is_m1), zero, r)

    def int_power(self, base: ir.Value, exp: ir.Value, dt: DataType) -> ir.Value:
        """Integer `base ** exp` by squaring, wrapping like `*`. A negative exponent gives
        trunc(1 / base**-exp): 1 for base 1, +-1 for base -1, else 0 (0 ** -k too, as x // 0)."""
        b = self.builder
        ty = base.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        negative = b.icmp_signed("<", exp, zero) if dt.is_signed else ir.Constant(I1, 0)
        acc, sq, rest = (self.local_ptr(f"$ipow{self.next_id()}", dt) for _ in range(3))
        b.store(one, acc)
        b.store(base, sq)
        b.store(b.select(negative, zero, exp), rest)
        cond_bb = self.fn.append_basic_block("ipow.cond")
        body_bb = self.fn.append_basic_block("ipow.body")
        done_bb = self.fn.append_basic_block("ipow.done")
        b.branch(cond_bb)
        b.position_at_end(cond_bb)
        e = b.load(rest)
        b.cbranch(b.icmp_unsigned("!=", e, zero), body_bb, done_bb)
        b.position_at_end(body_bb)
        x = b.load(sq)
        odd = b.icmp_unsigned("!=", b.and_(e, one), zero)
        b.store(b.select(odd, b.mul(b.load(acc), x), b.load(acc)), acc)
        b.store(b.mul(x, x), sq)
        b.store(b.lshr(e, one), rest)
        b.branch(cond_bb)
        b.position_at_end(done_bb)
        minus_one = ir.Constant(ty, -1)
        odd_exp = b.icmp_unsigned("!=", b.and_(exp, one), zero)
        inverse = b.select(b.icmp_signed("==", base, one), one,
                           b.select(b.icmp_signed("==", base, minus_one),
                                    b.select(odd_exp, minus_one, one), zero))
        return b.select(negative, inverse, b.load(acc))

    def expr_Math(self, e: n.Math) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        if e.fn == "ipow":
            return self.int_power(args[0], args[1], e.dtype)
        if e.fn in ("popcnt", "clz", "ffs"):           # Quadrants' bit counts
            return self.bit_count(e.fn, args[0])
        if e.fn == "abs" and not e.dtype.is_float:
            v = args[0]
            if not e.dtype.is_signed:
                return v
            return self.builder.select(self.builder.icmp_signed("<", v, ir.Constant(v.type, 0)),
                                       self.builder.neg(v), v)
        # only the body of a parallel task's own loop vectorizes (not inner loops)
        vectorizable = self.vectorizable and not self.loop_targets
        fn = self.target.math_function(self.module, e.fn, ll_type(e.dtype), len(args),
                                       vectorizable)
        flags = self.float_flags("sqrt", e.dtype.bits) if e.fn == "sqrt" else ()
        return self.builder.call(fn, args, fastmath=flags)

    def bit_count(self, fn: str, v: ir.Value) -> ir.Value:
        """Set bits (popcnt), leading zero bits (clz; the width for 0) or 1 + the index of
        the lowest set bit (ffs; 0 for 0), over the unsigned bit pattern, in v's type."""
        b = self.builder
        if fn == "popcnt":
            return b.ctpop(v)
        if fn == "clz":
            return b.ctlz(v, ir.Constant(ir.IntType(1), 0))
        zero = ir.Constant(v.type, 0)
        low = b.add(b.cttz(v, ir.Constant(ir.IntType(1), 0)), ir.Constant(v.type, 1))
        return b.select(b.icmp_unsigned("==", v, zero), zero, low)

    # ---- debugging aids -------------------------------------------------------------------
    def expr_Assertion(self, e: n.Assertion) -> ir.Value:
        """A failed assertion records its site; the run-time values of its message (at most
        2) travel as the fault's axis and index words, as raw 64-bit patterns."""
        formats = e.formats or ("",) * len(e.args)
        site = self.add_site(e.message, e.loc, "assert",
                             tuple((a.dtype.name, f) for a, f in zip(e.args, formats)))
        b = self.builder
        failed = b.icmp_signed("==", self.expr(e.cond), ir.Constant(ll_type(e.cond.dtype), 0))
        self.conditional += 1
        with b.if_then(failed, likely=False):
            words = [self.raw_word(a) for a in e.args]
            self.record_fault(site, [], tuple(words + [ir.Constant(I64, 0)] * (2 - len(words))))
        self.conditional -= 1
        return ir.Constant(I32, 0)

    def raw_word(self, a: n.Expr) -> ir.Value:
        """`a` as a 64-bit pattern: an integer extended, a float widened to f64."""
        b, v = self.builder, self.expr(a)
        if a.dtype.is_float:
            return b.bitcast(v if a.dtype.bits == 64 else b.fpext(v, ir.DoubleType()), I64)
        if a.dtype.bits == 64:
            return v
        return b.sext(v, I64) if a.dtype.is_signed else b.zext(v, I64)

    def expr_Print(self, e: n.Print) -> ir.Value:
        """printf on the CPU (flushed at once), vprintf on CUDA; a value with no spec of its
        own prints with Taichi's (`DataType.print_spec`: `%f` for an f32, `%.12f` for an
        f64); AMDGPU has no printf here."""
        spec, values = self.print_arguments(e)
        fmt_ptr = self._format_string("".join(
            p.replace("%", "%%") + (spec[k] if k < len(spec) else "")
            for k, p in enumerate(e.pieces)))
        b = self.builder
        i8p = ir.IntType(8).as_pointer()
        if self.target.printer == "vprintf":
            with b.goto_block(self.alloca_block):
                buf = self.target.alloca(b, ir.ArrayType(I64, max(len(values), 1)), "printbuf")
            for k, v in enumerate(values):
                slot = b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, k)])
                b.store(v, b.bitcast(slot, v.type.as_pointer()))
            b.call(declare(self.module, "vprintf", I32, (i8p, i8p)),
                   [fmt_ptr, b.bitcast(buf, i8p)])
            return ir.Constant(I32, 0)
        if self.target.printer != "printf":
            from ..errors import error_at
            raise error_at(e.loc, f"print() in kernels is not supported on {self.target.name} "
                           "in this version (CPU and CUDA only)")
        b.call(declare(self.module, "printf", I32, (i8p,), var_arg=True), [fmt_ptr, *values])
        b.call(declare(self.module, "fflush", I32, (i8p,)), [ir.Constant(i8p, None)])
        return ir.Constant(I32, 0)

    def print_arguments(self, e: n.Print) -> tuple[list[str], list[ir.Value]]:
        """Each argument of `print`: its printf conversion (the user's from a format string,
        else the dtype's) and its value as printf's varargs take it."""
        spec: list[str] = []
        values: list[ir.Value] = []
        for k, a in enumerate(e.args):
            v = self.expr(a)
            user = e.formats[k] if e.formats else ""     # a printf spec from a format string
            if not user:
                spec.append(a.dtype.print_spec)
            else:
                spec.append("%" + (user if a.dtype.is_float else user[:-1] + "ll" + user[-1]))
            values.append(self.print_word(v, a.dtype))
        return spec, values

    def print_word(self, v: ir.Value, dt: dtypes.DataType) -> ir.Value:
        """`v` as printf's varargs take it: a float as f64, an integer as i64."""
        b = self.builder
        if dt.bits == 64:
            return v
        if dt.is_float:
            return b.fpext(v, ir.DoubleType())
        return b.sext(v, I64) if dt.is_signed else b.zext(v, I64)

    def _format_string(self, text: str) -> ir.Value:
        """An i8* to a new constant global holding `text` (unique in the module: a loop body
        can be emitted twice, bounds versioning)."""
        data = bytearray(text.encode() + b"\0")
        fmt_ty = ir.ArrayType(ir.IntType(8), len(data))
        fmt = ir.GlobalVariable(self.module, fmt_ty, self.module.get_unique_name("jitrt_fmt"))
        fmt.linkage, fmt.global_constant = "internal", True
        fmt.initializer = ir.Constant(fmt_ty, data)
        return self.builder.bitcast(fmt, ir.IntType(8).as_pointer())

    # ---- global memory ------------------------------------------------------------------
    def expr_Load(self, e: n.Load) -> ir.Value:
        access = self.element_ptr(e.ref, e.indices, e.loc, "read")
        zero = ir.Constant(ll_type(e.dtype), 0.0 if e.dtype.is_float else 0)
        invariant = e.ref in self.facts.read_only     # (GPUs only: `codegen_facts`)
        if self.defers(access):
            return self.data_load(self.deferred_check(access, e.ref), e.ref, invariant)
        return self.guarded(access, lambda ptr: self.data_load(ptr, e.ref, invariant), zero)

    def data_load(self, ptr: ir.Value, ref: n.Ref, invariant: bool) -> ir.Value:
        """A load of `ref`'s element at `ptr`; `invariant`: data nothing writes while the task
        runs (`TaskFacts.read_only`), which a GPU reads through the read-only data path
        (PTX `ld.global.nc`)."""
        value = self.alias_tagged(self.builder.load(ptr), ref)
        if invariant:
            value.set_metadata("invariant.load", self.module.add_metadata([]))
        return value

    def alias_tagged(self, access: ir.Instruction, ref: n.Ref) -> ir.Instruction:
        """GPUs: a field access tagged with its field's alias scope and, as `!noalias`,
        every other field's (two fields never share memory: `frontend/context.field_ref`
        gives each field object one slot), so LLVM keeps values loaded from one field across
        stores to another and may move loads above them. Ndarray accesses are not tagged:
        two arguments may be one array, or view a field's memory."""
        if not (isinstance(ref, n.FieldRef) and self.target.traits.grid_launch):
            return access
        key = (ref.slot, ref.grad)
        tags = self.alias_tags.get(key)
        if tags is None:
            tags = self.alias_tags[key] = field_alias_tags(
                self.module, len(self.layout.field_slots), key)
        access.set_metadata("alias.scope", tags[0])
        access.set_metadata("noalias", tags[1])
        return access

    def expr_Atomic(self, e: n.Atomic) -> ir.Value:
        value = self.expr(e.value)
        access = self.element_ptr(e.ref, e.indices, e.loc, f"atomic_{e.op}")
        dt = e.dtype
        if e.op in ("or", "and", "xor", "xchg", "mul"):   # bitwise (integers), exchange, mul
            op = e.op
        elif dt.is_float:
            op = {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax"}[e.op]
        elif dt.is_signed:
            op = {"add": "add", "sub": "sub", "min": "min", "max": "max"}.get(e.op, e.op)
        else:
            op = {"add": "add", "sub": "sub", "min": "umin", "max": "umax"}.get(e.op, e.op)
        zero = ir.Constant(ll_type(dt), 0.0 if dt.is_float else 0)
        if e.ref in self.private:       # only this iteration touches the element: plain
            return self.guarded(access, lambda ptr: self.plain_rmw(op, ptr, value), zero)
        if op == "mul":
            return self.guarded(access, lambda ptr: self.cas_mul(ptr, value, dt), zero)
        return self.guarded(access, lambda ptr: self.alias_tagged(
            self.builder.atomic_rmw(op, ptr, value, "monotonic"), e.ref), zero)

    def cas_mul(self, ptr: ir.Value, value: ir.Value, dt: DataType) -> ir.Value:
        """`*ptr *= value` atomically (no instruction does it): a compare-and-swap loop on the
        bits; returns the old value."""
        b = self.builder
        bits = ir.IntType(dt.bits)
        iptr = b.bitcast(ptr, bits.as_pointer(ptr.type.addrspace))
        start = b.block
        loop = self.fn.append_basic_block("cas_mul")
        done = self.fn.append_basic_block("cas_mul_done")
        first = b.load(iptr)
        b.branch(loop)
        b.position_at_end(loop)
        seen = b.phi(bits)
        seen.add_incoming(first, start)
        old = b.bitcast(seen, ll_type(dt)) if dt.is_float else seen
        new = b.fmul(old, value) if dt.is_float else b.mul(old, value)
        pair = b.cmpxchg(iptr, seen, b.bitcast(new, bits) if dt.is_float else new,
                         "monotonic", "monotonic")
        seen.add_incoming(b.extract_value(pair, 0), loop)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return old

    def plain_rmw(self, op: str, ptr: ir.Value, value: ir.Value) -> ir.Value:
        """`op` applied to `*ptr` and `value` without atomicity; returns the old value."""
        b = self.builder
        old = b.load(ptr)
        if op in ("fadd", "fsub"):
            new = getattr(b, op)(old, value, flags=self.float_flags("+"))
        elif op in ("add", "sub"):
            new = getattr(b, op)(old, value)
        elif op == "mul":
            new = b.fmul(old, value) if isinstance(old.type, (ir.FloatType, ir.DoubleType)) \
                else b.mul(old, value)
        elif op in ("or", "and", "xor"):
            new = getattr(b, op + "_" if op != "xor" else op)(old, value)
        elif op == "xchg":
            new = value
        elif op in ("fmin", "fmax"):
            take = b.or_(b.fcmp_ordered("<" if op == "fmin" else ">", value, old),
                         b.fcmp_unordered("uno", old, old))     # as minnum/maxnum
            new = b.select(take, value, old)
        else:
            cmp = {"min": ("<", True), "max": (">", True), "umin": ("<", False),
                   "umax": (">", False)}[op]
            test = b.icmp_signed if cmp[1] else b.icmp_unsigned
            new = b.select(test(cmp[0], value, old), value, old)
        b.store(new, ptr)
        return old

    def data_ptr(self, ref: n.Ref) -> ir.Value:
        slot = (self.layout.field_slot(ref) if isinstance(ref, n.FieldRef)
                else self.layout.array_ptr_slot(ref))
        raw = self.load_slot(slot)
        # GPUs: field and ndarray data is device global memory (address space 1), which
        # lets the backend emit global (and read-only cached) loads instead of generic ones
        space = self.target.traits.data_address_space
        return self.builder.inttoptr(raw, ll_type(ref.dtype).as_pointer(space))

    def extents(self, ref: n.Ref) -> list[ir.Value]:
        if isinstance(ref, n.FieldRef):
            return [ir.Constant(I64, s) for s in ref.shape]
        return [self.load_slot(self.layout.array_shape_slot(ref, k)) for k in range(ref.ndim)]

    def element_ptr(self, ref: n.Ref, indices: tuple[n.Expr, ...], loc: n.Loc,
                    kind: str) -> Access:
        b = self.builder
        proven = self.unchecked.get((ref, indices))
        narrow = self.narrow_access(ref, indices)
        if proven is not None and narrow:
            return self.narrow_proven_ptr(ref, indices)
        if proven is not None:      # in bounds for the whole box: affine axes in 64 bits
            idx = [self.wide(i) if isinstance(ax, tuple) else self.affine_index(ax)
                   for ax, i in zip(proven, indices)]     # (a gather's axis is a tuple)
        elif narrow:
            return self.narrow_element_ptr(ref, indices, loc, kind)
        else:
            idx = [self.wide(i) for i in indices]
        extents = self.extents(ref)
        if proven is not None:
            offset0: ir.Value = ir.Constant(I64, 0)
            for v, ext in zip(idx, extents):
                offset0 = b.add(b.mul(offset0, ext), v)
            return Access(ir.Constant(I1, 1), b.gep(self.data_ptr(ref), [offset0]), -1, [])
        ok, axes = bounds_test(b, idx, extents)
        offset: ir.Value = ir.Constant(I64, 0)
        for v, ext in zip(idx, extents):
            offset = b.add(b.mul(offset, ext), v)
        # a site only where the access can fail (constant indices inside need none), so that a
        # body interleaved where nothing can fault adds none (`kernel_module.emit_fast_loop`)
        site = -1 if ok_is_true(ok) else self.add_site(ref, loc, kind)
        deferred = kind == "read" and self.waiting_reads > 0   # (its check is no fact yet)
        return Access(ok, b.gep(self.data_ptr(ref), [offset]), site, axes,
                      site >= 0 and self.check_made(ref, extents, indices, note=not deferred),
                      all(i.dtype.bits <= 32 for i in indices))

    def check_made(self, ref: n.Ref, extents: list[ir.Value],
                   indices: tuple[n.Expr, ...], note: bool = True) -> bool:
        """Whether an earlier access of this thread made the same check (GPUs: then a failure
        here was recorded there, `check_facts.py`); notes this one's otherwise (`note`)."""
        if not self.checked:
            return False
        found = check_facts.key(ref, extents, indices)
        if found is None:
            return False
        facts = self.checked[-1]
        if found[0] in facts:
            return True
        if note and not self.conditional:
            facts[found[0]] = found[1]
        return False

    def wide(self, index: n.Expr) -> ir.Value:
        """An index as the i64 the access uses (sign-extended)."""
        v = self.expr(index)
        if v.type == I64:
            return v
        return sext_constant(v) if isinstance(v, ir.Constant) else self.builder.sext(v, I64)

    def affine_index(self, ax: "bounds.Affine") -> ir.Value:
        """coef * variable + offset from the variable's 64-bit copy: the box test proved this
        is the index's value (no wrap in its type) at every point of the box."""
        b = self.builder
        var = b.load(self.local_ptr(f"$wide{ax.var}", dtypes.i64))
        offset = self.to_slot(self.expr(ax.offset), ax.offset.dtype)
        return b.add(b.mul(var, ir.Constant(I64, ax.coef)), offset)

    def guarded(self, access: Access, emit: Callable[[ir.Value], ir.Value | None],
                fallback: ir.Value | None) -> ir.Value | None:
        """Run `emit(ptr)` only if the access is in bounds; otherwise record its site as failed
        (and give `fallback` as the value). On targets whose failing access ends its thread
        (`TargetTraits.fault_ends_thread`) the thread records it and stops instead
        (`checked_or_stopped`)."""
        b = self.builder
        if ok_is_true(access.ok):
            return emit(access.ptr)
        if self.target.traits.fault_ends_thread:
            return self.checked_or_stopped(access, emit)
        if isinstance(access.ok, ir.Constant):    # an index known to be out of bounds
            if not access.known:
                self.record_fault(access.site, access.axes)
            return fallback
        with b.if_else(access.ok, likely=True) as (then, otherwise):
            with then:
                value = emit(access.ptr)
                then_block = b.block
            with otherwise:
                if not access.known:
                    self.record_fault(access.site, access.axes)
                else_block = b.block
        if fallback is None or value is None or isinstance(value.type, ir.VoidType):
            return None
        phi = b.phi(value.type)
        phi.add_incoming(value, then_block)
        phi.add_incoming(fallback, else_block)
        return phi

    def checked_or_stopped(self, access: Access,
                           emit: Callable[[ir.Value], ir.Value | None]) -> ir.Value | None:
        """GPUs: the access when every index is inside; otherwise the thread records the
        failure and ends there (PTX `exit`), as a failed check does in Taichi's and
        Quadrants' debug builds. The failing arm never rejoins, so the common path is one
        compare and a branch the hardware need not reconverge after, and what follows knows
        the indices are inside. An access repeating a check this thread made earlier
        (`known`) runs unchecked: had that check failed, the thread would have ended."""
        b = self.builder
        if not access.known:
            stop = b.append_basic_block("out_of_bounds")
            inside = b.append_basic_block("in_bounds")
            b.cbranch(access.ok, inside, stop).set_weights([1 << 20, 1])
            b.position_at_end(stop)
            self.record_fault(access.site, access.axes)
            end_thread(b)
            b.position_at_end(inside)
        return emit(access.ptr)

    def record_fault(self, site: int, axis_fail: list[tuple[ir.Value, ir.Value]],
                     words: tuple[ir.Value, ir.Value] | None = None) -> None:
        """Call the module's cold fault recorder with the first failing axis and its index
        (or with the two `words` given)."""
        axis, index = failing_axis(self.builder, axis_fail) if words is None else words
        self.call_recorder(ir.Constant(I64, site + 1), axis, index)

    def call_recorder(self, site1: ir.Value, axis: ir.Value, index: ir.Value) -> None:
        b = self.builder
        if self.target.traits.status_block:    # the status block and launch id, not the context
            b.call(fault_recorder(self.module, True),
                   [self.load_slot(abi.SLOT_RUNTIME), self.load_slot(abi.SLOT_LAUNCH_ID),
                    site1, axis, index])
        else:
            b.call(fault_recorder(self.module), [self.ctx_ptr, site1, axis, index])


def bounds_test(b: ir.IRBuilder, values: list[ir.Value], extents: list[ir.Value]
                ) -> tuple[ir.Value, list[tuple[ir.Value, ir.Value]]]:
    """(whether every index is inside its extent, (inside, index) per axis): compared
    unsigned, so that a negative index is outside; constants against constants folded."""
    ok: ir.Value = ir.Constant(I1, 1)
    axes: list[tuple[ir.Value, ir.Value]] = []
    for v, ext in zip(values, extents):
        if isinstance(v, ir.Constant) and isinstance(ext, ir.Constant):
            inside: ir.Value = ir.Constant(I1, 0 <= int(v.constant) < int(ext.constant))
        else:
            inside = b.icmp_unsigned("<", v, ext)
        ok = inside if ok_is_true(ok) else b.and_(ok, inside)
        axes.append((inside, v))
    return ok, axes


def failing_axis(b: ir.IRBuilder, axis_fail: list[tuple[ir.Value, ir.Value]]
                 ) -> tuple[ir.Value, ir.Value]:
    """(the first axis whose index is outside, that index), from (inside, index) per axis."""
    axis: ir.Value = ir.Constant(I64, 0)
    index: ir.Value = ir.Constant(I64, 0)
    for k, (inside, v) in reversed(list(enumerate(axis_fail))):
        if v.type != I64:             # a 32-bit access's index (`narrow_element_ptr`)
            v = sext_constant(v) if isinstance(v, ir.Constant) else b.sext(v, I64)
        axis = b.select(inside, axis, ir.Constant(I64, k))
        index = b.select(inside, index, v)
    return axis, index


def field_alias_tags(module: ir.Module, fields: int, key: tuple[int, bool]
                     ) -> tuple[ir.MDValue, ir.MDValue]:
    """(`!alias.scope`, `!noalias`) of the accesses of field `key` (slot, gradient) in a
    kernel of `fields` fields: its own scope, and the scopes of all the others (one domain,
    scopes named by slot: the same in every function of the module)."""
    domain = module.add_metadata([ir.MetaDataString(module, "jitrt fields")])

    def scope(k: tuple[int, bool]) -> ir.MDValue:
        name = f"jitrt field {k[0]}{' grad' if k[1] else ''}"
        return module.add_metadata([ir.MetaDataString(module, name), domain])
    others = [scope((slot, grad)) for grad in (False, True) for slot in range(fields)
              if (slot, grad) != key]
    return module.add_metadata([scope(key)]), module.add_metadata(others)


def end_thread(b: ir.IRBuilder) -> None:
    """End the current GPU thread here (PTX `exit`: barriers and warp-synchronous operations
    then wait only for the threads still running); the block ends `unreachable`."""
    b.asm(ir.FunctionType(ir.VoidType(), []), "exit;", "", [], side_effect=True)
    b.unreachable()


def sext_constant(v: ir.Constant) -> ir.Constant:
    """A constant integer sign-extended to i64 at compile time (constants are stored masked)."""
    bits = v.type.width
    value = int(v.constant)
    return ir.Constant(I64, value - (1 << bits) if value >= 1 << (bits - 1) else value)


def ok_is_true(v: ir.Value) -> bool:
    return isinstance(v, ir.Constant) and v.constant == 1


FAULT_RECORDER = "jitrt_record_fault"


def fault_recorder(module: ir.Module, gpu: bool = False) -> ir.Function:
    """`jitrt_record_fault(ctx, site + 1, axis, index)`, one per module (internal, cold, never
    inlined): the first failing access claims the error slot by compare-and-swap from 0 and
    writes its axis and index. One call per check keeps functions with thousands of accesses
    (unrolled loops) small for LLVM. On GPUs the record goes to the device's status block,
    with the launch id of the context that failed."""
    found = module.globals.get(FAULT_RECORDER)
    if found is not None:
        return found  # type: ignore[return-value]
    args = [I64, I64, I64, I64, I64] if gpu else [I64.as_pointer(), I64, I64, I64]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), FAULT_RECORDER)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if gpu:      # (status block address, launch id, site + 1, axis, index)
        status, launch, site, axis, index = fn.args
        record = b.inttoptr(status, I64.as_pointer())
    else:        # (context, site + 1, axis, index)
        record, site, axis, index = fn.args
    first = b.cmpxchg(b.gep(record, [ir.Constant(I64, abi.SLOT_ERROR)]), ir.Constant(I64, 0),
                      site, "monotonic", "monotonic")
    with b.if_then(b.extract_value(first, 1)):
        b.store(axis, b.gep(record, [ir.Constant(I64, abi.SLOT_ERROR_AXIS)]))
        b.store(index, b.gep(record, [ir.Constant(I64, abi.SLOT_ERROR_INDEX)]))
        if gpu:
            b.store(launch, b.gep(record, [ir.Constant(I64, abi.SLOT_LAUNCH_ID)]))
    b.ret_void()
    return fn


__all__ = ["ExprEmitter", "ll_type", "const", "dtypes"]
