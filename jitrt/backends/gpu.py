"""The GPU device: the device seam (`base.py`) written once for every GPU API behind a driver.

Stage: backend. `GpuDevice` is what the CUDA backend (`cuda.py`) and the AMDGPU backend
(`amdgpu.py`) open: each supplies a `GpuDriver` (`gpu_driver.py`: module load, function lookup,
launch, memory, one stream) and a compile step; everything else is shared and split by concern:

- `gpu_residency.py`: device mirrors of fields and ndarrays (uploaded when the host copy is
  newer, downloaded when the host reads), foreign device arrays, the adstack heap;
- `gpu_launch.py`: `GpuLaunch`, the entry point of one launch context (the task loop);
  `gpu_staging.py`: plain numpy arguments staged through pinned buffers;
- `gpu_faults.py`: the status block (faults, overflows, return values) read back at the next
  synchronisation and raised as on the CPU;
- `gpu_graph.py`: device graphs (`jr.graph`); `gpu_tasks.py`: the native GPU entry table and
  the adstack sizing service's kernels.

This module holds the device itself: its driver, status block, memory calls and the per-device
lists (launches, mirrors, foreign arrays). Caches: loaded modules by key (base class), the
launch entries and mirrors of this device, the sizing scratch (grow-only).
"""
from __future__ import annotations

import ctypes
import functools
import time
from typing import Any, Callable, Mapping

import xxhash
from llvmlite import ir

from ..codegen import abi
from ..errors import KernelArgError
from ..logger import logger
from ..native import launch_table as lt
from ..codegen.targets import Target as CodegenTarget
from ..launch_plan import LaunchPlan
from . import gpu_fill, gpu_tasks
from .base import (NO_SERVICES, Device, DeviceTarget, EntryPoint, GraphLayout, Handle,
                   HostServices,
                   LaunchContext, Reducer, Required)
from .gpu_driver import GpuDriver, handle_int
from .gpu_faults import check_status, raise_status, read_status
from .gpu_graph import GpuGraph
from . import gpu_launch
from .gpu_launch import DEFAULT_BLOCK, MAX_GRID, GpuLaunch
from .gpu_residency import DeviceMirror, ForeignArrays, GpuHeap
from .gpu_staging import ElementCopies, Uploads

__all__ = ["DEFAULT_BLOCK", "MAX_GRID", "GpuDevice", "GpuDriver", "GpuLaunch"]


