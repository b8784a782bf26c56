"""The AMDGPU backend without AMD hardware (none exists on our machines).

What runs here: code objects built for several gfx targets and read back (kernel descriptors,
wave size, LDS), the clean error of `jr.init(arch=jr.amdgpu)` without ROCm, and the hip-python
adapter (`backends/amdgpu.py`) driven through the shared GPU launch path against a recording
fake of the `hip` module: call order and arguments only. Nothing here executes a kernel on an
AMD GPU; these tests never stand in for that.
"""
import ctypes
import importlib.util
import shutil
import subprocess
import types

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import amdgcn, amdgpu, gpu, gpu_probe
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only
needs_linker = pytest.mark.skipif(amdgcn.linker() is None,
                                  reason="no ld.lld (pip install ziglang, or Debian's lld)")
heat = jr.field(jr.f32, shape=(64,))


@jr.kernel
def saxpy(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1), a: jr.f32):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


@jr.kernel
def total(x: nd(dtype=jr.f64, ndim=1), out: nd(dtype=jr.f64, ndim=1)):
    for i in range(x.shape[0]):
        out[0] += jr.exp(x[i]) + jr.tanh(x[i])


def build(kernel, *args):
    """(artifact, {gfx: code object}) of `kernel` for gfx942, gfx90a and gfx1100."""
    from jitrt.runtime import compiler
    from jitrt.runtime.arguments import bind_args, specialize
    objects = {}

    class CodeObjects:
        arch, codegen_target = "amdgpu", amdgcn.codegen_target()

        def compile(self, module):
            for gfx in ("gfx942", "gfx90a", "gfx1100"):
                objects[gfx] = amdgcn.compile_code_object(str(module), gfx)
            return b""
    program = program_mod.current()
    params, _, templates, name = specialize(kernel, bind_args(kernel, args, {}),
                                            program.config)
    ctx, kir = compiler.frontend(kernel, params, templates, name, program.config)
    return compiler.build_artifact(kernel, params, name, ctx, kir, program.config,
                                   CodeObjects()), objects


@needs_linker
def test_code_objects_for_each_gfx_target():
    artifact, objects = build(total, np.ones(8), np.zeros(1))
    assert len(artifact.symbols) == 1
    for gfx, code_object in objects.items():
        assert code_object[:4] == b"\x7fELF"
        (name, desc), = amdgcn.kernel_descriptors(code_object).items()
        assert name == artifact.symbols[0]
        assert desc.kernarg_size == 8 * (artifact.layout.gpu_slots + 1)
        assert desc.wave32 == (gfx == "gfx1100")
        assert desc.group_segment_size >= 8      # the block sum of the += partials (LDS)


@needs_linker
@pytest.mark.skipif(shutil.which("llvm-readelf") is None, reason="no llvm-readelf here")
def test_llvm_readelf_reads_the_code_object(tmp_path):
    artifact, objects = build(saxpy, np.ones(8, np.float32), np.ones(8, np.float32), 2.0)
    path = tmp_path / "k.hsaco"
    path.write_bytes(objects["gfx942"])
    symbols = subprocess.run(["llvm-readelf", "--symbols", str(path)], capture_output=True,
                             text=True).stdout
    assert f"{artifact.symbols[0]}.kd" in symbols
    notes = subprocess.run(["llvm-readelf", "--notes", str(path)], capture_output=True,
                           text=True).stdout
    assert "AMDGPU" in notes


@needs_linker
def test_a_linker_error_names_the_linker(monkeypatch):
    with pytest.raises(RuntimeError, match="ld.lld rejected"):
        amdgcn.link(b"not an object")


def test_no_linker_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(amdgcn, "linker", lambda: None)
    with pytest.raises(jr.BackendUnavailableError, match="ld.lld"):
        amdgcn.link(b"")


@pytest.mark.skipif(gpu_probe.hip_available()[0], reason="a ROCm GPU is present here")
def test_init_amdgpu_without_rocm_is_a_clear_error():
    with pytest.raises(jr.BackendUnavailableError) as info:
        jr.init(arch=jr.amdgpu, enable_fallback=False)
    text = str(info.value)
    assert "arch=amdgpu" in text
    if importlib.util.find_spec("hip") is not None:
        assert "libamdhip64.so" in text
    else:
        assert "hip-python" in text


# ---- the hip-python adapter against a recording fake ----------------------------------------

