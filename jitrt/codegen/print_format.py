"""How an in-kernel `print` writes a float on the CPU: as Python prints it.

Stage: codegen (a helper of `EmitExpr.expr_Print`). `format_float(module)` defines, once per
module, `jitrt_format_float(double v, i1 single, i8* buf)`, which writes into `buf` (40 bytes)
the text Python's `print` shows: NaN as `nan`; else the fewest significant digits that read
back as the value (`%.*g` for p = 1, 2, ... 17 until `strtod` gives the value again: `0.1`,
`1e+20`, `inf`), Python's shortest round trip, and where that decimal is a whole number below
1e16, it again with `.0` (`%.1f`: `1.0`, `100000.0`), as Python writes those. With `single`
the value is an f32 widened to double and reading back is compared in f32, so an f32 prints
as Python prints the shortest decimal that gives the f32 back (`0.1`, not
`0.10000000149011612`). Uses the C library's `snprintf` and `strtod`; caches nothing.
"""
from __future__ import annotations

from llvmlite import ir

from .declare import declare

NAME = "jitrt_format_float"
BUF_BYTES = 40
I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()


def _cstring(module: ir.Module, name: str, text: str) -> ir.GlobalVariable:
    found = module.globals.get(name)
    if found is not None:
        return found  # type: ignore[return-value]
    data = bytearray(text.encode() + b"\0")
    ty = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(module, ty, name)
    g.linkage, g.global_constant, g.initializer = "internal", True, ir.Constant(ty, data)
    return g


def format_float(module: ir.Module) -> ir.Function:
    """`jitrt_format_float(double v, i1 single, i8* buf)`, defined in `module` on first use."""
    found = module.globals.get(NAME)
    if found is not None:
        return found  # type: ignore[return-value]
    i8p = I8.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F64, I1, i8p]), NAME)
    fn.linkage = "internal"
    v, single, buf = fn.args
    snprintf = declare(module, "snprintf", I32, (i8p, I64, i8p), var_arg=True)
    strtod = declare(module, "strtod", F64, (i8p, i8p.as_pointer()))
    fabs = module.declare_intrinsic("llvm.fabs", [F64])
    trunc = module.declare_intrinsic("llvm.trunc", [F64])
    fmt = {key: _cstring(module, f"jitrt_ffmt_{key}", text).bitcast(i8p)
           for key, text in (("whole", "%.1f"), ("g", "%.*g"), ("nan", "nan"))}
    size = ir.Constant(I64, BUF_BYTES)
    entry, nan, loop, done = (fn.append_basic_block(s) for s in ("entry", "nan", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.fcmp_unordered("uno", v, v), nan, loop)
    b.position_at_end(nan)
    b.call(snprintf, [buf, size, fmt["nan"]])
    b.ret_void()
    b.position_at_end(loop)                 # the shortest %.*g that reads back as v
    p = b.phi(I32, "digits")
    p.add_incoming(ir.Constant(I32, 1), entry)
    b.call(snprintf, [buf, size, fmt["g"], p, v])
    back = b.call(strtod, [buf, ir.Constant(i8p.as_pointer(), None)])
    same = b.select(single, b.fcmp_ordered("==", b.fptrunc(back, F32), b.fptrunc(v, F32)),
                    b.fcmp_ordered("==", back, v))
    finished = b.or_(same, b.icmp_signed(">=", p, ir.Constant(I32, 17)))
    p.add_incoming(b.add(p, ir.Constant(I32, 1)), loop)
    b.cbranch(finished, done, loop)
    b.position_at_end(done)                 # a whole number below 1e16: Python's "1e+15" is
    is_whole = b.and_(b.fcmp_ordered("==", b.call(trunc, [back]), back),   # 1000000000000000.0
                      b.fcmp_ordered("<", b.call(fabs, [back]), ir.Constant(F64, 1e16)))
    with b.if_then(is_whole):
        b.call(snprintf, [buf, size, fmt["whole"], back])
    b.ret_void()
    return fn


# ---- CUDA: the device's printf has no snprintf/strtod to find the shortest digits ----------
# A float prints with `%g` (six significant digits) or, when it is a whole number below 1e16,
# with `%.1f`, as on the CPU (`1.0`, `100000.0`, `0.0`, not `1`, `100000`, `0`). vprintf
# takes one format string, so a print with k float arguments has 2**k of them and picks one
# at run time by which arguments are whole; up to DEVICE_WHOLE_ARGS floats get the rule, the
# floats after them print with `%g`.
WHOLE, GENERAL = "%.1f", "%g"
DEVICE_WHOLE_ARGS = 4


def device_formats(pieces: list[str], specs: list[str], floats: list[int]) -> list[str]:
    """The format strings of one device print: `pieces` (literal text, `%` escaped here)
    around `specs` (one per argument), with the float arguments `floats[j]` given `WHOLE`
    where bit j of the string's index is set, `GENERAL` where it is clear."""
    out = []
    for mask in range(1 << len(floats)):
        chosen = list(specs)
        for j, k in enumerate(floats):
            chosen[k] = WHOLE if mask >> j & 1 else GENERAL
        out.append("".join(p.replace("%", "%%") + (chosen[k] if k < len(chosen) else "")
                           for k, p in enumerate(pieces)))
    return out


def is_whole_below_1e16(module: ir.Module, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """i1: the double `v` is a whole number of magnitude below 1e16 (false for inf and nan)."""
    trunc = module.declare_intrinsic("llvm.trunc", [F64])
    fabs = module.declare_intrinsic("llvm.fabs", [F64])
    return b.and_(b.fcmp_ordered("==", b.call(trunc, [v]), v),
                  b.fcmp_ordered("<", b.call(fabs, [v]), ir.Constant(F64, 1e16)))
