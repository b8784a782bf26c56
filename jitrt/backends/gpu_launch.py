"""The entry point of one launch context on a GPU: the task loop, in generated Python.

Stage: backend (helpers of `gpu.py`). `GpuLaunch` is what `GpuDevice.launch_entry(context)`
returns. The kernels take the context by value (one 64-bit kernel parameter per slot, copied
by the driver at the launch: no upload and no device buffer for arguments; each launch counts
in `h2d_skipped`), one kernel per task on the device's stream (a serial task as a single
thread, a parallel task as a grid-stride loop), and no synchronisation unless the host needs
data (a return value, a written numpy array). Packing an array argument (`pack`) puts its
device address in the context; host arrays are staged (`gpu_staging.py`). Caches: a locals
buffer and the staging buffers per launch context; the generated code per context.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from .. import dtypes
from ..codegen import abi
from ..ir import nodes as n
from ..native import launch_table as lt
from ..data import Field, Ndarray
from ..launch_plan import LaunchPlan, large_shape
from . import gpu_staging, gpu_tasks
from .gpu_residency import DeviceMirror, unique
from .gpu_tasks import box_size_function

if TYPE_CHECKING:
    from .gpu import GpuDevice

DEFAULT_BLOCK = 256   # a task's threads per block unless jr.loop_config(block_dim=...) says
MAX_GRID = (1 << 31) - 1     # the most blocks in x a launch asks for (CUDA's limit)


class GpuLaunch:
    """The entry point of one launch context on a GPU (called with the context's address).

    Each instance has its own small class whose `__call__` is generated straight-line code
    (`make_call`): the residency checks of its fields (inlined) and of its array arguments
    (two lists that packing an argument updates in place), the staging of host arrays, one
    driver call per task (inlined from `GpuDriver.launch_source`). The code is generated again
    only when the context starts staging host arrays."""

    __call__: Callable[["GpuLaunch", int], None]   # generated per instance (`make_call`)

    def __new__(cls, device: "GpuDevice", context: Any) -> "GpuLaunch":
        return super().__new__(type("GpuLaunch", (cls,), {}))

    def __init__(self, device: "GpuDevice", context: Any) -> None:
        self.device, self.context = device, context
        compiled, plan = context.compiled, context.plan
        self.plan: LaunchPlan = plan
        self.launch_id = len(device.launches)
        device.launches.append(self)
        device.launch_at[context.addr] = self
        context.buf[abi.SLOT_LAUNCH_ID] = self.launch_id
        self.nbytes = len(context.buf) * 8
        self.slots = compiled.layout.gpu_slots
        self.dlocals = 0        # kernel-scope locals that outlive a task
        if compiled.layout.local_slots:
            self.dlocals = device.alloc(8 * len(compiled.layout.local_slots))
            context.buf[abi.SLOT_GPU_LOCALS] = self.dlocals
        # kernel parameters, as the driver wants them: the address of each context slot (the
        # driver copies their values at the launch), then of the threads-launched value
        self.param_values = (ctypes.c_uint64 * 1)(0)
        self.params = (ctypes.c_void_p * (self.slots + 1))(
            *(context.addr + 8 * k for k in range(self.slots)),
            ctypes.addressof(self.param_values))
        self.params_addr = ctypes.addressof(self.params)
        self.tasks = task_table(device, plan, compiled.functions, compiled.layout)
        self.fields = [b for f in compiled.field_objs for b in (f, f.grad) if b is not None]
        self.written_fields = [compiled.field_objs[s].grad if g else compiled.field_objs[s]
                               for s, g in plan.field_bumps]
        self.written_arrays = set(plan.array_bumps)
        self.arg_of_slot = {p.slot: p.index for p in plan.params}
        # slot -> (argument, its host memory when staged, whether the kernel writes it)
        self.arrays: dict[int, tuple[Any, Any, bool]] = {}
        self.staging: dict[int, tuple[int, int]] = {}     # slot -> (device ptr, bytes)
        self.pinned: dict[int, list[Any]] = {}   # slot -> [pinned host ptr, bytes, event]
        # a scalar return comes back through the status block (a vector one: a field)
        self.returns = plan.returns.kind in ("float", "signed", "unsigned")
        self.field_inputs = unique([f._mirror for f in self.fields])
        self.field_outputs = [f._mirror for f in self.written_fields]
        self.array_inputs: list[DeviceMirror] = []     # updated in place by `refresh`
        self.array_outputs: list[DeviceMirror] = []
        self.staged_code = False       # whether the generated code stages host arrays
        self.native: Any = None        # the GPU entry table (`native_table`), once asked for
        self.refresh()
        setattr(type(self), "__call__", self.make_call())

    def pack(self, buf: Any, slot: int, v: Any, dt: Any, ndim: int, need_grad: bool,
             written: bool = True, small: bool = False) -> bool:
        """`arguments.pack_array` for this device: device addresses in the slots; a plain
        numpy array gets a staging buffer of this context (grow-only)."""
        host = None        # memory jitrt does not own: staged in (and out) at each launch
        if type(v) is not Ndarray and not isinstance(v, (np.ndarray, Field)):
            v = self.device.wrap_foreign(v)      # a torch/CuPy device array, or None
            if v is None or (written and v.readonly):
                return False
        # every refusal comes before a slot is written (the records of the last array packed
        # stay true); `small`: a large array is addressed in 32 bits there, so specialize again
        if type(v) is Ndarray:
            if v.dtype is not dt or len(v.storage_shape) != ndim or (
                    need_grad and v.grad is None) or not self.device.owns(v) or (
                    small and large_shape(v.storage_shape)):
                return False        # (another device's array: `dispatch` says so)
            if v._mirror is None and getattr(v, "_owner", None) is not None:
                host = v._data              # jr.ndarray.from_dlpack of host memory
            else:
                buf[slot] = self.device.data_ptr(v)
                buf[slot + 1] = self.device.data_ptr(v.grad) if v.grad is not None else 0
        elif isinstance(v, np.ndarray) and not need_grad:
            # a numpy bool array is a u8 one (0 or 1), as arguments.pack_array reads it
            if (v.dtype != dt.np and not (dt is dtypes.u8 and v.dtype == np.bool_)) or \
                    v.ndim != ndim or not v.flags.c_contiguous or (
                    written and not v.flags.writeable) or (small and large_shape(v.shape)):
                return False
            host = v
        else:
            return False
        if host is not None:
            buf[slot] = gpu_staging.staging_buffer(self, slot, host.nbytes)
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
        """The generated `__call__`: residency checks, staging, the task loop, results."""
        env: dict[str, Any] = {"counters": self.device.counters,
                               "pv": self.param_values, "params": self.params_addr,
                               "buf": self.context.buf, "stage_in": self.stage_in,
                               "results": self.results, "ain": self.array_inputs,
                               "aout": self.array_outputs}
        lines = ["def __call__(self, addr):"]
        self.staged_code = bool(self.staging)
        has_arrays = bool(self.plan.of_kind("ndarray"))
        for k, m in enumerate(self.field_inputs):
            env[f"m{k}"] = m
            lines.append(f"    if m{k}.host_newer: m{k}.to_device()")
        if has_arrays:
            lines.append("    for m in ain:\n        if m.host_newer: m.to_device()")
        if self.staged_code:
            lines.append("    copy_out = stage_in()")
        lines.append("    counters['h2d_skipped'] += 1")      # arguments go by value
        lines += self.task_lines(env)
        for k, m in enumerate(self.field_outputs):
            env[f"o{k}"] = m
            lines.append(f"    o{k}.device_newer = True")
        if has_arrays:
            lines.append("    for m in aout: m.device_newer = True")
        if self.staged_code or self.returns:
            lines.append("    results(copy_out)" if self.staged_code else "    results(None)")
        source = "\n".join(lines)
        exec(compile(source, f"<jitrt gpu entry {self.plan.name}>", "exec"),
             env)  # noqa: S102
        call = env["__call__"]
        call.source = source
        return call

    def task_lines(self, env: dict[str, Any]) -> list[str]:
        """The generated task loop: one driver launch per task, the threads-launched
        parameter set only where it changes (once, outside the code, for a single task)."""
        driver = self.device.driver
        lines: list[str] = []

        def launch(function: str, grid: str, block: str) -> list[str]:
            code, names = driver.launch_source(function, grid, block, "params")
            env.update(names)
            return ["    " + line for line in code]
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
        return lines

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
        """Host arrays to their staging buffers (`gpu_staging.stage_in`)."""
        return gpu_staging.stage_in(self)

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
        device = self.device
        # each synchronisation copies the status block, the return slot with it
        if copy_out:
            gpu_staging.copy_back(device, copy_out)           # synchronises
        elif self.returns:
            device.synchronize()
        if self.returns:
            self.context.buf[abi.SLOT_RETURN] = device._status_host[abi.SLOT_RETURN]

    def release(self) -> None:
        if self.dlocals:
            self.device.free(self.dlocals)
        gpu_staging.release(self)


def run_tasks(plan: LaunchPlan, launch: GpuLaunch) -> None:
    """The tasks of `plan`, in order, one kernel each on the stream, from the context of
    `launch` (its task table: `task_table`); the Python twin of the generated task loop."""
    driver, params = launch.device.driver, launch.params_addr
    buf, pv = launch.context.buf, launch.param_values
    for task, (function, kind, size, block, grid, largest) in zip(plan.tasks, launch.tasks):
        if task.kind == "serial":
            pv[0] = 1
            driver.launch(function, 1, 1, params)
            continue
        if size is not None:
            grid = min(largest, max(1, (size(buf) + block - 1) // block))
        pv[0] = grid * block
        driver.launch(function, grid, block, params)


def default_block(box: Any, multiprocessors: int) -> int:
    """Threads per block of a task without `jr.loop_config(block_dim=...)`: `DEFAULT_BLOCK`,
    or, for a box of a constant size too small to give every multiprocessor a block of that
    many, the fewest multiples of 64 threads (whole warps, and whole wavefronts on AMD's
    wave64 GPUs: block sums need them) that spread it over all of them. A loop over 256 rows
    of a grid, each thread walking a row, then runs on 4 multiprocessors instead of 1
    (DiffTaichi's wave: its step 0.46 -> 0.16 ms on an H200)."""
    if not box:
        return DEFAULT_BLOCK
    size = 1
    for begin, end in box:
        if not (isinstance(begin, n.Const) and isinstance(end, n.Const)
                and isinstance(begin.value, int) and isinstance(end.value, int)):
            return DEFAULT_BLOCK
        size *= max(0, end.value - begin.value)
    per_unit = -(-size // max(1, multiprocessors))
    return min(DEFAULT_BLOCK, max(64, -(-per_unit // 64) * 64))


def task_table(device: "GpuDevice", plan: LaunchPlan, functions: Mapping[str, Any],
               layout: abi.ContextLayout) -> list[tuple[Any, ...]]:
    """Per task of the plan: (function, kind, box size from the context or None, block,
    resident grid, largest grid). A task with adstacks keeps to the resident threads (each
    owns a heap slice); others get one thread per point of the box (more loads in flight)."""
    resident = device.max_resident_threads
    limit = device.driver.max_grid_threads
    table = []
    for t in plan.tasks:
        block = t.block_dim or default_block(t.box if t.kind == "parallel" else None,
                                             device.driver.multiprocessors)
        size = box_size_function(t.box, layout) if t.kind == "parallel" else None
        resident_grid = max(1, resident // block)
        largest = resident_grid if t.stacks else min(MAX_GRID, limit // block)
        table.append((functions[t.symbol], t.kind, size, block, resident_grid, largest))
    return table
