"""The AMDGPU device: the shared GPU launch path (`gpu.py`) over HIP, through hip-python.

Stage: backend. `open_device(device_id)` makes a `GpuDevice` whose driver is `HipDriver` (one
device, one non-blocking stream, modules, launches, memory and graphs: the same calls the CUDA
driver makes, by their HIP names) and whose compile step is `amdgcn.compile_code_object` for
the device's gfx target (`JITRT_AMDGPU_ARCH` overrides it). The artifact is the code object
itself. hip-python is imported only here, when arch=amdgpu is chosen; `HipDriver` takes the
`hip` module as an argument so that a recording fake can stand in for it in tests.
Not run on AMD hardware: see docs/gpu.md for what was verified and how.
"""
from __future__ import annotations

import os
import threading
from typing import Any

from ..errors import BackendUnavailableError
from . import amdgcn
from .base import DeviceTarget
from .gpu import GpuDevice


class HipError(RuntimeError):
    pass


class _Bound(threading.local):
    """Per thread: whether the device is current on it (hipSetDevice)."""
    bound = False


def gfx_name(arch_name: Any) -> str:
    """"gfx942" of a device's gcnArchName ("gfx942:sramecc+:xnack-")."""
    text = arch_name.decode() if isinstance(arch_name, bytes) else str(arch_name)
    return text.split(":", 1)[0].strip()


