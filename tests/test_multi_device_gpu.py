"""Several devices, streams and interop on a real GPU (`JITRT_TEST_ARCHS=cuda`): what the fake
vendor of tests/test_devices.py cannot show, values computed by kernels and pointers shared
with torch. Tests named `*_two_gpus` need two devices and skip with one; the rest need one.
torch (with CUDA) is optional: the tests that exchange data with it skip without it.
docs/gpu.md, "Several devices, streams and interop"."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
pytestmark = pytest.mark.gpu_only


@jr.kernel
def axpy(a: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


@pytest.fixture
def two_gpus(arch):
    if arch != "cuda" or jr.device_count() < 2:
        pytest.skip("needs two CUDA devices")


@pytest.fixture
def torch(arch):
    torch = pytest.importorskip("torch")
    if arch != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    return torch


def test_kernels_on_two_gpus_from_one_thread_two_gpus(two_gpus):
    n = 1 << 20
    x0, y0 = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
    x0.fill(1.0)
    with jr.device(1):
        x1, y1 = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
        x1.fill(2.0)
    for _ in range(3):                   # launches alternate; both devices run at once
        axpy(1.0, x0, y0)
        with jr.device(1):
            axpy(3.0, x1, y1)
    with jr.device(1):
        jr.sync()
    jr.sync()
    assert y0.to_numpy()[[0, -1]].tolist() == [3.0, 3.0]
    assert y1.to_numpy()[[0, -1]].tolist() == [18.0, 18.0]
    with pytest.raises(jr.KernelArgError, match="argument 'x' lives on cuda:1, but this "
                       "launch runs on cuda:0"):
        axpy(1.0, x1, y0)
    x1_on_0 = x1.to_device(0)
    axpy(1.0, x1_on_0, y0)
    assert y0.to_numpy()[7] == 5.0


def test_a_torch_tensor_of_gpu_1_is_used_in_place_on_gpu_1_two_gpus(two_gpus, torch):
    x = torch.arange(8, dtype=torch.float32, device="cuda:1")
    y = torch.zeros(8, dtype=torch.float32, device="cuda:1")
    torch.cuda.synchronize("cuda:1")      # torch's stream and jitrt's are not ordered
    with jr.device(1) as p1:
        allocations = p1.stats()["allocations"]
        axpy(2.0, x, y)
        jr.sync()
        assert p1.stats()["allocations"] == allocations       # nothing copied
        assert p1.device.wrap_foreign(y)._mirror.ptr == y.data_ptr()
    assert y.cpu().tolist() == [2.0 * k for k in range(8)]
    with pytest.raises(jr.KernelArgError, match="argument 'x' lives on cuda:1, but this "
                       "launch runs on cuda:0"):
        axpy(2.0, x, torch.zeros(8, device="cuda:0"))


def test_exports_share_memory_on_each_device_two_gpus(two_gpus, torch):
    with jr.device(1):
        a = jr.ndarray(jr.f32, shape=(4,), needs_grad=True)
        a.fill(1.0)
        a.grad.fill(5.0)
    t = torch.from_dlpack(a)
    g = torch.from_dlpack(a.grad)
    assert t.device == torch.device("cuda:1") and t.data_ptr() == a._mirror.ptr
    assert g.data_ptr() == a.grad._mirror.ptr and g.cpu().tolist() == [5.0] * 4
    c = torch.as_tensor(a, device="cuda:1")
    assert c.data_ptr() == a._mirror.ptr


def test_dlpack_and_cai_share_memory_and_grad(torch):
    a = jr.ndarray(jr.f32, shape=(16,), needs_grad=True)
    a.fill(3.0)
    a.grad.fill(1.0)
    t = torch.from_dlpack(a)              # torch passes its stream: ordered on the device
    assert t.data_ptr() == a._mirror.ptr and t.cpu().tolist() == [3.0] * 16
    assert torch.as_tensor(a.grad, device="cuda").data_ptr() == a.grad._mirror.ptr
    assert a.__cuda_array_interface__["version"] == 3


def test_launches_on_torchs_stream_are_ordered_with_its_ops(torch):
    n = 1 << 22
    side = torch.cuda.Stream()
    x = torch.empty(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.fill_(2.0)                          # queued on torch's side stream
        with jr.stream(jr.Stream.from_handle(side.cuda_stream)):
            axpy(1.0, x, y)                   # after the fill, on the same stream
        y.mul_(10.0)                          # after the kernel
    side.synchronize()
    assert y[[0, n - 1]].cpu().tolist() == [20.0, 20.0]


def test_a_jitrt_stream_waits_for_a_torch_event(torch):
    n = 1 << 22
    x = torch.empty(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    x.fill_(4.0)                               # torch's current stream
    y.zero_()
    ready = torch.cuda.Event()
    ready.record()
    s = jr.Stream()
    jr.Event.from_handle(ready.cuda_event).wait(s)
    with jr.stream(s):
        axpy(0.5, x, y)
        done = jr.Event().record()
    done.synchronize()
    assert y[[0, n - 1]].cpu().tolist() == [2.0, 2.0]
    torch_stream = torch.cuda.ExternalStream(s.cuda_stream)
    assert torch_stream.cuda_stream == s.cuda_stream


def test_graphs_capture_and_replay_on_a_user_stream():
    x, y = jr.ndarray(jr.f32, shape=(256,)), jr.ndarray(jr.f32, shape=(256,))
    x.fill(1.0)
    s = jr.Stream()
    with jr.stream(s):
        step = jr.graph(lambda: axpy(1.0, x, y))
        for _ in range(4):
            step()
        s.synchronize()
    assert y.to_numpy()[0] == 4.0
    assert np.all(y.to_numpy() == 4.0)


def test_a_torch_op_through_dlpack_between_two_launches_is_ordered(torch):
    """The data-parallel step's pattern: a kernel writes `g`, torch changes it in place
    through a DLPack view (an all-reduce would), the next kernel reads it; jitrt's stream and
    torch's are ordered by DLPack's stream argument, then by launching on torch's stream."""
    n = 1 << 22
    g, out = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
    g.fill(1.0)
    axpy(2.0, g, g)                         # g = 3, on jitrt's stream
    view = torch.from_dlpack(g)             # torch's stream waits for it on the device
    view.mul_(2.0)                          # g = 6, on torch's stream
    g.touch()
    with jr.stream(jr.Stream.from_handle(torch.cuda.current_stream().cuda_stream)):
        axpy(1.0, g, out)                   # after mul_, on torch's stream
    assert out.to_numpy()[[0, n - 1]].tolist() == [6.0, 6.0]
