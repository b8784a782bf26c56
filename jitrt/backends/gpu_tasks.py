"""How a GPU launch context's tasks are sized and launched without Python.

Stage: backend (helpers of `gpu.py`). `box_size_function` gives the generated Python entry a
task's point count from the host launch context (the grid follows it); `native_table` fills a
context's *GPU entry table* (`native/launch_table.py`'s `G_*` words) that the native GPU
entry (`native/native_gpu_entry.py`) reads to launch without Python, with each task's box as
bounds it can read itself (`box_bounds`), and `write_native_mirrors` keeps the table's
mirrors and its go-to-Python flag current when the context's arguments are repacked. Caches
nothing (the table lives on its `GpuLaunch`). The sizing service's GPU kernels are launched
here too (`GpuReducer`, `GpuRequired`: the callables `SizingPlan` calls).
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any

from ..codegen import abi
from ..native import launch_table as lt
from ..ir import nodes as n

Box = tuple[tuple[n.Expr, n.Expr], ...]    # a task's box: (begin, end) per dimension


def host_expr(e: n.Expr, layout: abi.ContextLayout) -> str | None:
    """Python source computing an integer bound expression from the context buffer `buf`, if
    it is made of constants, scalar arguments and ndarray extents (else None)."""
    if isinstance(e, n.Const) and isinstance(e.value, int):
        return repr(e.value)
    if isinstance(e, n.Arg) and e.dtype.is_int:
        return f"buf[{layout.arg_slot(e)}]"
    if isinstance(e, n.Shape):
        return f"buf[{layout.array_shape_slot(e.ref, e.axis)}]"
    if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
        return host_expr(e.x, layout)
    if isinstance(e, n.Binary) and e.op in ("+", "-", "*"):
        a, b = host_expr(e.a, layout), host_expr(e.b, layout)
        return None if a is None or b is None else f"({a} {e.op} {b})"
    return None


def box_size_function(box: Box, layout: abi.ContextLayout) -> Any:
    """`f(buf) -> points in a task's box` (`TaskPlan.box`), computed on the host to size the
    grid, or None when a bound depends on device data (the grid is then the device's resident
    maximum; the grid-stride loop is correct for any grid)."""
    extents = []
    for be, ee in box:
        begin, end = host_expr(be, layout), host_expr(ee, layout)
        if begin is None or end is None:
            return None
        extents.append(f"max(0, {end} - {begin})")
    return eval("lambda buf: " + " * ".join(extents or ["1"]))  # noqa: S307 (built above)


def box_bounds(box: Box, layout: abi.ContextLayout) -> list[int] | None:
    """The task's box for the native GPU entry: per extent (begin is a slot, begin, end is a
    slot, end), each bound a constant or one context slot; None when a bound is anything else
    or the box has more than `MAX_EXTENTS` extents (that launch then stays in Python)."""
    def bound(e: n.Expr) -> tuple[int, int] | None:
        if isinstance(e, n.Const) and isinstance(e.value, int):
            return 0, e.value
        if isinstance(e, n.Arg) and e.dtype.is_int:
            return 1, layout.arg_slot(e)
        if isinstance(e, n.Shape):
            return 1, layout.array_shape_slot(e.ref, e.axis)
        if isinstance(e, n.Cast) and e.dtype.is_int and e.x.dtype.is_int:
            return bound(e.x)
        return None
    if len(box) > lt.MAX_EXTENTS:
        return None
    words: list[int] = []
    for be, ee in box:
        begin, end = bound(be), bound(ee)
        if begin is None or end is None:
            return None
        words += [*begin, *end]
    return words


def native_table(launch: Any, native: dict[str, Any], api: list[int],
                 newer: list[int | None]) -> Any:
    """The GPU entry table of the `GpuLaunch` `launch`: the driver's words (`native`), the
    C API functions (`api`), `DeviceMirror`'s slot offsets (`newer`; without them every
    launch goes to the Python entry) and one record per task."""
    plan = launch.context.plan
    arrays = len(plan.of_kind("ndarray"))
    launch.native_inputs = len(launch.field_inputs) + 2 * arrays     # capacities
    launch.native_outputs = len(launch.field_outputs) + 2 * arrays
    ntasks = len(launch.tasks)
    first_input = lt.G_HEADER_WORDS + lt.TASK_WORDS * ntasks
    t = (ctypes.c_int64 * (first_input + launch.native_inputs + launch.native_outputs))()
    keep = [functools.partial(launch, launch.context.addr), launch.raise_native_error]
    launch.native_keep = keep
    t[lt.G_LAUNCH], t[lt.G_GET_CURRENT], t[lt.G_GPU_CONTEXT], t[lt.G_STREAM] = \
        native["words"]
    if launch.device.native_stream is not None:     # inside a `jr.stream(...)` block
        t[lt.G_STREAM] = launch.device.native_stream
    t[lt.G_PARAMS], t[lt.G_THREADS] = launch.params_addr, \
        ctypes.addressof(launch.param_values)
    t[lt.G_CONTEXT] = launch.context.addr
    t[lt.G_PYTHON_ENTRY], t[lt.G_ON_ERROR] = id(keep[0]), id(keep[1])
    t[lt.G_SKIPPED] = ctypes.addressof(launch.device.native_skips)
    t[lt.G_HOST_NEWER], t[lt.G_DEVICE_NEWER] = (v or 0 for v in newer)
    t[lt.G_TRUE] = id(True)
    t[lt.G_API:lt.G_API + len(lt.G_API_NAMES)] = api
    t[lt.G_NTASKS], t[lt.G_TASKS] = ntasks, lt.G_HEADER_WORDS
    t[lt.G_INPUTS], t[lt.G_OUTPUTS] = first_input, first_input + launch.native_inputs
    launch.native_slow_tasks = None in newer     # no offsets: always Python
    for k, (task, (function, kind, size, block, grid, largest)) in enumerate(
            zip(plan.tasks, launch.tasks)):
        bounds = box_bounds(task.box, launch.context.compiled.layout) \
            if size is not None else []
        if bounds is None:
            launch.native_slow_tasks, bounds = True, []
        extents = -1 if kind == "serial" else len(bounds) // 4 if size is not None \
            else 0
        at = lt.G_HEADER_WORDS + lt.TASK_WORDS * k
        handle = launch.device.driver.function_handle(function)
        record = [handle, block, largest if size is not None else grid, extents]
        t[at:at + 4 + len(bounds)] = record + bounds
    return t


def write_native_mirrors(launch: Any) -> None:
    """The table's inputs, outputs and whether launches must go to Python (a staged host
    array, a return value, a box the table cannot describe, more mirrors than it holds)."""
    t = launch.native
    t[lt.G_SLOW] = int(bool(launch.staging) or launch.returns or launch.native_slow_tasks
                       or len(launch.inputs) > launch.native_inputs
                       or len(launch.outputs) > launch.native_outputs)
    if t[lt.G_SLOW]:
        t[lt.G_NINPUTS] = t[lt.G_NOUTPUTS] = 0
        return
    t[lt.G_NINPUTS], t[lt.G_NOUTPUTS] = len(launch.inputs), len(launch.outputs)
    first_in, first_out = t[lt.G_INPUTS], t[lt.G_OUTPUTS]
    t[first_in:first_in + len(launch.inputs)] = [id(m) for m in launch.inputs]
    t[first_out:first_out + len(launch.outputs)] = [id(m) for m in launch.outputs]


SIZING_BLOCK = 128    # the sizing service's reduction kernels


class GpuSizing:
    """The sizing service's compiled GPU kernels as the callables `SizingPlan` calls: each
    brings the launch's data to the device first (the sizing runs before the launch) and
    synchronises (a sizing miss needs the numbers on the host: heap layout)."""

    def __init__(self, device: Any, function: Any, nspecs: int, nstacks: int) -> None:
        self.device, self.function, self.nspecs, self.nstacks = device, function, nspecs, nstacks

    def run(self, ctx_addr: int, pointers: list[int], grid: int) -> None:
        device = self.device
        launch = device.launch_at[ctx_addr]
        launch.prepare()
        values = (ctypes.c_uint64 * (1 + len(pointers)))(grid * SIZING_BLOCK, *pointers)
        slots = launch.slots
        params = (ctypes.c_void_p * (slots + len(values)))(
            *(ctx_addr + 8 * k for k in range(slots)),
            *(ctypes.addressof(values) + 8 * k for k in range(len(values))))
        device.driver.launch(self.function, grid, SIZING_BLOCK if grid > 1 else 1,
                             ctypes.addressof(params))


class GpuReducer(GpuSizing):
    def __call__(self, ctx_addr: int) -> int:
        scratch = self.device.scratch(8)
        self.device.driver.memset(scratch, 8)
        self.run(ctx_addr, [scratch], self.device.max_resident_threads // SIZING_BLOCK)
        out = ctypes.c_int64()
        self.device.copy_d2h(ctypes.addressof(out), scratch, 8)
        self.device.synchronize()
        return out.value


class GpuRequired(GpuSizing):
    def __call__(self, ctx_addr: int, results_addr: int, out_addr: int) -> None:
        scratch = self.device.scratch(8 * (self.nspecs + self.nstacks) + 8)
        results, out = scratch, scratch + 8 * self.nspecs
        self.device.copy_h2d(results, results_addr, 8 * self.nspecs)
        self.run(ctx_addr, [results, out], 1)
        self.device.copy_d2h(out_addr, out, 8 * self.nstacks)
        self.device.synchronize()
