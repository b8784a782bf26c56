"""In-kernel `print` on CUDA, checked without a GPU: floats print with `%g`, whole numbers
below 1e16 with `%.1f` (as the CPU prints them: `1.0`, not `1`), the format string picked at
run time from the ones in the PTX (codegen/print_format.py, "CUDA")."""
from __future__ import annotations

import ctypes
import math
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

import jitrt as jr
from jitrt.backends.llvm_setup import init_llvm, make_target_machine
from jitrt.codegen import print_format

pytestmark = pytest.mark.cpu_only      # PTX is built on the CPU; nothing runs on a GPU


@jr.kernel
def show(a: jr.types.ndarray(dtype=jr.f32, ndim=1), n: jr.i32):
    for i in range(a.shape[0]):
        print("v", a[i], n, a[i] * 2.0, "100%")


def ptx_strings(ptx: str) -> set[str]:
    """The byte-array globals of a PTX module, as text."""
    return {bytes(int(x) for x in m.group(1).split(",")).decode().rstrip("\0")
            for m in re.finditer(r"\.b8 jitrt_fmt\S*\[\d+\] = \{([\d, ]+)\}", ptx)}


def test_cuda_print_has_a_format_for_each_wholeness_of_its_floats():
    ptx = jr.debug.gpu_asm(show, np.ones(4, np.float32), 3, arch="cuda")
    assert ptx_strings(ptx) == {f"v {x} %lld {y} 100%%\n" for x in ("%g", "%.1f")
                                for y in ("%g", "%.1f")}
    assert "vprintf" in ptx


def whole_below_1e16_on_this_cpu():
    """`print_format.is_whole_below_1e16`, compiled for the CPU: the same IR the CUDA print
    runs (no libc in it), callable from Python."""
    init_llvm()
    module = ir.Module("whole")
    fn = ir.Function(module, ir.FunctionType(ir.IntType(8), [ir.DoubleType()]), "whole")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.zext(print_format.is_whole_below_1e16(module, b, fn.args[0]), ir.IntType(8)))
    # a target machine of its own: the engine owns (and frees) the one it is given
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        make_target_machine(opt=0))
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(ctypes.c_int8, ctypes.c_double)(engine.get_function_address("whole"))
    return engine, call


# values whose CPU print (Python's) has at most six significant digits: the device prints them
# the same; others print with %g's six digits (docs/usage.md, "print and assert in kernels")
VALUES = [0.0, -0.0, 1.0, -2.0, 3.0, 100000.0, 123456.0, 1e15, 9999999999999998.0, 0.5, 0.1,
          -2.25, 1.5e-7, 1e16, 1e20, -3e30, math.inf, -math.inf]


def test_device_format_choice_prints_as_the_cpu_does():
    engine, whole = whole_below_1e16_on_this_cpu()
    formats = print_format.device_formats(["", " ", "\n"], ["%g", "%g"], [0, 1])
    for x in VALUES:
        for y in (1.0, 0.25):
            mask = whole(x) | whole(y) << 1
            assert formats[mask] % (x, y) == f"{x} {y}\n", (x, y)
    assert whole(math.nan) == 0
    assert formats[0] % (math.nan, 0.5) == "nan 0.5\n"


def test_floats_past_the_fourth_print_with_g():
    formats = print_format.device_formats([""] * 7, ["%g"] * 6, [0, 1, 2, 3])
    assert len(formats) == 16
    assert formats[15] == "%.1f%.1f%.1f%.1f%g%g"
