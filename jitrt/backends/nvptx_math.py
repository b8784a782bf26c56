"""libdevice's math functions optimised once, linked into a kernel after its own optimisation.

Stage: backend (part of `nvptx.compile_ptx`). A kernel that calls only the libdevice
functions codegen emits (`nvptx.codegen_math_names()`: sin, cos, atan2, exp...) is run
through LLVM's O3 pipeline with those functions as calls (declared pure by codegen,
`NvptxTarget.math_function`), then each function's body, already optimised for the compute
capability, is linked in and inlined (`optimise_and_link`), with a cleanup where body and
kernel meet. Before, the whole O3 pipeline ran over every inlined body of every kernel:
sin, cos, atan2 and exp made a kernel's LLVM time two to three times its own.

Caches: one piece per function and compute capability (`math_piece`: the function after
O3 for `sm_<sm>`, libdevice's `__nvvm_reflect` queries answered, and the helpers it calls),
per process and, given the offline cache (`HostServices.store`), per machine; a piece is
made only when a kernel first needs its function (~5-20 ms of CPU), from the part of
libdevice codegen calls (`nvptx.codegen_math_bitcode`).
"""
from __future__ import annotations

import time

import llvmlite.binding as llvm

from ..logger import logger
from . import nvptx
from .base import HostServices
from .llvm_setup import optimize

# A libdevice function with more instructions than this, once optimised, is declared
# `noduplicate` while the kernel's O3 pipeline runs before it is inlined: O3 would not
# unroll a loop around such a body had it been inlined first (NVPTX's budget for a
# partially unrolled loop body is 75 instructions), and unrolling a loop of calls to it
# would make one copy of the body per call (8 copies of sinf's for
# `for k in range(8): s += sin(...)`). Shorter ones (expf, logf) unroll as before.
BIG_BODY = 75

# per process: (libdevice's path, sm, function name) -> its piece's bitcode
_PIECES: dict[tuple[str, int, str], bytes] = {}


def _piece_key(host: HostServices, sm: int, name: str) -> str:
    return f"{nvptx.cut_key(host)}-sm{sm}-{name}"


def math_piece(name: str, sm: int, host: HostServices | None = None) -> bytes:
    """Bitcode of libdevice's `name` (one of `nvptx.codegen_math_names()`) optimised for
    `sm_<sm>`, with the helpers it calls (linkonce_odr: two pieces calling one helper link
    to one copy). Made once per process, or once per machine with an offline cache
    (`host.store`). Call under LLVM_LOCK."""
    path = nvptx.libdevice_path() or ""
    piece = _PIECES.get((path, sm, name))
    if piece is not None:
        return piece
    store = host.store if host is not None else None
    key = _piece_key(host, sm, name) if host is not None and store is not None else ""
    loaded = store.load(key) if store is not None else None     # (checksummed: a damaged
    piece = loaded if isinstance(loaded, bytes) else None        # entry reads as None)
    if piece is None:
        start = time.perf_counter()
        mod = llvm.parse_bitcode(nvptx.libdevice_subset(frozenset({name}), host))
        mod.triple = nvptx.TRIPLE
        optimize(mod, nvptx.target_machine(sm))
        for fn in mod.functions:
            if not fn.is_declaration and fn.name != name:
                fn.linkage = llvm.Linkage.linkonce_odr
        piece = bytes(mod.as_bitcode())
        if store is not None:
            store.save(key, f"libdevice: {name} optimised for sm_{sm}", piece)
        logger.debug("libdevice: %s optimised for sm_%d, %.1f ms%s", name, sm,
                     (time.perf_counter() - start) * 1e3,
                     " (kept in the offline cache)" if store is not None else "")
    _PIECES[(path, sm, name)] = piece
    return piece


def prepare(sm: int, host: HostServices | None = None) -> None:
    """Every piece for `sm_<sm>` made (or read) now: what a machine that ran CUDA programs
    has in its offline cache (`benchmarks/gpu_compile.py --libdevice kept`). Call under
    LLVM_LOCK."""
    for name in sorted(nvptx.codegen_math_names()):
        math_piece(name, sm, host)


def _size(fn: llvm.ValueRef) -> int:
    return sum(1 for block in fn.blocks for _ in block.instructions)


def optimise_and_link(mod: llvm.ModuleRef, used: frozenset[str], sm: int,
                      host: HostServices | None) -> None:
    """O3 over `mod` with its calls of `used` (codegen's math functions) left as calls,
    then their optimised bodies linked in and inlined. Call under LLVM_LOCK."""
    tm = nvptx.target_machine(sm)
    pieces = {name: llvm.parse_bitcode(math_piece(name, sm, host)) for name in sorted(used)}
    for name, piece in pieces.items():
        if _size(piece.get_function(name)) > BIG_BODY:
            mod.get_function(name).add_function_attribute("noduplicate")
    optimize(mod, tm)
    left = nvptx.math_calls(mod)       # O3 may have merged or dropped some calls
    if not left:
        return
    for name in sorted(left):
        piece = pieces[name]
        piece.triple, piece.data_layout = mod.triple, mod.data_layout
        mod.link_in(piece)
    for fn in mod.functions:           # keep only what the kernels call
        if not fn.is_declaration and (fn.name.startswith("__nv_") or
                                      fn.linkage == llvm.Linkage.linkonce_odr):
            fn.linkage = llvm.Linkage.internal
    _inline(mod, tm)


def _inline(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """Inline the linked (already optimised) functions into the optimised kernel and clean
    up where they meet it: arguments and constants folded into the bodies, their local
    arrays promoted, branches made dead by that removed."""
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_always_inliner_pass()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(mod, pb)
    fpm = llvm.create_new_function_pass_manager()
    fpm.add_sroa_pass()
    fpm.add_instruction_combine_pass()
    fpm.add_simplify_cfg_pass()
    fpm.add_aggressive_dce_pass()
    for fn in mod.functions:
        if not fn.is_declaration:
            fpm.run(fn, pb)
