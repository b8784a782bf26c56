"""jr.init(debug=True) reports integer + - * << that wrap around, as Taichi's debug builds do:
the task prints "<Operation> overflow detected in kernel K at file:line:col" and the source
line, and goes on with the wrapped value; release builds print nothing."""
import numpy as np
import pytest

import jitrt as jr

CASES = [  # dtype, x, y, op: every one wraps
    (jr.i8, 64, 64, "+"), (jr.u8, 128, 128, "+"), (jr.i32, 2**30, 2**30, "+"),
    (jr.u64, 2**63, 2**63, "+"), (jr.i16, 2**14, -(2**14) - 1, "-"), (jr.u32, 1, 2, "-"),
    (jr.i64, 2**32 + 1, 2**31 + 1, "*"), (jr.u16, 257, 257, "*"), (jr.i8, 2, 6, "<<"),
    (jr.u64, 2, 63, "<<")]
NAMES = {"+": "Addition", "-": "Subtraction", "*": "Multiplication", "<<": "Shift left"}


def _line_of(text):
    """The line of this file that holds `text` (where a report must point)."""
    with open(__file__) as f:
        return next(k for k, line in enumerate(f, 1) if line.strip() == text)


def _kernel(ty, op):
    @jr.kernel
    def add(x: ty, y: ty) -> ty:
        a = ty(x)
        return a + y

    @jr.kernel
    def sub(x: ty, y: ty) -> ty:
        a = ty(x)
        return a - y

    @jr.kernel
    def mul(x: ty, y: ty) -> ty:
        a = ty(x)
        return a * y

    @jr.kernel
    def shl(x: ty, y: ty) -> ty:
        a = ty(x)
        return a << y
    return {"+": add, "-": sub, "*": mul, "<<": shl}[op]


@pytest.mark.parametrize("ty,x,y,op", CASES)
def test_a_wrapping_operation_is_reported_with_kernel_place_and_source(ty, x, y, op, capfd):
    jr.init(debug=True, offline_cache=False)
    capfd.readouterr()
    got = _kernel(ty, op)(x, y)
    out = capfd.readouterr().out
    assert f"{NAMES[op]} overflow detected in kernel " in out
    assert f"test_debug_overflow.py:{_line_of(f'return a {op} y')}:" in out
    assert f"    return a {op} y\n" in out
    width = ty.bits
    mask = (1 << width) - 1
    exact = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__,
             "<<": int.__lshift__}[op](x, y) & mask
    if ty.is_signed and exact >= 1 << (width - 1):
        exact -= 1 << width
    assert got == exact                      # the wrapped value, as without the check


@pytest.mark.parametrize("ty,x,y,op", CASES)
def test_no_report_without_overflow_or_without_debug(ty, x, y, op, capfd):
    jr.init(debug=False, offline_cache=False)
    capfd.readouterr()
    _kernel(ty, op)(x, y)
    assert "overflow detected" not in capfd.readouterr().out
    jr.init(debug=True, offline_cache=False)
    capfd.readouterr()
    small = {"+": (x - 1 if x > 0 else x, 0), "-": (x, 0), "*": (x, 1), "<<": (x, y - 1)}[op]
    _kernel(ty, op)(*small)
    assert "overflow detected" not in capfd.readouterr().out


def test_checks_run_in_parallel_loops_and_name_the_line(capfd):
    jr.init(debug=True, offline_cache=False)
    x = jr.field(jr.i32, shape=4)
    x.from_numpy(np.array([1, 2**31 - 1, 3, 4], np.int32))

    @jr.kernel
    def bump():
        for i in x:
            x[i] = x[i] + 1     # (x[i] += 1 is an atomic add: not checked, as in Taichi)

    capfd.readouterr()
    bump()
    out = capfd.readouterr().out
    assert out.count("Addition overflow detected") == 1
    line = _line_of("x[i] = x[i] + 1     # (x[i] += 1 is an atomic add: not checked, as in Taichi)")
    assert f"test_debug_overflow.py:{line}:" in out and "    x[i] = x[i] + 1 " in out
    assert x.to_numpy().tolist() == [2, -(2**31), 4, 5]


def test_the_reported_place_is_part_of_the_ir_text_the_cache_key_hashes():
    from jitrt.ir import nodes as n
    from jitrt.ir.printer import expr_text
    a, b = n.Local("a", jr.i32), n.Local("b", jr.i32)
    plain = n.Binary("+", a, b, jr.i32)
    said = "Addition overflow detected in kernel k at f.py:{}:1"
    at_5 = n.Binary("+", a, b, jr.i32, overflow=said.format(5))
    at_6 = n.Binary("+", a, b, jr.i32, overflow=said.format(6))
    assert expr_text(plain) == "(a + b):i32"
    assert "f.py:5:1" in expr_text(at_5) and expr_text(at_5) != expr_text(at_6)
