"""The GPU launch path, written once for every GPU API behind a small `GpuDriver`.

Stage: backend. `GpuDevice` is the device seam (`base.py`) for GPUs: the CUDA backend
(`cuda.py`) and the AMDGPU backend (`amdgpu.py`) each supply a driver (module load, function
lookup, launch, memory, one stream) and a compile step; everything else lives here:

- data residency: each field and ndarray a launch touches gets a `DeviceMirror` (device memory
  of the same size). Host writes mark the host copy newer and the next launch uploads it; a
  launch marks what it writes device-newer and host reads (`to_numpy`, `x[i]`) download it.
  Plain numpy arguments are copied in before each launch and, when written, out after it;
- `GpuLaunch`, the entry point of one launch context: the kernels take the context by value
  (one 64-bit kernel parameter per slot, copied by the driver at the launch: no upload and no
  device buffer for arguments; each launch counts in `h2d_skipped`), one kernel per task on
  the device's stream (a serial task as a single thread, a parallel task as a grid-stride
  loop), and no synchronisation unless the host needs data (a return value, a written numpy
  array);
- the status block: kernels record faults, adstack overflows and return values in device
  memory, read back (into pinned memory) at the next synchronisation, where a fault raises
  `KernelRuntimeError` naming kernel, array and index, and an overflow `AdStackOverflowError`
  naming kernel and task, as on the CPU;
- the adstack sizing service's GPU kernels (`GpuReducer`, `GpuRequired` in `gpu_tasks.py`,
  with the grid sizes and the native GPU entry table), the adstack heap (`GpuHeap`) and
  device graphs (`GpuGraph`, for `jr.graph`).
Caches: loaded modules by key (base class), device memory per buffer (its mirror), a locals
buffer and numpy staging per launch context (grow-only), wrappers of foreign device arrays per
live object, the sizing scratch and the heap per device (grow-only).
"""
from __future__ import annotations

import ctypes
import weakref
from typing import Any, Callable, Protocol

import numpy as np

from .. import dtypes
from ..codegen import abi
from ..codegen import launch_table as lt
from ..data import Field, Ndarray
from ..codegen.targets import Target as CodegenTarget
from .base import Device, DeviceTarget, EntryPoint
from .gpu_tasks import box_size_function
from . import gpu_tasks

DEFAULT_BLOCK = 256   # a task's threads per block unless jr.loop_config(block_dim=...) says
MAX_GRID = (1 << 31) - 1     # the most blocks in x a launch asks for (CUDA's limit)


class GpuDriver(Protocol):
    """What the launch path needs from a GPU API (addresses and handles are ints)."""
    name: str
    multiprocessors: int
    max_threads_per_multiprocessor: int
    dlpack_device_type: int       # DLPack's device type of its memory (kDLCUDA, kDLROCM)
    max_grid_threads: int         # the most threads (blocks * block size) one launch may have

    def load_module(self, image: bytes) -> Any: ...
    def function(self, module: Any, name: str) -> int: ...
    def launch(self, function: int, grid: int, block: int, params: int) -> None: ...
    def launch_source(self, function: str, grid: str, block: str, params: str
                      ) -> tuple[list[str], dict[str, Any]]: ...
    def begin_capture(self) -> None: ...
    def end_capture(self) -> Any: ...
    def instantiate(self, graph: Any) -> Any: ...
    def exec_update(self, graph_exec: Any, graph: Any) -> bool: ...
    def graph_launch(self, graph_exec: Any) -> None: ...
    def destroy_graph(self, graph: Any) -> None: ...
    def destroy_exec(self, graph_exec: Any) -> None: ...
    def alloc(self, nbytes: int) -> int: ...
    def alloc_pinned(self, nbytes: int) -> int: ...
    def free_pinned(self, ptr: int) -> None: ...
    def free(self, ptr: int) -> None: ...
    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None: ...
    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None: ...
    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None: ...
    def memset(self, dst: int, nbytes: int) -> None: ...
    def synchronize(self) -> None: ...
    def close(self) -> None: ...
    def event_create(self) -> Any: ...
    def event_record(self, event: Any) -> None: ...
    def event_synchronize(self, event: Any) -> None: ...
    def event_destroy(self, event: Any) -> None: ...
    def native_words(self) -> tuple[int, int, int, int] | None:
        """(launch function, get-current function, driver context, stream) as integers for
        the native GPU entry (`codegen/native_gpu_entry.py`), or None: launches stay in
        Python."""
    def function_handle(self, function: Any) -> int: ...
    def launch_error(self, code: int) -> Exception: ...


