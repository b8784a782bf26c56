"""NVPTX code: LLVM IR -> PTX (llvmlite) -> cubin (ptxas). No GPU and no driver needed.

Stage: backend (the compile half of the CUDA device). `compile_ptx(module, sm)` optimises a
kernel module for `sm_<sm>`, links libdevice (the CUDA math library, LLVM bitcode) into it
when it calls `__nv_*` functions (codegen's: their bodies optimised once per sm, then inlined
after the kernel's own optimisation, `nvptx_math.py`) and returns PTX text.
`assemble(ptx, sm)` runs the toolkit's `ptxas` on it and returns a cubin (None when no ptxas
is installed; the driver then compiles the PTX itself at load time). Both come from the
`nvidia-cuda-nvcc` wheel (`pip install 'jitrt[cuda]'`), found through cuda-pathfinder,
`CUDA_HOME` or /usr/local/cuda.
Caches nothing itself: libdevice's bitcode, the part of it codegen can call and the subsets
kernels link are cached by `libdevice.py` (per process, and across processes in the offline
cache), each of its functions optimised per sm by `nvptx_math.py`.
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from ..codegen.targets import NvptxTarget, TargetTraits
from .base import HostServices
from .llvm_setup import LLVM_LOCK, optimize
from .libdevice import TRIPLE as TRIPLE
from .libdevice import (_CUTS as _CUTS, _libdevice_bitcode as _libdevice_bitcode,  # noqa: F401
                        _subset_of as _subset_of, codegen_math_bitcode as codegen_math_bitcode,
                        codegen_math_names as codegen_math_names, cut_key as cut_key,
                        libdevice_path as libdevice_path, libdevice_subset as libdevice_subset,
                        math_calls as math_calls, ptxas_path as ptxas_path,
                        target_machine as target_machine)
from .tools import transform

# what CUDA kernels have (`codegen.targets.TargetTraits`): grid launches, a status block for
# what a launch writes, data in global memory (space 1), stacks interleaved across threads
TRAITS = TargetTraits(grid_launch=True, status_block=True, data_address_space=1,
                      host_interrupts=False, interleaved_stacks=True, unroll_hints=False,
                      local_stacks=True, fault_ends_thread=True,
                      deferred_reads=True, narrow_offsets=True)


@functools.lru_cache(maxsize=None)
def codegen_target() -> NvptxTarget:
    """The codegen hooks for NVPTX, with this LLVM's data layout."""
    return NvptxTarget("cuda", TRIPLE, str(target_machine(80).target_data), TRAITS)


def compile_ptx(module: ir.Module | str, sm: int, host: HostServices | None = None) -> str:
    """PTX for compute capability `sm` (80 for 8.0...), libdevice linked in where used (what
    it needs of libdevice kept in `host.store` across processes, when given). A kernel that
    calls only codegen's math functions is optimised first and gets their bodies, optimised
    once per sm, inlined after (`nvptx_math`); other `__nv_*` functions are linked first and
    optimised with the kernel."""
    from . import nvptx_math
    text = str(module)
    with LLVM_LOCK:
        tm = target_machine(sm)
        mod = llvm.parse_assembly(text)
        mod.verify()
        used = math_calls(mod)
        if used and used <= codegen_math_names():
            nvptx_math.optimise_and_link(mod, used, sm, host)
        else:
            if used:
                lib = llvm.parse_bitcode(libdevice_subset(used, host))
                lib.triple, lib.data_layout = mod.triple, mod.data_layout
                mod.link_in(lib)
                for fn in mod.functions:     # keep only what the kernels call
                    if fn.name.startswith("__nv_") and not fn.is_declaration:
                        fn.linkage = llvm.Linkage.internal
            optimize(mod, tm)
        return str(tm.emit_assembly(mod))


# ptxas compiles a module's functions (a kernel's tasks) on every core of the machine; the
# code is the same as without it (the cubin's sections are laid out differently). A ptxas too
# old to know the option gets the command without it from then on (the list emptied).
SPLIT_COMPILE = ["-split-compile=0"]


def assemble(ptx: str, sm: int) -> bytes | None:
    """A cubin for `sm_<sm>` made by ptxas, or None when ptxas is not installed. A PTX error
    raises RuntimeError with ptxas's message (a code generation bug, never the user's)."""
    tool = ptxas_path()
    if tool is None:
        return None
    what = f"ptxas rejected the generated PTX for sm_{sm}"
    command = [tool, f"-arch=sm_{sm}", "-O3"]
    if SPLIT_COMPILE:
        try:
            return transform(command + SPLIT_COMPILE, ptx.encode(), ".ptx", ".cubin", what)
        except RuntimeError as exc:
            if "split-compile" not in str(exc):
                raise
            SPLIT_COMPILE.clear()            # an older ptxas: "Unknown option"
    return transform(command, ptx.encode(), ".ptx", ".cubin", what)
