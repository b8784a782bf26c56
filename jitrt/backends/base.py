"""The device seam: what the rest of jitrt may ask of a backend, and nothing more.

Stage: backend. A `Device` is created by `jr.init(arch=...)` (one per program, for one explicit
device id) and is the only place that knows how code is compiled, loaded and launched and how
memory moves on its hardware. The compiler asks it for its codegen `target`, `compile`s an LLVM
module into an artifact (object code, PTX, a code object) and `load`s artifacts (cached here by
key: loading the same artifact twice returns the same entry points). The offline-cache key
uses `target.cache_key`; the adstack heap is sized from `max_resident_threads`; a launch
context gets its device-specific header slots from `fill_context_header` and runs through
`entry`. Memory: `alloc`/`free` and copies between host and device (asynchronous where the
device has streams; `synchronize` waits), and `read_flags` (where fault/overflow flags come
back from). A backend is one short module subclassing `Device`; see docs/architecture.md.
"""
from __future__ import annotations

import abc
import threading
from typing import TYPE_CHECKING, Any, Callable

from llvmlite import ir

from ..frozen import frozen
from ..codegen.targets import Target as CodegenTarget

if TYPE_CHECKING:
    from .cpu_tiers import Tiers


@frozen
class DeviceTarget:
    """What code is generated for: the part of a device that reaches the offline-cache key."""
    arch: str          # "cpu" | "cuda" | "amdgpu"
    triple: str
    data_layout: str
    cpu: str           # host CPU name, "sm_90", "gfx90a"...
    features: str      # CPU feature string; a toolkit version for GPUs

    def cache_key(self) -> str:
        return f"{self.arch} {self.triple} {self.cpu} {self.features}"


EntryPoint = Callable[[int], None]   # runs one launch given its context address


class Device(abc.ABC):
    """One compute device. Subclasses implement the `_`-prefixed hooks and the memory calls."""

    arch: str = "?"

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self._loaded: dict[str, dict[str, Any]] = {}
        self._load_lock = threading.RLock()

    # ---- code ---------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def target(self) -> DeviceTarget:
        """The device's target description (part of every offline-cache key)."""

    @property
    @abc.abstractmethod
    def codegen_target(self) -> CodegenTarget:
        """The codegen hooks for this device (math symbols, allocas, GPU or not)."""

    @abc.abstractmethod
    def compile(self, module: ir.Module) -> bytes:
        """Optimise and emit `module` as a loadable artifact (what the offline cache stores)."""

    def load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, Any]:
        """Load `artifact` once per `key` and return the address of every symbol in it."""
        with self._load_lock:
            found = self._loaded.get(key)
            if found is None:
                found = self._load(key, artifact, symbols)
                missing = [name for name in symbols if not found.get(name)]
                if missing:
                    raise RuntimeError(f"symbols missing after loading {key}: {missing}")
                self._loaded[key] = found
            return found

    @abc.abstractmethod
    def _load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, Any]:
        ...

    tiered = False       # whether `tiers()` gives a tiered compilation

    def tiers(self) -> "Tiers | None":
        """The device's tiered compilation (`backends/cpu_tiers.py`: a quick copy runs first,
        the optimised one replaces it), or None where kernels are compiled once (GPUs)."""
        return None

    @abc.abstractmethod
    def entry(self, address: int) -> EntryPoint:
        """A callable that runs the launch entry at `address` on a context address."""

    def launch_entry(self, context: Any) -> EntryPoint:
        """The entry point of one launch context (`runtime/context.py`): on the CPU the fused
        entry function; GPUs return an object that also packs array arguments (`.pack`)."""
        return self.entry(context.compiled.entry_addr)

    @abc.abstractmethod
    def sizing_calls(self, functions: dict[str, Any], prefix: str, nspecs: int, nstacks: int,
                     sizable: bool) -> tuple[list[Callable[[int], int]], Any]:
        """The adstack sizing service's compiled functions as callables: one max-reducer per
        spec (context address -> maximum) and the capacity function (context, results, out
        addresses; None unless every stack is sizable)."""

    def graph(self, entries: list[Any]) -> Any:
        """A device graph replaying these launch entries in order, or None where launches
        are replayed one by one (the CPU)."""
        return None

    def adstack_heap(self) -> Any:
        """The program's adstack heap (`ensure(nbytes, who) -> address`), None for the
        runtime's host heap."""
        return None

    def data_ptr(self, data: Any) -> int:
        """The address kernels use for a field's or jitrt ndarray's data on this device."""
        return int(data.ptr)

    # ---- launches -----------------------------------------------------------------------
    @property
    def native_launch_addr(self) -> int | None:
        """The runtime's CPython-callable launcher (`codegen/native_launcher.py`) when launches
        on this device can run through it (the CPU), else None."""
        return None

    def native_entry(self, context: Any, lay: dict[str, int],
                     slot_offset: Callable[[type, str], int | None]) -> tuple[int, int]:
        """(function, argument) the native launcher calls for a launch of `context`: the
        kernel's fused entry with the context's address (the CPU). `lay` is the launcher's
        CPython layout and `slot_offset(cls, name)` measures a `__slots__` member's offset
        (a GPU's entry table needs both)."""
        return context.compiled.entry_addr, context.addr

    @property
    @abc.abstractmethod
    def max_resident_threads(self) -> int:
        """Threads that may run a task at once: the adstack heap holds one slice per thread."""

    @abc.abstractmethod
    def fill_context_header(self, buf: Any) -> None:
        """Write the device's header slots of a launch context (runtime addresses...)."""

    def read_flags(self, buf: Any) -> None:
        """Bring the fault/overflow slots of a context up to date on the host (a no-op where
        the context is host memory)."""

    # ---- memory -------------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, nbytes: int) -> int:
        ...

    @abc.abstractmethod
    def free(self, ptr: int) -> None:
        ...

    @abc.abstractmethod
    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        ...

    @abc.abstractmethod
    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None:
        ...

    @abc.abstractmethod
    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        ...

    counters: dict[str, int] = {}   # device-side counters merged into jr.debug.stats()

    def stat_counts(self) -> dict[str, int]:
        """The device's counters as `jr.debug.stats()` reports them."""
        return self.counters

    def reset_counts(self) -> None:
        for name in self.counters:
            self.counters[name] = 0
    # a launch's fault record is in its context right after it (the CPU); GPUs report faults
    # at the next synchronisation instead, so launchers need not look
    faults_in_context = True

    def synchronize(self) -> None:
        """Wait for all queued work (launches run synchronously on devices without streams)."""

    def close(self) -> None:
        """Release what the device holds (called when its program is replaced)."""
