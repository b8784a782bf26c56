"""The shared GPU launch path (`backends/gpu.py`) against a recording fake of the driver:
bookkeeping only (what is launched with which grid, what becomes current where), never a
substitute for the GPU tests in test_gpu.py. Runs on any machine."""
import ctypes

import numpy as np
import pytest

import jitrt as jr
from jitrt import data as data_mod
from jitrt.backends import gpu, nvptx
from jitrt.backends.base import DeviceTarget
from jitrt.runtime import native_launch
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


class RecordingDriver:
    name = "cuda"
    multiprocessors, max_threads_per_multiprocessor = 4, 256
    dlpack_device_type, max_grid_threads = 2, (1 << 31) * 1024
    jit_loads = 0

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

    def fill(self, dst, pattern, count):
        self.calls.append(("fill", dst, pattern, count))

    def fill_call(self, dst, pattern, count):
        return lambda: self.fill(dst, pattern, count)

    def synchronize(self):
        pass

    def event_create(self):
        return ["event"]

    def event_record(self, event):
        event[0] = "recorded"

    def event_synchronize(self, event):
        self.calls.append(("event_sync", event[0]))

    def event_destroy(self, event):
        pass

    def close(self):
        pass


def on_fake_device(driver):
    """The current program with its device replaced by a GpuDevice over `driver` (a
    generator: the fixtures yield the driver, then close the program)."""
    target = DeviceTarget("cuda", nvptx.TRIPLE, nvptx.codegen_target().data_layout, "sm_90",
                          "fake")
    device = gpu.GpuDevice(0, driver, target, nvptx.codegen_target(), lambda module: b"")
    program = program_mod.current()
    program_mod._close(program)
    program.device = device
    program_mod.ACTIVE[0] = program
    yield driver
    program_mod._close(program)


@pytest.fixture
def fakegpu(fakegpu_program):
    """The driver of a program on the fake third vendor (conftest.py's `fakegpu_program`:
    `fakegpu_backend.py` over `fakegpu_lib.py`, plugged in with one registry line)."""
    return fakegpu_program[1].device.driver


@pytest.fixture(params=["recording", "fakegpu"])
def fake(request):
    """A program whose device is a GpuDevice over the recording driver, or over the fake
    third vendor's binding (the same calls recorded in the same shape)."""
    if request.param == "fakegpu":
        yield request.getfixturevalue("fakegpu")
    else:
        yield from on_fake_device(RecordingDriver())


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
    assert launches == [("launch", launches[0][1], 4, 256)] * 6   # 1000 points, 256 a block
    assert not [c for c in fake.calls if c[0] == "h2d"]            # both are on the device
    assert entry.array_outputs == [b._mirror] and b._mirror.device_newer


def test_a_return_value_costs_one_copy_of_the_status_block(fake):
    """A kernel's return value comes back with the status block its synchronisation reads:
    one copy (before: a copy for the value, then the synchronisation's own)."""
    x = jr.field(jr.i32, shape=(4,))

    @jr.kernel
    def first() -> jr.i32:
        return x[0]

    first()                              # (the fake runs no kernel: the value is 0)
    fake.calls.clear()
    assert first() == 0
    assert [c[0] for c in fake.calls] == ["launch", "d2h"]


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
    x.from_numpy(np.full(64, 2.0, np.float32))      # uploaded at once, asynchronously
    bump()
    assert [c[0] for c in fake.calls if c[0] != "event_sync"] == ["launch", "h2d", "launch"]
    fake.calls.clear()
    x[3] = 5.0                  # the device copy is newer: the element alone goes up
    bump()
    # 64 points for the fake's 4 multiprocessors: one block of 64 (`gpu_launch.default_block`)
    assert [c[:1] + c[2:] for c in fake.calls] == [("h2d", 4), ("launch", 1, 64)]
    fake.calls.clear()
    with x.writable() as data:  # the host copy is newer: downloaded, written, uploaded
        data[3] = 6.0
    bump()
    assert [c[0] for c in fake.calls if c[0] != "d2h"] == ["h2d", "launch"]
    host = np.zeros(5, np.float32)

    @jr.kernel
    def scale(h: nd(dtype=jr.f32, ndim=1)):
        for i in range(h.shape[0]):
            h[i] *= 2.0

    fake.calls.clear()
    scale(host)
    # staged in, launched, copied out, then the status block read at the synchronisation
    assert [c[0] for c in fake.calls] == ["h2d", "launch", "d2h", "d2h"]


