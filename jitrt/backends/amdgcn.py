"""AMDGPU code: LLVM IR -> relocatable object (llvmlite) -> code object (HSACO, ld.lld).

Stage: backend (the compile half of the AMDGPU device). No GPU and no ROCm needed.
`compile_code_object(module, gfx)` optimises a kernel module for one gfx target (`gfx942`,
`gfx90a`, `gfx1100`, ...), emits an ELF object and links it into the shared object the HIP
runtime loads (`hipModuleLoadData`). Math functions need no device library (the kernels carry
jitrt's portable math, `codegen/portable_math.py`). The linker is the first found of:
`JITRT_LD_LLD`, ROCm's (`$ROCM_PATH/llvm/bin/ld.lld`, /opt/rocm), `ld.lld` on the PATH
(Debian's `lld` package), the `ziglang` wheel's (`zig ld.lld`). Without one,
compiling raises `BackendUnavailableError` saying so.
`kernel_descriptors(code_object)` reads a code object's kernel descriptors back (kernarg
size, LDS size, wave size per kernel): what the tests check each code object against.
Caches: one target machine per gfx target and the linker command, per process.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import struct

import llvmlite.binding as llvm
from llvmlite import ir

from ..frozen import frozen
from ..codegen.targets import AmdgpuTarget, TargetTraits
from ..errors import BackendUnavailableError
from .llvm_setup import LLVM_LOCK, init_all_targets, optimize
from .tools import transform

TRIPLE = "amdgcn-amd-amdhsa"
DEFAULT_GFX = "gfx942"
WAVE64 = ("gfx9",)          # gfx9 targets run wave64 only; gfx10+ default to wave32
# what HIP kernels have (`codegen.targets.TargetTraits`): grid launches, a status block for
# what a launch writes, data in global memory (space 1), stacks interleaved across threads
TRAITS = TargetTraits(grid_launch=True, status_block=True, data_address_space=1,
                      host_interrupts=False, interleaved_stacks=True, unroll_hints=False,
                      local_stacks=True, fault_ends_thread=False, narrow_offsets=True)


def wave_size(gfx: str) -> int:
    return 64 if gfx.startswith(WAVE64) else 32


@functools.lru_cache(maxsize=None)
def target_machine(gfx: str) -> llvm.TargetMachine:
    init_all_targets()
    target = llvm.Target.from_triple(TRIPLE)
    tm = target.create_target_machine(cpu=gfx, opt=3, reloc="pic")
    return tm


@functools.lru_cache(maxsize=None)
def codegen_target() -> AmdgpuTarget:
    """The codegen hooks for AMDGPU, with this LLVM's data layout (the same for every gfx)."""
    return AmdgpuTarget("amdgpu", TRIPLE, str(target_machine(DEFAULT_GFX).target_data), TRAITS)


def _optimized(module: ir.Module | str, gfx: str) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    optimize(mod, target_machine(gfx))
    return mod


def assembly(module: ir.Module | str, gfx: str) -> str:
    """The AMDGCN assembly of a kernel module for `gfx` (`jr.debug.gpu_asm`)."""
    with LLVM_LOCK:
        return str(target_machine(gfx).emit_assembly(_optimized(module, gfx)))


def compile_object(module: ir.Module | str, gfx: str) -> bytes:
    with LLVM_LOCK:
        return bytes(target_machine(gfx).emit_object(_optimized(module, gfx)))


@functools.lru_cache(maxsize=None)
def linker() -> tuple[str, ...] | None:
    """The command that runs ld.lld, or None when there is none."""
    named = os.environ.get("JITRT_LD_LLD")
    if named:
        return (named,)
    for root in (os.environ.get("ROCM_PATH", ""), "/opt/rocm"):
        path = os.path.join(root, "llvm", "bin", "ld.lld")
        if root and os.access(path, os.X_OK):
            return (path,)
    found = shutil.which("ld.lld")
    if found:
        return (found,)
    versioned = sorted(glob.glob("/usr/bin/ld.lld-*"),
                       key=lambda p: int(p.rsplit("-", 1)[1]) if p.rsplit("-", 1)[1].isdigit()
                       else 0)
    if versioned:
        return (versioned[-1],)
    spec = importlib.util.find_spec("ziglang")
    if spec is not None and spec.submodule_search_locations:
        zig = os.path.join(list(spec.submodule_search_locations)[0], "zig")
        if os.access(zig, os.X_OK):
            return (zig, "ld.lld")
    return None


def link(obj: bytes) -> bytes:
    """The loadable code object of one relocatable AMDGPU object."""
    command = linker()
    if command is None:
        raise BackendUnavailableError(
            "arch=amdgpu: linking a code object needs ld.lld (ROCm ships one; or Debian's "
            "'lld' package, or pip install ziglang; JITRT_LD_LLD names another)")
    return transform([*command, "-shared", "--no-undefined"], obj, ".o", ".hsaco",
                     "ld.lld rejected the generated AMDGPU object")


def compile_code_object(module: ir.Module | str, gfx: str) -> bytes:
    return link(compile_object(module, gfx))


@frozen
class KernelDescriptor:
    """What a code object's kernel descriptor (`<name>.kd`, 64 bytes) says of one kernel."""
    kernarg_size: int        # bytes of kernel arguments
    group_segment_size: int  # bytes of LDS (shared memory) per workgroup
    wave32: bool             # whether it runs as wave32 (gfx10+) or wave64


def kernel_descriptors(code_object: bytes) -> dict[str, KernelDescriptor]:
    """{kernel name: its descriptor} from the `<name>.kd` symbols of an AMDGPU ELF."""
    data = code_object
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF code object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize)
                for k in range(shnum)]
    found: dict[str, KernelDescriptor] = {}
    for sec in sections:
        if sec[1] != 2:                  # SHT_SYMTAB
            continue
        strtab = sections[sec[6]]
        for off in range(sec[4], sec[4] + sec[5], 24):
            name_off, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", data, off)
            start = strtab[4] + name_off
            name = data[start:data.index(b"\0", start)].decode()
            if name.endswith(".kd") and (info & 0xF) == 1:      # STT_OBJECT
                home = sections[shndx]
                at = home[4] + value - home[3]
                group, _, kernarg = struct.unpack_from("<III", data, at)
                properties, = struct.unpack_from("<H", data, at + 56)
                found[name[:-3]] = KernelDescriptor(kernarg, group, bool(properties & 0x400))
    return found