class FakeHip:
    """The parts of hip-python's `hip` module the adapter calls, recording each call."""

    hipError_t = types.SimpleNamespace(hipSuccess=0)
    hipDeviceAttribute_t = types.SimpleNamespace(hipDeviceAttributeMultiprocessorCount=1,
                                                 hipDeviceAttributeMaxThreadsPerMultiProcessor=2)
    hipStreamCaptureMode = types.SimpleNamespace(hipStreamCaptureModeThreadLocal=1)
    hipStreamDefault, hipStreamNonBlocking, hipHostMallocDefault = 0, 1, 0

    def __init__(self):
        self.calls, self.memory, self.images = [], {}, []

    def __getattr__(self, name):
        results = {"hipGetDeviceCount": (0, 1), "hipDriverGetVersion": (0, 60300000),
                   "hipStreamCreateWithFlags": (0, "stream"),
                   "hipModuleGetFunction": None, "hipStreamEndCapture": (0, "graph"),
                   "hipGraphInstantiate": (0, "exec", None, b"")}
        if not name.startswith("hip"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name, args))
            if name == "hipModuleGetFunction":
                return 0, ("function", args[1].decode())
            return results.get(name, (0,))
        return call

    def hipDeviceGetAttribute(self, which, device):
        return 0, {1: 104, 2: 2048}[which]

    def hipGetDeviceProperties(self, device):
        return 0, types.SimpleNamespace(gcnArchName=b"gfx942:sramecc+:xnack-")

    def hipModuleLoadData(self, image):
        self.calls.append(("hipModuleLoadData", (len(image),)))
        self.images.append(bytes(image))
        return 0, "module"

    def hipMalloc(self, nbytes):
        block = (ctypes.c_uint8 * nbytes)()
        self.memory[ctypes.addressof(block)] = block
        return 0, ctypes.addressof(block)

    hipHostMalloc = lambda self, nbytes, flags: self.hipMalloc(nbytes)  # noqa: E731


@pytest.fixture
def fake_hip():
    """A program whose device is the AMDGPU device over the recording fake."""
    hip = FakeHip()
    device = amdgpu.device_for(amdgpu.HipDriver(hip, 0), 0)
    program = program_mod.current()
    program_mod._close(program)
    program.device = device
    program_mod.ACTIVE[0] = program
    yield hip
    device.close()


def test_the_adapter_reads_the_device(fake_hip, monkeypatch):
    driver = program_mod.current().device.driver
    assert isinstance(driver, amdgpu.HipDriver) and driver.gfx == "gfx942"
    assert program_mod.current().device.target.cpu == "gfx942"
    assert program_mod.current().device.max_resident_threads == 104 * 2048
    names = [c[0] for c in fake_hip.calls]
    assert names[:3] == ["hipInit", "hipGetDeviceCount", "hipSetDevice"]
    assert "hipStreamCreateWithFlags" in names
    monkeypatch.setenv("JITRT_AMDGPU_ARCH", "gfx90a")
    assert amdgpu.HipDriver(FakeHip(), 0).gfx == "gfx90a"
    with pytest.raises(jr.BackendUnavailableError, match="device_id=3"):
        amdgpu.HipDriver(FakeHip(), 3)


def test_a_failing_call_names_the_call():
    hip = FakeHip()
    hip.hipGetErrorName = lambda err: (0, b"hipErrorOutOfMemory")
    driver = amdgpu.HipDriver(hip, 0)
    with pytest.raises(amdgpu.HipError, match="hipMalloc failed: hipErrorOutOfMemory"):
        driver.check((2, 0), "hipMalloc")


@needs_linker
def test_launch_path_calls_hip_in_order(fake_hip):
    x, y = jr.ndarray(jr.f32, (1000,)), jr.ndarray(jr.f32, (1000,))
    x.from_numpy(np.ones(1000, np.float32))
    fake_hip.calls.clear()
    saxpy(x, y, 2.0)
    names = [c[0] for c in fake_hip.calls]
    assert names.count("hipModuleLoadData") == 1
    (image,) = fake_hip.images
    (symbol, desc), = amdgcn.kernel_descriptors(image).items()      # the real code object
    assert ("hipModuleGetFunction", ("module", symbol.encode())) in fake_hip.calls
    launches = [c[1] for c in fake_hip.calls if c[0] == "hipModuleLaunchKernel"]
    assert len(launches) == 1
    function, grid, _, _, block, _, _, shared, stream, params, extra = launches[0]
    assert function == ("function", symbol) and stream == "stream" and extra is None
    assert block == gpu.DEFAULT_BLOCK and grid == -(-1000 // block) and shared == 0
    assert isinstance(params, int) and params
    # the upload of x happens before the launch; y's host copy is untouched (zeros, uploaded)
    first_launch = names.index("hipModuleLaunchKernel")
    uploads = [k for k, c in enumerate(fake_hip.calls) if c[0] == "hipMemcpyHtoDAsync"]
    assert uploads and max(uploads) < first_launch
    fake_hip.calls.clear()
    saxpy(x, y, 2.0)                    # nothing changed on the host: no upload, one launch
    assert [c[0] for c in fake_hip.calls] == ["hipModuleLaunchKernel"]
    y.to_numpy()                        # the host reads: a download and a synchronisation
    names = [c[0] for c in fake_hip.calls]
    assert "hipMemcpyDtoHAsync" in names and "hipStreamSynchronize" in names


@needs_linker
def test_graphs_go_through_hip_graphs(fake_hip):
    x, y = jr.ndarray(jr.f32, (64,)), jr.ndarray(jr.f32, (64,))
    with jr.graph() as step:
        saxpy(x, y, 2.0)
        saxpy(y, x, 0.5)
    fake_hip.calls.clear()
    step()
    names = [c[0] for c in fake_hip.calls]
    assert names.count("hipGraphLaunch") == 1 and "hipModuleLaunchKernel" not in names