class HipDriver:
    """The calls the GPU launch path makes, through hip-python, on one device."""

    name = "amdgpu"
    dlpack_device_type = 10                 # kDLROCM
    max_grid_threads = (1 << 32) - 1        # HIP: blocks * block size below 2^32

    def __init__(self, hip: Any, device_id: int) -> None:
        self.hip = hip
        self._success = hip.hipError_t.hipSuccess
        self.check(hip.hipInit(0), "hipInit")
        count = self.check(hip.hipGetDeviceCount(), "hipGetDeviceCount")
        if not 0 <= device_id < count:
            raise BackendUnavailableError(f"arch=amdgpu: device_id={device_id} but this "
                                          f"machine has {count} AMD GPU(s)")
        self.device = device_id
        self._thread = _Bound()
        self.bind()
        attr = hip.hipDeviceAttribute_t
        self.multiprocessors = self.attribute(attr.hipDeviceAttributeMultiprocessorCount)
        self.max_threads_per_multiprocessor = self.attribute(
            attr.hipDeviceAttributeMaxThreadsPerMultiProcessor)
        props = self.check(hip.hipGetDeviceProperties(device_id), "hipGetDeviceProperties")
        self.gfx = os.environ.get("JITRT_AMDGPU_ARCH") or gfx_name(props.gcnArchName)
        self.driver_version = self.check(hip.hipDriverGetVersion(), "hipDriverGetVersion")
        self.stream = self.check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking),
                                 "hipStreamCreateWithFlags")
        self._launch = hip.hipModuleLaunchKernel
        self._modules: list[Any] = []

    def bind(self) -> None:
        """Make the device current on the calling thread (once per thread)."""
        if not self._thread.bound:
            self.check(self.hip.hipSetDevice(self.device), "hipSetDevice")
            self._thread.bound = True

    def check(self, result: Any, what: str) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self._success:
            name = self.hip.hipGetErrorName(err)
            text = name[-1] if isinstance(name, tuple) else name
            raise HipError(f"{what} failed: "
                           f"{text.decode() if isinstance(text, bytes) else text or err}")
        return rest[0] if len(rest) == 1 else (rest or None)

    def attribute(self, which: Any) -> int:
        return int(self.check(self.hip.hipDeviceGetAttribute(which, self.device),
                              "hipDeviceGetAttribute"))

    # ---- code -----------------------------------------------------------------------------
    def load_module(self, image: bytes) -> Any:
        self.bind()
        module = self.check(self.hip.hipModuleLoadData(image), "hipModuleLoadData")
        self._modules.append(module)
        return module

    def function(self, module: Any, name: str) -> Any:
        return self.check(self.hip.hipModuleGetFunction(module, name.encode()),
                          f"hipModuleGetFunction({name})")

    def launch(self, function: Any, grid: int, block: int, params: int) -> None:
        if not self._thread.bound:
            self.bind()
        self.check(self._launch(function, grid, 1, 1, block, 1, 1, 0, self.stream, params,
                                None), "hipModuleLaunchKernel")

    def launch_source(self, function: str, grid: str, block: str, params: str
                      ) -> tuple[list[str], dict[str, Any]]:
        """`launch(...)` as lines of generated code (the GPU entry inlines it)."""
        names = {"_hip_launch": self._launch, "_hip_stream": self.stream,
                 "_hip_ok": self._success, "_hip_tl": self._thread, "_hip_bind": self.bind,
                 "_hip_check": self.check}
        return ["if not _hip_tl.bound: _hip_bind()",
                f"err = _hip_launch({function}, {grid}, 1, 1, {block}, 1, 1, 0, _hip_stream, "
                f"{params}, None)",
                "if err[0] != _hip_ok: _hip_check(err, 'hipModuleLaunchKernel')"], names

    # ---- events (when a pinned staging buffer may be written again) -----------------------
    def event_create(self) -> Any:
        self.bind()
        flags = getattr(self.hip, "hipEventDisableTiming", 2)
        return self.check(self.hip.hipEventCreateWithFlags(flags), "hipEventCreateWithFlags")

    def event_record(self, event: Any) -> None:
        self.check(self.hip.hipEventRecord(event, self.stream), "hipEventRecord")

    def event_synchronize(self, event: Any) -> None:
        self.check(self.hip.hipEventSynchronize(event), "hipEventSynchronize")

    def event_destroy(self, event: Any) -> None:
        self.hip.hipEventDestroy(event)

    def native_words(self) -> tuple[int, int, int, int] | None:
        """None: HIP launches stay in the Python entry (hipModuleLaunchKernel has the shape
        the native GPU entry calls, but no AMD GPU was ever available to run it on)."""
        return None

    def function_handle(self, function: Any) -> int:
        return int(function)

    def launch_error(self, code: int) -> Exception:
        return HipError(f"hipModuleLaunchKernel failed: error {code}")

    # ---- graphs ---------------------------------------------------------------------------
    def begin_capture(self) -> None:
        self.bind()
        mode = self.hip.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal
        self.check(self.hip.hipStreamBeginCapture(self.stream, mode), "hipStreamBeginCapture")

    def end_capture(self) -> Any:
        return self.check(self.hip.hipStreamEndCapture(self.stream), "hipStreamEndCapture")

    def instantiate(self, graph: Any) -> Any:
        graph_exec, _, _ = self.check(self.hip.hipGraphInstantiate(graph, 0),
                                      "hipGraphInstantiate")
        return graph_exec

    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        result = self.hip.hipGraphExecUpdate(graph_exec, graph, None)
        return bool(result[0] == self._success)

    def graph_launch(self, graph_exec: Any) -> None:
        self.check(self.hip.hipGraphLaunch(graph_exec, self.stream), "hipGraphLaunch")

    def destroy_graph(self, graph: Any) -> None:
        self.hip.hipGraphDestroy(graph)

    def destroy_exec(self, graph_exec: Any) -> None:
        self.hip.hipGraphExecDestroy(graph_exec)

    # ---- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        self.bind()
        return int(self.check(self.hip.hipMalloc(nbytes), "hipMalloc"))

    def alloc_pinned(self, nbytes: int) -> int:
        self.bind()
        return int(self.check(self.hip.hipHostMalloc(nbytes, self.hip.hipHostMallocDefault),
                              "hipHostMalloc"))

    def free_pinned(self, ptr: int) -> None:
        self.bind()
        self.check(self.hip.hipHostFree(ptr), "hipHostFree")

    def free(self, ptr: int) -> None:
        self.bind()
        self.check(self.hip.hipFree(ptr), "hipFree")

    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self.hip.hipMemcpyHtoDAsync(dst, src, nbytes, self.stream),
                       "hipMemcpyHtoDAsync")

    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self.hip.hipMemcpyDtoHAsync(dst, src, nbytes, self.stream),
                       "hipMemcpyDtoHAsync")

    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.bind()
        if nbytes:
            self.check(self.hip.hipMemcpyDtoDAsync(dst, src, nbytes, self.stream),
                       "hipMemcpyDtoDAsync")

    def memset(self, dst: int, nbytes: int) -> None:
        self.bind()
        self.check(self.hip.hipMemsetD8Async(dst, 0, nbytes, self.stream), "hipMemsetD8Async")

    def synchronize(self) -> None:
        self.bind()
        self.check(self.hip.hipStreamSynchronize(self.stream), "hipStreamSynchronize")

    def close(self) -> None:
        self.synchronize()
        for module in self._modules:
            self.hip.hipModuleUnload(module)
        self._modules.clear()
        self.hip.hipStreamDestroy(self.stream)


def device_for(driver: HipDriver, device_id: int) -> GpuDevice:
    """The GPU device over a HIP driver (real or a test's fake)."""
    gfx = driver.gfx
    target = DeviceTarget("amdgpu", amdgcn.TRIPLE, amdgcn.codegen_target().data_layout, gfx,
                          f"hip {driver.driver_version}")
    return GpuDevice(device_id, driver, target, amdgcn.codegen_target(),
                     lambda module: amdgcn.compile_code_object(module, gfx))


def open_device(device_id: int = 0) -> GpuDevice:
    from hip import hip  # type: ignore[import-not-found]
    try:
        driver = HipDriver(hip, device_id)
    except HipError as exc:
        raise BackendUnavailableError(f"arch=amdgpu: {exc}") from None
    return device_for(driver, device_id)
