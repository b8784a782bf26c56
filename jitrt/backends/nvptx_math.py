"""libdevice's math functions optimised once, linked into a kernel after its own optimisation.

Stage: backend (part of `nvptx.compile_ptx`). A kernel that calls only the libdevice
functions codegen emits (`libdevice.codegen_math_names()`: sin, cos, atan2, exp...) is run
through LLVM's O3 pipeline with those functions as calls (declared pure by codegen,
`NvptxTarget.math_function`), then each function's body, already optimised for the compute
capability, is linked in and inlined (`optimise_and_link`), with a cleanup where body and
kernel meet. Before, the whole O3 pipeline ran over every inlined body of every kernel:
sin, cos, atan2 and exp made a kernel's LLVM time two to three times its own.

Caches: per function and compute capability, a piece of bitcode defining it (`math_pieces`:
the function after O3 for `sm_<sm>`, libdevice's `__nvvm_reflect` queries answered, and the
helpers it calls), per process and, given the offline cache (`HostServices.store`), per
machine. A piece is made when a kernel first needs its function (~5-20 ms of CPU a
function; the functions a kernel needs that none has needed yet are made together, in one
cut of the part of libdevice codegen calls, `libdevice.codegen_math_bitcode`, and one O3 run).
"""
from __future__ import annotations

import time

import llvmlite.binding as llvm

from ..logger import logger
from . import libdevice
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
    return f"{libdevice.cut_key(host)}-sm{sm}-{name}"


def math_pieces(names: frozenset[str], sm: int,
                host: HostServices | None = None) -> dict[str, bytes]:
    """For each of libdevice's `names` (of `libdevice.codegen_math_names()`), bitcode defining
    it optimised for `sm_<sm>`, with the helpers it calls. Those not made yet in this
    process, nor on this machine (`host.store`), are made together (one cut of libdevice,
    one O3 run) into one piece, kept under each of their names; every function and table of a
    piece is linkonce_odr, so that pieces sharing one link to one copy of it. Call
    under LLVM_LOCK."""
    path = libdevice.libdevice_path() or ""
    store = host.store if host is not None else None
    found: dict[str, bytes] = {}
    for name in sorted(names):
        piece = _PIECES.get((path, sm, name))
        if piece is None and host is not None and store is not None:
            loaded = store.load(_piece_key(host, sm, name))  # (checksummed: a damaged
            piece = loaded if isinstance(loaded, bytes) else None    # entry reads as None)
        if piece is not None:
            found[name] = _PIECES[(path, sm, name)] = piece
    missing = frozenset(name for name in names if name not in found)
    if missing:
        start = time.perf_counter()
        mod = llvm.parse_bitcode(libdevice.libdevice_subset(missing, host))
        mod.triple = libdevice.TRIPLE
        optimize(mod, libdevice.target_machine(sm))
        for value in [*mod.functions, *mod.global_variables]:   # (sinf's table of 2/pi...)
            if not value.is_declaration:
                value.linkage = llvm.Linkage.linkonce_odr
        piece = bytes(mod.as_bitcode())
        listed = ", ".join(sorted(missing))
        for name in sorted(missing):
            found[name] = _PIECES[(path, sm, name)] = piece
            if host is not None and store is not None:
                store.save(_piece_key(host, sm, name),
                           f"libdevice: {listed} optimised for sm_{sm}", piece)
        logger.debug("libdevice: %s optimised for sm_%d, %.1f ms%s", listed, sm,
                     (time.perf_counter() - start) * 1e3,
                     " (kept in the offline cache)" if store is not None else "")
    return found


def prepare(sm: int, host: HostServices | None = None) -> None:
    """A piece for each of codegen's math functions and `sm_<sm>`, one function each, made
    (or read) now: what a machine that ran CUDA programs has in its offline cache
    (`benchmarks/gpu_compile.py --libdevice kept`). Call under LLVM_LOCK."""
    for name in sorted(libdevice.codegen_math_names()):
        math_pieces(frozenset({name}), sm, host)


def _size(fn: llvm.ValueRef) -> int:
    return sum(1 for block in fn.blocks for _ in block.instructions)


def optimise_and_link(mod: llvm.ModuleRef, used: frozenset[str], sm: int,
                      host: HostServices | None) -> None:
    """O3 over `mod` with its calls of `used` (codegen's math functions) left as calls,
    then their optimised bodies linked in and inlined. Call under LLVM_LOCK."""
    tm = libdevice.target_machine(sm)
    parsed: dict[bytes, llvm.ModuleRef] = {}        # a piece made for several names: once
    pieces: dict[str, llvm.ModuleRef] = {}
    for name, bitcode in math_pieces(used, sm, host).items():
        if bitcode not in parsed:
            parsed[bitcode] = llvm.parse_bitcode(bitcode)
        pieces[name] = parsed[bitcode]
        if _size(pieces[name].get_function(name)) > BIG_BODY:
            mod.get_function(name).add_function_attribute("noduplicate")
    optimize(mod, tm)
    left = libdevice.math_calls(mod)       # O3 may have merged or dropped some calls
    if not left:
        return
    for piece in {id(pieces[name]): pieces[name] for name in sorted(left)}.values():
        piece.triple, piece.data_layout = mod.triple, mod.data_layout
        mod.link_in(piece)
    for value in [*mod.functions, *mod.global_variables]:   # keep only what is used
        if not value.is_declaration and (value.name.startswith("__nv_") or
                                         value.linkage == llvm.Linkage.linkonce_odr):
            value.linkage = llvm.Linkage.internal
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
