"""A third GPU vendor plugs in with two files and one registry line (`fakegpu_backend.py`,
`fakegpu_lib.py`, `registry.register(...)`), and the backend registry answers for it as for
cuda and amdgpu: `jr.init(arch=...)` accepts it, "gpu" finds it, the shared GPU launch path
runs over its driver table on the CPU. Kernels never execute here (the fake binding runs no
code); what is checked is the bookkeeping a user sees: data round trips through device
memory, faults recorded by a kernel raised at the next synchronisation, graphs, errors that
name the vendor's call."""
import ctypes

import fakegpu_backend
import fakegpu_lib
import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import gpu, gpu_probe, registry
from jitrt.codegen import abi
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


@pytest.fixture
def lib(fakegpu_program):
    """A fresh fake GPU, its arch registered (the one line), then a program on it
    (conftest.py's `fakegpu_program`)."""
    return fakegpu_program[0]


@jr.kernel
def double(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0


def test_an_unregistered_arch_is_a_config_error_naming_the_registered_ones():
    with pytest.raises(jr.ConfigError, match="expected one of cpu, cuda, amdgpu, gpu"):
        jr.init(arch="fakegpu")


def test_the_registered_vendor_opens_through_jr_init(lib):
    program = jr.init(arch="fakegpu", offline_cache=False)
    device = program.device
    assert program.arch == "fakegpu" and isinstance(device, gpu.GpuDevice)
    assert device.target.cache_key().startswith("fakegpu ")
    assert device.max_resident_threads == 4 * 256
    assert [name for name, _ in lib.log[:3]] == ["fgInit", "fgGetDeviceCount", "fgSetDevice"]
    x = jr.ndarray(jr.f32, shape=(3,))
    assert x.__dlpack_device__() == (12, 0)          # the vendor's DLPack device type
    assert x.__cuda_array_interface__["data"][0] == device.data_ptr(x)
    assert jr.is_extension_supported("fakegpu", jr.extension.adstack)


@pytest.mark.skipif(gpu_probe.cuda_available()[0] or gpu_probe.hip_available()[0],
                    reason="a real GPU answers first")
def test_arch_gpu_finds_the_first_stream_gpu_that_answers(lib):
    assert registry.resolve("gpu").name == "fakegpu"
    assert jr.init(arch="gpu", offline_cache=False).arch == "fakegpu"


def test_data_round_trips_through_device_memory(lib):
    a = jr.ndarray(jr.f32, shape=(4,))
    a.from_numpy(np.arange(4, dtype=np.float32))
    double(a)                                   # uploads a, launches (no code runs here)
    assert ("h2d", a._mirror.ptr, 16) in lib.calls
    # what "the kernel" wrote in device memory is what the host reads next
    ctypes.memmove(a._mirror.ptr, np.full(4, 7.0, np.float32).ctypes.data, 16)
    np.testing.assert_array_equal(a.to_numpy(), [7.0] * 4)
    host = np.ones(4, np.float32)               # a numpy argument: staged in and out
    double(host)
    np.testing.assert_array_equal(host, [1.0] * 4)


def test_a_recorded_fault_raises_at_the_next_synchronisation(lib):
    a = jr.ndarray(jr.f32, shape=(4,))
    double(a)
    device = program_mod.current().device
    (handle,) = double.handles.values()
    assert handle.compiled.sites, "the kernel has a checked access"
    status = (ctypes.c_int64 * abi.STATUS_SLOTS).from_address(device.status)
    status[abi.SLOT_ERROR], status[abi.SLOT_ERROR_AXIS] = 1, 0       # site 0, axis 0
    status[abi.SLOT_ERROR_INDEX] = 9
    status[abi.SLOT_LAUNCH_ID] = handle.entry.launch_id
    with pytest.raises(jr.KernelRuntimeError, match=r"kernel \S*double\S*: Out of bound "
                       r"access: index 9 out of bounds on axis 0 of 'a'"):
        jr.sync()
    jr.sync()                                    # reported once: the block was cleared


def test_graphs_replay_through_the_vendor_graph_calls(lib):
    a = jr.ndarray(jr.f32, shape=(8,))
    with jr.graph() as step:
        double(a)
        double(a)
    lib.calls.clear()
    step()
    assert [c for c in lib.calls if c[0] in ("launch", "graph_launch")] == [
        ("graph_launch", "exec")]


def test_a_failing_vendor_call_names_the_call_and_the_error(lib):
    lib.fail["fgMalloc"] = fakegpu_lib.ERROR_OUT_OF_MEMORY
    with pytest.raises(fakegpu_backend.FakeGpuError,
                       match="fgMalloc failed: fgErrorOutOfMemory"):
        jr.ndarray(jr.f32, shape=(8,)).__cuda_array_interface__


def test_gpu_asm_names_the_archs_that_print_assembly():
    with pytest.raises(ValueError, match="arch must be one of 'cuda', 'amdgpu', got 'cpu'"):
        jr.debug.gpu_asm(double, np.zeros(2, np.float32), arch="cpu")
