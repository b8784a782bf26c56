"""The shared GPU launch path (`backends/gpu.py`) against a recording fake of the driver:
bookkeeping only (what is launched with which grid, what becomes current where), never a
substitute for the GPU tests in test_gpu.py. Runs on any machine."""
import ctypes

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import gpu, nvptx
from jitrt.backends.base import DeviceTarget
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


class RecordingDriver:
    name = "cuda"
    multiprocessors, max_threads_per_multiprocessor = 4, 256
    dlpack_device_type, max_grid_threads = 2, (1 << 31) * 1024

    def __init__(self):
        self.calls, self._memory = [], {}

    def load_module(self, image):
        return object()

    def function(self, module, name):
        return name

    def launch(self, function, grid, block, params):
        self.calls.append(("launch", function, grid, block))

    def launch_source(self, function, grid, block, params):
        return ([f"_launch({function}, {grid}, {block}, {params})"],
                {"_launch": self.launch})

    def alloc(self, nbytes):
        block = (ctypes.c_uint8 * nbytes)()
        self._memory[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    alloc_pinned = alloc

    def free(self, ptr):
        self._memory.pop(ptr, None)

    free_pinned = free

    def copy_h2d(self, dst, src, nbytes):
        self.calls.append(("h2d", dst, nbytes))

    def copy_d2h(self, dst, src, nbytes):
        self.calls.append(("d2h", src, nbytes))

    def copy_d2d(self, dst, src, nbytes):
        pass

    def memset(self, dst, nbytes):
        pass

    def synchronize(self):
        pass

    def close(self):
        pass


@pytest.fixture
def fake():
    """A program whose device is a GpuDevice over the recording driver."""
    driver = RecordingDriver()
    target = DeviceTarget("cuda", nvptx.TRIPLE, nvptx.codegen_target().data_layout, "sm_90",
                          "fake")
    device = gpu.GpuDevice(0, driver, target, nvptx.codegen_target(), lambda module: b"")
    program = program_mod.current()
    program_mod._close(program)
    program.device = device
    program_mod.ACTIVE[0] = program
    yield driver
    program_mod._close(program)


def test_ping_pong_arrays_reuse_the_generated_entry(fake):
    @jr.kernel
    def step(src: nd(dtype=jr.f32, ndim=1), dst: nd(dtype=jr.f32, ndim=1)):
        for i in range(src.shape[0]):
            dst[i] = src[i] * 0.5

    a, b = jr.ndarray(jr.f32, shape=(1000,)), jr.ndarray(jr.f32, shape=(1000,))
    step(a, b)
    entry = next(iter(step.handles.values())).entry
    code = type(entry).__call__
    fake.calls.clear()
    for _ in range(3):
        step(b, a)
        step(a, b)
    assert type(entry).__call__ is code             # repacking did not regenerate it
    launches = [c for c in fake.calls if c[0] == "launch"]
    assert launches == [("launch", launches[0][1], 8, 128)] * 6   # 1000 points, 128 a block
    assert not [c for c in fake.calls if c[0] == "h2d"]            # both are on the device
    assert entry.array_outputs == [b._mirror] and b._mirror.device_newer


def test_host_writes_upload_before_the_next_launch_only(fake):
    x = jr.field(jr.f32, shape=(64,))

    @jr.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    bump()
    fake.calls.clear()
    bump()
    assert [c[0] for c in fake.calls] == ["launch"]
    x.fill(2.0)
    bump()
    assert [c[0] for c in fake.calls] == ["launch", "h2d", "launch"]
    host = np.zeros(5, np.float32)

    @jr.kernel
    def scale(h: nd(dtype=jr.f32, ndim=1)):
        for i in range(h.shape[0]):
            h[i] *= 2.0

    fake.calls.clear()
    scale(host)
    # staged in, launched, copied out, then the status block read at the synchronisation
    assert [c[0] for c in fake.calls] == ["h2d", "launch", "d2h", "d2h"]
