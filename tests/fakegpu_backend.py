"""A third GPU vendor, fake, plugged in the way a real one is: this module (its driver table and
`open_device`) and `fakegpu_lib.py` (its binding: a test double), then one registry line:

    registry.register(registry.Backend("fakegpu", "fakegpu_backend", stream_gpu=True,
                                       host_memory=False))

after which `jr.init(arch="fakegpu")` runs the shared GPU launch path (residency, staging,
graphs, faults) over the fake binding on the CPU. Kernels compile to NVPTX IR (the codegen
target is borrowed, renamed) but are never assembled or run. With `FAKEGPU_SM=80` in the
environment the compile step is CUDA's own (`cuda.compile_artifact`: PTX, then a cubin from
ptxas) and the driver loads what CUDA's would: the cubin, else the PTX (counted as compiled
by the driver); the fake binding records the images (`FakeGpuLib.images`).
"""
import dataclasses
import os

import fakegpu_lib as fg

from jitrt.backends import cuda, nvptx
from jitrt.backends.base import NO_SERVICES, DeviceTarget, HostServices
from jitrt.backends.gpu import GpuDevice
from jitrt.backends.stream_driver import StreamApi, StreamDriver

FAKEGPU_API = StreamApi(
    success=lambda lib: lib.SUCCESS, error_code=lambda lib, code: code,
    get_error_name="fgGetErrorName", init="fgInit", device_count="fgGetDeviceCount",
    set_current="fgSetDevice", attribute="fgDeviceGetAttribute",
    multiprocessors=lambda lib: lib.Attribute.MULTIPROCESSORS,
    threads_per_multiprocessor=lambda lib: lib.Attribute.THREADS_PER_MULTIPROCESSOR,
    driver_version="fgDriverGetVersion", stream_create="fgStreamCreate",
    stream_flags=lambda lib: lib.STREAM_NON_BLOCKING,
    device_stream_flags=lambda lib: lib.STREAM_DEFAULT, stream_synchronize="fgStreamSynchronize",
    stream_destroy="fgStreamDestroy", module_load="fgModuleLoad",
    module_unload="fgModuleUnload", module_function="fgModuleGetFunction",
    launch="fgLaunchKernel", launch_extra=None, event_create="fgEventCreate",
    event_flags=lambda lib: lib.EVENT_NO_TIMING, event_record="fgEventRecord",
    event_synchronize="fgEventSynchronize", event_destroy="fgEventDestroy",
    begin_capture="fgStreamBeginCapture", capture_mode=lambda lib: lib.CAPTURE_THREAD_LOCAL,
    end_capture="fgStreamEndCapture", instantiate="fgGraphInstantiate",
    exec_update="fgGraphExecUpdate", exec_update_extra=(), graph_launch="fgGraphLaunch",
    graph_destroy="fgGraphDestroy", exec_destroy="fgGraphExecDestroy", alloc="fgMalloc",
    alloc_pinned="fgMallocHost", pinned_flags=lambda lib: (lib.PINNED_DEFAULT,),
    free="fgFree", free_pinned="fgFreeHost", copy_h2d="fgMemcpyHtoDAsync",
    copy_d2h="fgMemcpyDtoHAsync", copy_d2d="fgMemcpyDtoDAsync", memset="fgMemsetD8Async",
    memset16="fgMemsetD16Async", memset32="fgMemsetD32Async",
    stream_wait_event="fgStreamWaitEvent")


class FakeGpuError(RuntimeError):
    pass


class FakeGpuDriver(StreamDriver):
    name, api, error, device_noun = "fakegpu", FAKEGPU_API, FakeGpuError, "fake GPU(s)"
    dlpack_device_type = 12                 # kDLExtDev
    max_grid_threads = (1 << 31) * 1024

    @property
    def calls(self):
        """What the binding recorded (the shape `test_gpu_launch_path` asserts on)."""
        return self.lib.calls


LIB = [fg.FakeGpuLib()]     # the process's fake GPU (a test may put a fresh one here)


def available():
    return True, ""


def codegen_target():
    return dataclasses.replace(nvptx.codegen_target(), name="fakegpu")


class FakeCubinDriver(FakeGpuDriver):
    """Loads a CUDA artifact as `CudaDriver` does: its cubin, else its PTX."""

    def load_module(self, image):
        cubin, ptx = cuda.unpack_artifact(image)
        if cubin is None:
            self.jit_loads += 1
        return super().load_module(cubin or ptx)


def open_device(device_id: int, host: HostServices = NO_SERVICES) -> GpuDevice:
    sm = os.environ.get("FAKEGPU_SM")
    driver = (FakeCubinDriver if sm else FakeGpuDriver)(LIB[0], device_id)
    target = DeviceTarget("fakegpu", nvptx.TRIPLE, codegen_target().data_layout,
                          f"sm_{sm}" if sm else "fake0", "fake driver 1")

    def compile_fn(module):
        return cuda.compile_artifact(module, int(sm), device.counters, host) if sm else b"fake"

    device = GpuDevice(device_id, driver, target, codegen_target(), compile_fn, host)
    return device
