"""Several devices in one process (`jr.device(k)`, runtime/devices.py): a program per device,
arrays that belong to one device, the error for an array of another device, `to_device`, the
exports of each array from its own device. Run over the fake vendor (`fakegpu_lib.py`) with
two fake GPUs: kernels never execute there, what is checked is which device's memory, handles
and driver calls a launch uses (docs/gpu.md, "Several devices, streams and interop")."""
import ctypes

import numpy as np
import pytest

import jitrt as jr
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


@pytest.fixture
def two(fakegpu_program):
    """(fake binding, program of device 0) with two fake GPUs."""
    lib, program = fakegpu_program
    lib.devices = 2
    return lib, program


@jr.kernel
def scale(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0


def test_each_device_has_its_own_program_and_handles(two):
    lib, p0 = two
    a = jr.ndarray(jr.f32, shape=(8,))
    scale(a)
    with jr.device(1) as p1:
        assert program_mod.current() is p1 and p1 is not p0
        assert p1.device.device_id == 1 and p1.arch == "fakegpu"
        assert p1.config.offline_cache is False          # the current program's options
        b = jr.ndarray(jr.f32, shape=(8,))
        scale(b)
        assert b._mirror.device is p1.device
    assert program_mod.current() is p0 and a._mirror.device is p0.device
    handles = list(scale.handles.values())
    assert sorted(h.program.config.device_id for h in handles) == [0, 1]
    compiles = p0.stats()["compiles"] + p1.stats()["compiles"]
    for _ in range(3):                    # switching back and forth compiles nothing again
        scale(a)
        with jr.device(1) as again:
            assert again is p1
            scale(b)
    assert p0.stats()["compiles"] + p1.stats()["compiles"] == compiles


def test_a_launch_given_an_array_of_another_device_names_both(two):
    a = jr.ndarray(jr.f32, shape=(8,))
    scale(a)                              # a belongs to fakegpu:0 now
    with jr.device(1):
        with pytest.raises(jr.KernelArgError, match=r"kernel test_devices.scale: argument 'a' "
                           r"lives on fakegpu:0, but this launch runs on fakegpu:1; "
                           r".*jr\.device\(0\).*a\.to_device\(1\)"):
            scale(a)
        b = jr.ndarray(jr.f32, shape=(8,))
        scale(b)                          # the fast path of device 1 is installed
        with pytest.raises(jr.KernelArgError, match="argument 'a' lives on fakegpu:0"):
            scale(a)                      # a new array through the fast path: the same error


def test_a_field_belongs_to_the_device_that_first_used_it(two):
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    bump()
    with jr.device(1):
        with pytest.raises(jr.KernelArgError, match=r"kernel .*bump.*: field '.*' lives on "
                           r"fakegpu:0, but this launch runs on fakegpu:1"):
            bump()
    bump()                                # device 0 still runs it


def test_to_device_copies_an_ndarray_and_its_grad(two):
    lib, _ = two
    a = jr.ndarray(jr.f32, shape=(4,), needs_grad=True)
    a.from_numpy(np.arange(4, dtype=np.float32))
    a.grad.fill(3.0)
    scale(a)
    b = a.to_device(1)
    assert b is not a and b._mirror.device.device_id == 1
    assert b.grad._mirror.device is b._mirror.device
    assert b._mirror.ptr != a._mirror.ptr
    assert b._mirror.host_newer is False           # uploaded at once
    np.testing.assert_array_equal(b.to_numpy(), np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(b.grad.to_numpy(), np.full(4, 3.0, np.float32))
    with jr.device(1):
        scale(b)                                   # b is device 1's


def test_exports_come_from_the_arrays_own_device(two):
    a = jr.ndarray(jr.f32, shape=(4,))
    scale(a)
    with jr.device(1):
        b = jr.ndarray(jr.f32, shape=(4,))
        scale(b)
    # device 0 is current again: b still exports device 1's memory
    assert b.__dlpack_device__() == (12, 1) and a.__dlpack_device__() == (12, 0)
    assert b.__cuda_array_interface__["data"][0] == b._mirror.ptr
    assert a.__cuda_array_interface__["data"][0] == a._mirror.ptr
    b.fill(2.0)                                   # a memset on device 1's memory
    np.testing.assert_array_equal(b.to_numpy(), np.full(4, 2.0, np.float32))


class Foreign:
    """Another library's device array: `__cuda_array_interface__` and `__dlpack_device__`."""

    def __init__(self, device_id, n=4):
        self.memory = np.zeros(n, np.float32)
        self.device_id = device_id

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.memory.shape, "typestr": "<f4", "version": 3, "strides": None,
                "data": (self.memory.ctypes.data, False)}

    def __dlpack_device__(self):
        return 12, self.device_id


def test_a_foreign_array_of_another_device_is_refused_and_of_this_one_copied_never(two):
    with jr.device(1):
        t1 = Foreign(1)
        scale(t1)                                  # device 1's memory, used in place
        wrapped = program_mod.current().device.wrap_foreign(t1)
        assert wrapped._mirror.ptr == t1.memory.ctypes.data      # no copy: the same pointer
    with pytest.raises(jr.KernelArgError, match=r"argument 'a' lives on fakegpu:1, but this "
                       r"launch runs on fakegpu:0"):
        scale(t1)
    scale(Foreign(0))


def test_device_ids_are_checked(two):
    assert jr.device_count() == 2
    with pytest.raises(jr.BackendUnavailableError, match=r"device_id=2 but this machine has "
                       r"2 fake GPU\(s\)"):
        with jr.device(2):
            pass
    with pytest.raises(jr.ConfigError, match="a device id is an int >= 0"):
        with jr.device(-1):
            pass


def test_jr_init_closes_every_device(two):
    lib, _ = two
    a = jr.ndarray(jr.f32, shape=(4,))
    with jr.device(1):
        scale(a)
    p = jr.init(arch="fakegpu", offline_cache=False, enable_fallback=False, device_id=1)
    assert list(program_mod.OPEN.values()) == [p]
    assert a._mirror is None                      # brought home when device 1 closed
    scale(a)                                      # and usable on the new program
    assert not [h for h in scale.handles.values() if h.program is not p]


def test_a_tape_records_one_device(two):
    a = jr.ndarray(jr.f32, shape=(4,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def total(a: nd(dtype=jr.f32, ndim=1), loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(a.shape[0]):
            loss[None] += a[i]

    with jr.ad.Tape(loss):
        total(a, loss)
        with pytest.raises(jr.JitrtError, match=r"jr.device\(1\) inside a jr.ad.Tape"):
            with jr.device(1):
                pass


def test_the_cpu_is_device_0_only():
    assert jr.device_count() == 1
    with jr.device(0) as p:
        assert p is program_mod.current() and p.arch == "cpu"
    with pytest.raises(jr.ConfigError, match="the CPU is device 0"):
        with jr.device(1):
            pass
    a = jr.ndarray(jr.f32, shape=(3,))
    a.fill(1.0)
    b = a.to_device(0)
    assert b is not a and b.to_numpy().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(jr.ConfigError, match="the CPU is device 0"):
        a.to_device(1)


# ---- streams and events (runtime/streams.py) ---------------------------------------------

def launch_streams(lib):
    """The stream of each launch the fake binding saw (fgLaunchKernel's ninth argument)."""
    return [args[8] for name, args in lib.log if name == "fgLaunchKernel"]


def test_launches_copies_and_fills_go_on_the_chosen_stream(two):
    lib, program = two
    a = jr.ndarray(jr.f32, shape=(8,))
    scale(a)
    s = jr.Stream()
    assert s.handle != program.device.driver.stream and s.device_id == 0
    lib.log.clear()
    with jr.stream(s):
        scale(a)
        a.fill(1.0)
        a.from_numpy(np.ones(8, np.float32))
    scale(a)
    assert launch_streams(lib) == [s.handle, program.device.driver.stream]
    memsets = [args[-1] for name, args in lib.log if name == "fgMemsetD32Async"]
    assert memsets == [s.handle]
    external = jr.Stream.from_handle(0x1234)
    with jr.stream(external):
        lib.log.clear()
        scale(a)
        assert launch_streams(lib) == [0x1234]
    assert external.cuda_stream == 0x1234


def test_events_order_streams_on_the_device(two):
    lib, program = two
    a = jr.ndarray(jr.f32, shape=(8,))
    s1, s2 = jr.Stream(), jr.Stream()
    with jr.stream(s1):
        scale(a)
        done = jr.Event().record()          # on s1, the stream the device queues on now
    assert lib.event_streams[id(done.handle)] == s1.handle
    lib.calls.clear()
    s2.wait_event(done)
    s2.wait_stream(s1)
    assert [c for c in lib.calls if c[0] == "wait"] == [("wait", s2.handle, "recorded")] * 2
    lib.log.clear()
    done.synchronize()
    s2.synchronize()
    assert [name for name, _ in lib.log] == ["fgEventSynchronize", "fgStreamSynchronize"]
    assert lib.log[-1][1] == (s2.handle,)
    torch_event = jr.Event.from_handle(0xBEEF)
    lib.log.clear()
    torch_event.wait()                      # jitrt's stream waits for another library's
    assert lib.log == [("fgStreamWaitEvent", (program.device.driver.stream, 0xBEEF, 0))]


def test_a_stream_of_device_1_launches_there(two):
    lib, p0 = two
    s = jr.Stream(device=1)
    with jr.stream(s):
        assert program_mod.current().config.device_id == 1
        b = jr.ndarray(jr.f32, shape=(4,))
        scale(b)
    assert program_mod.current() is p0 and b._mirror.device.device_id == 1
    with pytest.raises(jr.JitrtError, match="an event of device 0 cannot be recorded on or "
                       "waited for by a stream of device 1"):
        jr.Event().record(s)


def test_graphs_capture_and_replay_on_the_chosen_stream(two):
    lib, program = two
    a = jr.ndarray(jr.f32, shape=(8,))
    s = jr.Stream()
    with jr.stream(s):
        g = jr.graph(lambda: scale(a))
        g()                                 # records (and captures on s)
        lib.log.clear()
        g()                                 # replays
    assert [args[1] for name, args in lib.log if name == "fgGraphLaunch"] == [s.handle]


def test_dlpack_export_with_a_consumer_stream_does_not_wait_on_the_host(two):
    lib, program = two
    a = jr.ndarray(jr.f32, shape=(4,))
    scale(a)
    lib.log.clear()
    capsule = a.__dlpack__(stream=1)        # CUDA's legacy default stream, as torch passes it
    assert capsule is not None
    names = [name for name, _ in lib.log]
    assert "fgStreamSynchronize" not in names
    assert ("fgStreamWaitEvent" in names and
            [args[0] for name, args in lib.log if name == "fgStreamWaitEvent"] == [1])
    lib.log.clear()
    a.__dlpack__()                          # no stream: the host waits, as before
    assert "fgStreamSynchronize" in [name for name, _ in lib.log]
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] is None and cai["data"][0] == a._mirror.ptr


def test_streams_and_events_on_the_cpu_run_in_order():
    a = jr.ndarray(jr.f32, shape=(4,))
    a.fill(1.0)
    s = jr.Stream()
    assert s.handle is None and s.cuda_stream == 0
    with jr.stream(s):
        scale(a)
        e = jr.Event().record()
    e.wait()
    e.synchronize()
    s.synchronize()
    assert a.to_numpy().tolist() == [2.0] * 4


class DLPackTensor:
    """Another library's device tensor that speaks only DLPack (as JAX's does): a capsule
    over fake device memory, made with jitrt's own exporter; `released` counts the times the
    consumer handed it back, `streams` the consumer streams it was asked for."""

    def __init__(self, device_id, n=4):
        self.memory = np.arange(n, dtype=np.float32)
        self.device_id, self.released, self.streams = device_id, 0, []

    def __dlpack_device__(self):
        return 12, self.device_id

    def __dlpack__(self, stream=None, **kwargs):
        from jitrt import dlpack, dtypes
        self.streams.append(stream)

        def released():
            self.released += 1
        return dlpack.export(self.memory.ctypes.data, self.memory.shape, dtypes.f32, 12,
                             self.device_id, self, released)


def test_from_dlpack_of_a_device_tensor_copies_nothing_and_hands_it_back(two):
    import gc
    t = DLPackTensor(0)
    a = jr.ndarray.from_dlpack(t, name="imported")
    assert a._mirror.ptr == t.memory.ctypes.data and a.name == "imported"
    assert t.streams == [None]                   # the fake stream has no address
    assert a.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert t.released == 0
    del a
    gc.collect()
    assert t.released == 1
    lib = two[0]
    lib.calls.clear()
    scale(jr.ndarray.from_dlpack(t))             # used in place: nothing uploaded
    assert [c[0] for c in lib.calls] == ["launch"]
    with pytest.raises(ValueError, match=r"the tensor is on DLPack device \(12, 1\); this "
                       r"program's device is fakegpu:0 .*jr\.device\(1\)"):
        jr.ndarray.from_dlpack(DLPackTensor(1))
    with jr.device(1):
        b = jr.ndarray.from_dlpack(DLPackTensor(1))
        assert b._mirror.device.device_id == 1


def test_from_dlpack_of_a_device_tensor_on_the_cpu_says_why():
    with pytest.raises(ValueError, match="the tensor is in device memory"):
        jr.ndarray.from_dlpack(DLPackTensor(0))


def test_devices_of_one_arch_share_the_offline_cache(two, tmp_path):
    jr.init(arch="fakegpu", offline_cache=True, offline_cache_dir=str(tmp_path),
            enable_fallback=False)

    @jr.kernel
    def twice(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] * 2.0

    twice(jr.ndarray(jr.f32, shape=(4,)))
    jr.sync()
    with jr.device(1) as p1:
        assert p1.cache_store is not None and p1.cache_store.dir == \
            program_mod.OPEN[("fakegpu", 0)].cache_store.dir
        twice(jr.ndarray(jr.f32, shape=(4,)))
        stats = p1.stats()
    assert stats["offline_cache_hits"] == 1 and stats["compiles"] == 0


def test_each_device_is_made_current_again_after_the_other(two):
    lib, _ = two
    a = jr.ndarray(jr.f32, shape=(4,))
    with jr.device(1):
        b = jr.ndarray(jr.f32, shape=(4,))
        scale(b)
    lib.log.clear()
    for _ in range(2):
        scale(a)
        with jr.device(1):
            scale(b)
    current = [args[0] for name, args in lib.log if name == "fgSetDevice"]
    assert current == [0, 1, 0, 1]
    launches = [name for name, _ in lib.log if name in ("fgSetDevice", "fgLaunchKernel")]
    assert launches == ["fgSetDevice", "fgLaunchKernel"] * 4


def test_touch_after_a_consumer_wrote_device_memory_uploads_nothing_over_it(two):
    lib, _ = two
    a = jr.ndarray(jr.f32, shape=(4,))
    scale(a)
    a.__dlpack__(stream=1)                       # a consumer may write the device memory now
    ptr = a._mirror.ptr
    (ctypes.c_float * 4).from_address(ptr)[2] = 7.0     # what the consumer wrote
    gen = a.gen
    a.touch()
    assert a.gen == gen + 1
    lib.calls.clear()
    scale(a)
    assert [c[0] for c in lib.calls] == ["launch"]          # no upload of the stale host copy
    assert a.to_numpy()[2] == 7.0


def test_a_stream_block_is_ordered_after_and_before_the_work_around_it(two):
    lib, program = two
    own = program.device.driver.stream
    a = jr.ndarray(jr.f32, shape=(8,))
    s = jr.Stream()
    lib.log.clear()
    a.fill(1.0)                                  # on jitrt's own stream
    with jr.stream(s):
        scale(a)                                 # on s, after the fill
    scale(a)                                     # on jitrt's own stream, after the block
    stream_of = {"fgEventRecord": 1, "fgStreamWaitEvent": 0, "fgLaunchKernel": 8,
                 "fgMemsetD32Async": 3}
    order = [(name, args[stream_of[name]]) for name, args in lib.log if name in stream_of]
    assert order == [("fgMemsetD32Async", own),
                     ("fgEventRecord", own), ("fgStreamWaitEvent", s.handle),   # s after it
                     ("fgLaunchKernel", s.handle),
                     ("fgEventRecord", s.handle), ("fgStreamWaitEvent", own),   # own after s
                     ("fgLaunchKernel", own)]
    assert launch_streams(lib) == [s.handle, own]
