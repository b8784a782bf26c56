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
import threading
from typing import Any

from ..errors import BackendUnavailableError
from . import nvptx
from .base import DeviceTarget
from .gpu import GpuDevice

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


def compile_artifact(module: Any, sm: int) -> bytes:
    ptx = nvptx.compile_ptx(module, sm)
    return pack_artifact(ptx, nvptx.assemble(ptx, sm))


@functools.lru_cache(maxsize=None)
def ptxas_version() -> str:
    tool = nvptx.ptxas_path()
    if tool is None:
        return "no ptxas"
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else "ptxas"


class CudaError(RuntimeError):
    pass


class _Bound(threading.local):
    """Per thread: whether the device's context is current on it."""
    bound = False


class CudaDriver:
    """The calls the GPU launch path makes, through cuda-bindings, on one device."""

    name = "cuda"
    dlpack_device_type = 2                  # kDLCUDA
    max_grid_threads = (1 << 31) * 1024     # blocks in x below 2^31, 1024 threads each

    def __init__(self, device_id: int) -> None:
        from cuda.bindings import driver as cu  # type: ignore[import-not-found]
        self.cu = cu
        self.check(cu.cuInit(0), "cuInit")
        count = self.check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= device_id < count:
            raise BackendUnavailableError(f"arch=cuda: device_id={device_id} but this machine "
                                          f"has {count} CUDA device(s)")
        self.device = self.check(cu.cuDeviceGet(device_id), "cuDeviceGet")
        self.context = self.check(cu.cuDevicePrimaryCtxRetain(self.device),
                                  "cuDevicePrimaryCtxRetain")
        self._thread = _Bound()
        self.bind()
        attr = cu.CUdevice_attribute
        get = self.attribute
        self.multiprocessors = get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_threads_per_multiprocessor = get(
            attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
        self.sm = 10 * get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) + get(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.driver_version = self.check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
        self.stream = self.check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING),
                                 "cuStreamCreate")
        self._success = cu.CUresult.CUDA_SUCCESS
        # (measured on an H100: cuda-bindings' Cython call is 1.3-2.7 us faster per launch
        # than a ctypes call of libcuda's cuLaunchKernel with argtypes)
        self._launch = cu.cuLaunchKernel
        self._graph_launch = cu.cuGraphLaunch
        self._h2d, self._d2h = cu.cuMemcpyHtoDAsync, cu.cuMemcpyDtoHAsync
        self._modules: list[Any] = []
        self.ptx_loads = 0          # modules the driver compiled from PTX (no usable cubin)

    def bind(self) -> None:
        """Make the device's context current on the calling thread (once per thread)."""
        if not self._thread.bound:
            self.check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
            self._thread.bound = True

    def check(self, result: Any, what: str) -> Any:
        err, *rest = result
        if err != self.cu.CUresult.CUDA_SUCCESS:
            _, name = self.cu.cuGetErrorName(err)
            raise CudaError(f"{what} failed: {name.decode() if name else err}")
        return rest[0] if len(rest) == 1 else (rest or None)

    def attribute(self, which: Any) -> int:
        return int(self.check(self.cu.cuDeviceGetAttribute(which, self.device),
                              "cuDeviceGetAttribute"))

    # ---- code -----------------------------------------------------------------------------
    def load_module(self, image: bytes) -> Any:
        self.bind()
        cubin, ptx = unpack_artifact(image)
        module = None
        if cubin is not None:
            err, module = self.cu.cuModuleLoadData(cubin)
            if err != self._success:
                module = None
        if module is None:
            self.ptx_loads += 1
            module = self.check(self.cu.cuModuleLoadData(ptx), "cuModuleLoadData (PTX)")
        self._modules.append(module)
        return module

    def function(self, module: Any, name: str) -> Any:
        """The CUfunction of kernel `name`."""
        return self.check(self.cu.cuModuleGetFunction(module, name.encode()),
                          f"cuModuleGetFunction({name})")

    def launch(self, function: Any, grid: int, block: int, params: int) -> None:
        if not self._thread.bound:
            self.bind()
        err, = self._launch(function, grid, 1, 1, block, 1, 1, 0, self.stream, params, 0)
        if err != self._success:
            self.check((err,), "cuLaunchKernel")

    def launch_source(self, function: str, grid: str, block: str, params: str
                      ) -> tuple[list[str], dict[str, Any]]:
        """`launch(...)` as lines of generated code (the GPU entry inlines it)."""
        names = {"_cu_launch": self._launch, "_cu_stream": self.stream, "_cu_ok": self._success,
                 "_cu_tl": self._thread, "_cu_bind": self.bind, "_cu_check": self.check}
        return ["if not _cu_tl.bound: _cu_bind()",
                f"err, = _cu_launch({function}, {grid}, 1, 1, {block}, 1, 1, 0, _cu_stream, "
                f"{params}, 0)",
                "if err != _cu_ok: _cu_check((err,), 'cuLaunchKernel')"], names

    # ---- events (when a pinned staging buffer may be written again) -----------------------
    def event_create(self) -> Any:
        self.bind()
        return self.check(self.cu.cuEventCreate(
            self.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")

    def event_record(self, event: Any) -> None:
        self.check(self.cu.cuEventRecord(event, self.stream), "cuEventRecord")

    def event_synchronize(self, event: Any) -> None:
        self.check(self.cu.cuEventSynchronize(event), "cuEventSynchronize")

    def event_destroy(self, event: Any) -> None:
        self.cu.cuEventDestroy(event)

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

    def function_handle(self, function: Any) -> int:
        return int(function)

    def launch_error(self, code: int) -> Exception:
        err = self.cu.CUresult(code)
        _, name = self.cu.cuGetErrorName(err)
        return CudaError(f"cuLaunchKernel failed: {name.decode() if name else code}")

    # ---- graphs ---------------------------------------------------------------------------
    def begin_capture(self) -> None:
        self.bind()
        mode = self.cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.check(self.cu.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")

    def end_capture(self) -> Any:
        return self.check(self.cu.cuStreamEndCapture(self.stream), "cuStreamEndCapture")

    def instantiate(self, graph: Any) -> Any:
        return self.check(self.cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        result = self.cu.cuGraphExecUpdate(graph_exec, graph)
        return bool(result[0] == self._success)

    def graph_launch(self, graph_exec: Any) -> None:
        err, = self._graph_launch(graph_exec, self.stream)
        if err != self._success:
            self.check((err,), "cuGraphLaunch")

    def destroy_graph(self, graph: Any) -> None:
        self.cu.cuGraphDestroy(graph)

    def destroy_exec(self, graph_exec: Any) -> None:
        self.cu.cuGraphExecDestroy(graph_exec)

    # ---- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        self.bind()
        return int(self.check(self.cu.cuMemAlloc(nbytes), "cuMemAlloc"))

    def alloc_pinned(self, nbytes: int) -> int:
        """Page-locked host memory (transfers to and from it are true DMA)."""
        self.bind()
        return int(self.check(self.cu.cuMemAllocHost(nbytes), "cuMemAllocHost"))

    def free_pinned(self, ptr: int) -> None:
        self.bind()
        self.check(self.cu.cuMemFreeHost(ptr), "cuMemFreeHost")

    def free(self, ptr: int) -> None:
        self.bind()
        self.check(self.cu.cuMemFree(ptr), "cuMemFree")

    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self._h2d(dst, src, nbytes, self.stream), "cuMemcpyHtoDAsync")

    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self._d2h(dst, src, nbytes, self.stream), "cuMemcpyDtoHAsync")

    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self.cu.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream),
                       "cuMemcpyDtoDAsync")

    def memset(self, dst: int, nbytes: int) -> None:
        self.bind()
        self.check(self.cu.cuMemsetD8Async(dst, 0, nbytes, self.stream), "cuMemsetD8Async")

    def synchronize(self) -> None:
        self.bind()
        self.check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def close(self) -> None:
        self.synchronize()
        for module in self._modules:
            self.cu.cuModuleUnload(module)
        self._modules.clear()
        self.cu.cuStreamDestroy(self.stream)


def open_device(device_id: int = 0) -> GpuDevice:
    try:
        driver = CudaDriver(device_id)
    except CudaError as exc:
        raise BackendUnavailableError(f"arch=cuda: {exc}") from None
    sm = driver.sm
    target = DeviceTarget("cuda", nvptx.TRIPLE, nvptx.codegen_target().data_layout, f"sm_{sm}",
                          f"driver {driver.driver_version}; {ptxas_version()}")
    return GpuDevice(device_id, driver, target, nvptx.codegen_target(),
                     lambda module: compile_artifact(module, sm))
