"""The stream-driver base (`backends/stream_driver.py`) and the CUDA adapter over it, against a
recording fake of cuda-bindings' `driver` module: which calls the adapter makes, with which
arguments, and what a failing call raises. Runs on any machine; never stands in for the GPU
tests in test_gpu.py."""
import ctypes
import dataclasses
import enum
import sys
import types

import pytest

from jitrt.backends import amdgpu, cuda, stream_driver
from jitrt.backends.base import DeviceTarget

pytestmark = pytest.mark.cpu_only


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_LAUNCH_FAILED = 719


class FakeCu:
    """The parts of cuda-bindings' `driver` module the adapter calls, recording each call."""

    CUresult = CUresult
    CUdevice_attribute = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="mp",
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR="threads",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor")
    CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING="non-blocking",
                                           CU_STREAM_DEFAULT="blocking")
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING="no-timing")
    CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL="local")

    def __init__(self):
        self.calls, self.fail = [], {}

    def __getattr__(self, name):
        results = {"cuDeviceGetCount": 2, "cuDeviceGet": "dev", "cuDriverGetVersion": 12040,
                   "cuDevicePrimaryCtxRetain": "ctx", "cuStreamCreate": "stream",
                   "cuMemAlloc": 4096, "cuMemAllocHost": 8192, "cuStreamEndCapture": "graph",
                   "cuGraphInstantiate": "exec", "cuModuleLoadData": "module"}
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name, args))
            if name in self.fail:       # a failing call still returns its outputs (None)
                return (self.fail[name],) + ((None,) if name in results else ())
            return (CUresult.CUDA_SUCCESS,) + ((results[name],) if name in results else ())
        return call

    def cuDeviceGetAttribute(self, which, device):
        return CUresult.CUDA_SUCCESS, {"mp": 132, "threads": 2048, "major": 9, "minor": 0}[which]

    def cuGetErrorName(self, err):
        return CUresult.CUDA_SUCCESS, CUresult(err).name.encode()


@pytest.fixture
def cu(monkeypatch):
    fake = FakeCu()
    package = types.ModuleType("cuda.bindings")
    package.driver = fake
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", package)
    return fake


def test_cuda_opens_the_primary_context_and_a_stream(cu):
    driver = cuda.CudaDriver(1)
    assert [c for c in cu.calls if c[0] != "cuDeviceGetAttribute"] == [
        ("cuInit", (0,)), ("cuDeviceGetCount", ()), ("cuDeviceGet", (1,)),
        ("cuDevicePrimaryCtxRetain", ("dev",)), ("cuCtxSetCurrent", ("ctx",)),
        ("cuDriverGetVersion", ()), ("cuStreamCreate", ("blocking",))]
    assert (driver.sm, driver.multiprocessors, driver.max_threads_per_multiprocessor) == \
        (90, 132, 2048)
    assert driver.driver_version == 12040 and driver.stream == "stream"
    cu.calls.clear()
    driver.create_stream()          # `jr.Stream()`: non-blocking, as torch's pooled streams
    assert cu.calls == [("cuStreamCreate", ("non-blocking",))]
    with pytest.raises(cuda.BackendUnavailableError,
                       match="arch=cuda: device_id=2 but this machine has 2 CUDA device"):
        cuda.CudaDriver(2)


def test_cuda_calls_take_the_stream_and_the_vendor_constants(cu):
    driver = cuda.CudaDriver(0)
    cu.calls.clear()
    driver.launch("f", 3, 128, 77)
    driver.copy_h2d(10, 20, 8)
    driver.copy_d2h(10, 20, 0)                      # nothing to copy: no call
    assert driver.alloc_pinned(16) == 8192
    event = driver.event_create()
    driver.begin_capture()
    assert driver.instantiate(driver.end_capture()) == "exec"
    assert driver.exec_update("exec", "graph") is True
    assert cu.calls == [
        ("cuLaunchKernel", ("f", 3, 1, 1, 128, 1, 1, 0, "stream", 77, 0)),
        ("cuMemcpyHtoDAsync", (10, 20, 8, "stream")), ("cuMemAllocHost", (16,)),
        ("cuEventCreate", ("no-timing",)), ("cuStreamBeginCapture", ("stream", "local")),
        ("cuStreamEndCapture", ("stream",)), ("cuGraphInstantiate", ("graph", 0)),
        ("cuGraphExecUpdate", ("exec", "graph"))]
    assert event is None          # the fake's cuEventCreate returns no handle


