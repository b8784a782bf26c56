"""libdevice (the CUDA math library, LLVM bitcode) and the CUDA toolkit's files: where they are,
the part of libdevice jitrt's NVPTX codegen can call, and the subsets kernels link.

Stage: backend helper (of `nvptx.py` and `nvptx_math.py`). Caches, per process: the path of
each tool, libdevice's bitcode, the part of it codegen can call (parsed from all of libdevice
once) and the subsets of that per set of math functions used; across processes, given the
offline cache (`HostServices.store`), that part of libdevice.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import time

import llvmlite.binding as llvm
import xxhash

from ..codegen.targets import INSTRUCTIONS, MATH_INTRINSIC
from ..errors import BackendUnavailableError
from ..logger import logger
from .base import HostServices
from .llvm_setup import init_all_targets

TRIPLE = "nvptx64-nvidia-cuda"


def _toolkit_roots() -> list[str]:
    roots = [os.environ.get(v, "") for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    try:        # the nvidia-* wheels install under site-packages/nvidia/cu<major>/
        import nvidia
        for base in nvidia.__path__:
            roots += sorted(glob.glob(os.path.join(base, "cu*")), reverse=True)
            roots.append(os.path.join(base, "cuda_nvcc"))
    except ImportError:
        pass
    return [r for r in roots if r and os.path.isdir(r)]


@functools.lru_cache(maxsize=None)
def libdevice_path() -> str | None:
    for root in _toolkit_roots():
        found = sorted(glob.glob(os.path.join(root, "nvvm", "libdevice", "libdevice*.bc")))
        if found:
            return found[-1]
    return None


@functools.lru_cache(maxsize=None)
def ptxas_path() -> str | None:
    for root in _toolkit_roots():
        path = os.path.join(root, "bin", "ptxas")
        if os.access(path, os.X_OK):
            return path
    return shutil.which("ptxas")


@functools.lru_cache(maxsize=None)
def target_machine(sm: int) -> llvm.TargetMachine:
    init_all_targets()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=f"sm_{sm}", opt=3)


def drop_unused(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """Remove the internal functions nothing calls (most of a linked libdevice)."""
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(mod, pb)


@functools.lru_cache(maxsize=1)
def _libdevice_bitcode() -> bytes:
    path = libdevice_path()
    if path is None:
        raise BackendUnavailableError(
            "arch=cuda: the kernel calls CUDA math functions, which need libdevice "
            "(pip install 'jitrt[cuda]', which brings nvidia-cuda-nvcc)")
    with open(path, "rb") as f:
        return f.read()


def codegen_math_names() -> frozenset[str]:
    """Every libdevice function jitrt's NVPTX codegen calls (`NvptxTarget.math_symbol`: the
    math functions that are no instruction, f32 and f64)."""
    return frozenset(f"__nv_{fn}{suffix}" for fn in MATH_INTRINSIC if fn not in INSTRUCTIONS
                     for suffix in ("f", ""))


@functools.lru_cache(maxsize=256)
def _subset_of(bitcode: bytes, names: frozenset[str]) -> bytes:
    """Bitcode of the functions `names` of `bitcode` and what they call (cached per process:
    the same bitcode object comes back for every kernel, and bytes keep their hash)."""
    lib = llvm.parse_bitcode(bitcode)
    for fn in lib.functions:
        if not fn.is_declaration and fn.name not in names:
            fn.linkage = llvm.Linkage.internal
    drop_unused(lib, target_machine(80))     # the same bitcode serves every sm
    return bytes(lib.as_bitcode())


# per process: libdevice's path -> its cut to `codegen_math_names()` (made or loaded once)
_CUTS: dict[str, bytes] = {}


def cut_key(host: HostServices) -> str:
    """The offline-cache key of the cut: libdevice's bytes, jitrt's sources (which decide
    `codegen_math_names()`) and LLVM's versions (`HostServices.runtime_key`)."""
    parts = [host.runtime_key(), xxhash.xxh3_128_hexdigest(_libdevice_bitcode())]
    return "libdevice-" + xxhash.xxh3_128_hexdigest("\0".join(parts).encode())


def codegen_math_bitcode(host: HostServices | None = None) -> bytes:
    """libdevice cut down to `codegen_math_names()` and what they call (~45 KB of its
    ~460): made once per process, the source of every kernel's subset. With an offline cache
    (`host.store`) it is read from there, or made and stored there for the next process.
    Call under LLVM_LOCK."""
    path = libdevice_path() or ""
    cut = _CUTS.get(path)
    if cut is not None:
        return cut
    store = host.store if host is not None else None
    key = cut_key(host) if host is not None and store is not None else ""
    loaded = store.load(key) if store is not None else None   # (checksummed: a damaged
    cut = loaded if isinstance(loaded, bytes) else None        # entry reads as None)
    if cut is not None:
        logger.debug("libdevice: the part codegen calls read from the offline cache")
    else:
        start = time.perf_counter()
        cut = _subset_of(_libdevice_bitcode(), codegen_math_names())
        if store is not None:
            store.save(key, "libdevice: the math functions codegen calls", cut)
        logger.debug("libdevice: all of it parsed for the part codegen calls, %.1f ms%s",
                     (time.perf_counter() - start) * 1e3,
                     " (kept in the offline cache)" if store is not None else "")
    _CUTS[path] = cut
    return cut


def libdevice_subset(names: frozenset[str], host: HostServices | None = None) -> bytes:
    """Bitcode of the libdevice functions `names` and what they call. All of libdevice is
    parsed (~50-100 ms) once per process, or once per machine with an offline cache, into the
    part codegen can call (`codegen_math_bitcode`); each new set of names is cut from that
    (~5 ms) rather than from all of libdevice again (~60 ms a set, for each kernel whose math
    functions differ from an earlier one's). Call under LLVM_LOCK."""
    if names <= codegen_math_names():
        return _subset_of(codegen_math_bitcode(host), names)
    return _subset_of(_libdevice_bitcode(), names)


def math_calls(mod: llvm.ModuleRef) -> frozenset[str]:
    """The libdevice functions `mod` declares (and so calls)."""
    return frozenset(fn.name for fn in mod.functions
                     if fn.is_declaration and fn.name.startswith("__nv_"))