class DeviceMirror:
    """The device copy of one field or ndarray (`data._Buffer._mirror`): which copy is newer,
    and the transfers that make the other one current."""
    __slots__ = ("device", "ptr", "nbytes", "host", "host_newer", "device_newer", "owner")

    def __init__(self, device: "GpuDevice", owner: Any) -> None:
        self.device, self.owner = device, weakref.ref(owner)
        self.host = owner._data
        self.nbytes = max(int(self.host.nbytes), 1)
        self.ptr = device.alloc(self.nbytes)
        self.host_newer, self.device_newer = True, False
        weakref.finalize(owner, self.owner_died)

    def owner_died(self) -> None:
        if self.ptr and not self.device.closed:
            self.device.free(self.ptr)
            self.device.mirrors.remove(self)
        self.ptr = 0

    def to_device(self) -> None:
        """Before a launch: upload the host copy if it changed since the last upload."""
        if self.host_newer:
            self.device.copy_h2d(self.ptr, self.host.ctypes.data, self.host.nbytes)
            self.host_newer = False

    def before_host_read(self) -> None:
        if self.device_newer:
            self.device.copy_d2h(self.host.ctypes.data, self.ptr, self.host.nbytes)
            self.device.synchronize()
            self.device_newer = False

    def after_host_write(self) -> None:
        self.host_newer = True

    def release(self) -> None:
        """The device goes away: bring the data home and drop the device memory."""
        self.before_host_read()
        owner = self.owner()
        if owner is not None and owner._mirror is self:
            owner._mirror = None
        self.device.free(self.ptr)
        self.ptr = 0


class ForeignMirror(DeviceMirror):
    """The device side of an ndarray over another library's device memory (a torch or CuPy
    array passed to a kernel): that memory itself, never allocated or freed here; the data
    starts newer on the device."""
    __slots__ = ()

    def __init__(self, device: "GpuDevice", owner: Any, ptr: int) -> None:
        self.device, self.owner = device, weakref.ref(owner)
        self.host = owner._data
        self.nbytes = max(int(self.host.nbytes), 1)
        self.ptr = ptr
        self.host_newer, self.device_newer = False, True

    def owner_died(self) -> None:
        self.ptr = 0

    def release(self) -> None:
        self.before_host_read()
        owner = self.owner()
        if owner is not None and owner._mirror is self:
            owner._mirror = None
        self.ptr = 0


def cuda_array(obj: Any) -> tuple[int, tuple[int, ...], Any, bool] | None:
    """(pointer, shape, numpy dtype, read-only) of a C-contiguous `__cuda_array_interface__`
    object, or None when it is not one."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        return None
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expect, step = [], dtype.itemsize
        for s in reversed(shape):
            expect.append(step)
            step *= s
        if tuple(strides) != tuple(reversed(expect)) and 0 not in shape:
            return None
    ptr, readonly = cai["data"]
    return int(ptr), shape, dtype, bool(readonly)


class GpuHeap:
    """The program's adstack heap in device memory: grows by doubling, never per launch."""

    def __init__(self, device: "GpuDevice") -> None:
        self.device, self.size = device, 1 << 16
        self.ptr = device.alloc(self.size)

    def ensure(self, nbytes: int, who: str = "") -> int:
        if nbytes > self.size:
            size = self.size
            while size < nbytes:
                size *= 2
            self.device.synchronize()        # launches in flight may still use the old one
            self.device.free(self.ptr)
            self.ptr, self.size = self.device.alloc(size), size
            self.device.counters["allocations"] += 1
        return self.ptr


