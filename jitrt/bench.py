"""`python -m jitrt bench`: host overhead of one kernel launch, against an empty native call.

Stage: benchmark (uses the public API, plus llvmlite for the floor). Two kernels over 16
elements: L0 takes one array (`out[i] = i`), L1 takes four arrays and two scalars and writes
all four arrays. Each is launched with jitrt ndarrays, with plain numpy arrays and as a bound
launch (`k.bind(*args)`, called with no arguments). The floor is what no launcher can beat
from Python: a ctypes call of an empty native function compiled with llvmlite, taking as many
int64 arguments as the kernel has parameters. Every case is timed as the median of `repeats`
runs of `launches` calls each, with one `jr.sync()` at the end of each run.
`benchmarks/launch_overhead.py` is a thin script over `main()`.
"""
from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import jitrt as jr

N = 16
TARGETS_US = {"L0": 1.0, "L1": 1.5}   # DESIGN.md: steady-state launch with jitrt ndarrays
REPORTED = (                         # from the issue; not measured here
    ("Warp", "10.7 us (2.5 us with record_cmd)"),
    ("Quadrants", "6.4 us"),
    ("Taichi", "27 us"),
)


@jr.kernel
def fill_l0(out: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(out.shape[0]):
        out[i] = i


@jr.kernel
def fill_l1(a: jr.types.ndarray(dtype=jr.f32, ndim=1), b: jr.types.ndarray(dtype=jr.f32, ndim=1),
            c: jr.types.ndarray(dtype=jr.f32, ndim=1), d: jr.types.ndarray(dtype=jr.f32, ndim=1),
            s: jr.f32, t: jr.i32):
    for i in range(a.shape[0]):
        a[i] = i
        b[i] = i * s
        c[i] = i + t
        d[i] = s * (i + t)


# ---- the floor: an empty native function called through ctypes ----------------------------

class EmptyFunctions:
    """`void empty<k>(int64, ...)` for each argument count, compiled once with llvmlite."""

    def __init__(self, arg_counts: tuple[int, ...]) -> None:
        import llvmlite.binding as llvm
        from llvmlite import ir
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = ir.Module(name="jitrt_bench_floor")
        module.triple = llvm.get_process_triple()
        for k in arg_counts:
            fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)] * k),
                             f"empty{k}")
            ir.IRBuilder(fn.append_basic_block("entry")).ret_void()
        tm = llvm.Target.from_triple(module.triple).create_target_machine()
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        self._engine = llvm.create_mcjit_compiler(mod, tm)   # kept alive with the functions
        self._engine.finalize_object()
        self.functions = {
            k: ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * k)(
                self._engine.get_function_address(f"empty{k}"))
            for k in arg_counts}


# ---- timing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    level: str          # "L0" or "L1"
    case: str
    us: float           # median microseconds per launch


def time_launches(fn: Callable[..., Any], args: tuple, launches: int, repeats: int) -> float:
    """Median over `repeats` runs of the microseconds per call of `fn(*args)`."""
    for _ in range(min(launches, 1000)):   # warm up (the first call of a kernel compiles)
        fn(*args)
    jr.sync()
    loop = range(launches)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in loop:
            fn(*args)
        jr.sync()
        samples.append((time.perf_counter() - start) / launches * 1e6)
    return statistics.median(samples)


def measure(launches: int = 20000, repeats: int = 5) -> list[Row]:
    """Time every case; raises AssertionError if a kernel wrote wrong values."""
    jr.sync()
    f32 = np.float32
    s, t = 1.5, 3
    nd = [jr.ndarray(jr.f32, shape=(N,)) for _ in range(4)]
    host = [np.zeros(N, f32) for _ in range(4)]
    floor = EmptyFunctions((1, 6))
    ptrs = [a.ctypes.data for a in host]
    cases: list[tuple[str, str, Callable[..., Any], tuple]] = [
        ("L0", "empty ctypes call, 1 int64 (floor)", floor.functions[1], (ptrs[0],)),
        ("L0", "jitrt ndarray", fill_l0, (nd[0],)),
        ("L0", "numpy array", fill_l0, (host[0],)),
        ("L0", "bound launch k.bind(...)()", fill_l0.bind(nd[0]), ()),
        ("L1", "empty ctypes call, 6 int64 (floor)", floor.functions[6], (*ptrs, 7, t)),
        ("L1", "jitrt ndarray", fill_l1, (*nd, s, t)),
        ("L1", "numpy array", fill_l1, (*host, s, t)),
        ("L1", "bound launch k.bind(...)()", fill_l1.bind(*nd, s, t), ()),
    ]
    rows = [Row(level, name, time_launches(fn, args, launches, repeats))
            for level, name, fn, args in cases]
    i = np.arange(N, dtype=f32)
    want = (i, i * f32(s), i + f32(t), f32(s) * (i + f32(t)))
    for got in (nd, host):
        for arr, expect in zip(got, want):
            values = arr.to_numpy() if isinstance(arr, jr.Ndarray) else arr
            assert np.array_equal(values, expect), f"wrong kernel output {values} != {expect}"
    return rows


def format_table(rows: list[Row]) -> str:
    floors = {r.level: r.us for r in rows if "floor" in r.case}
    width = max(len(f"{r.level} {r.case}") for r in rows)
    lines = [f"{'case':<{width}}  {'us/launch':>9}  {'ratio vs floor':>14}",
             f"{'-' * width}  {'-' * 9}  {'-' * 14}"]
    for r in rows:
        ratio = r.us / floors[r.level] if floors.get(r.level) else float("nan")
        lines.append(f"{r.level + ' ' + r.case:<{width}}  {r.us:9.3f}  {ratio:13.2f}x")
    return "\n".join(lines)


def format_targets(rows: list[Row]) -> str:
    lines = ["DESIGN targets (jitrt ndarrays, steady state):"]
    for level, target in TARGETS_US.items():
        got = next(r.us for r in rows if r.level == level and r.case == "jitrt ndarray")
        verdict = "met" if got <= target else "NOT met"
        lines.append(f"  {level} <= {target:.1f} us: measured {got:.3f} us ({verdict})")
    lines.append("Reference launch overheads (reported, not measured here):")
    lines += [f"  {name:<10} {text}" for name, text in REPORTED]
    return "\n".join(lines)


def main(launches: int = 20000, repeats: int = 5, arch: str = "cpu") -> int:
    if launches < 1 or repeats < 1:
        raise ValueError("launches and repeats must be at least 1")
    jr.init(arch=arch)
    print(f"jitrt {jr.__version__} launch overhead: kernels over {N} elements, median of "
          f"{repeats} x {launches} launches, one jr.sync() per run")
    print("L0: 1 array argument; L1: 4 arrays + 2 scalars (the kernel writes all 4)")
    rows = measure(launches, repeats)
    print(format_table(rows))
    print("(a jitrt launch is one ctypes call with one argument, the launch context; so it can\n"
          " beat the L1 floor, whose 6 arguments ctypes converts one by one)")
    print(format_targets(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