# ---- the native GPU entry (native/native_gpu_entry.py) over a fake driver ------------------

LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
CURRENT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int64))
FAKE_CONTEXT, FAKE_STREAM = 0x7700, 0x55


class NativeDriver(RecordingDriver):
    """The recording driver plus native words: its 'cuLaunchKernel' and 'cuCtxGetCurrent'
    are ctypes callbacks that record what the native entry passed."""

    def __init__(self):
        super().__init__()
        self.native_calls, self.handles, self.fail_with = [], [], 0
        self.current = FAKE_CONTEXT

        def launch(function, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
            slots = (self.entry_slots or 0)
            threads = ctypes.c_uint64.from_address(
                ctypes.c_void_p.from_address(params + 8 * slots).value).value
            self.native_calls.append((self.handles[function - 1], gx, (gy, gz), bx,
                                      (by, bz, shmem), stream, threads, extra))
            return self.fail_with

        def current(out):
            out[0] = self.current
            return 0
        self.entry_slots = None
        self._callbacks = (LAUNCH_FN(launch), CURRENT_FN(current))
        self.stream = "own"                # `jr.stream` blocks (GpuDevice.use_stream)
        self.cur = [self.stream]

    def use_stream(self, stream):
        previous, self.cur[0] = self.cur[0], stream
        return previous

    def native_words(self):
        launch, current = (ctypes.cast(cb, ctypes.c_void_p).value for cb in self._callbacks)
        return launch, current, FAKE_CONTEXT, FAKE_STREAM

    def function_handle(self, function):
        self.handles.append(function)
        return len(self.handles)

    def launch_error(self, code):
        return RuntimeError(f"fake launch failed with {code}")


@pytest.fixture
def native_fake():
    if native_launch.layout() is None:
        pytest.skip("no native launches in this Python")
    yield from on_fake_device(NativeDriver())


def launches(driver):
    return [c for c in driver.calls if c[0] == "launch"]


def test_steady_state_gpu_launches_run_natively(native_fake):
    @jr.kernel
    def step(src: nd(dtype=jr.f32, ndim=1), dst: nd(dtype=jr.f32, ndim=1), n: jr.i32):
        for i in range(n):
            dst[i] = src[i] * 0.5

    a, b = jr.ndarray(jr.f32, shape=(1000,)), jr.ndarray(jr.f32, shape=(1000,))
    step(a, b, 1000)                                 # packs, builds the tables: Python
    entry = next(iter(step.handles.values())).entry
    native_fake.entry_slots = entry.slots
    function = entry.tasks[0][0]
    native_fake.calls.clear()
    before = jr.debug.stats()
    b._mirror.device_newer = False
    for n, grid in ((1000, 4), (100, 1), (257, 2), (0, 1)):
        step(a, b, n)
        assert native_fake.native_calls[-1] == (function, grid, (1, 1), 256, (1, 1, 0),
                                                FAKE_STREAM, grid * 256, None)
    assert launches(native_fake) == []               # no Python entry ran
    assert b._mirror.device_newer is True            # the native entry marked it
    after = jr.debug.stats()
    assert after["launches"] - before["launches"] == 4
    assert after["h2d_skipped"] - before["h2d_skipped"] == 4


def test_launches_the_native_launcher_leaves_to_python_launch_natively(native_fake):
    """A bool for an integer parameter, a keyword argument: the native launcher hands the
    call to the Python launcher, which then launches through the native GPU entry, not the
    Python one (Genesis's `func_solve_init(..., write_L=True)` at every step)."""
    @jr.kernel
    def step(dst: nd(dtype=jr.f32, ndim=1), flag: jr.i32):
        for i in range(dst.shape[0]):
            dst[i] = flag

    b = jr.ndarray(jr.f32, shape=(300,))
    step(b, 1)
    native_fake.entry_slots = next(iter(step.handles.values())).entry.slots
    native_fake.calls.clear()
    for call in (lambda: step(b, True), lambda: step(b, flag=False), lambda: step(dst=b, flag=1)):
        count = len(native_fake.native_calls)
        call()
        assert len(native_fake.native_calls) == count + 1
    assert launches(native_fake) == []               # no Python entry ran


def test_native_gpu_entry_hands_what_must_move_to_python(native_fake):
    x = jr.field(jr.f32, shape=(64,))

    @jr.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    bump()
    native_fake.entry_slots = next(iter(bump.handles.values())).entry.slots
    native_fake.calls.clear()
    bump()
    assert native_fake.native_calls and launches(native_fake) == []
    with x.writable() as data:                       # the host copy is newer: Python uploads
        data[3] = 2.0
    native_fake.calls.clear()
    bump()
    assert [c[0] for c in native_fake.calls] == ["h2d", "launch"]
    native_fake.calls.clear()
    bump()
    assert native_fake.calls == []                   # native again
    native_fake.current = 0x1234                     # another driver context is current
    bump()
    assert [c[0] for c in native_fake.calls] == ["launch"]
    native_fake.current = FAKE_CONTEXT
    native_fake.fail_with = 700
    with pytest.raises(RuntimeError, match="fake launch failed with 700"):
        bump()
    native_fake.fail_with = 0
    count = len(native_fake.native_calls)
    bump()                                           # and the next launch works
    assert len(native_fake.native_calls) == count + 1


def test_native_gpu_launches_go_on_the_stream_a_block_chose(native_fake):
    x = jr.field(jr.f32, shape=(64,))

    @jr.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    @jr.kernel
    def later():
        for i in x:
            x[i] -= 1.0

    bump()
    native_fake.entry_slots = next(iter(bump.handles.values())).entry.slots
    device = program_mod.current().device
    bump()
    assert native_fake.native_calls[-1][5] == FAKE_STREAM
    previous = device.use_stream(0x66)         # what `with jr.stream(s):` does
    bump()                                     # a table built before the block
    assert native_fake.native_calls[-1][5] == 0x66
    later()                                    # and one built inside it
    later()
    assert native_fake.native_calls[-1][5] == 0x66
    device.use_stream(previous)
    bump()
    later()
    assert [c[5] for c in native_fake.native_calls[-2:]] == [FAKE_STREAM, FAKE_STREAM]


def test_launches_a_tape_records_run_through_the_native_gpu_entry(native_fake, monkeypatch):
    # issue 32: a recorded launch went through the Python GPU entry (the native launcher
    # hands every launch to Python while a Tape records); now the recording launcher calls
    # the native entry, which launches when nothing has to move and hands the rest back
    monkeypatch.setattr(data_mod, "CURRENT_DEVICE", [program_mod.current().device])  # fills
    x = jr.field(jr.f32, shape=(64,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def square():
        for i in x:
            loss[None] += x[i] * x[i]

    square()
    native_fake.entry_slots = next(iter(square.handles.values())).entry.slots
    with jr.ad.Tape(loss):                    # the grad kernel's first launch: Python
        square()
    for _ in range(2):
        count = len(native_fake.native_calls)
        native_fake.calls.clear()
        with jr.ad.Tape(loss):
            square()
        assert len(native_fake.native_calls) == count + 2     # the forward, then its grad
        assert launches(native_fake) == []                    # no Python entry ran
    with x.writable() as data:                # the host copy is newer: the Python entry
        data[0] = 3.0
    native_fake.calls.clear()
    with jr.ad.Tape(loss):
        square()
    assert [c[0] for c in native_fake.calls if c[0] != "fill"][:2] == ["h2d", "launch"]
    native_fake.fail_with = 700               # a refused launch raises from the recording
    with pytest.raises(RuntimeError, match="fake launch failed with 700"):
        with jr.ad.Tape(loss):
            square()
    native_fake.fail_with = 0
    count = len(native_fake.native_calls)
    with jr.ad.Tape(loss):
        square()
    assert len(native_fake.native_calls) == count + 2


def test_staged_and_returning_gpu_launches_stay_in_python(native_fake):
    @jr.kernel
    def scale(h: nd(dtype=jr.f32, ndim=1)):
        for i in range(h.shape[0]):
            h[i] *= 2.0

    @jr.kernel
    def total(h: nd(dtype=jr.f32, ndim=1)) -> jr.i32:
        return h.shape[0]

    host = np.zeros(5, np.float32)
    for kernel, arg in ((scale, host), (total, jr.ndarray(jr.f32, shape=(3,)))):
        kernel(arg)
        native_fake.entry_slots = next(iter(kernel.handles.values())).entry.slots
        native_fake.calls.clear()
        count = len(native_fake.native_calls)
        kernel(arg)
        assert len(native_fake.native_calls) == count      # the Python entry launched it
        assert launches(native_fake)


def test_two_dimensional_and_serial_tasks_natively(native_fake):
    @jr.kernel
    def two(a: nd(dtype=jr.f32, ndim=2)):
        a[0, 0] = 1.0
        for i, j in jr.ndrange((1, a.shape[0]), a.shape[1]):
            a[i, j] = 2.0

    a = jr.ndarray(jr.f32, shape=(30, 20))
    two(a)
    native_fake.entry_slots = next(iter(two.handles.values())).entry.slots
    native_fake.calls.clear()
    two(a)
    assert launches(native_fake) == []
    serial, box = native_fake.native_calls[-2:]
    assert (serial[1], serial[3], serial[6]) == (1, 1, 1)
    assert (box[1], box[3], box[6]) == (3, 256, 3 * 256)     # 29 x 20 = 580 points


def test_host_arrays_are_staged_through_pinned_buffers(fake):
    """A plain numpy argument goes host -> pinned buffer -> device and, when written, back
    the same way: the copies are DMA from and to the pinned buffer (never the array itself),
    and a pinned buffer is written again only after its last copy's event."""
    copies = []
    fake.copy_h2d = lambda dst, src, nbytes: copies.append(("h2d", src, nbytes))
    fake.copy_d2h = lambda dst, src, nbytes: copies.append(("d2h", dst, nbytes))

    @jr.kernel
    def scale(h: nd(dtype=jr.f32, ndim=1)):
        for i in range(h.shape[0]):
            h[i] *= 2.0

    host = np.zeros(5, np.float32)
    scale(host)
    entry = next(iter(scale.handles.values())).entry
    ((pinned, size, event),) = entry.pinned.values()
    assert size == host.nbytes and event == ["recorded"]
    assert ("h2d", pinned, 20) in copies and ("d2h", pinned, 20) in copies
    assert not [c for c in copies if c[1] == host.ctypes.data]
    fake.calls.clear()
    scale(host)
    assert fake.calls[0] == ("event_sync", "recorded")       # before the buffer is reused
    assert list(entry.pinned.values())[0][0] == pinned       # grow-only: the same buffer


def test_adstacks_in_local_memory_take_no_heap(fakegpu):
    # a stack whose capacity is known when compiling and small lives in the thread's local
    # memory (passes/lowered.local_capacity): the launch reserves no heap bytes for it

    def chain(trips):
        @jr.kernel
        def k(x: nd(dtype=jr.f32, ndim=1), loss: nd(dtype=jr.f32, ndim=0)):
            for i in range(x.shape[0]):
                v = x[i]
                for _ in range(trips):
                    v = jr.sin(v) * 1.1 + 0.1
                loss[None] += v
        return k

    x = jr.ndarray(jr.f32, shape=(64,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    heap = program_mod.current().heap
    size = heap.size
    small = chain(6)
    small.grad(x, loss)
    before = jr.debug.stats()["allocations"]
    small.grad(x, loss)
    assert heap.size == size                    # 7 f32 entries: local memory
    large = chain(200)
    large.grad(x, loss)                         # 201 entries (804 bytes): the heap grows
    assert heap.size > size and jr.debug.stats()["allocations"] > before


def test_small_constant_boxes_spread_over_the_multiprocessors():
    from jitrt.backends.gpu_launch import DEFAULT_BLOCK, default_block
    from jitrt.ir import nodes as n

    def box(*extents):
        return tuple((n.Const(0, jr.i32), n.Const(e, jr.i32)) for e in extents)
    assert default_block(box(256), 132) == 64          # 4 blocks: 4 multiprocessors busy
    assert default_block(box(8192), 132) == 64
    assert default_block(box(16 * 1024), 132) == 128
    assert default_block(box(256, 256), 132) == DEFAULT_BLOCK
    assert default_block(box(100), 4) == 64
    assert default_block(box(1000), 4) == DEFAULT_BLOCK
    assert default_block(None, 132) == DEFAULT_BLOCK    # a serial task
    end = n.Arg(0, "k", jr.i32)                          # a size known at launch only
    assert default_block(((n.Const(0, jr.i32), end),), 132) == DEFAULT_BLOCK
