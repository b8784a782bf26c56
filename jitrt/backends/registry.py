"""The backend registry: arch name -> the module that opens its device, and its properties.

Stage: backend selection. `BACKENDS` is the one table of the archs jitrt can run on; generic
code asks it (`get(arch).stream_gpu`, `names()`) instead of naming an arch. A backend module
(`cpu.py`, `cuda.py`, `amdgpu.py`, or a test's fake vendor) provides the `BackendModule`
functions: `available()` (can this process run it, and if not, why), `open_device(device_id,
host)`, `codegen_target()` and, for GPUs, `assembly(module, options)` (`jr.debug.gpu_asm`).
Backend modules are imported only when their arch is asked for; this module imports nothing
heavy (`jitrt.config` reads it to check `arch=`). `register` adds an entry (tests plug a fake
vendor in with it). Caches nothing.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Mapping, Protocol

from ..errors import BackendUnavailableError
from ..frozen import frozen

if TYPE_CHECKING:
    from llvmlite import ir

    from ..codegen.targets import Target as CodegenTarget
    from .base import Device, HostServices

ANY_GPU = "gpu"      # jr.init(arch="gpu"): the first stream GPU in table order that answers


class BackendModule(Protocol):
    """What a backend's module provides (module-level functions)."""

    def available(self) -> tuple[bool, str]: ...
    def open_device(self, device_id: int, host: "HostServices") -> "Device": ...
    def codegen_target(self) -> "CodegenTarget": ...


class AssemblyModule(BackendModule, Protocol):
    """A backend that prints its kernels' assembly without a device (`jr.debug.gpu_asm`)."""

    def assembly(self, module: "ir.Module", options: Mapping[str, object]) -> str: ...


@frozen
class Backend:
    """One arch: its name, the module that implements it, and what generic code may ask."""
    name: str
    module: str             # absolute, or relative to jitrt.backends (".cuda")
    stream_gpu: bool        # launches queue on a device stream; data has device mirrors
    host_memory: bool       # kernels address host memory (nothing to export or mirror)
    assembly: str = ""      # what `jr.debug.gpu_asm` prints for it ("" where it does not)

    def load(self) -> BackendModule:
        return importlib.import_module(self.module, __package__)


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("cpu", ".cpu", stream_gpu=False, host_memory=True),
    Backend("cuda", ".cuda", stream_gpu=True, host_memory=False, assembly="PTX"),
    Backend("amdgpu", ".amdgpu", stream_gpu=True, host_memory=False, assembly="AMDGCN"),
)}


def names() -> tuple[str, ...]:
    """Every arch `jr.init(arch=...)` accepts: the table's, then "gpu"."""
    return (*BACKENDS, ANY_GPU)


def get(arch: str) -> Backend:
    try:
        return BACKENDS[arch]
    except KeyError:
        raise ValueError(f"unknown arch {arch!r}: expected one of {', '.join(names())}"
                         ) from None


def register(backend: Backend) -> None:
    """Add (or replace) an arch: a backend module outside jitrt plugs in with this line."""
    BACKENDS[backend.name] = backend


def unregister(name: str) -> None:
    BACKENDS.pop(name, None)


def resolve(arch: str) -> Backend:
    """The backend to open for `arch` ("gpu": the first stream GPU whose runtime answers);
    raises BackendUnavailableError naming what each candidate lacks."""
    candidates = [b for b in BACKENDS.values() if b.stream_gpu] if arch == ANY_GPU \
        else [get(arch)]
    reasons = []
    for backend in candidates:
        ok, why = backend.load().available()
        if ok:
            return backend
        reasons.append(f"{backend.name}: {why}")
    raise BackendUnavailableError(f"arch={arch} is not available: " + "; ".join(reasons))


def create_device(arch: str, device_id: int, host: "HostServices") -> "Device":
    """The device for `arch` ("gpu": the first GPU runtime available)."""
    return resolve(arch).load().open_device(device_id, host)


def assembler(arch: str | None) -> AssemblyModule:
    """The module that prints `arch`'s assembly (`jr.debug.gpu_asm`; None: the first arch in
    the table that prints one)."""
    printers = [b.name for b in BACKENDS.values() if b.assembly]
    arch = printers[0] if arch is None and printers else arch
    if arch not in printers:
        raise ValueError(f"arch must be one of {', '.join(map(repr, printers))}, got {arch!r}")
    return BACKENDS[str(arch)].load()  # type: ignore[return-value]
