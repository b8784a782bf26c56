"""The device seam: what the rest of jitrt may ask of a backend, and nothing more.

Stage: backend. A `Device` is created by `jr.init(arch=...)` (one per program, for one explicit
device id, through `registry.create_device`) and is the only place that knows how code is
compiled, loaded and launched and how memory moves on its hardware. It has three roles, each
an abstract base whose every member callers use is declared here:

- `CompileRole`: the codegen `target`, the `DeviceTarget` whose `cache_key` is part of every
  offline-cache key, `compile` (LLVM module -> loadable artifact: object code, PTX, a code
  object), and `tiers` (a tiered compilation, the CPU's);
- `RunRole`: `load` (artifacts by key, cached here: loading the same artifact twice returns the
  same entry points), `launch_entry` (the callable that runs one launch context), the adstack
  sizing calls and heap, device graphs, the native launcher's words, the context header,
  `synchronize`, counters and `close`;
- `MemoryRole`: `alloc`/`free`, copies between host and device (asynchronous where the device
  has streams; `synchronize` waits), the device address of a field's or ndarray's data, and the
  export of that data to other libraries (DLPack, `__cuda_array_interface__`) and import of
  theirs (`wrap_foreign`).

What a backend needs from the runtime comes down through `HostServices` (the offline cache,
the host runtime module's cache key, the thread count): no backend imports `runtime/`,
`cache/` or `frontend/`. A backend is one short module subclassing `Device` and one line in
`registry.BACKENDS`; see docs/architecture.md.
"""
from __future__ import annotations

import abc
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from llvmlite import ir

from ..codegen.targets import Target as CodegenTarget
from ..frozen import frozen
from ..launch_plan import LaunchPlan

if TYPE_CHECKING:
    import ctypes

    from ..data import Ndarray
    from .cpu_tiers import Tiers

    Words = ctypes.Array[ctypes.c_int64]     # a launch context's 64-bit slots


@frozen
class DeviceTarget:
    """What code is generated for: the part of a device that reaches the offline-cache key."""
    arch: str          # a registry name: "cpu", "cuda", "amdgpu"...
    triple: str
    data_layout: str
    cpu: str           # host CPU name, "sm_90", "gfx90a"...
    features: str      # CPU feature string; a toolkit version for GPUs

    def cache_key(self) -> str:
        return f"{self.arch} {self.triple} {self.cpu} {self.features}"


Handle = object      # a stream or event of a device's API (opaque outside the backend)
EntryPoint = Callable[[int], None]   # runs one launch given its context address
Reducer = Callable[[int], int]       # the sizing service's max-reducer: context -> maximum
Required = Callable[[int, int, int], None]   # its capacity function: (context, results, out)


class ObjectStore(Protocol):
    """The offline cache as a backend sees it: bytes by key."""

    def load(self, key: str, /) -> object: ...
    def save(self, key: str, what: str, obj: bytes, /) -> None: ...


@frozen
class HostServices:
    """What the runtime hands a backend when it opens a device (the seam's only way down)."""
    num_threads: int | None         # CPU worker threads counting the caller (None: all cores)
    parallel_grain: int
    store: ObjectStore | None       # the offline cache, for the host runtime module
    # what the host runtime module's object code depends on besides the triple and data
    # layout (the host target, LLVM's versions, jitrt's sources); asked only with a store
    runtime_key: Callable[[], str]
    cores: int = 1                  # the cores this process may run on
    # work for helper threads while the host runtime module compiles (cold starts)
    while_compiling: tuple[Callable[[], None], ...] = ()
    # the host runtime module's object code shipped with jitrt for (triple, data layout) and
    # today's sources (`cache/prebuilt.py`), or None
    prebuilt_runtime: Callable[[str, str], bytes | None] = lambda triple, layout: None


NO_SERVICES = HostServices(None, 1, None, lambda: "", os.cpu_count() or 1)


class CompiledLike(Protocol):
    """What a device reads of a launch's compiled kernel (`runtime/artifact.CompiledKernel`)."""

    @property
    def name(self) -> str: ...
    @property
    def entry_addr(self) -> int: ...


class LaunchContext(Protocol):
    """One launch context (`runtime/context.py`): its slots, their address, its kernel and
    its handle's launch plan (`launch_plan.py`)."""
    addr: int
    buf: "Words"
    plan: LaunchPlan

    @property
    def compiled(self) -> CompiledLike: ...


