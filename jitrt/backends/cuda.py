"""The CUDA device: the shared GPU launch path (`gpu.py`) over the CUDA driver API.

Stage: backend. `open_device(device_id)` makes a `GpuDevice` whose driver is `CudaDriver`
(cuda-bindings: the device's primary context, one non-blocking stream, modules, launches and
memory) and whose compile step is `compile_artifact`: LLVM IR -> PTX for the device's
compute capability (`nvptx.py`, libdevice linked) -> a cubin from ptxas when the toolkit is
installed. The artifact (what the offline cache stores) holds both, so a driver that cannot
load the cubin compiles the PTX itself. cuda-bindings is imported only here, when arch=cuda is
chosen.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import subprocess
import time
from typing import Any, Callable, Mapping

from llvmlite import ir

from ..errors import BackendUnavailableError
from ..logger import logger
from . import gpu_probe, nvptx
from .base import NO_SERVICES, DeviceTarget, HostServices
from .cuda_loops import GraphLoops
from .gpu import GpuDevice
from .stream_driver import StreamApi, StreamDriver

MAGIC = b"JRCU1\0\0\0"


def pack_artifact(ptx: str, cubin: bytes | None) -> bytes:
    cubin = cubin or b""
    return MAGIC + struct.pack("<Q", len(cubin)) + cubin + ptx.encode() + b"\0"


def unpack_artifact(artifact: bytes) -> tuple[bytes | None, bytes]:
    """(cubin or None, NUL-terminated PTX) of an artifact made by `pack_artifact`."""
    if not artifact.startswith(MAGIC):
        raise ValueError("not a jitrt CUDA artifact")
    n = struct.unpack_from("<Q", artifact, len(MAGIC))[0]
    start = len(MAGIC) + 8
    return (artifact[start:start + n] or None), artifact[start + n:]


# PTX up to this size is assembled by the driver's own PTX compiler in this process
# (`CudaDriver.link_ptx`) when a device is open: a ptxas process costs 10-20 ms to start,
# most of a small kernel's assembly. Larger PTX goes to ptxas, which spreads a module's
# functions over every core (`nvptx.SPLIT_COMPILE`); the driver compiles them one by one.
IN_PROCESS_PTX_BYTES = 64 << 10


def compile_artifact(module: Any, sm: int, counters: dict[str, int] | None = None,
                     host: HostServices | None = None,
                     link: Callable[[str], bytes | None] | None = None) -> bytes:
    """The artifact of `module` for `sm_<sm>`: its PTX and the cubin made of it (the
    driver-ready image, what a warm start loads without compiling): by `link` (the open
    device's in-process PTX compiler) for PTX up to IN_PROCESS_PTX_BYTES, else by ptxas.
    Each stage's time is logged at DEBUG; `counters["ptxas_runs"]` counts the ptxas runs,
    `counters["driver_links"]` the in-process ones. `host.store`, the offline cache, keeps
    the part of libdevice codegen calls (`nvptx.codegen_math_bitcode`) and each of its
    functions optimised for `sm` (`nvptx_math.math_piece`)."""
    t0 = time.perf_counter()
    ptx = nvptx.compile_ptx(module, sm, host)
    t1 = time.perf_counter()
    cubin = link(ptx) if link is not None and len(ptx) <= IN_PROCESS_PTX_BYTES else None
    in_process = cubin is not None
    if cubin is None:
        cubin = nvptx.assemble(ptx, sm)
    t2 = time.perf_counter()
    if counters is not None and cubin is not None:
        how = "driver_links" if in_process else "ptxas_runs"
        counters[how] = counters.get(how, 0) + 1
    name = getattr(module, "name", "module")
    tool = "driver's PTX compiler" if in_process else "ptxas"
    logger.debug("%s: LLVM -> PTX %.1f ms (%d bytes), %s", name, (t1 - t0) * 1e3, len(ptx),
                 f"{tool} {(t2 - t1) * 1e3:.1f} ms ({len(cubin)}-byte cubin for sm_{sm})"
                 if cubin is not None else "no ptxas: the driver compiles the PTX at load")
    return pack_artifact(ptx, cubin)


@functools.lru_cache(maxsize=None)
def ptxas_version() -> str:
    tool = nvptx.ptxas_path()
    if tool is None:
        return "no ptxas"
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else "ptxas"


class CudaError(RuntimeError):
    pass


CUDA_API = StreamApi(
    success=lambda cu: cu.CUresult.CUDA_SUCCESS, error_code=lambda cu, code: cu.CUresult(code),
    get_error_name="cuGetErrorName", init="cuInit", device_count="cuDeviceGetCount",
    set_current="cuCtxSetCurrent", attribute="cuDeviceGetAttribute",
    multiprocessors=lambda cu: cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    threads_per_multiprocessor=lambda cu:
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
    driver_version="cuDriverGetVersion", stream_create="cuStreamCreate",
    stream_flags=lambda cu: cu.CUstream_flags.CU_STREAM_NON_BLOCKING,
    device_stream_flags=lambda cu: cu.CUstream_flags.CU_STREAM_DEFAULT,
    stream_synchronize="cuStreamSynchronize", stream_destroy="cuStreamDestroy",
    module_load="cuModuleLoadData", module_unload="cuModuleUnload",
    module_function="cuModuleGetFunction", launch="cuLaunchKernel", launch_extra=0,
    event_create="cuEventCreate", event_flags=lambda cu: cu.CUevent_flags.CU_EVENT_DISABLE_TIMING,
    event_record="cuEventRecord", event_synchronize="cuEventSynchronize",
    event_destroy="cuEventDestroy", begin_capture="cuStreamBeginCapture",
    capture_mode=lambda cu: cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    end_capture="cuStreamEndCapture", instantiate="cuGraphInstantiate",
    exec_update="cuGraphExecUpdate", exec_update_extra=(), graph_launch="cuGraphLaunch",
    graph_destroy="cuGraphDestroy", exec_destroy="cuGraphExecDestroy", alloc="cuMemAlloc",
    alloc_pinned="cuMemAllocHost", pinned_flags=lambda cu: (), free="cuMemFree",
    free_pinned="cuMemFreeHost", copy_h2d="cuMemcpyHtoDAsync", copy_d2h="cuMemcpyDtoHAsync",
    copy_d2d="cuMemcpyDtoDAsync", memset="cuMemsetD8Async", memset16="cuMemsetD16Async",
    memset32="cuMemsetD32Async", stream_wait_event="cuStreamWaitEvent",
    from_address=lambda cu, kind, address: (cu.CUstream if kind == "stream" else cu.CUevent)(
        address))


class CudaDriver(StreamDriver):
    """The CUDA driver API through cuda-bindings: the device's primary context is what is made
    current; a module is loaded from the artifact's cubin, else compiled from its PTX."""

    name, api, error, device_noun = "cuda", CUDA_API, CudaError, "CUDA device(s)"
    dlpack_device_type = 2                  # kDLCUDA
    max_grid_threads = (1 << 31) * 1024     # blocks in x below 2^31, 1024 threads each
    # (measured on an H100: cuda-bindings' Cython call is 1.3-2.7 us faster per launch than
    # a ctypes call of libcuda's cuLaunchKernel with argtypes)

    def __init__(self, device_id: int) -> None:
        from cuda.bindings import driver as cu
        self.loops = GraphLoops(self)
        super().__init__(cu, device_id)

    def open(self, device_id: int) -> Any:
        device = self.checked("cuDeviceGet", device_id)
        self.context = self.checked("cuDevicePrimaryCtxRetain", device)
        return device

    @property
    def current(self) -> Any:
        return self.context

    def setup(self) -> None:
        attr = self.lib.CUdevice_attribute
        self.sm = 10 * self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) + \
            self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)

    def load_module(self, image: bytes) -> Any:
        self.bind()
        cubin, ptx = unpack_artifact(image)
        module = None
        if cubin is not None:
            err, module = self.lib.cuModuleLoadData(cubin)
            if err != self._success:
                module = None
        if module is None:              # no cubin, or not one this device runs
            self.jit_loads += 1
            module = self.check(self.lib.cuModuleLoadData(ptx), "cuModuleLoadData (PTX)")
        self._modules.append(module)
        return module

    def link_ptx(self, ptx: str) -> bytes | None:
        """A cubin for this device made of `ptx` by the driver's PTX compiler, in this
        process (cuLinkCreate, cuLinkAddData, cuLinkComplete); None when the driver refuses
        it (then ptxas assembles it and reports what was wrong)."""
        cu, ok = self.lib, self._success
        self.bind()
        err, state = cu.cuLinkCreate(0, [], [])
        if err != ok:
            return None
        try:
            data = ptx.encode() + b"\0"
            err, = cu.cuLinkAddData(state, cu.CUjitInputType.CU_JIT_INPUT_PTX, data, len(data),
                                    b"jitrt", 0, [], [])
            if err != ok:
                return None
            err, image, size = cu.cuLinkComplete(state)
            if err != ok or not size:
                return None
            return ctypes.string_at(int(image), int(size))    # (freed with the state)
        finally:
            cu.cuLinkDestroy(state)

    def load_ptx_function(self, ptx: str, name: str) -> Any:
        """Kernel `name` of PTX written by hand (`cuda_loops.LOOP_SET_PTX`), assembled in the
        process (else by ptxas) and loaded as a module of its own."""
        cubin = self.link_ptx(ptx) or nvptx.assemble(ptx, self.sm)
        return self.function(self.load_module(pack_artifact(ptx, cubin)), name)

    # ---- device-side loops of graphs (`jr.graph.do_while`): `cuda_loops.GraphLoops` ------
    @property
    def graph_loops(self) -> bool:
        """Conditional WHILE nodes: CUDA 12.3 drivers and later."""
        return int(self.driver_version) >= 12030

    def loop_prepare(self, depth: int) -> None:
        self.loops.prepare(depth)

    def loop_begin(self) -> tuple[Any, Any, Any]:
        return self.loops.begin()

    def loop_end(self, state: tuple[Any, Any, Any], flag_ptr: int) -> None:
        self.loops.end(state, flag_ptr)

    def close(self) -> None:
        self.loops.close()
        super().close()

    def native_words(self) -> tuple[int, int, int, int] | None:
        """libcuda's cuLaunchKernel and cuCtxGetCurrent, the context and the stream, for the
        native GPU entry (the same library cuda-bindings loaded)."""
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            launch, current = (ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                               for name in ("cuLaunchKernel", "cuCtxGetCurrent"))
        except (OSError, AttributeError):
            return None
        if not launch or not current:
            return None
        return launch, current, int(self.context), int(self.stream)


def open_device(device_id: int, host: HostServices = NO_SERVICES) -> GpuDevice:
    try:
        driver = CudaDriver(device_id)
    except CudaError as exc:
        raise BackendUnavailableError(f"arch=cuda: {exc}") from None
    sm = driver.sm
    target = DeviceTarget("cuda", nvptx.TRIPLE, nvptx.codegen_target().data_layout, f"sm_{sm}",
                          f"driver {driver.driver_version}; {ptxas_version()}")

    def compile_fn(module: ir.Module) -> bytes:     # ptxas runs go in the device's counters
        return compile_artifact(module, sm, device.counters, host, driver.link_ptx)

    device = GpuDevice(device_id, driver, target, nvptx.codegen_target(), compile_fn, host)
    return device


# ---- the registry's entry points (`registry.BackendModule`) ----------------------------------
available = gpu_probe.cuda_available
codegen_target = nvptx.codegen_target


def assembly(module: ir.Module, options: Mapping[str, object]) -> str:
    """PTX for compute capability `options["sm"]` (`jr.debug.gpu_asm(..., sm=80)`)."""
    return nvptx.compile_ptx(module, int(str(options.get("sm", 80))))