def test_a_failing_cuda_call_names_the_call_and_the_error(cu):
    driver = cuda.CudaDriver(0)
    cu.fail["cuMemAlloc"] = CUresult.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(cuda.CudaError, match="cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"):
        driver.alloc(64)
    cu.fail["cuLaunchKernel"] = CUresult.CUDA_ERROR_LAUNCH_FAILED
    with pytest.raises(cuda.CudaError, match="cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"):
        driver.launch("f", 1, 1, 0)
    text = str(driver.launch_error(719))            # what the native GPU entry raises
    assert text == "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"
    # the generated launch (inlined in the GPU entry) checks the same way
    code, names = driver.launch_source("f", "1", "1", "p")
    env = {**names, "f": "f", "p": 0}
    with pytest.raises(cuda.CudaError, match="cuLaunchKernel failed: CUDA_ERROR_LAUNCH"):
        exec("\n".join(code), env)


def test_a_cuda_module_falls_back_to_its_ptx(cu):
    driver = cuda.CudaDriver(0)
    cu.fail["cuModuleLoadData"] = CUresult.CUDA_ERROR_INVALID_IMAGE
    with pytest.raises(cuda.CudaError, match=r"cuModuleLoadData \(PTX\) failed"):
        driver.load_module(cuda.pack_artifact("// ptx", b"cubin"))
    assert driver.jit_loads == 1
    loads = [c[1][0] for c in cu.calls if c[0] == "cuModuleLoadData"]
    assert loads == [b"cubin", b"// ptx\0"]         # the cubin first, then the PTX


def test_open_device_builds_the_cuda_target(cu):
    device = cuda.open_device(0)
    assert device.target.arch == "cuda" and device.target.cpu == "sm_90"
    assert device.target.features.startswith("driver 12040; ")
    assert isinstance(device.target, DeviceTarget)


def test_vendor_tables_name_each_call_once():
    """Every call of the base is in each table, and no two roles share a vendor call (a
    copy-paste slip in a table would launch where it should copy)."""
    for api in (cuda.CUDA_API, amdgpu.HIP_API):
        names = [v for v in (getattr(api, f.name) for f in dataclasses.fields(api))
                 if isinstance(v, str)]
        assert len(names) == len(set(names)), names
    assert issubclass(cuda.CudaDriver, stream_driver.StreamDriver)
    assert issubclass(amdgpu.HipDriver, stream_driver.StreamDriver)


def test_hip_table_names_calls_hip_python_has():
    hip = pytest.importorskip("hip", reason="hip-python is not installed").hip
    names = [getattr(amdgpu.HIP_API, f.name) for f in dataclasses.fields(amdgpu.HIP_API)]
    assert [name for name in names if isinstance(name, str) and not hasattr(hip, name)] == []


def test_cuda_fills_with_memsets_on_the_stream(cu):
    driver = cuda.CudaDriver(0)
    cu.calls.clear()
    driver.fill(4096, bytes([0, 0, 0x80, 0x3F]), 10)           # 1.0f: one D32 memset
    driver.fill(4096, bytes([0, 0, 0, 0, 0, 0, 0xF8, 0x3F]), 3)  # 1.5 as f64: doubling
    pattern = ctypes.addressof(driver._pattern)
    assert cu.calls == [
        ("cuMemsetD32Async", (4096, 0x3F800000, 10, "stream")),
        ("cuMemcpyHtoDAsync", (4096, pattern, 8, "stream")),      # the first element
        ("cuMemcpyDtoDAsync", (4104, 4096, 8, "stream")),         # then 1 element
        ("cuMemcpyDtoDAsync", (4112, 4096, 8, "stream"))]         # (the last one of 3)