class HostBuffer(Protocol):
    """A field's or ndarray's data on the host (`data._Buffer`)."""
    ptr: int


class GraphLoop:
    """A device-side do-while in a recorded graph (`jr.graph.do_while`): the `body` (indices
    of launch entries, and loops) runs, then again while the 4-byte flag of the jitrt
    ndarray `flag` is non-zero (`Device.graph_loops` says whether a device builds them)."""

    __slots__ = ("flag", "body")

    def __init__(self, flag: Any, body: "list[int | GraphLoop]") -> None:
        self.flag, self.body = flag, body

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphLoop) and other.flag is self.flag and \
            other.body == self.body

    __hash__ = None  # type: ignore[assignment]


GraphLayout = Sequence["int | GraphLoop"]


class DeviceGraph(Protocol):
    """Launch entries replayed as one device graph (`jr.graph`)."""

    def update(self, entries: Sequence[EntryPoint]) -> None: ...
    def recapture_if_changed(self, entries: Sequence[EntryPoint]) -> None: ...
    def replay(self) -> None: ...
    def release(self) -> None: ...


class AdStackHeap(Protocol):
    """The adstack heap: `ensure(nbytes, who)` -> its address, grown to at least `nbytes`."""

    def ensure(self, nbytes: int, who: str = "") -> int: ...


class PoolInfo(Protocol):
    """The CPU worker pool as `program.pool` shows it."""
    num_threads: int
    spin_limit: int


class CompileRole(abc.ABC):
    """Compile: what code is generated for, and the artifact it becomes."""

    tiered = False       # whether `tiers()` gives a tiered compilation

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

    def tiers(self) -> "Tiers | None":
        """The device's tiered compilation (`backends/cpu_tiers.py`: a quick copy runs first,
        the optimised one replaces it), or None where kernels are compiled once (GPUs)."""
        return None