class GpuDevice(Device):
    """A GPU behind a `GpuDriver`; the launch path of every GPU backend."""

    faults_in_context = False

    def __init__(self, device_id: int, driver: GpuDriver, target: DeviceTarget,
                 codegen_target: CodegenTarget, compile_fn: Callable[[ir.Module], bytes],
                 host: HostServices = NO_SERVICES) -> None:
        super().__init__(device_id)
        self.host = host
        self.arch = target.arch
        self.driver = driver
        self._target, self._codegen_target, self._compile = target, codegen_target, compile_fn
        self.status = driver.alloc(abi.STATUS_SLOTS * 8)
        driver.memset(self.status, abi.STATUS_SLOTS * 8)
        # pinned: the status block (faults, return values) comes back by DMA, without staging
        self._pinned = driver.alloc_pinned(abi.STATUS_SLOTS * 8)
        self._status_host = (ctypes.c_int64 * abi.STATUS_SLOTS).from_address(self._pinned)
        self.launches: list[GpuLaunch] = []
        self.launch_at: dict[int, GpuLaunch] = {}     # context address -> its entry
        self.dlpack_device_type = driver.dlpack_device_type
        self.foreign = ForeignArrays(self)
        self.uploads = Uploads(self)
        self.elements = ElementCopies(self)
        self._scratch, self._scratch_size = 0, 0
        self.mirrors: list[DeviceMirror] = []
        self.counters: dict[str, int] = {"h2d_skipped": 0, "h2d_uploads": 0, "allocations": 0,
                                         "graph_instantiations": 0, "graph_updates": 0,
                                         "graph_replays": 0, "ptxas_runs": 0, "driver_links": 0,
                                         "module_loads": 0, "driver_jit_loads": 0}
        self.native_skips = (ctypes.c_int64 * 1)()   # h2d_skipped of native launches
        self._native: Any = False         # False: not looked at yet; None: no native launches
        # the stream native launches use inside a `jr.stream(...)` block (None: the driver's)
        self.native_stream: int | None = None
        self._export_event: Handle | None = None     # what DLPack consumers wait for
        self._fill_function: Any = None   # the fill kernel (`gpu_fill`), once compiled
        self.closed = False

    # ---- code ---------------------------------------------------------------------------
    @property
    def target(self) -> DeviceTarget:
        return self._target

    @property
    def codegen_target(self) -> CodegenTarget:
        return self._codegen_target

    def compile(self, module: Any) -> bytes:
        return bytes(self._compile(module))

    def _load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, Any]:
        """One module per artifact; counted, and timed in the DEBUG log with what the driver
        did: load a ready image (a cubin) or compile the module itself (PTX)."""
        driver, t0, jit = self.driver, time.perf_counter(), self.driver.jit_loads
        module = driver.load_module(artifact)
        jit = driver.jit_loads - jit
        self.counters["module_loads"] += 1
        self.counters["driver_jit_loads"] += jit
        logger.debug("%s: driver load %.1f ms (%s)", key, (time.perf_counter() - t0) * 1e3,
                     "compiled by the driver from PTX" if jit else "a ready image")
        return {name: driver.function(module, name) for name in symbols}

    def launch_entry(self, context: LaunchContext) -> EntryPoint:
        return GpuLaunch(self, context)

    def run_tasks(self, plan: LaunchPlan, context: LaunchContext) -> None:
        """The tasks of `plan` on the stream, one kernel each, with the slots of `context`
        (whose launch entry this device made): what a graph captures."""
        gpu_launch.run_tasks(plan, self.launch_at[context.addr])

    # ---- launches -----------------------------------------------------------------------
    @property
    def max_resident_threads(self) -> int:
        return self.driver.multiprocessors * self.driver.max_threads_per_multiprocessor

    @property
    def native_launch_addr(self) -> int | None:
        native = self.native_functions()
        return None if native is None else int(native["jitrt_launch"])

    def native_functions(self) -> dict[str, Any] | None:
        """The host runtime's functions and the driver's words that native launches on this
        device need, loaded on first use; None where the driver offers no native launch."""
        if self._native is False:
            self._native = None
            words = self.driver.native_words()
            if words is not None:
                from .cpu import runtime_functions
                self._native = {**runtime_functions(self.host), "words": words}
        return self._native  # type: ignore[no-any-return]

    def native_entry(self, context: LaunchContext, lay: Mapping[str, int],
                     slot_offset: Callable[[type, str], int | None]) -> tuple[int, int]:
        """The native GPU entry and this context's GPU entry table (`lay`: the native
        launcher's CPython layout; `slot_offset` measures `DeviceMirror`'s slots)."""
        native = self.native_functions()
        assert native is not None
        newer = [slot_offset(DeviceMirror, name) for name in ("host_newer", "device_newer")]
        api = [lay[name] for name in lt.G_API_NAMES]
        table = self.launch_at[context.addr].native_table(native, api, newer)
        return native["jitrt_gpu_entry"], table

    def stat_counts(self) -> dict[str, int]:
        counts = dict(self.counters)
        counts["h2d_skipped"] += self.native_skips[0]
        return counts

    def reset_counts(self) -> None:
        super().reset_counts()
        self.native_skips[0] = 0

    def fill_context_header(self, buf: Any) -> None:
        buf[abi.SLOT_RUNTIME] = self.status
        buf[abi.SLOT_NUM_THREADS] = self.max_resident_threads

    def sizing_calls(self, functions: Mapping[str, object], prefix: str, nspecs: int,
                     nstacks: int, sizable: bool) -> tuple[list[Reducer], Required | None]:
        reducers: list[Reducer] = [
            gpu_tasks.GpuReducer(self, functions[f"{prefix}_red{k}_kernel"], nspecs, nstacks)
            for k in range(nspecs)]
        required = gpu_tasks.GpuRequired(self, functions[f"{prefix}_required_kernel"], nspecs,
                                         nstacks) if sizable else None
        return reducers, required

    def graph(self, entries: list[EntryPoint], layout: GraphLayout | None = None
              ) -> GpuGraph:
        """A device graph of these launch entries, in order or as `layout` orders them
        (`jr.graph`; a `jr.graph.do_while` kernel's loops)."""
        return GpuGraph(self, entries, layout)

    @property
    def graph_loops(self) -> bool:
        return self.driver.graph_loops

    def adstack_heap(self) -> GpuHeap:
        return GpuHeap(self)

    def scratch(self, nbytes: int) -> int:
        """Device memory for the sizing service's results (grow-only, one per device)."""
        if nbytes > self._scratch_size:
            if self._scratch:
                self.driver.synchronize()
                self.free(self._scratch)
            self._scratch_size = max(nbytes, 4096)
            self._scratch = self.alloc(self._scratch_size)
        return self._scratch

    # ---- data ---------------------------------------------------------------------------
    def data_ptr(self, data: Any) -> int:
        """The device address of a field or jitrt ndarray, given device memory on first use."""
        mirror = data._mirror
        if mirror is None or mirror.device is not self:
            if mirror is not None:
                raise KernelArgError(
                    f"'{data.name}' lives on {mirror.device.arch}:{mirror.device.device_id}, "
                    f"but is used on {self.arch}:{self.device_id}: an array belongs to the "
                    "device that first used it (copy an ndarray with .to_device(k); "
                    "docs/gpu.md, \"Several devices\")")
            mirror = DeviceMirror(self, data)
            self.counters["allocations"] += 1
            data._mirror = mirror
            self.mirrors.append(mirror)
        return mirror.ptr  # type: ignore[no-any-return]

    def owns(self, data: Any) -> bool:
        """Whether `data` (and its `.grad`) has no device copy on another device."""
        mirror, grad = data._mirror, data.grad
        return (mirror is None or mirror.device is self) and (
            grad is None or grad._mirror is None or grad._mirror.device is self)

    def export_ptr(self, data: Any, wait: bool = True) -> int:
        """The device address of `data` for another library (`__cuda_array_interface__`,
        `__dlpack__`): uploaded if the host copy is newer, the stream synchronised (unless
        not `wait`: the consumer's stream waits instead, `consumer_waits`), and the device
        copy marked newer (the consumer may write it)."""
        ptr = self.data_ptr(data)
        mirror = data._mirror
        mirror.to_device()
        if wait:
            self.synchronize()
        mirror.device_newer = True
        return ptr

    def consumer_waits(self, address: int) -> None:
        """Another library's stream waits (on the device) for the current stream's work so
        far: one event recorded here, waited for there (one event per device, recorded
        again each time: a wait sees the record made before it)."""
        if self._export_event is None:
            self._export_event = self.driver.event_create()
        self.driver.record_on(self._export_event, self.driver.cur[0])
        self.driver.wait_event(self.driver.from_address("stream", address), self._export_event)

    def fill_data(self, data: Any, pattern: bytes, value: Any = None) -> bool:
        """A fill on the device (`DeviceMirror.fill`) when the device copy is current or
        there is none yet; host data written since the last upload, or a host tensor
        wrapped by `from_dlpack` (staged, never mirrored), is filled on the host. `value`:
        the number the pattern came from (the mirror keeps the prepared call under it)."""
        if not self.on_device(data, data):
            return False
        self.data_ptr(data)
        data._mirror.fill(pattern, value)
        return True

    def fill_call(self, dst: int, pattern: bytes, count: int) -> Callable[[], None]:
        """The driver call(s) writing `count` copies of `pattern` from `dst` on the stream,
        prepared: one memset where the pattern repeats a 1-, 2- or 4-byte word, else one
        upload of the whole array when it is at most `gpu_fill.UPLOAD_BYTES` (through the
        pinned element ring), else one launch of the fill kernel (`gpu_fill`) for an element
        of up to 16 4-byte words, else doubling copies (docs/gpu.md, "Where data lives")."""
        call: Callable[[], None] | None = self.driver.fill_call(dst, pattern, count)
        if call is not None:
            return call
        if len(pattern) * count <= gpu_fill.UPLOAD_BYTES:    # a 0-d f64 loss.grad = 1
            return gpu_fill.upload_call(self.elements.up, dst, pattern, count)
        if len(pattern) % 4 == 0 and len(pattern) <= 4 * gpu_fill.FILL_WORDS:
            return gpu_fill.kernel_call(self, self.fill_function(), dst, pattern, count)
        return functools.partial(self.driver.fill_doubling, dst, pattern, count)

    def fill_function(self) -> Any:
        """The fill kernel's handle, loaded on first use: from the offline cache when there
        is one (so that a warm start compiles nothing), else compiled (and saved there)."""
        if self._fill_function is None:
            store, artifact = self.host.store, None
            key = "fill-" + xxhash.xxh3_128_hexdigest("\0".join(
                [repr(self.target), gpu_fill.VERSION, self.host.runtime_key()]).encode())
            if store is not None:
                cached = store.load(key)
                artifact = cached if isinstance(cached, bytes) else None
            if artifact is None:
                artifact = self.compile(gpu_fill.fill_module(self.codegen_target))
                if store is not None:
                    store.save(key, "jitrt fill kernel", artifact)
            self._fill_function = self._load("jitrt_fill", artifact,
                                             [gpu_fill.NAME])[gpu_fill.NAME]
        return self._fill_function

    def copy_data(self, dst: Any, src: Any) -> bool:
        """`dst.copy_from(src)` device to device when the source's device copy is current
        and the dtypes are the same (else on the host, converting)."""
        if src.dtype != dst.dtype or src._mirror is None or not self.on_device(src, dst):
            return False
        self.data_ptr(dst)
        dst._mirror.copy_from(src._mirror)
        return True

    def on_device(self, source: Any, data: Any) -> bool:
        """Whether an operation that overwrites all of `data` from `source` (itself for a
        fill) belongs on this device: `source` has no host writes pending (or no device copy
        yet), `data` is not a staged host tensor, and neither is another device's."""
        mirror = source._mirror
        if mirror is not None and (mirror.device is not self or mirror.host_newer):
            return False
        if data._mirror is None:
            return getattr(data, "_owner", None) is None
        return data._mirror.device is self

    def host_overwrote(self, data: Any) -> None:
        """After `from_numpy`: the new host data goes up now (one asynchronous upload), so
        that the next launch is one that moves nothing."""
        mirror = data._mirror
        if mirror is not None and mirror.device is self:
            mirror.upload_now()

    def wrap_foreign(self, obj: Any) -> Any:
        """A jitrt ndarray over a torch/CuPy device array (no copy), the same one for the
        same live object; None if `obj` is not a C-contiguous device array of a jitrt dtype."""
        return self.foreign.wrap(obj)

    def import_dlpack(self, obj: Any) -> Any:
        """A jitrt ndarray over a device tensor's memory, by DLPack (no copy)."""
        return self.foreign.import_dlpack(obj)

    def check_status(self) -> None:
        """After a synchronisation: raise the fault a kernel recorded, if any (and clear it)."""
        check_status(self)

    # ---- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        return self.driver.alloc(max(nbytes, 1))

    def free(self, ptr: int) -> None:
        self.driver.free(ptr)

    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        self.driver.copy_h2d(dst, src, nbytes)

    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None:
        self.driver.copy_d2h(dst, src, nbytes)

    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.driver.copy_d2d(dst, src, nbytes)

    def synchronize(self) -> None:
        """Wait for the stream (once: the status block's copy is queued before the wait); a
        fault recorded by a kernel since the last check raises."""
        read_status(self)
        self.driver.synchronize()
        raise_status(self)

    def device_count(self) -> int:
        return self.driver.device_count()

    # ---- streams and events -------------------------------------------------------------
    def create_stream(self) -> Handle:
        return self.driver.create_stream()

    def destroy_stream(self, stream: Handle) -> None:
        self.driver.destroy_stream(stream)

    def use_stream(self, stream: Handle | None) -> Handle:
        """Queue what follows on `stream` (None: the driver's own), launches through the
        native entry included: each entry table's stream word is rewritten when the stream
        changes (one write per launch context), so that a launch pays nothing for it."""
        driver = self.driver
        chosen = driver.stream if stream is None else stream
        previous = driver.use_stream(chosen)
        word = None if chosen is driver.stream else handle_int(chosen)
        if word != self.native_stream:
            self.native_stream = word
            native = self.native_functions() if self._native is not False else None
            for launch in self.launches:
                if launch.native is not None and native is not None:
                    launch.native[lt.G_STREAM] = native["words"][3] if word is None else word
        return previous

    def current_stream(self) -> Handle:
        return self.driver.cur[0]

    def from_address(self, kind: str, address: int) -> Handle:
        return self.driver.from_address(kind, address)

    def address_of(self, handle: Handle | None) -> int:
        return handle_int(handle)

    def create_event(self) -> Handle:
        return self.driver.event_create()

    def destroy_event(self, event: Handle) -> None:
        self.driver.event_destroy(event)

    def record_event(self, event: Handle, stream: Handle | None) -> None:
        self.driver.record_on(event, self.driver.cur[0] if stream is None else stream)

    def wait_event(self, stream: Handle | None, event: Handle) -> None:
        self.driver.wait_event(self.driver.cur[0] if stream is None else stream, event)

    def synchronize_event(self, event: Handle) -> None:
        self.driver.event_synchronize(event)

    def synchronize_stream(self, stream: Handle | None) -> None:
        """The host waits for `stream`; for the current stream, a recorded fault raises."""
        if stream is None or stream is self.driver.cur[0]:
            self.synchronize()
        else:
            self.driver.stream_synchronize(stream)

    def close(self) -> None:
        """Bring every buffer's data home, then free what this device allocated."""
        if self.closed:
            return
        if self.native_stream is not None:   # closed inside a `jr.stream(...)` block
            self.use_stream(None)
        self.closed = True
        self.driver.synchronize()
        if self._export_event is not None:
            self.driver.event_destroy(self._export_event)
        for mirror in self.mirrors:
            if mirror.ptr:
                mirror.release()
        self.foreign.close()
        self.uploads.close()
        self.elements.close()
        for launch in self.launches:
            launch.release()
        self.driver.free(self.status)
        self.driver.free_pinned(self._pinned)
        if self._scratch:
            self.driver.free(self._scratch)
        self.driver.close()
