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

from typing import TYPE_CHECKING

from .long_lived import settled as _settled

# The import makes objects that live as long as the process: no collector passes over them
# while it runs (jitrt/long_lived.py)
with _settled():
    # numpy first, from this shallow import depth. Imported four levels down (jitrt -> ad ->
    # runtime.program -> config), numpy's import took ~15 ms longer on CPython 3.11: its typing
    # modules' many small calls sat on a boundary of the interpreter's frame-stack chunks, and
    # each call mapped and unmapped a chunk (~900 mmap/munmap pairs; docs/performance.md).
    import numpy as _numpy  # noqa: F401

    # The C extension modules the rest of the import loads, then LLVM's library on another core
    # (backends/llvm_preload.py, which its import starts): glibc's dlopen holds one lock for a
    # whole load, so loading an extension module meanwhile would wait for LLVM's to end.
    import heapq as _heapq  # noqa: F401
    import xxhash as _xxhash  # noqa: F401

    from .backends import llvm_preload as _llvm_preload  # noqa: F401,E402

    from . import ad, types
    from ._version import __version__ as __version__
    if TYPE_CHECKING:
        # loaded on first use at run time (`_LAZY` below)
        from . import debug, math, profiler
        from .linear_solve import solve
        from .quadrants import algorithms, lang, simt
        from .quadrants import qd_logging as _logging  # noqa: F401 (qd._logging)
        from .quadrants.perf import perf_dispatch
        from .runtime.devices import device, device_count
        from .runtime.streams import Event, Stream, stream
        from .runtime.graph import Graph, graph
        # To a type checker a dtype is the Python type of its values, so that kernel parameters
        # annotated `x: jr.f32` are valid types (`float`) and a kernel's signature is checked at
        # its calls (docs/usage.md, "Type checking"); at run time they are jitrt's dtypes.
        from typing import TypeAlias
        f32: TypeAlias = float
        f64: TypeAlias = float
        i8: TypeAlias = int
        i16: TypeAlias = int
        i32: TypeAlias = int
        i64: TypeAlias = int
        u8: TypeAlias = int
        u16: TypeAlias = int
        u32: TypeAlias = int
        u64: TypeAlias = int
        float32: TypeAlias = float
        float64: TypeAlias = float
        int8: TypeAlias = int
        int16: TypeAlias = int
        int32: TypeAlias = int
        int64: TypeAlias = int
        uint8: TypeAlias = int
        uint16: TypeAlias = int
        uint32: TypeAlias = int
        uint64: TypeAlias = int
    else:
        from .dtypes import f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
        from .dtypes import (f32 as float32, f64 as float64, i8 as int8, i16 as int16,
                             i32 as int32, i64 as int64, u8 as uint8, u16 as uint16, u32 as uint32,
                             u64 as uint64)
    from .errors import (AdStackOverflowError, AutodiffError, BackendUnavailableError,
                         ConfigError, CastWarning, FloatDtypeError, GradCheckWarning,
                         InvalidShapeError, JitrtError,
                         KernelArgCountError, KernelArgError, KernelArgValueError,
                         KernelAssertionError, KernelBoundsError, KernelCompileError,
                         KernelIndexError, KernelNameError, KernelRuntimeError, KernelSyntaxError,
                         KernelTypeError, NotDifferentiableError, OfflineCacheError,
                         TapeLossError)
    from .errors import (TaichiAssertionError, TaichiCompilationError, TaichiIndexError,
                         TaichiNameError, TaichiRuntimeError, TaichiRuntimeTypeError,
                         TaichiSyntaxError, TaichiTypeError)
    from .extension import (amdgpu, arm64, cpu, cuda, dx11, dx12, extension, gles, gpu,
                            is_extension_supported, metal, opengl, vulkan, x64, x86_64)
    from .frontend.builtins import atomic_and, atomic_or, atomic_xor, static_assert, static_print
    from .frontend.builtins import (MATH, atan2, atomic_add, atomic_max, atomic_min, atomic_sub,
                                    block_local, cast, clamp, eig, exp2, grouped, log2, loop_config,
                                    ndrange, polar_decompose, pow_ as pow, randn, random, rsqrt,
                                    select, sign, static, stop_grad, svd, sym_eig)
    from .frontend.builtins import abs_ as _builtins_abs, max_ as _builtins_max, \
        min_ as _builtins_min
    from .kernel import data_oriented, func, kernel, real_func
    from .data import Field, MatrixField, Ndarray, ScalarField
    from .data_declare import Layout, field, ndarray
    from .linalg import Matrix, Struct, StructField, Vector, rgb_to_hex
    from .layout import FieldsBuilder, SNodeTree  # noqa: F401 (Taichi's builder of a layout tree)
    from .layout import i, ij, ijk, ijkl, ik, j, jk, k, l, root  # noqa: E741,F401 (jr.ij...)
    from .runtime.program import clear_cache, init, reset, sync
    from .types import ref, template
    from .peer_funcs import (CRITICAL, DEBUG, ERROR, INFO, TRACE, WARN, assume_in_range, dataclass,
                             hex_to_rgb, is_logging_effective, one, set_logging_level, zero)

    # Quadrants 1.3.3's own names (what Genesis uses beyond Taichi's language): jitrt/quadrants/,
    # docs/porting.md "Genesis"
    from .frontend.builtins import (atomic_exchange, atomic_mul, bit_cast, bit_shr, outer, raw_div,
                                    raw_mod)
    from .quadrants.tensor import Backend, MatrixTensor, Tensor, VectorTensor, tensor

    u1 = u8            # Quadrants' 1-bit bool: a byte here (docs/porting.md, "Genesis")

    # What a kernel launch on the CPU does not need loads on first use (PEP 562 `__getattr__`), so
    # that `import jitrt` does not pay for it (docs/performance.md, "Cold start"): name -> (module,
    # attribute; None: the module itself)
    _LAZY: dict[str, tuple[str, str | None]] = {
        "debug": (".debug", None), "math": (".math", None), "profiler": (".profiler", None),
        "algorithms": (".quadrants.algorithms", None), "lang": (".quadrants.lang", None),
        "simt": (".quadrants.simt", None), "_logging": (".quadrants.qd_logging", None),
        "perf_dispatch": (".quadrants.perf", "perf_dispatch"), "solve": (".linear_solve", "solve"),
        "Graph": (".runtime.graph", "Graph"), "graph": (".runtime.graph", "graph"),
        "device": (".runtime.devices", "device"),
        "device_count": (".runtime.devices", "device_count"),
        "Stream": (".runtime.streams", "Stream"),
        "Event": (".runtime.streams", "Event"), "stream": (".runtime.streams", "stream")}

    # The launch path and the cache store load with the package; the compile pipeline (frontend
    # lowering, passes, codegen) loads with the first compile and the CPU backend (llvmlite's LLVM
    # library) with jr.init(), so that `import jitrt` pays for neither (docs/performance.md,
    # "Start-up").
    from .cache import store as _store  # noqa: E402,F401
    from .runtime import launcher as _launcher  # noqa: E402,F401