class RunRole(abc.ABC):
    """Run: load artifacts, launch contexts, synchronise."""

    # a launch's fault record is in its context right after it (the CPU); GPUs report faults
    # at the next synchronisation instead, so launchers need not look
    faults_in_context = True
    pool: PoolInfo | None = None     # the CPU worker pool (None elsewhere)
    counters: dict[str, int] = {}    # device-side counters merged into jr.debug.stats()

    def __init__(self) -> None:
        self._loaded: dict[str, dict[str, object]] = {}
        self._load_lock = threading.RLock()

    def load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, object]:
        """Load `artifact` once per `key` and return each symbol's entry point (an address
        on the CPU, the driver's function handle on a GPU)."""
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
    def _load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, object]:
        ...

    @abc.abstractmethod
    def launch_entry(self, context: LaunchContext) -> EntryPoint:
        """The callable that runs one launch context (`runtime/context.py`), given its
        address: the CPU's fused entry function; a GPU's entry also packs array arguments."""

    @abc.abstractmethod
    def sizing_calls(self, functions: Mapping[str, object], prefix: str, nspecs: int,
                     nstacks: int, sizable: bool) -> tuple[list[Reducer], Required | None]:
        """The adstack sizing service's compiled functions as callables: one max-reducer per
        spec (context address -> maximum) and the capacity function (context, results, out
        addresses; None unless every stack is sizable)."""

    def graph(self, entries: list[EntryPoint], layout: GraphLayout | None = None
              ) -> DeviceGraph | None:
        """A device graph replaying these launch entries in order (or as `layout` orders
        them, with device-side loops, where `graph_loops`), or None where launches are
        replayed one by one (the CPU)."""
        return None

    @property
    def graph_loops(self) -> bool:
        """Whether `graph` builds a layout's loops on the device (CUDA's conditional
        nodes); elsewhere a do-while loop's test runs on the host."""
        return False

    def adstack_heap(self) -> AdStackHeap | None:
        """The program's adstack heap, None for the runtime's host heap."""
        return None

    @property
    def native_launch_addr(self) -> int | None:
        """The runtime's CPython-callable launcher (`native/native_launcher.py`) when launches
        on this device can run through it, else None."""
        return None

    def native_entry(self, context: LaunchContext, lay: Mapping[str, int],
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
    def fill_context_header(self, buf: "Words") -> None:
        """Write the device's header slots of a launch context (runtime addresses...)."""

    def stat_counts(self) -> dict[str, int]:
        """The device's counters as `jr.debug.stats()` reports them."""
        return self.counters

    def reset_counts(self) -> None:
        for name in self.counters:
            self.counters[name] = 0

    def synchronize(self) -> None:
        """Wait for all queued work (launches run synchronously on devices without streams)."""

    def device_count(self) -> int:
        """How many devices of this kind the machine has (`jr.device_count()`)."""
        return 1

    # streams and events (`jr.Stream`, `jr.Event`): the defaults are a device without streams,
    # whose launches run in order, synchronously (the CPU): nothing to create, wait or order
    def create_stream(self) -> Handle | None:
        """A new stream of this device (None where there are none)."""
        return None

    def destroy_stream(self, stream: Handle) -> None:
        """Release a stream `create_stream` made (its work queued before is left to run)."""

    def use_stream(self, stream: Handle | None) -> Handle | None:
        """Queue launches, copies and memsets on `stream` from now on (None: the device's
        own stream); returns the stream used before."""
        return None

    def current_stream(self) -> Handle | None:
        """The stream work is queued on now (None where there are none)."""
        return None

    def from_address(self, kind: str, address: int) -> Handle | None:
        """The handle of another library's stream or event ("stream", "event") given its
        address (`torch.cuda.Stream.cuda_stream`); None where there are none."""
        return None

    def address_of(self, handle: Handle | None) -> int:
        """The address a stream or event handle stands for (0: none)."""
        return 0

    def create_event(self) -> Handle | None:
        return None

    def destroy_event(self, event: Handle) -> None:
        """Release an event `create_event` made."""

    def record_event(self, event: Handle, stream: Handle | None) -> None:
        """Record `event` on `stream` (None: the current stream)."""

    def wait_event(self, stream: Handle | None, event: Handle) -> None:
        """`stream` (None: the current one) waits on the device for what `event` recorded."""

    def synchronize_event(self, event: Handle) -> None:
        """The host waits for what `event` recorded."""

    def synchronize_stream(self, stream: Handle | None) -> None:
        """The host waits for `stream` (None: the current one)."""

    def consumer_waits(self, address: int) -> None:
        """Another library's stream (its address, as DLPack's `__dlpack__(stream=...)` gives
        it: 1 CUDA's legacy default stream, 2 its per-thread one) waits on the device for the
        work queued so far on the current stream; the host does not wait."""

    def close(self) -> None:
        """Release what the device holds (called when its program is replaced)."""


class MemoryRole(abc.ABC):
    """Memory: allocation, copies, and the data's address for kernels and other libraries."""

    dlpack_device_type = 1        # DLPack's device type of this device's memory (kDLCPU)

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

    def data_ptr(self, data: HostBuffer) -> int:
        """The address kernels use for a field's or jitrt ndarray's data on this device."""
        return int(data.ptr)

    def export_ptr(self, data: HostBuffer, wait: bool = True) -> int:
        """The address of `data` for another library (DLPack, `__cuda_array_interface__`),
        current there and assumed written by it; with `wait` the host waits for the work
        queued before (else the consumer orders itself: `consumer_waits`)."""
        return int(data.ptr)

    def fill_data(self, data: HostBuffer, pattern: bytes, value: Any = None) -> bool:
        """Make every element of `data` the element whose bytes are `pattern` (converted
        from `value`) in this device's memory, without waiting; False (nothing done) where
        the host copy is where the fill belongs (host memory, or host data written since
        the device last had it)."""
        return False

    def copy_data(self, dst: HostBuffer, src: HostBuffer) -> bool:
        """Copy `src` into `dst` (same dtype and size) in this device's memory, without
        waiting; False (nothing done) where the copy belongs on the host."""
        return False

    def host_overwrote(self, data: HostBuffer) -> None:
        """The host copy of `data` was overwritten whole (`from_numpy`): a device copy, if
        any, is brought up to date now (asynchronously), so that launches move nothing."""

    def import_dlpack(self, obj: object) -> "Ndarray | None":
        """`jr.ndarray.from_dlpack` of a tensor in this device's memory (no copy), or None
        where memory is the host's (numpy imports it)."""
        return None

    def wrap_foreign(self, obj: object) -> "Ndarray | None":
        """A jitrt ndarray over another library's array in this device's memory (no copy),
        or None when `obj` is not one (host memory needs no wrapping: None)."""
        return None


class Device(CompileRole, RunRole, MemoryRole):
    """One compute device: the three roles together. Subclasses implement the abstract
    members; see `cpu.py` and `gpu.py`."""

    arch: str = "?"

    def __init__(self, device_id: int = 0) -> None:
        RunRole.__init__(self)
        self.device_id = device_id

