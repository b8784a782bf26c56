"""Whole-array operations on a GPU program run on the device, on the stream: `fill` (and so
`.grad` zeroing and a Tape's gradient clearing) as driver memsets, `copy_from` between device
copies as one device-to-device copy, `from_numpy` as one asynchronous upload; none of them
synchronises, and host reads afterwards see the values (docs/gpu.md, "Where data lives").
Run over the fake vendor (`fakegpu_lib.py`), whose memsets and copies act on memory: kernels
never execute there, what is checked is the driver calls and the data they leave."""
import dataclasses
import pickle

import fakegpu_backend
import fakegpu_lib
import numpy as np
import pytest

import jitrt as jr
from jitrt.backends.stream_driver import memset_plan
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


@pytest.fixture
def lib(fakegpu_program):
    return fakegpu_program[0]


def names(lib):
    return [c[0] for c in lib.calls]


def syncs(lib):
    return [name for name, _ in lib.log if name == "fgStreamSynchronize"]


@jr.kernel
def scale(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0


def test_memset_plan_uses_one_memset_when_the_element_repeats_a_word():
    f32 = np.float32(1.0).tobytes()
    assert memset_plan(f32, 10) == ((4, 0, 0x3F800000, 10, 0),)
    assert memset_plan(np.float64(0.0).tobytes(), 10) == ((1, 0, 0, 80, 0),)
    assert memset_plan(np.int16(-2).tobytes(), 3) == ((2, 0, 0xFFFE, 3, 0),)
    assert memset_plan(np.int8(7).tobytes(), 5) == ((1, 0, 7, 5, 0),)
    assert memset_plan(np.array([1.0, 1.0, 1.0], np.float32).tobytes(), 4) == (
        (4, 0, 0x3F800000, 12, 0),)
    assert memset_plan(f32, 0) == ()


def test_memset_plan_writes_other_elements_word_by_word_with_a_pitch():
    # 1.5 as f64 is 0x3FF8000000000000: halves differ, two pitched memsets of 4-byte words
    assert memset_plan(np.float64(1.5).tobytes(), 6) == ((4, 0, 0, 6, 8),
                                                         (4, 4, 0x3FF80000, 6, 8))
    vec = np.array([1, 2, 3], np.uint8).tobytes()
    assert memset_plan(vec, 2) == ((1, 0, 1, 2, 3), (1, 1, 2, 2, 3), (1, 2, 3, 2, 3))


@pytest.mark.parametrize("make", [lambda: jr.ndarray(jr.f32, shape=(1000,)),
                                  lambda: jr.field(jr.f32, shape=(1000,))],
                         ids=["ndarray", "field"])
def test_a_fill_is_a_memset_and_the_next_launch_uploads_nothing(lib, make):
    x = make()

    @jr.kernel
    def bump(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] += 1.0

    @jr.kernel
    def bump_field():
        for i in x:
            x[i] += 1.0

    launch = (lambda: bump(x)) if isinstance(x, jr.Ndarray) else bump_field
    launch()
    lib.calls.clear()
    before = len(syncs(lib))
    x.fill(3.0)
    launch()
    assert names(lib) == ["memset", "launch"]          # no upload of the array
    assert lib.calls[0][1:] == (4, x._mirror.ptr, 0x40400000, 1000)   # D32 of 3.0f
    assert len(syncs(lib)) == before                  # nothing waited for the stream
    np.testing.assert_array_equal(x.to_numpy(), np.full(1000, 3.0, np.float32))
    assert "d2h" in names(lib) and len(syncs(lib)) > before   # the host read downloads


@pytest.mark.parametrize("dtype, value, expect", [
    (jr.f64, 1.5, []),     # halves differ: one upload and doubling copies, no memset
    (jr.f64, 0.0, [("memset", 1, 0, 0)]),
    (jr.i8, -3, [("memset", 1, 0, 0xFD)]),
    (jr.i16, 300, [("memset", 2, 0, 300)]),
    (jr.i32, 7.9, [("memset", 4, 0, 7)]),       # converted as a host fill converts it
])
def test_fills_of_each_width_give_the_values_back(lib, dtype, value, expect):
    x = jr.ndarray(dtype, shape=(37,))
    lib.calls.clear()
    x.fill(value)
    base = x._mirror.ptr
    calls = [(c[0], c[1], c[2] - base, *c[3:-1]) for c in lib.calls if "memset" in c[0]]
    assert calls == expect
    want = np.empty(37, dtype.np)
    want[...] = value
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_vector_element_fills(lib):
    v = jr.Vector.ndarray(3, jr.f32, shape=(5,))
    lib.calls.clear()
    v.fill(jr.Vector([1.0, 2.0, -3.0]))
    # components differ: 60 bytes, one upload of them all (the fill kernel for larger ones)
    assert [c[0::2] for c in lib.calls] == [("h2d", 60)]
    np.testing.assert_array_equal(v.to_numpy(), np.tile([1.0, 2.0, -3.0], (5, 1)))
    assert v[4][2] == -3.0                             # an element read downloads too
    w = jr.Vector.field(2, jr.i8, shape=(4, 3))
    w.fill(5)                                          # every component: one byte memset
    np.testing.assert_array_equal(w.to_numpy(), np.full((4, 3, 2), 5, np.int8))
    m = jr.Matrix.ndarray(2, 2, jr.f64, shape=(3,))
    m.fill(jr.Matrix([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(m.to_numpy(), np.tile([[1.0, 2.0], [3.0, 4.0]], (3, 1, 1)))


def test_host_reads_after_a_device_fill_see_it(lib):
    x = jr.ndarray(jr.f32, shape=(8,))
    x.fill(2.5)
    assert x[3] == 2.5
    x.fill(4.0)
    assert pickle.loads(pickle.dumps(x)).to_numpy().tolist() == [4.0] * 8
    x.fill(1.0)
    assert np.asarray(x).tolist() == [1.0] * 8
    x.fill(6.0)
    x[1] = 0.0                                   # a host write downloads the rest first
    assert x.to_numpy().tolist() == [6.0, 0.0] + [6.0] * 6
    y = jr.ndarray(jr.f32, shape=(8,))
    x.fill(9.0)
    y.copy_from(x)
    assert y.to_numpy().tolist() == [9.0] * 8


def test_a_host_written_array_is_filled_on_the_host(lib):
    x = jr.ndarray(jr.f32, shape=(4,))
    scale(x)
    with x.writable() as data:         # the host copy is newer now
        data[0] = 1.0
    lib.calls.clear()
    x.fill(2.0)
    assert "memset" not in names(lib)
    scale(x)
    assert names(lib) == ["h2d", "launch"]
    host = jr.ndarray.from_dlpack(np.zeros(4, np.float32))   # staged, never mirrored
    host.fill(3.0)
    assert host.to_numpy().tolist() == [3.0] * 4 and host._mirror is None


def test_copy_from_between_device_copies_stays_on_the_device(lib):
    a, b = jr.ndarray(jr.f32, shape=(16,)), jr.ndarray(jr.f32, shape=(16,))
    a.from_numpy(np.arange(16, dtype=np.float32))
    scale(a)
    scale(b)
    lib.calls.clear()
    before, gen = len(syncs(lib)), b.gen
    b.copy_from(a)
    assert names(lib) == [] and "fgMemcpyDtoDAsync" in [n for n, _ in lib.log]
    assert len(syncs(lib)) == before and b.gen == gen + 1
    scale(b)
    assert names(lib) == ["launch"]
    np.testing.assert_array_equal(b.to_numpy(), np.arange(16, dtype=np.float32))
    b.copy_from(b)                               # itself: nothing to copy
    np.testing.assert_array_equal(b.to_numpy(), np.arange(16, dtype=np.float32))
    c = jr.ndarray(jr.f64, shape=(16,))          # another dtype: converted on the host
    c.copy_from(a)
    np.testing.assert_array_equal(c.to_numpy(), np.arange(16))


def test_from_numpy_into_a_device_array_is_one_upload_without_waiting(lib):
    x = jr.ndarray(jr.f32, shape=(64,))
    scale(x)
    lib.calls.clear()
    before = len(syncs(lib))
    x.from_numpy(np.ones(64, np.float32))
    assert [c for c in names(lib) if c != "event_sync"] == ["h2d"]
    assert len(syncs(lib)) == before
    # through a pinned buffer: the driver never stages (nor waits) for pageable memory
    (upload,) = [args for name, args in lib.log if name == "fgMemcpyHtoDAsync"][-1:]
    assert upload[1] != x._data.ctypes.data and upload[0] == x._mirror.ptr
    scale(x)
    assert names(lib)[-1] == "launch" and names(lib).count("h2d") == 1   # moved nothing
    x.from_numpy(np.full(64, 2.0, np.float32))   # the other pinned buffer, then the first
    x.from_numpy(np.full(64, 3.0, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 3.0, np.float32))


def test_a_tape_clears_gradients_with_memsets(lib):
    @jr.kernel
    def sq(x: nd(dtype=jr.f32, ndim=1), loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(x.shape[0]):
            loss[None] += x[i] * x[i]

    x = jr.ndarray(jr.f32, shape=(32,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    g = jr.field(jr.f32, shape=(8,), needs_grad=True)
    sq(x, loss)                  # the first launch uploads x, loss and their gradients
    lib.calls.clear()
    for _ in range(2):
        with jr.ad.Tape(loss=loss):
            sq(x, loss)
        assert "h2d" not in names(lib) and "d2h" not in names(lib)
        assert names(lib).count("memset") >= 4   # g.grad, loss, x.grad, loss.grad
        lib.calls.clear()
    # the kernels never run here: what the clearing wrote is what stays
    assert x.grad.to_numpy().tolist() == [0.0] * 32 and loss.grad[None] == 1.0
    assert loss[None] == 0.0 and g.grad.to_numpy().tolist() == [0.0] * 8


def test_hip_takes_its_32_bit_memset_value_signed():
    lib = fakegpu_lib.FakeGpuLib()

    class SignedDriver(fakegpu_backend.FakeGpuDriver):
        api = dataclasses.replace(fakegpu_backend.FAKEGPU_API, memset32_signed=True)

    driver = SignedDriver(lib, 0)
    dst = driver.alloc(16)
    driver.fill(dst, np.float32(-1.0).tobytes(), 4)
    (args,) = [a for n, a in lib.log if n == "fgMemsetD32Async"]
    assert args[1] == 0xBF800000 - (1 << 32)
    assert np.frombuffer(bytes((fakegpu_lib.ctypes.c_uint8 * 16).from_address(dst)),
                         np.float32).tolist() == [-1.0] * 4


def test_the_ndarray_step_moves_no_data_and_launches_as_the_field_step(lib):
    # issue 32: the ndarray form of the adstack step uploaded x.grad, loss and loss.grad at
    # every step (host fills); now its launches are the field form's, after three memsets
    n = 2048
    xf = jr.field(jr.f32, shape=(n,), needs_grad=True)
    lf = jr.field(jr.f32, shape=(), needs_grad=True)
    c = jr.ndarray(jr.i32, shape=(n,))
    c.from_numpy(np.arange(n, dtype=np.int32) % 8 + 1)

    @jr.kernel
    def forward(c: nd(dtype=jr.i32, ndim=1)):
        for i in xf:
            v = xf[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            lf[None] += v

    @jr.kernel
    def seed():
        for i in xf:
            xf.grad[i] = 0.0
        lf.grad[None] = 1.0
        lf[None] = 0.0

    @jr.kernel
    def fwd(x: nd(dtype=jr.f32, ndim=1), c: nd(dtype=jr.i32, ndim=1),
            loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    x = jr.ndarray(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    field_calls, array_calls = [], []
    for _ in range(2):
        lib.calls.clear()
        seed()
        forward(c)
        forward.grad(c)
        field_calls = [call[2:] for call in lib.calls if call[0] == "launch"]
        lib.calls.clear()
        before = len(syncs(lib))
        loss.fill(0)
        x.grad.fill(0)
        loss.grad.fill(1)
        fwd(x, c, loss)
        fwd.grad(x, c, loss)
        array_calls = [call[2:] for call in lib.calls if call[0] == "launch"]
    assert names(lib) == ["memset"] * 3 + ["launch"] * len(array_calls)
    assert len(syncs(lib)) == before
    # (grid, block) of forward and grad: the seed kernel's launches aside, the same
    assert array_calls == field_calls[-len(array_calls):]


def test_a_fill_of_shared_device_memory_is_done_when_it_returns(lib):
    # a zero-copy foreign view (`to_torch(copy=False)`) reads the memory on its own stream
    x = jr.ndarray(jr.f32, shape=(8,))
    scale(x)
    x._mirror.shared = True            # what to_torch(copy=False) sets on a GPU program
    before = len(syncs(lib))
    lib.calls.clear()
    x.fill(2.0)
    assert names(lib)[0] == "memset" and len(syncs(lib)) > before


def test_exports_and_host_copies_after_a_device_fill_see_it(lib):
    x = jr.ndarray(jr.f32, shape=(6,))
    x.fill(7.0)
    ptr = x.__cuda_array_interface__["data"][0]       # the device memory, not re-uploaded
    exported = np.ctypeslib.as_array((fakegpu_lib.ctypes.c_float * 6).from_address(ptr))
    assert exported.tolist() == [7.0] * 6
    x.fill(8.0)
    capsule_ptr = x._mirror.ptr
    x.__dlpack__()
    assert np.ctypeslib.as_array(
        (fakegpu_lib.ctypes.c_float * 6).from_address(capsule_ptr)).tolist() == [8.0] * 6
    wide = jr.ndarray(jr.f64, shape=(6,))
    wide.copy_from(x)                                # another dtype: the host copy, downloaded
    assert wide.to_numpy().tolist() == [8.0] * 6


@pytest.mark.parametrize("shared", [False, True], ids=["export", "to_torch_view"])
def test_touch_after_a_foreign_device_write_keeps_it(lib, shared):
    """A consumer writes the exported device memory (an NCCL all-reduce of `x.grad` through
    `torch.from_dlpack`), then `x.touch()` as docs/gpu.md says: the device copy is the data.
    touch() used to mark the host copy newer, so the next launch uploaded the stale host copy
    over the consumer's write."""
    x = jr.ndarray(jr.f32, shape=(4,))
    x.fill(1.0)                                          # on the device; the host copy is stale
    ptr = x.__cuda_array_interface__["data"][0]
    x._mirror.shared = shared                            # what to_torch(copy=False) sets
    (fakegpu_lib.ctypes.c_float * 4).from_address(ptr)[:] = [7.0, 7.0, 7.0, 7.0]
    gen = x.gen
    x.touch()
    assert x.gen == gen + 1
    lib.calls.clear()
    scale(x)                                             # the kernel never runs on the fake
    assert [c for c in lib.calls if c[0] == "h2d" and c[1] == ptr] == []
    assert x.to_numpy().tolist() == [7.0] * 4


# ---- one element at Python scope: its bytes alone move (docs/gpu.md, "Where data lives") ---

def moves(lib):
    """The data copies since the last clear, as (direction, device address, byte count), but
    for the status block's read at each synchronisation (faults)."""
    status = program_mod.current().device.status
    return [c[:3] for c in lib.calls if c[0] in ("h2d", "d2h") and c[1] != status]


def copies(lib):
    """`moves` as (direction, byte count)."""
    return [(c[0], c[2]) for c in moves(lib)]


@pytest.mark.parametrize("make", [lambda: jr.ndarray(jr.f32, shape=()),
                                  lambda: jr.field(jr.f32, shape=())],
                         ids=["ndarray", "field"])
def test_a_0d_element_read_copies_its_bytes_and_a_write_does_not_wait(lib, make):
    loss = make()
    loss.fill(3.0)                      # newer on the device
    lib.calls.clear()
    before = len(syncs(lib))
    assert loss[None] == 3.0
    assert copies(lib) == [("d2h", 4)] and len(syncs(lib)) == before + 1
    lib.calls.clear()
    before, gen = len(syncs(lib)), loss.gen
    loss[None] = 5.0
    assert copies(lib) == [("h2d", 4)] and len(syncs(lib)) == before and loss.gen == gen + 1
    assert not loss._mirror.device_newer and not loss._mirror.host_newer   # both current
    lib.calls.clear()
    assert loss[None] == 5.0 and loss.to_numpy().tolist() == 5.0
    assert copies(lib) == []            # read whole once: the host copy is current again


def test_an_nd_element_moves_alone_and_the_host_copy_stays_consistent(lib):
    x = jr.ndarray(jr.f64, shape=(400, 400))        # over WHOLE_READ_BYTES
    x.fill(2.0)
    ptr = x._mirror.ptr
    lib.calls.clear()
    assert x[3, 4] == 2.0 and x[-1, -1] == 2.0
    assert moves(lib) == [("d2h", ptr + (3 * 400 + 4) * 8, 8),
                          ("d2h", ptr + (400 * 400 - 1) * 8, 8)]
    lib.calls.clear()
    x[3, 5] = 7.0
    x[-1, 0] = -1.0
    assert moves(lib) == [("h2d", ptr + (3 * 400 + 5) * 8, 8),
                          ("h2d", ptr + (399 * 400) * 8, 8)]
    want = np.full((400, 400), 2.0)
    want[3, 5], want[-1, 0] = 7.0, -1.0
    np.testing.assert_array_equal(x.to_numpy(), want)      # one download of the whole
    lib.calls.clear()
    x[0, 0] = 4.0            # both copies current: the host copy and the element's bytes
    scale2 = x.to_numpy()
    assert copies(lib) == [("h2d", 8)] and scale2[0, 0] == 4.0


def test_a_second_element_read_of_a_small_array_downloads_it_whole(lib):
    # issue 32: DiffTaichi's billiards reads 22 ball coordinates between launches, each a
    # wait; now the second read of the same data brings the whole (small) array down once
    x = jr.Vector.field(2, jr.f32, shape=(2048, 11))     # billiards' x: 176 KiB
    x.fill(0.5)
    ptr = x._mirror.ptr
    lib.calls.clear()
    before = len(syncs(lib))
    coords = [x[100, i][d] for i in range(11) for d in range(2)]
    assert coords == [0.5] * 22
    assert moves(lib) == [("d2h", ptr + 100 * 11 * 8, 4), ("d2h", ptr, 2048 * 11 * 8)]
    assert len(syncs(lib)) == before + 2
    lib.calls.clear()
    x[5, 0] = [1.0, 2.0]                   # a write: a new generation; the host is current
    assert x[5, 0][1] == 2.0 and x[6, 0][0] == 0.5 and copies(lib) == [("h2d", 8)]


def test_an_offset_field_element_is_found_at_its_storage_place(lib):
    f = jr.field(jr.i32, shape=(10,), offset=(-5,))
    f.fill(1)
    lib.calls.clear()
    f[-5] = 9
    assert moves(lib) == [("h2d", f._mirror.ptr, 4)]
    assert f[-5] == 9 and f[4] == 1 and f.to_numpy().tolist() == [9] + [1] * 9


def test_vector_and_matrix_elements_move_their_bytes(lib):
    v = jr.Vector.ndarray(3, jr.f32, shape=(100_000,))     # over WHOLE_READ_BYTES
    v.fill(jr.Vector([1.0, 2.0, 3.0]))
    lib.calls.clear()
    assert v[2].to_numpy().tolist() == [1.0, 2.0, 3.0] and v[2][1] == 2.0 and v[4].z == 3.0
    assert copies(lib) == [("d2h", 12), ("d2h", 4), ("d2h", 4)]
    lib.calls.clear()
    v[2] = [4.0, 5.0, 6.0]
    v[3][0] = -1.0
    v[5].y = 8.0
    assert copies(lib) == [("h2d", 12), ("h2d", 4), ("h2d", 4)]
    lib.calls.clear()
    v[6][0:2] = [9.0, 9.0]             # some components: the element is read and written
    assert copies(lib) == [("d2h", 12), ("h2d", 12)]
    rows = v.to_numpy()
    assert rows[2].tolist() == [4.0, 5.0, 6.0] and rows[3].tolist() == [-1.0, 2.0, 3.0]
    assert rows[5].tolist() == [1.0, 8.0, 3.0] and rows[6].tolist() == [9.0, 9.0, 3.0]
    m = jr.Matrix.field(2, 2, jr.f64, shape=(40_000,))
    m.fill(1.5)
    lib.calls.clear()
    m[1] = [[1.0, 2.0], [3.0, 4.0]]
    assert m[1][1, 0] == 3.0 and m[1][0].to_numpy().tolist() == [1.0, 2.0]
    assert copies(lib) == [("h2d", 32), ("d2h", 8), ("d2h", 16)]


def test_the_parameter_update_moves_three_elements_and_the_next_launch_nothing(lib):
    # `x[None] -= lr * x.grad[None]`: two element reads, one element write; x stays current
    # on the device, so the next launch uploads nothing (it uploaded all of x before)
    x = jr.field(jr.f32, shape=(), needs_grad=True)
    y = jr.field(jr.f32, shape=(1000,))

    @jr.kernel
    def use():
        for i in y:
            y[i] = x[None] * 2.0

    use()
    x.fill(1.0)                                  # both newer on the device
    x.grad.fill(0.5)
    lib.calls.clear()
    before = len(syncs(lib))
    x[None] -= 0.1 * x.grad[None]
    use()
    assert moves(lib) == [("d2h", x._mirror.ptr, 4), ("d2h", x.grad._mirror.ptr, 4),
                          ("h2d", x._mirror.ptr, 4)]
    assert names(lib)[-1] == "launch" and len(syncs(lib)) == before + 2
    lib.calls.clear()
    x[None] -= 0.1 * x.grad[None]                # both read whole already: current on the host
    use()
    assert moves(lib) == [("h2d", x._mirror.ptr, 4)] and names(lib)[-1] == "launch"
    want = np.float32(np.float32(1.0) - np.float32(0.05)) - np.float32(0.05)
    assert x[None] == want and x.to_numpy() == want
    big = jr.ndarray(jr.f32, shape=(1 << 16,))
    scale(big)
    lib.calls.clear()
    big[7] = 3.0
    scale(big)
    assert copies(lib) == [("h2d", 4)]          # not the 256 KiB array


def test_an_element_write_after_pending_host_writes_waits_for_the_launch(lib):
    x = jr.ndarray(jr.f32, shape=(100,))
    scale(x)
    with x.writable() as data:          # the host copy is newer: the launch uploads all of it
        data[:] = 1.0
    lib.calls.clear()
    x[3] = 2.0
    assert copies(lib) == []
    scale(x)
    assert copies(lib) == [("h2d", 400)]


def test_many_element_writes_reuse_the_pinned_ring(lib):
    x = jr.ndarray(jr.i32, shape=(3000,))
    x.fill(0)
    lib.calls.clear()
    for i in range(3000):
        x[i] = i
    for i in range(3000):
        x[i] += 1
    assert x.to_numpy().tolist() == list(range(1, 3001))
    ring = {args[1] for name, args in lib.log[-12000:] if name == "fgMemcpyHtoDAsync"}
    assert len(ring) <= 4096            # 64 KiB of 16-byte slots, used again in turn
    # a half of the ring is written again only after the copies that read it have run
    assert 1 <= names(lib).count("event_sync") <= 6
