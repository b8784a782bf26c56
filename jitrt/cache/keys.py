"""Offline-cache keys.

Stage: cache. A key is xxh3-128 over the named fields of a frozen `CacheKeyParts`, in field
order, so a new part is a new field and reaches the key without anyone listing it by hand.
Parts: the kernel's source, the source of every `@jr.func` it inlines, the compile-time
constants it captured, its specialization (the content-stable kernel name: module, qualified
name, template values, argument types, grad mode), the layouts of the fields it reaches, the
IR the frontend produced, the compile options of the config table that affect code, the
target (triple, CPU, features), the llvmlite and LLVM versions, the jitrt version and a hash
of jitrt's own source files' paths, sizes and modification times (a changed compiler never
reuses an old entry; `source_hash`).
"""
from __future__ import annotations

import functools
import os
from dataclasses import fields

import xxhash

from ..frozen import frozen


@frozen
class CacheKeyParts:
    kernel_source: str
    func_sources: tuple[tuple[str, str], ...]
    captured_constants: tuple[tuple[str, str], ...]
    specialization: str
    field_layouts: tuple[tuple[str, tuple[int, ...], bool], ...]
    frontend_ir: str
    compile_options: tuple[tuple[str, str], ...]
    target: str
    llvm_versions: str
    jitrt_version: str
    compiler_hash: str


def cache_key(parts: CacheKeyParts) -> str:
    h = xxhash.xxh3_128()
    for f in fields(parts):
        h.update(f.name.encode())
        h.update(b"=")
        h.update(repr(getattr(parts, f.name)).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


PIN_ENV = "JITRT_DEV_PIN_COMPILER_HASH"


@functools.lru_cache(maxsize=None)
def compiler_hash() -> str:
    """`source_hash` of the jitrt package (once per process). For jitrt's own development
    only, `JITRT_DEV_PIN_COMPILER_HASH=TEXT` replaces it with `pinned:TEXT`: an edit to the
    launch path then reuses the kernels a long build compiled (an edit that changes generated
    code must not be run so: its stale entries would be reused). Never set by default."""
    pinned = os.environ.get(PIN_ENV)
    if pinned:
        return f"pinned:{pinned}"
    return source_hash(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def source_hash(root: str) -> str:
    """Hash of the path, size and modification time (ns) of every .py file under `root`, in
    path order: what Python's own bytecode cache checks a source against (an edit, a
    checkout or a reinstall changes it). The files' contents are not read: reading the
    package's ~170 files took 5-7 ms of CPU of every process's first compile on the
    development VM, against ~1 ms for their `stat`. (`os.scandir`: `pathlib`'s rglob took
    2-3x as long.)"""
    files: list[tuple[list[str], int, int]] = []
    pending = [(root, "")]
    while pending:
        directory, rel = pending.pop()
        with os.scandir(directory) as entries:
            for e in entries:
                if e.is_dir():
                    if e.name != "__pycache__":
                        pending.append((e.path, f"{rel}{e.name}/"))
                elif e.name.endswith(".py"):
                    st = e.stat()
                    files.append(((rel + e.name).split("/"), st.st_size, st.st_mtime_ns))
    h = xxhash.xxh3_64()
    for parts, size, mtime in sorted(files):
        h.update(f"{'/'.join(parts)}\0{size}\0{mtime}\0".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def llvm_versions() -> str:
    import llvmlite

    from ..backends import llvm_direct
    return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm_direct.version_info()))}"


@functools.lru_cache(maxsize=None)
def host_target() -> str:
    """The CPU device's target key (`DeviceTarget.cache_key` of `backends/cpu.CpuDevice`)."""
    from ..backends import llvm_direct as llvm
    return f"cpu {llvm.process_triple()} {llvm.host_cpu_name()} {llvm.host_cpu_features()}"