ScalarNdarray = VectorNdarray = MatrixNdarray = Ndarray     # and of an ndarray's
pyfunc = func                           # a @jr.func also runs at Python scope
# the peers' axis lists with l (jr.i ... jr.ijkl are in layout.py)
il, jl, kl, ijl, ikl, jkl = (0, 3), (1, 3), (2, 3), (0, 1, 3), (0, 2, 3), (1, 2, 3)

sin, cos, tan, exp, log = MATH["sin"], MATH["cos"], MATH["tan"], MATH["exp"], MATH["log"]
sqrt, tanh, floor, ceil = MATH["sqrt"], MATH["tanh"], MATH["floor"], MATH["ceil"]
asin, acos, atan, sinh, cosh, round = (MATH[fn] for fn in ("asin", "acos", "atan", "sinh",
                                                           "cosh", "round"))
# Taichi's ti.min/ti.max/ti.abs (element-wise); left out of __all__ so that `from jitrt import *`
# keeps Python's own min, max and abs
min, max, abs = _builtins_min, _builtins_max, _builtins_abs

__all__ = ["AdStackOverflowError", "AutodiffError", "BackendUnavailableError", "ConfigError",
           "CastWarning", "Field", "FloatDtypeError", "GradCheckWarning", "Graph",
           "InvalidShapeError", "JitrtError",
           "KernelArgError", "KernelArgValueError", "KernelCompileError", "KernelRuntimeError",
           "Matrix", "MatrixField",
           "Layout", "Ndarray", "NotDifferentiableError", "OfflineCacheError", "ScalarField",
           "Struct", "StructField", "TapeLossError",
           "Vector", "acos", "ad", "amdgpu", "asin",
           "atan", "atan2", "atomic_add", "atomic_max", "atomic_min", "atomic_sub", "block_local",
           "cast", "ceil",
           "clamp", "clear_cache", "cos", "cosh", "cpu", "cuda", "data_oriented", "debug",
           "device", "device_count", "eig", "Event", "Stream", "stream",
           "exp", "exp2", "f32", "f64", "field", "floor", "func", "gpu", "graph", "grouped", "i16",
           "i32", "i64", "i8", "init", "kernel", "log", "log2", "loop_config", "math", "ndarray",
           "ndrange", "polar_decompose", "pow", "profiler", "randn", "random", "reset", "root",
           "round", "rsqrt", "select", "sign", "sin", "sinh", "sqrt", "static", "stop_grad", "svd",
           "sym_eig",
           "sync", "tan", "tanh", "template", "types", "u16", "u32", "u64", "u8", "rgb_to_hex",
           "real_func", "ref",
           # Taichi's and Quadrants' spellings and names (docs/porting.md)
           "algorithms", "arm64", "assume_in_range", "atomic_and", "atomic_exchange", "atomic_or",
           "atomic_xor", "Backend", "CRITICAL", "dataclass", "DEBUG", "dx11", "dx12", "ERROR",
           "extension", "FieldsBuilder", "float32", "float64", "gles", "hex_to_rgb", "INFO",
           "int16", "int32",
           "int64", "int8", "is_extension_supported", "is_logging_effective",
           "KernelArgCountError", "KernelAssertionError", "KernelBoundsError", "KernelIndexError",
           "KernelNameError", "KernelSyntaxError", "KernelTypeError", "lang", "Layout",
           "MatrixNdarray", "MatrixTensor", "metal", "one", "opengl", "outer", "perf_dispatch",
           "pyfunc", "raw_mod", "ScalarNdarray", "set_logging_level", "simt", "solve",
           "raw_div", "bit_cast", "bit_shr", "atomic_mul",
           "static_assert", "static_print", "StructField", "TaichiAssertionError",
           "TaichiCompilationError", "TaichiIndexError", "TaichiNameError", "TaichiRuntimeError",
           "TaichiRuntimeTypeError", "TaichiSyntaxError", "TaichiTypeError", "Tensor", "tensor",
           "TRACE", "u1", "uint16", "uint32", "uint64", "uint8", "VectorNdarray", "VectorTensor",
           "vulkan", "WARN", "x64", "x86_64", "zero"]


def __getattr__(name: str) -> object:
    """A name of `_LAZY`, loaded now; else a peer's name jitrt lacks: an AttributeError that
    says what to use instead."""
    spec = _LAZY.get(name)
    if spec is not None:
        import importlib
        module = importlib.import_module(spec[0], __name__)
        value = module if spec[1] is None else getattr(module, spec[1])
        globals()[name] = value
        return value
    from .peer_names import missing
    raise missing("jitrt", name, {**globals(), **dict.fromkeys(_LAZY)})


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