class GpuDevice(Device):
    """A GPU behind a `GpuDriver`; the launch path of every GPU backend."""

    faults_in_context = False

    def __init__(self, device_id: int, driver: GpuDriver, target: DeviceTarget,
                 codegen_target: CodegenTarget, compile_fn: Any) -> None:
        super().__init__(device_id)
        self.arch = target.arch
        self.driver = driver
        self._target, self._codegen_target, self._compile = target, codegen_target, compile_fn
        self.status = driver.alloc(abi.STATUS_SLOTS * 8)
        driver.memset(self.status, abi.STATUS_SLOTS * 8)
        # pinned: the status block (faults, return values) comes back by DMA, without staging
        self._pinned = driver.alloc_pinned(abi.STATUS_SLOTS * 8)
        self._status_host = (ctypes.c_int64 * abi.STATUS_SLOTS).from_address(self._pinned)
        self.launches: list["GpuLaunch"] = []
        self.launch_at: dict[int, "GpuLaunch"] = {}     # context address -> its entry
        self.dlpack_device_type = driver.dlpack_device_type
        self._foreign: dict[int, tuple[Any, Any]] = {}  # id(object) -> (weak ref, ndarray)
        self._scratch, self._scratch_size = 0, 0
        self.mirrors: list[DeviceMirror] = []
        self.counters: dict[str, int] = {"h2d_skipped": 0, "h2d_uploads": 0, "allocations": 0,
                                         "graph_instantiations": 0, "graph_updates": 0,
                                         "graph_replays": 0}
        self.native_skips = (ctypes.c_int64 * 1)()   # h2d_skipped of native launches
        self.runtime_store: Any = None    # the offline cache, for the host runtime module
        self._native: Any = False         # False: not looked at yet; None: no native launches
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
        module = self.driver.load_module(artifact)
        return {name: self.driver.function(module, name) for name in symbols}

    def entry(self, address: int) -> EntryPoint:
        raise TypeError("GPU launches go through launch_entry(context)")

    def launch_entry(self, context: Any) -> EntryPoint:
        return GpuLaunch(self, context)

    # ---- launches -----------------------------------------------------------------------
    @property
    def max_resident_threads(self) -> int:
        return self.driver.multiprocessors * self.driver.max_threads_per_multiprocessor

    @property
    def native_launch_addr(self) -> int | None:
        native = self.native_functions()
        return None if native is None else native["jitrt_launch"]  # type: ignore[no-any-return]

    def native_functions(self) -> dict[str, Any] | None:
        """The host runtime's functions and the driver's words that native launches on this
        device need, loaded on first use; None where the driver offers no native launch."""
        if self._native is False:
            self._native = None
            words = self.driver.native_words()
            if words is not None:
                from .cpu import runtime_functions
                self._native = {**runtime_functions(self.runtime_store), "words": words}
        return self._native  # type: ignore[no-any-return]

    def native_entry(self, context: Any, lay: dict[str, int],
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

    def sizing_calls(self, functions: dict[str, Any], prefix: str, nspecs: int, nstacks: int,
                     sizable: bool) -> tuple[list[Any], Any]:
        reducers = [gpu_tasks.GpuReducer(self, functions[f"{prefix}_red{k}_kernel"], nspecs,
                                         nstacks) for k in range(nspecs)]
        required = gpu_tasks.GpuRequired(self, functions[f"{prefix}_required_kernel"], nspecs,
                                         nstacks) if sizable else None
        return reducers, required

    def graph(self, entries: list[Any]) -> GpuGraph:
        """A device graph of these launch entries, in order (`jr.graph`)."""
        return GpuGraph(self, entries)

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

    def data_ptr(self, data: Any) -> int:
        """The device address of a field or jitrt ndarray, given device memory on first use."""
        mirror = data._mirror
        if mirror is None or mirror.device is not self:
            if mirror is not None:
                mirror.release()
            mirror = DeviceMirror(self, data)
            self.counters["allocations"] += 1
            data._mirror = mirror
            self.mirrors.append(mirror)
        return mirror.ptr  # type: ignore[no-any-return]

    def export_ptr(self, data: Any) -> int:
        """The device address of `data` for another library (`__cuda_array_interface__`,
        `__dlpack__`): uploaded if the host copy is newer, the stream synchronised, and the
        device copy marked newer (the consumer may write it)."""
        ptr = self.data_ptr(data)
        mirror = data._mirror
        mirror.to_device()
        self.synchronize()
        mirror.device_newer = True
        return ptr

    def wrap_foreign(self, obj: Any) -> Any:
        """A jitrt ndarray over a torch/CuPy device array (no copy), the same one for the
        same live object; None if `obj` is not a C-contiguous device array of a jitrt dtype."""
        found = self._foreign.get(id(obj))
        if found is not None and found[0]() is obj:
            return found[1]
        info = cuda_array(obj)
        if info is None:
            return None
        ptr, shape, np_dtype, readonly = info
        dt = dtypes.from_numpy(np_dtype)
        if dt is None:
            return None
        wrapped = Ndarray._on_device(lambda nd: ForeignMirror(self, nd, ptr), shape, dt, obj)
        wrapped.readonly = readonly
        try:
            self._foreign[id(obj)] = (weakref.ref(obj), wrapped)
        except TypeError:       # not weak-referenceable: wrapped again at each use
            pass
        return wrapped

    def check_status(self) -> None:
        """After a synchronisation: raise the fault a kernel recorded, if any (and clear it)."""
        status = self._status_host
        self.driver.copy_d2h(ctypes.addressof(status), self.status, abi.STATUS_SLOTS * 8)
        self.driver.synchronize()
        if status[abi.SLOT_OVERFLOW] and not status[abi.SLOT_ERROR]:
            context = self.launches[status[abi.STATUS_OVERFLOW_LAUNCH]].context
            context.buf[abi.SLOT_OVERFLOW] = status[abi.SLOT_OVERFLOW]
            self.driver.memset(self.status, abi.STATUS_SLOTS * 8)
            context.overflow()            # raises AdStackOverflowError naming kernel and task
        if not status[abi.SLOT_ERROR]:
            return
        launch_id = status[abi.SLOT_LAUNCH_ID]
        record = (ctypes.c_int64 * abi.HEADER_SLOTS)()
        for slot in (abi.SLOT_ERROR, abi.SLOT_ERROR_AXIS, abi.SLOT_ERROR_INDEX):
            record[slot] = status[slot]
        self.driver.memset(self.status, abi.STATUS_SLOTS * 8)
        self.driver.synchronize()
        from ..runtime.context import raise_fault
        raise_fault(record, self.launches[launch_id].context.compiled)

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
        """Wait for the stream; a fault recorded by a kernel since the last check raises."""
        self.driver.synchronize()
        self.check_status()

    def close(self) -> None:
        """Bring every buffer's data home, then free what this device allocated."""
        if self.closed:
            return
        self.closed = True
        self.driver.synchronize()
        for mirror in self.mirrors:
            if mirror.ptr:
                mirror.release()
        for _, wrapped in self._foreign.values():   # other libraries' memory: just let go
            wrapped._mirror = None
        self._foreign.clear()
        for launch in self.launches:
            launch.release()
        self.driver.free(self.status)
        self.driver.free_pinned(self._pinned)
        if self._scratch:
            self.driver.free(self._scratch)
        self.driver.close()


def unique(mirrors: list[DeviceMirror]) -> list[DeviceMirror]:
    """`mirrors` without repeats, in order."""
    return list({id(m): m for m in mirrors}.values())


class GpuGraph:
    """Bound launches recorded into one device graph (`jr.graph`): `replay()` brings changed
    host data to the device, stages host arrays, launches the graph (one driver call for all
    kernels) and does each launch's bookkeeping. `update(entries)` re-captures after changed
    arguments and updates the instantiated graph in place (instantiating again only when the
    driver refuses the update)."""

    def __init__(self, device: "GpuDevice", entries: list["GpuLaunch"]) -> None:
        self.device, self.exec = device, None
        self.update(entries)

    def update(self, entries: list["GpuLaunch"]) -> None:
        device, driver = self.device, self.device.driver
        for entry in entries:
            entry.prepare()
        driver.begin_capture()
        try:
            for entry in entries:
                entry.launch_tasks()
        finally:
            graph = driver.end_capture()
        if self.exec is not None and driver.exec_update(self.exec, graph):
            device.counters["graph_updates"] += 1
        else:
            if self.exec is not None:
                driver.destroy_exec(self.exec)
            self.exec = driver.instantiate(graph)
            device.counters["graph_instantiations"] += 1
        driver.destroy_graph(graph)
        self.entries = entries
        # what each captured launch's parameters were (a graph holds them by value)
        self.captured = {id(e): ctypes.string_at(e.context.addr, 8 * e.slots)
                         for e in entries}
        self.mirrors = unique([m for e in entries for m in e.inputs])
        self.written = unique([m for e in entries for m in e.outputs])
        self.staged = [e for e in entries if e.staging]

    def recapture_if_changed(self, entries: list["GpuLaunch"]) -> None:
        """Before a replay: if a launch's context changed since the capture (an adstack
        capacity or heap that grew), capture again and update the graph in place."""
        for e in entries:
            if ctypes.string_at(e.context.addr, 8 * e.slots) != self.captured[id(e)]:
                self.update(self.entries)
                return

    def replay(self) -> None:
        device = self.device
        for m in self.mirrors:
            if m.host_newer:
                m.to_device()
        copy_out = [c for e in self.staged for c in e.stage_in()]
        device.driver.graph_launch(self.exec)
        device.counters["graph_replays"] += 1
        for m in self.written:
            m.device_newer = True
        if copy_out:
            copy_back(device, copy_out)

    def release(self) -> None:
        if self.exec is not None and not self.device.closed:
            self.device.driver.destroy_exec(self.exec)
        self.exec = None


class GpuLaunch:
    """The entry point of one launch context on a GPU (called with the context's address).

    Each instance has its own small class whose `__call__` is generated straight-line code
    (`make_call`): the residency checks of its fields (inlined) and of its array arguments
    (two lists that packing an argument updates in place), the staging of host arrays, one
    driver call per task (inlined from `GpuDriver.launch_source`). The code is generated again
    only when the context starts staging host arrays."""

    __call__: Callable[["GpuLaunch", int], None]   # generated per instance (`make_call`)

    def __new__(cls, device: GpuDevice, context: Any) -> "GpuLaunch":
        return super().__new__(type("GpuLaunch", (cls,), {}))

    def __init__(self, device: GpuDevice, context: Any) -> None:
        self.device, self.context = device, context
        compiled = context.compiled
        self.launch_id = len(device.launches)
        device.launches.append(self)
        device.launch_at[context.addr] = self
        context.buf[abi.SLOT_LAUNCH_ID] = self.launch_id
        self.nbytes = len(context.buf) * 8
        layout = compiled.layout
        self.slots = layout.gpu_slots
        self.dlocals = 0        # kernel-scope locals that outlive a task
        if layout.local_slots:
            self.dlocals = device.alloc(8 * len(layout.local_slots))
            context.buf[abi.SLOT_GPU_LOCALS] = self.dlocals
        # kernel parameters, as the driver wants them: the address of each context slot (the
        # driver copies their values at the launch), then of the threads-launched value
        self.param_values = (ctypes.c_uint64 * 1)(0)
        self.params = (ctypes.c_void_p * (self.slots + 1))(
            *(context.addr + 8 * k for k in range(self.slots)),
            ctypes.addressof(self.param_values))
        self.params_addr = ctypes.addressof(self.params)
        ir_tasks = compiled.lowered.tasked.tasks
        resident = device.max_resident_threads
        blocks = [t.block_dim or DEFAULT_BLOCK for t in compiled.tasks]
        limit = device.driver.max_grid_threads
        # per task: (function, kind, box size from the context or None, block, resident grid,
        # largest grid). A task with adstacks keeps to the resident threads (each owns a heap
        # slice); others get one thread per point of the box (more loads in flight)
        self.tasks = [(compiled.functions[t.symbol], t.kind,
                       box_size_function(ir_tasks[t.index], compiled.layout)
                       if t.kind == "parallel" else None, block, max(1, resident // block),
                       max(1, resident // block) if t.stacks else min(MAX_GRID, limit // block))
                      for t, block in zip(compiled.tasks, blocks)]
        self.fields = [b for f in compiled.field_objs for b in (f, f.grad) if b is not None]
        writes = compiled.lowered.writes
        self.written_fields = [compiled.field_objs[s].grad if g else compiled.field_objs[s]
                               for s, g in writes.fields]
        self.written_arrays = set(writes.arrays)
        self.arg_of_slot = {slot: i for i, slot in enumerate(compiled.layout.param_slots)}
        # slot -> (argument, its host memory when staged, whether the kernel writes it)
        self.arrays: dict[int, tuple[Any, Any, bool]] = {}
        self.staging: dict[int, tuple[int, int]] = {}     # slot -> (device ptr, bytes)
        self.pinned: dict[int, list[Any]] = {}   # slot -> [pinned host ptr, bytes, event]
        self.returns = compiled.lowered.tasked.ret is not None
        self.field_inputs = unique([f._mirror for f in self.fields])
        self.field_outputs = [f._mirror for f in self.written_fields]
        self.array_inputs: list[DeviceMirror] = []     # updated in place by `refresh`
        self.array_outputs: list[DeviceMirror] = []
        self.staged_code = False       # whether the generated code stages host arrays
        self.native: Any = None        # the GPU entry table (`native_table`), once asked for
        self.refresh()
        setattr(type(self), "__call__", self.make_call())

    def pack(self, buf: Any, slot: int, v: Any, dt: Any, ndim: int, need_grad: bool,
             written: bool = True) -> bool:
        """`arguments.pack_array` for this device: device addresses in the slots; a plain
        numpy array gets a staging buffer of this context (grow-only)."""
        host = None        # memory jitrt does not own: staged in (and out) at each launch
        if type(v) is not Ndarray and not isinstance(v, (np.ndarray, Field)):
            v = self.device.wrap_foreign(v)      # a torch/CuPy device array, or None
            if v is None or (written and v.readonly):
                return False
        if type(v) is Ndarray:
            if v.dtype is not dt or len(v.storage_shape) != ndim or (
                    need_grad and v.grad is None):
                return False
            if v._mirror is None and getattr(v, "_owner", None) is not None:
                host = v._data              # jr.ndarray.from_dlpack of host memory
            else:
                buf[slot] = self.device.data_ptr(v)
                buf[slot + 1] = self.device.data_ptr(v.grad) if v.grad is not None else 0
        elif isinstance(v, np.ndarray) and not need_grad:
            # a numpy bool array is a u8 one (0 or 1), as arguments.pack_array reads it
            if (v.dtype != dt.np and not (dt is dtypes.u8 and v.dtype == np.bool_)) or \
                    v.ndim != ndim or not v.flags.c_contiguous or (
                    written and not v.flags.writeable):
                return False
            host = v
        else:
            return False
        if host is not None:
            ptr, size = self.staging.get(slot, (0, 0))
            if not ptr or size < host.nbytes:
                if ptr:
                    self.device.free(ptr)
                ptr, size = self.device.alloc(host.nbytes), max(host.nbytes, 1)
                self.device.counters["allocations"] += 1
                self.staging[slot] = (ptr, size)
            buf[slot] = ptr
            buf[slot + 1] = 0
        self.arrays[slot] = (v, host, written)
        self.refresh()
        shape = v.storage_shape if type(v) is Ndarray else v.shape
        for k in range(ndim):
            buf[slot + 2 + k] = shape[k]
        return True

    def refresh(self) -> None:
        """After an array argument is packed: the device copies a launch makes current and
        marks newer (the generated code reads the array lists, updated here in place; it is
        generated again only when staging starts)."""
        reads, writes = self.array_mirrors()
        self.array_inputs[:] = unique(reads + writes)
        self.array_outputs[:] = writes
        self.inputs = unique(self.field_inputs + self.array_inputs)
        self.outputs = self.field_outputs + self.array_outputs
        if bool(self.staging) != self.staged_code:
            setattr(type(self), "__call__", self.make_call())
        if self.native is not None:
            gpu_tasks.write_native_mirrors(self)

    def native_table(self, native: dict[str, Any], api: list[int],
                     newer: list[int | None]) -> int:
        """The address of this context's GPU entry table, built once (`gpu_tasks.py`)."""
        if self.native is None:
            self.native = gpu_tasks.native_table(self, native, api, newer)
            gpu_tasks.write_native_mirrors(self)
        return ctypes.addressof(self.native)

    def raise_native_error(self) -> None:
        """What the native GPU entry calls when the driver refused a launch."""
        raise self.device.driver.launch_error(int(self.native[lt.G_ERROR]))

    def make_call(self) -> Any:
        driver = self.device.driver
        env: dict[str, Any] = {"counters": self.device.counters,
                               "pv": self.param_values, "params": self.params_addr,
                               "buf": self.context.buf, "stage_in": self.stage_in,
                               "results": self.results, "ain": self.array_inputs,
                               "aout": self.array_outputs}
        lines = ["def __call__(self, addr):"]
        self.staged_code = bool(self.staging)
        has_arrays = any(p.kind == "ndarray" for p in self.context.compiled.params)

        def launch(function: str, grid: str, block: str) -> list[str]:
            code, names = driver.launch_source(function, grid, block, "params")
            env.update(names)
            return ["    " + line for line in code]
        for k, m in enumerate(self.field_inputs):
            env[f"m{k}"] = m
            lines.append(f"    if m{k}.host_newer: m{k}.to_device()")
        if has_arrays:
            lines.append("    for m in ain:\n        if m.host_newer: m.to_device()")
        if self.staged_code:
            lines.append("    copy_out = stage_in()")
        lines.append("    counters['h2d_skipped'] += 1")      # arguments go by value
        last = None        # the threads-launched parameter as the previous task left it
        for k, (function, kind, size, block, grid, largest) in enumerate(self.tasks):
            env[f"f{k}"] = function
            if kind == "serial":
                if last != 1:
                    lines.append("    pv[0] = 1")
                lines += launch(f"f{k}", "1", "1")
                last = 1
                continue
            if size is not None:
                env[f"size{k}"] = size
                lines += [f"    g = min({largest}, max(1, (size{k}(buf) + {block - 1}) // "
                          f"{block}))", f"    pv[0] = g * {block}"]
                last = None
            else:
                if last != grid * block:
                    lines.append(f"    pv[0] = {grid * block}")
                lines.append(f"    g = {grid}")
                last = grid * block
            lines += launch(f"f{k}", "g", str(block))
        if len(self.tasks) == 1 and last is not None:   # constant: set once, here
            self.param_values[0] = last
            lines = [ln for ln in lines if not ln.startswith("    pv[0] =")]
        for k, m in enumerate(self.field_outputs):
            env[f"o{k}"] = m
            lines.append(f"    o{k}.device_newer = True")
        if has_arrays:
            lines.append("    for m in aout: m.device_newer = True")
        if self.staged_code or self.returns:
            lines.append("    results(copy_out)" if self.staged_code else "    results(None)")
        source = "\n".join(lines)
        exec(compile(source, f"<jitrt gpu entry {self.context.compiled.name}>", "exec"),
             env)  # noqa: S102
        call = env["__call__"]
        call.source = source
        return call

    def prepare(self) -> list[tuple[Any, int, int]]:
        """Everything before the kernels: data made current on the device, host arrays
        staged in. Returns the staged arrays the kernels write (copied out after them)."""
        for m in self.inputs:
            if m.host_newer:
                m.to_device()
        copy_out = self.stage_in() if self.staging else []
        self.device.counters["h2d_skipped"] += 1
        return copy_out

    def stage_in(self) -> list[tuple[Any, int, int]]:
        """Copy host-memory arguments (numpy arrays, wrapped host tensors) to their staging
        buffers; returns those the kernels write, to copy out after them."""
        copy_out = []
        driver = self.device.driver
        for slot, (_, host, written) in self.arrays.items():
            if host is not None:
                ptr, pinned = self.staging[slot][0], self.pinned_buffer(slot, host.nbytes)
                ctypes.memmove(pinned[0], host.ctypes.data, host.nbytes)
                driver.copy_h2d(ptr, pinned[0], host.nbytes)      # DMA from pinned memory
                driver.event_record(pinned[2])       # the buffer is free again after this
                if written:
                    copy_out.append((host, ptr, pinned[0]))
        return copy_out

    def pinned_buffer(self, slot: int, nbytes: int) -> list[Any]:
        """[address, size, event] of the pinned host buffer that stages the host array of
        `slot` (grow-only, one per context and slot); the copy that last read it has
        finished (its event), so it may be written."""
        driver = self.device.driver
        found = self.pinned.get(slot)
        if found is not None:
            driver.event_synchronize(found[2])
            if found[1] >= nbytes:
                return found
            driver.free_pinned(found[0])
            driver.event_destroy(found[2])
        size = max(nbytes, 1)
        self.pinned[slot] = [driver.alloc_pinned(size), size, driver.event_create()]
        return self.pinned[slot]

    def launch_tasks(self) -> None:
        """One kernel per task on the stream (what a graph captures)."""
        driver = self.device.driver
        buf = self.context.buf
        for function, kind, size, block, grid, largest in self.tasks:
            if kind == "serial":
                self.param_values[0] = 1
                driver.launch(function, 1, 1, self.params_addr)
                continue
            if size is not None:
                grid = min(largest, max(1, (size(buf) + block - 1) // block))
            self.param_values[0] = grid * block
            driver.launch(function, grid, block, self.params_addr)

    def array_mirrors(self) -> tuple[list[DeviceMirror], list[DeviceMirror]]:
        """The device copies of the current array arguments: (read, written)."""
        reads, writes = [], []
        for slot, (v, host, written) in self.arrays.items():
            if host is None:
                reads += [v._mirror] + ([v.grad._mirror] if v.grad is not None else [])
                if written:
                    writes.append(v._mirror)
                if (self.arg_of_slot[slot], True) in self.written_arrays:
                    writes.append(v.grad._mirror)
        return reads, writes

    def results(self, copy_out: list[tuple[Any, int, int]] | None) -> None:
        """Copy staged arrays the kernels wrote back and read a return value (the only
        synchronisations of a launch)."""
        device, driver = self.device, self.device.driver
        if self.returns:
            status = device._status_host
            driver.copy_d2h(ctypes.addressof(status), device.status, abi.STATUS_SLOTS * 8)
        if copy_out:
            copy_back(device, copy_out)           # synchronises
        elif self.returns:
            device.synchronize()
        if self.returns:
            self.context.buf[abi.SLOT_RETURN] = device._status_host[abi.SLOT_RETURN]

    def release(self) -> None:
        if self.dlocals:
            self.device.free(self.dlocals)
        for ptr, _ in self.staging.values():
            self.device.free(ptr)
        self.staging.clear()
        for ptr, _, event in self.pinned.values():
            self.device.driver.event_synchronize(event)
            self.device.driver.free_pinned(ptr)
            self.device.driver.event_destroy(event)
        self.pinned.clear()


def copy_back(device: GpuDevice, copy_out: list[tuple[Any, int, int]]) -> None:
    """After the kernels: the staged host arrays they wrote come back through their pinned
    buffers (DMA, one synchronisation), then into the arrays themselves."""
    for host, ptr, pinned in copy_out:
        device.driver.copy_d2h(pinned, ptr, host.nbytes)
    try:
        device.synchronize()        # may raise a kernel's fault: the copies are done by then
    finally:
        for host, _, pinned in copy_out:
            ctypes.memmove(host.ctypes.data, pinned, host.nbytes)


