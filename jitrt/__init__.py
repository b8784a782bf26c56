"""jitrt: a JIT kernel runtime for Python built on llvmlite.

    import jitrt as jr
    jr.init(arch=jr.cpu)
    x = jr.field(jr.f32, shape=(16,))

    @jr.kernel
    def fill(k: jr.f32):
        for i in x:
            x[i] = i * k

The pipeline: frontend (AST -> IR) -> passes (pipeline.py) -> codegen (LLVM IR) -> backends
(native code) -> runtime (LaunchHandle, launches). See docs/ for usage and architecture.
"""
from __future__ import annotations

# numpy first, from this shallow import depth. Imported four levels down (jitrt -> ad ->
# runtime.program -> config), numpy's import took ~15 ms longer on CPython 3.11: its typing
# modules' many small calls sat on a boundary of the interpreter's frame-stack chunks, and
# each call mapped and unmapped a chunk (~900 mmap/munmap pairs; docs/performance.md).
import numpy as _numpy  # noqa: F401

from . import ad, debug, math, profiler, types
from ._version import __version__ as __version__
from .dtypes import f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from .errors import (AdStackOverflowError, AutodiffError, BackendUnavailableError, ConfigError,
                     FloatDtypeError, GradCheckWarning, JitrtError, KernelArgError,
                     KernelCompileError, KernelRuntimeError, NotDifferentiableError,
                     OfflineCacheError)
from .frontend.builtins import (MATH, atan2, atomic_add, atomic_max, atomic_min, atomic_sub,
                                block_local, cast, clamp, eig, exp2, grouped, log2, loop_config,
                                ndrange, polar_decompose, pow_ as pow, randn, random, rsqrt,
                                select, sign, static, stop_grad, svd, sym_eig)
from .frontend.builtins import abs_ as _builtins_abs, max_ as _builtins_max, \
    min_ as _builtins_min
from .kernel import data_oriented, func, kernel
from .data import Field, Ndarray, field, ndarray
from .linalg import Matrix, Struct, Vector, rgb_to_hex
from .layout import i, ij, ijk, ijkl, ik, j, jk, k, l, root  # noqa: E741,F401 (jr.ij...)
from .runtime.graph import Graph, graph
from .runtime.program import clear_cache, init, reset, sync
from .types import template

# Quadrants 1.3.3's own names (what Genesis uses beyond Taichi's language): jitrt/quadrants/,
# docs/porting.md "Genesis"
from .frontend.builtins import (atomic_and, atomic_exchange, atomic_or, atomic_xor, outer,
                                raw_mod, static_assert)
from .frontend.builtins import graph_do_while as _graph_do_while
from .quadrants import algorithms, lang, simt
from .quadrants import qd_logging as _logging  # noqa: F401 (qd._logging)
from .quadrants.perf import perf_dispatch
from .quadrants.qd_logging import CRITICAL, DEBUG, ERROR, INFO, TRACE, WARN
from .quadrants.tensor import Backend, Layout, MatrixTensor, Tensor, VectorTensor, tensor

int8, int16, int32, int64, uint8, uint16, uint32, uint64 = i8, i16, i32, i64, u8, u16, u32, u64
float32, float64 = f32, f64
u1 = u8            # Quadrants' 1-bit bool: a byte here (docs/porting.md, "Genesis")
graph.do_while = _graph_do_while  # type: ignore[attr-defined]   # qd.graph.do_while(flag)

# The launch path and the cache store load with the package; the compile pipeline (frontend
# lowering, passes, codegen) loads with the first compile and the CPU backend (llvmlite's LLVM
# library) with jr.init(), so that `import jitrt` pays for neither (docs/performance.md,
# "Start-up").
from .cache import store as _store  # noqa: E402,F401
from .runtime import launcher as _launcher  # noqa: E402,F401


class _Arch(str):
    @property
    def name(self) -> str:
        return str(self)


cpu, cuda, amdgpu, gpu = _Arch("cpu"), _Arch("cuda"), _Arch("amdgpu"), _Arch("gpu")
x64 = arm64 = cpu                       # the peers' names of the host CPU arch
ScalarField = MatrixField = Field       # the peers' names of a field's type (annotations)

sin, cos, tan, exp, log = MATH["sin"], MATH["cos"], MATH["tan"], MATH["exp"], MATH["log"]
sqrt, tanh, floor, ceil = MATH["sqrt"], MATH["tanh"], MATH["floor"], MATH["ceil"]
asin, acos, atan, sinh, cosh, round = (MATH[fn] for fn in ("asin", "acos", "atan", "sinh",
                                                           "cosh", "round"))
# Taichi's ti.min/ti.max/ti.abs (element-wise); left out of __all__ so that `from jitrt import *`
# keeps Python's own min, max and abs
min, max, abs = _builtins_min, _builtins_max, _builtins_abs

__all__ = ["AdStackOverflowError", "AutodiffError", "BackendUnavailableError", "ConfigError",
           "Field", "FloatDtypeError", "GradCheckWarning", "Graph", "JitrtError",
           "KernelArgError", "KernelCompileError", "KernelRuntimeError", "Matrix", "MatrixField",
           "Ndarray", "NotDifferentiableError", "OfflineCacheError", "ScalarField", "Struct",
           "Vector", "acos", "ad", "amdgpu", "asin",
           "atan", "atan2", "atomic_add", "atomic_max", "atomic_min", "atomic_sub", "block_local",
           "cast", "ceil",
           "clamp", "clear_cache", "cos", "cosh", "cpu", "cuda", "data_oriented", "debug", "eig",
           "exp", "exp2", "f32", "f64", "field", "floor", "func", "gpu", "graph", "grouped", "i16",
           "i32", "i64", "i8", "init", "kernel", "log", "log2", "loop_config", "math", "ndarray",
           "ndrange", "polar_decompose", "pow", "profiler", "randn", "random", "reset", "root",
           "round", "rsqrt", "select", "sign", "sin", "sinh", "sqrt", "static", "stop_grad", "svd",
           "sym_eig",
           "sync", "tan", "tanh", "template", "types", "u16", "u32", "u64", "u8", "rgb_to_hex",
           # Quadrants'
           "Backend", "CRITICAL", "DEBUG", "ERROR", "INFO", "Layout", "MatrixTensor", "TRACE",
           "Tensor", "VectorTensor", "WARN", "algorithms", "atomic_and", "atomic_exchange",
           "atomic_or", "atomic_xor", "float32", "float64", "int16", "int32", "int64", "int8",
           "lang", "outer", "perf_dispatch", "raw_mod", "simt", "static_assert", "tensor", "u1",
           "uint16", "uint32", "uint64", "uint8"]


def __getattr__(name: str) -> object:
    """A peer's name jitrt lacks: an AttributeError that says what to use instead."""
    from .peer_names import missing
    raise missing("jitrt", name)
