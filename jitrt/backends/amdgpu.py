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
from typing import Any, Mapping

from llvmlite import ir

from ..errors import BackendUnavailableError
from . import amdgcn, gpu_probe
from .base import NO_SERVICES, DeviceTarget, HostServices
from .gpu import GpuDevice
from .stream_driver import StreamApi, StreamDriver


class HipError(RuntimeError):
    pass


def gfx_name(arch_name: Any) -> str:
    """"gfx942" of a device's gcnArchName ("gfx942:sramecc+:xnack-")."""
    text = arch_name.decode() if isinstance(arch_name, bytes) else str(arch_name)
    return text.split(":", 1)[0].strip()


HIP_API = StreamApi(
    success=lambda hip: hip.hipError_t.hipSuccess,
    error_code=lambda hip, code: hip.hipError_t(code), get_error_name="hipGetErrorName",
    init="hipInit", device_count="hipGetDeviceCount", set_current="hipSetDevice",
    attribute="hipDeviceGetAttribute",
    multiprocessors=lambda hip: hip.hipDeviceAttribute_t.hipDeviceAttributeMultiprocessorCount,
    threads_per_multiprocessor=lambda hip:
        hip.hipDeviceAttribute_t.hipDeviceAttributeMaxThreadsPerMultiProcessor,
    driver_version="hipDriverGetVersion", stream_create="hipStreamCreateWithFlags",
    stream_flags=lambda hip: hip.hipStreamNonBlocking,
    device_stream_flags=lambda hip: hip.hipStreamDefault,
    stream_synchronize="hipStreamSynchronize", stream_destroy="hipStreamDestroy",
    module_load="hipModuleLoadData", module_unload="hipModuleUnload",
    module_function="hipModuleGetFunction", launch="hipModuleLaunchKernel", launch_extra=None,
    event_create="hipEventCreateWithFlags",
    event_flags=lambda hip: getattr(hip, "hipEventDisableTiming", 2),
    event_record="hipEventRecord", event_synchronize="hipEventSynchronize",
    event_destroy="hipEventDestroy", begin_capture="hipStreamBeginCapture",
    capture_mode=lambda hip: hip.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal,
    end_capture="hipStreamEndCapture", instantiate="hipGraphInstantiate",
    exec_update="hipGraphExecUpdate", exec_update_extra=(None,), graph_launch="hipGraphLaunch",
    graph_destroy="hipGraphDestroy", exec_destroy="hipGraphExecDestroy", alloc="hipMalloc",
    alloc_pinned="hipHostMalloc", pinned_flags=lambda hip: (hip.hipHostMallocDefault,),
    free="hipFree", free_pinned="hipHostFree", copy_h2d="hipMemcpyHtoDAsync",
    copy_d2h="hipMemcpyDtoHAsync", copy_d2d="hipMemcpyDtoDAsync", memset="hipMemsetD8Async",
    memset16="hipMemsetD16Async", memset32="hipMemsetD32Async",
    memset32_signed=True, stream_wait_event="hipStreamWaitEvent")


class HipDriver(StreamDriver):
    """HIP through hip-python (the `hip` module is an argument: a test's fake can stand in):
    the device ordinal is what is made current; the artifact is the code object itself.
    Launches stay in the Python entry: hipModuleLaunchKernel has the shape the native GPU
    entry calls, but no AMD GPU was ever available to run it on."""

    name, api, error, device_noun = "amdgpu", HIP_API, HipError, "AMD GPU(s)"
    dlpack_device_type = 10                 # kDLROCM
    max_grid_threads = (1 << 32) - 1        # HIP: blocks * block size below 2^32

    def setup(self) -> None:
        props = self.checked("hipGetDeviceProperties", self.device)
        self.gfx = os.environ.get("JITRT_AMDGPU_ARCH") or gfx_name(props.gcnArchName)


def device_for(driver: HipDriver, device_id: int,
               host: HostServices = NO_SERVICES) -> GpuDevice:
    """The GPU device over a HIP driver (real or a test's fake)."""
    gfx = driver.gfx
    target = DeviceTarget("amdgpu", amdgcn.TRIPLE, amdgcn.codegen_target().data_layout, gfx,
                          f"hip {driver.driver_version}")
    return GpuDevice(device_id, driver, target, amdgcn.codegen_target(),
                     lambda module: amdgcn.compile_code_object(module, gfx), host)


def open_device(device_id: int, host: HostServices = NO_SERVICES) -> GpuDevice:
    from hip import hip
    try:
        driver = HipDriver(hip, device_id)
    except HipError as exc:
        raise BackendUnavailableError(f"arch=amdgpu: {exc}") from None
    return device_for(driver, device_id, host)


# ---- the registry's entry points (`registry.BackendModule`) ----------------------------------
available = gpu_probe.hip_available
codegen_target = amdgcn.codegen_target


def assembly(module: ir.Module, options: Mapping[str, object]) -> str:
    """AMDGCN assembly for the gfx target `options["gfx"]` (`jr.debug.gpu_asm(..., gfx=)`)."""
    return amdgcn.assembly(module, str(options.get("gfx", "gfx942")))
