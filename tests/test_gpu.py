"""The GPU launch path (`backends/gpu.py`) on a real GPU: data residency, numpy arguments,
return values, faults reported at the next synchronisation, arguments by value, math and
atomics against numpy, and a replaced program bringing device data home.

The tests marked `gpu_only` run once per GPU arch in `JITRT_TEST_ARCHS` and skip on machines
without one; the graph tests run on every arch (the CPU replays bound launches). The rest of
the suite also runs on each GPU arch.
"""
import numpy as np
import pytest

import jitrt as jr
from test_adstack_sizing import make_problem     # the data-dependent recurrence and its loss

nd = jr.types.ndarray
gpu_only = pytest.mark.gpu_only


@gpu_only
def test_field_round_trip_through_device_memory():
    x = jr.field(jr.f32, shape=(1000,))
    x.from_numpy(np.arange(1000, dtype=np.float32))

    @jr.kernel
    def double():
        for i in x:
            x[i] = x[i] * 2

    double()
    double()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1000, dtype=np.float32) * 4)
    x[3] = -1.0                     # a host write after a device write: downloaded first
    assert x[3] == -1.0 and x[4] == 16.0
    double()
    assert x[3] == -2.0 and x[999] == 999 * 8
    x.fill(1.5)
    double()
    np.testing.assert_array_equal(x.to_numpy(), np.full(1000, 3.0, np.float32))


@gpu_only
def test_numpy_arguments_are_copied_in_and_written_ones_out():
    @jr.kernel
    def saxpy(a: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x = np.arange(5000, dtype=np.float32)
    y = np.ones(5000, np.float32)
    saxpy(2.0, x, y)
    np.testing.assert_allclose(y, 2 * x + 1)
    x[:] = 1
    saxpy(3.0, x, y)               # the same arrays, changed in place: copied in again
    np.testing.assert_allclose(y, 2 * np.arange(5000) + 4)
    np.testing.assert_array_equal(x, np.ones(5000, np.float32))


@gpu_only
def test_jitrt_ndarrays_stay_on_the_device_and_arguments_go_by_value():
    @jr.kernel
    def inc(a: nd(dtype=jr.i32, ndim=1), k: jr.i32):
        for i in range(a.shape[0]):
            a[i] += k

    a = jr.ndarray(jr.i32, shape=(300,))
    inc(a, 1)
    jr.debug.reset_stats()
    for _ in range(10):
        inc(a, 1)
    inc(a, 5)                       # a changed scalar: still no upload (kernel parameters)
    stats = jr.debug.stats()
    assert stats["h2d_skipped"] == 11 and stats["h2d_uploads"] == 0
    assert stats["allocations"] == 0
    np.testing.assert_array_equal(a.to_numpy(), np.full(300, 16, np.int32))


@gpu_only
def test_two_handles_never_share_a_context_buffer():
    @jr.kernel
    def put(a: nd(dtype=jr.f32, ndim=1), v: jr.f32):
        for i in range(a.shape[0]):
            a[i] = v

    a32 = jr.ndarray(jr.f32, shape=(4,))
    a2 = jr.ndarray(jr.f32, shape=(4,))
    put(a32, 1.0)
    b = put.bind(a2, 2.0)
    b()
    handles = list(put.handles.values())
    launches = {id(h.entry) for h in handles} | {id(b.entry)}
    assert len(launches) == 2
    assert handles[0].entry.params_addr != b.entry.params_addr
    assert handles[0].addr != b.addr
    put(a32, 3.0)
    b()
    assert a32.to_numpy().tolist() == [3.0] * 4 and a2.to_numpy().tolist() == [2.0] * 4


@gpu_only
def test_return_values_and_serial_locals_reach_later_tasks():
    x = jr.field(jr.i64, shape=(64,))

    @jr.kernel
    def steps(n: jr.i32) -> jr.i64:
        m = n * 2
        base = 100
        for i in range(m):
            x[i] = base + i
        total = base
        jr.loop_config(serialize=True)
        for i in range(m):
            total += x[i]
        return total + n

    assert steps(10) == sum(100 + i for i in range(20)) + 110
    assert x[19] == 119 and x[20] == 0


@gpu_only
def test_a_fault_is_reported_at_the_next_synchronisation():
    a = jr.ndarray(jr.f32, shape=(8,))

    @jr.kernel
    def oob(arr: nd(dtype=jr.f32, ndim=1), k: jr.i32):
        for i in range(arr.shape[0]):
            arr[i + k] = 1.0

    oob(a, 0)
    oob(a, 3)                        # asynchronous: nothing raised yet
    with pytest.raises(jr.KernelRuntimeError, match=r"oob.*index \d+ out of bounds"):
        jr.sync()
    jr.sync()                        # reported once; the program stays usable
    oob(a, 0)
    assert a.to_numpy().tolist() == [1.0] * 8


@gpu_only
@pytest.mark.parametrize("serial", [True, False])
def test_a_failing_access_ends_its_thread_and_is_named(serial):
    """On a GPU a thread whose access fails a check records it and stops there
    (`TargetTraits.fault_ends_thread`, as Taichi's checks on CUDA): nothing after it in that
    thread runs, the other threads run on, and the program stays usable."""
    a = jr.ndarray(jr.f32, shape=(4,))
    idx = jr.ndarray(jr.i32, shape=(3,))
    out = jr.ndarray(jr.f32, shape=(3,))

    @jr.kernel
    def chain(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
              out: nd(dtype=jr.f32, ndim=1)):
        jr.loop_config(serialize=serial)
        for k in range(3):
            j = idx[k]
            out[k] = a[j] + 1.0           # idx[1] = 9: a[9] fails, its thread stops
            a[j] = 5.0
            out[k] += jr.atomic_add(a[j // 2], 1.0)

    a.from_numpy(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    idx.from_numpy(np.array([0, 9, 3], np.int32))
    out.from_numpy(np.full(3, -1.0, np.float32))
    chain(a, idx, out)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 9 out of bounds on axis 0 of 'a' "
                                                    r"\(read\).*the thread that made it stopped"):
        jr.sync()
    if serial:                            # one thread: k = 0 ran whole, then it ended
        assert out.to_numpy().tolist() == [7.0, -1.0, -1.0]
        assert a.to_numpy().tolist() == [6.0, 2.0, 3.0, 4.0]
    else:                                 # a thread per k: k = 0 and k = 2 ran whole
        assert out.to_numpy().tolist() == [7.0, -1.0, 7.0]
        assert a.to_numpy().tolist() == [6.0, 3.0, 3.0, 5.0]
    idx.from_numpy(np.array([3, 3, 3], np.int32))
    chain(a, idx, out)                    # the program stays usable
    jr.sync()


@gpu_only
@pytest.mark.parametrize("serial", [True, False])
def test_inner_loops_fault_where_they_leave(serial):
    """An inner loop whose range leaves an array it reads runs on where it guards its own
    accesses, and stops its thread at the first access that leaves, named with its index;
    the other iterations and threads keep what they wrote."""
    a = jr.ndarray(jr.f32, shape=(8,))
    n = jr.ndarray(jr.i32, shape=(3,))
    out = jr.ndarray(jr.f32, shape=(3, 8))

    @jr.kernel
    def sums(a: nd(dtype=jr.f32, ndim=1), n: nd(dtype=jr.i32, ndim=1),
             out: nd(dtype=jr.f32, ndim=2)):
        jr.loop_config(serialize=serial)
        for k in range(3):
            lo = k - 1
            total = 0.0
            for i in range(lo, n[k]):
                if i >= 0:                    # the loop guards its own reads below 0
                    total += a[i]
                    out[k, i] = total
            out[k, 0] += 100.0

    a.from_numpy(np.arange(1.0, 9.0, dtype=np.float32))
    out.from_numpy(np.zeros((3, 8), np.float32))
    n.from_numpy(np.array([8, 4, 9], np.int32))         # k = 2 reads a[8]: out of bounds
    sums(a, n, out)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 8 out of bounds on axis 0 of 'a'"):
        jr.sync()
    got = out.to_numpy()
    first = np.cumsum(np.arange(1.0, 9.0))
    first[0] += 100.0
    np.testing.assert_array_equal(got[0], first)
    np.testing.assert_array_equal(got[1], [101, 3, 6, 10, 0, 0, 0, 0])
    np.testing.assert_array_equal(got[2][1:], np.cumsum(np.arange(2.0, 9.0)))
    assert got[2][0] == 0.0                             # the thread stopped before it
    n.from_numpy(np.array([8, 8, 8], np.int32))
    out.from_numpy(np.zeros((3, 8), np.float32))
    sums(a, n, out)
    jr.sync()
    assert out.to_numpy()[2].tolist() == [100.0] + list(np.cumsum(np.arange(2.0, 9.0)))


@gpu_only
@pytest.mark.parametrize("dt", [jr.f32, jr.f64])
def test_math_matches_numpy(dt):
    fns = ["sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "floor", "ceil"]

    @jr.kernel
    def math(x: nd(dtype=dt, ndim=1), out: nd(dtype=dt, ndim=2)):
        for i in range(x.shape[0]):
            v = x[i]
            out[0, i] = jr.sin(v)
            out[1, i] = jr.cos(v)
            out[2, i] = jr.tan(v)
            out[3, i] = jr.exp(v)
            out[4, i] = jr.log(v)
            out[5, i] = jr.sqrt(v)
            out[6, i] = jr.tanh(v)
            out[7, i] = jr.floor(v)
            out[8, i] = jr.ceil(v)

    x = np.linspace(0.1, 3.0, 257).astype(dt.np)
    out = np.zeros((9, 257), dt.np)
    math(x, out)
    tol = 1e-5 if dt is jr.f32 else 1e-12
    for k, fn in enumerate(fns):
        np.testing.assert_allclose(out[k], getattr(np, fn)(x), rtol=tol, err_msg=fn)


@gpu_only
def test_float_atomics_and_reductions():
    s = jr.field(jr.f32, shape=())
    lo = jr.field(jr.f32, shape=())
    hi = jr.field(jr.f32, shape=())

    @jr.kernel
    def reduce(x: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            s[None] += x[i]
            jr.atomic_min(lo[None], x[i])
            jr.atomic_max(hi[None], x[i])

    x = np.random.default_rng(1).uniform(-5, 5, 100_000).astype(np.float32)
    lo[None], hi[None] = 1e9, -1e9
    reduce(x)
    assert s[None] == pytest.approx(float(x.sum(dtype=np.float64)), abs=0.5)
    assert lo[None] == x.min() and hi[None] == x.max()


@gpu_only
def test_replacing_the_program_brings_device_data_home():
    x = jr.field(jr.i32, shape=(16,))

    @jr.kernel
    def fill():
        for i in x:
            x[i] = i * 3

    fill()
    jr.init(arch=jr.cpu, offline_cache=False)
    assert x._mirror is None
    assert x.to_numpy().tolist() == [i * 3 for i in range(16)]
    fill()                           # now on the CPU, same field
    assert x[5] == 15


def _grad_on(arch, xv, cnt, **options):
    jr.init(arch=arch, offline_cache=False, **options)
    x, loss, recur = make_problem(len(xv), jr.f64)
    x.from_numpy(xv)
    recur(cnt)
    loss.grad[None] = 1.0
    recur.grad(cnt)
    return loss[None], x.grad.to_numpy(), recur


@gpu_only
def test_gradients_of_data_dependent_loops_equal_the_cpus(arch):
    rng = np.random.default_rng(7)
    xv = rng.uniform(-1, 1, 5000)
    cnt = rng.integers(0, 9, 5000).astype(np.int32)
    gpu_loss, gpu_grad, recur = _grad_on(arch, xv, cnt)
    stats = jr.debug.stats()
    assert stats["max_reducer_dispatches"] >= 1 and stats["launch_cache_misses"] == 1
    recur.grad(cnt)                              # unchanged data: a launch-cache hit
    assert jr.debug.stats()["launch_cache_hits"] == 1
    cpu_loss, cpu_grad, _ = _grad_on("cpu", xv, cnt)
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-12)
    np.testing.assert_allclose(gpu_grad, cpu_grad, rtol=1e-12)


@gpu_only
def test_adstack_overflow_is_raised_at_sync_naming_kernel_and_task(arch):
    rng = np.random.default_rng(3)
    xv = rng.uniform(-1, 1, 4096)
    cnt = rng.integers(3, 9, 4096).astype(np.int32)
    jr.init(arch=arch, offline_cache=False, ad_stack_size=2)
    x, loss, recur = make_problem(4096, jr.f64)
    x.from_numpy(xv)
    loss.grad[None] = 1.0
    recur.grad(cnt)                              # asynchronous: reported at the next sync
    with pytest.raises(jr.AdStackOverflowError) as info:
        jr.sync()
    assert "recur.grad" in info.value.kernel_name and info.value.task_id == 0
    assert "capacity 2" in str(info.value)
    jr.sync()                                    # reported once
    _, grad, _ = _grad_on(arch, xv, cnt)         # exact sizing again: usable and right
    _, cpu_grad, _ = _grad_on("cpu", xv, cnt)
    np.testing.assert_allclose(grad, cpu_grad, rtol=1e-12)


# ---- graphs (every arch: the CPU replays the bound launches in order) ----------------------------

@pytest.mark.parametrize("form", ["step", "with"])
def test_graph_replays_a_step_and_keeps_generations_exact(arch, form):
    x = jr.field(jr.f32, shape=(256,))
    counter = jr.ndarray(jr.i32, shape=(1,))

    @jr.kernel
    def add(k: jr.f32):
        for i in x:
            x[i] += k

    @jr.kernel
    def tick(c: nd(dtype=jr.i32, ndim=1)):
        c[0] += 1

    def step():
        add(1.0)
        add(2.0)                  # the same kernel twice, other arguments: both kept
        tick(counter)

    if form == "step":
        g = jr.graph(step)
        g()
    else:
        with jr.graph() as g:
            step()
    assert len(g) == 3
    gen = x.gen
    for _ in range(5):
        g()
    assert x.gen == gen + 10
    np.testing.assert_array_equal(x.to_numpy(), np.full(256, 18.0, np.float32))
    assert counter[0] == 6
    x.fill(0.0)                   # between replays: on the device (a memset) before the next
    g()
    assert x[7] == 3.0
    if arch != "cpu":
        stats = jr.debug.stats()
        assert stats["graph_instantiations"] == 1 and stats["graph_replays"] == 6


def test_graph_with_changed_arguments_updates_instead_of_instantiating(arch):
    a = jr.ndarray(jr.f32, shape=(1000,))
    b = jr.ndarray(jr.f32, shape=(1000,))

    @jr.kernel
    def scale(arr: nd(dtype=jr.f32, ndim=1), s: jr.f32):
        for i in range(arr.shape[0]):
            arr[i] = arr[i] * s + 1.0

    g = jr.graph(lambda arr, s: scale(arr, s))
    g(a, 2.0)                     # records: a = 1
    g(a, 2.0)                     # replays: a = 3
    g(b, 3.0)                     # other arguments: rebound and updated, b = 1
    g(b, 3.0)                     # replays: b = 4
    assert a[0] == 3.0 and b[999] == 4.0
    if arch != "cpu":
        stats = jr.debug.stats()
        assert stats["graph_instantiations"] == 1 and stats["graph_updates"] == 1


def test_graph_of_grad_launches_rechecks_adstack_sizes(arch):
    n = 2048
    x, loss, recur = make_problem(n, jr.f64)
    rng = np.random.default_rng(5)
    x.from_numpy(rng.uniform(-1, 1, n))
    cnt = jr.ndarray(jr.i32, shape=(n,))
    cnt.from_numpy(np.full(n, 2, np.int32))

    def step():
        recur.grad(cnt)

    loss.grad[None] = 1.0
    g = jr.graph(step)
    g()
    cnt.from_numpy(np.full(n, 7, np.int32))   # larger trip counts: capacities must grow
    x.grad.fill(0.0)
    g()
    jr.sync()
    expected = x.grad.to_numpy()
    x.grad.fill(0.0)
    recur.grad(cnt)                            # the same launch outside the graph
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)
    assert np.abs(expected).sum() > 0


def test_graph_refuses_a_replaced_program(arch):
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def one():
        for i in x:
            x[i] = 1.0

    g = jr.graph(one)
    g()
    jr.init(arch=arch, offline_cache=False)
    with pytest.raises(jr.JitrtError, match="record it again"):
        g.replay()


# ---- interop with other GPU libraries (torch, CuPy: on the GPU machine) ----------------------

def _gpu_lib(name):
    import importlib.util
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} not installed")
    return __import__(name)


@gpu_only
def test_ndarrays_export_cuda_array_interface_and_dlpack_without_copies():
    torch = _gpu_lib("torch")
    a = jr.ndarray(jr.f32, shape=(6,))
    a.from_numpy(np.arange(6, dtype=np.float32))

    @jr.kernel
    def twice(arr: nd(dtype=jr.f32, ndim=1)):
        for i in range(arr.shape[0]):
            arr[i] = arr[i] * 2

    twice(a)
    t = torch.as_tensor(a, device="cuda")          # through __cuda_array_interface__
    assert t.tolist() == [0, 2, 4, 6, 8, 10]
    d = torch.from_dlpack(a)                       # through __dlpack__
    assert d.device.type == "cuda" and d.data_ptr() == t.data_ptr()
    d += 1                                         # a write by the consumer, on the device
    torch.cuda.synchronize()
    a.touch()
    assert a.to_numpy().tolist() == [1, 3, 5, 7, 9, 11]
    twice(a)
    jr.sync()        # a view exported before a launch is ordered after it by a sync (or a stream)
    assert t.tolist() == [2, 6, 10, 14, 18, 22]    # the same memory


@gpu_only
def test_kept_views_are_ordered_with_launches_on_torchs_default_stream():
    """Taichi and Quadrants launch on CUDA's legacy default stream, torch's default stream:
    a zero-copy view kept by a program (Genesis keeps one per field) and written by torch is
    seen by the next launch, and a launch's writes by torch's next read, with no
    synchronisation between them. jitrt's stream is a blocking one, so the same holds."""
    torch = _gpu_lib("torch")
    if torch.cuda.current_stream().cuda_stream != 0:
        pytest.skip("torch's current stream is not the legacy default stream")
    src = jr.field(jr.i32, shape=256)
    dst = jr.field(jr.i32, shape=256)

    @jr.kernel
    def copy_plus_one():
        for i in src:
            dst[i] = src[i] + 1

    copy_plus_one()
    jr.sync()
    src_view, dst_view = src.to_torch(copy=False), dst.to_torch(copy=False)
    for value in (7, 8, 9):
        torch.cuda._sleep(20_000_000)         # keep the legacy stream busy (tens of ms) ...
        src_view.fill_(value)                 # ... so that this write lands after the launch
        copy_plus_one()                       # unless the launch waits for it
        assert dst_view.tolist() == [value + 1] * 256     # torch's read waits for the launch


@gpu_only
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_foreign_device_arrays_are_kernel_arguments_without_copies(lib):
    mod = _gpu_lib(lib)

    @jr.kernel
    def axpy(s: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = s * x[i] + y[i]

    if lib == "torch":
        x = mod.arange(1000, dtype=mod.float32, device="cuda")
        y = mod.ones(1000, dtype=mod.float32, device="cuda")
        host = lambda t: t.cpu().numpy()  # noqa: E731
        sync = mod.cuda.synchronize
    else:
        x = mod.arange(1000, dtype=mod.float32)
        y = mod.ones(1000, dtype=mod.float32)
        host = mod.asnumpy
        sync = mod.cuda.Device().synchronize
    before = jr.debug.stats()["allocations"]
    axpy(2.0, x, y)
    axpy(2.0, x, y)                                # the fast path, same objects
    jr.sync()
    sync()
    np.testing.assert_allclose(host(y), 4 * np.arange(1000) + 1)
    assert jr.debug.stats()["allocations"] == before     # no staging: their memory is used


def test_loop_config_block_dim(arch):
    x = jr.field(jr.f32, shape=(1000,))
    total = jr.field(jr.f32, shape=())

    @jr.kernel
    def fill():
        jr.loop_config(block_dim=256)
        for i in x:
            x[i] = 1.0
            total[None] += 1.0

    fill()
    assert total[None] == 1000.0                   # warp sums need whole warps: they are
    handle = next(iter(fill.handles.values()))
    assert [t.block_dim for t in handle.compiled.tasks] == [256]
    if arch != "cpu":
        assert handle.entry.tasks[0][3] == 256

    @jr.kernel
    def partial_warps():
        jr.loop_config(block_dim=8, block_dim_adaptive=False)   # Taichi's: accepted
        for i in x:
            total[None] += 2.0

    total[None] = 0.0
    partial_warps()
    assert total[None] == 2000.0
    handle = next(iter(partial_warps.handles.values()))
    assert [t.block_dim for t in handle.compiled.tasks] == [32]   # rounded up to a warp

    @jr.kernel
    def bad():
        jr.loop_config(block_dim=2048)
        for i in x:
            x[i] = 0.0

    with pytest.raises(jr.KernelCompileError, match="an int from 1 to 1024, got 2048"):
        bad()


@gpu_only
def test_device_fills_copies_and_uploads_give_the_values_to_kernels_and_host():
    # fills are driver memsets, or doubling copies (f64 1.5, vec3, u8 vec3, i16),
    # copy_from a device copy, from_numpy an upload: what a kernel then reads is the value
    @jr.kernel
    def total(a: nd(ndim=1), out: nd(dtype=jr.f64, ndim=0)):
        for i in range(a.shape[0]):
            out[None] += jr.cast(a[i], jr.f64)

    @jr.kernel
    def total3(a: nd(ndim=1), out: nd(dtype=jr.f64, ndim=0)):
        for i in range(a.shape[0]):
            out[None] += (jr.cast(a[i][0], jr.f64) + 10 * jr.cast(a[i][1], jr.f64)
                          + 100 * jr.cast(a[i][2], jr.f64))

    out = jr.ndarray(jr.f64, shape=())
    n = 100_003
    for dtype, value in ((jr.f32, -1.0), (jr.f64, 1.5), (jr.i8, -3), (jr.i16, 300),
                         (jr.i32, 70000), (jr.u8, 200)):
        a = jr.ndarray(dtype, shape=(n,))
        total(a, out)                       # a has a current device copy
        a.fill(value)
        out.fill(0)
        total(a, out)
        assert out[None] == pytest.approx(float(np.asarray(value, dtype.np)) * n), dtype
        assert a[n - 1] == np.asarray(value, dtype.np), dtype
    for dtype in (jr.f32, jr.u8):
        v = jr.Vector.ndarray(3, dtype, shape=(n,))
        v.fill(jr.Vector([1, 2, 3]))
        out.fill(0)
        total3(v, out)
        assert out[None] == 321.0 * n
        np.testing.assert_array_equal(v.to_numpy(), np.tile(np.array([1, 2, 3], dtype.np),
                                                             (n, 1)))
    a, b = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
    a.from_numpy(np.arange(n, dtype=np.float32))
    total(a, out)                           # a has a device copy now
    b.copy_from(a)                          # device to device
    out.fill(0)
    total(b, out)
    assert out[None] == pytest.approx(n * (n - 1) / 2)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(n, dtype=np.float32))
    for k in (2, 3, 4):                     # uploads through the two pinned buffers in turn
        a.from_numpy(np.full(n, k, np.float32))
        out.fill(0)
        total(a, out)
        assert out[None] == k * n


@gpu_only
def test_element_reads_and_writes_of_device_data_reach_kernels_and_the_host():
    # one element moves alone (docs/gpu.md, "One element at Python scope"): values must be
    # the kernels' and reach them, with the rest of the array untouched on both sides
    n = 10_001
    x = jr.ndarray(jr.f32, shape=(n,))
    v = jr.Vector.field(3, jr.f64, shape=(7, 5))
    s = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def bump(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] + 1.0
        for i, j in v:
            v[i, j] += jr.Vector([1.0, 2.0, 3.0])
        s.grad[None] = s[None] * 2.0

    x.from_numpy(np.arange(n, dtype=np.float32))
    s[None] = 3.0
    bump(x)
    assert x[5] == 6.0 and x[-1] == n and s.grad[None] == 6.0
    assert v[6, 4].to_numpy().tolist() == [1.0, 2.0, 3.0] and v[2, 3][1] == 2.0
    x[5] = -10.0
    v[6, 4] = [7.0, 8.0, 9.0]
    v[0, 0][2] = -3.0
    s[None] -= 0.5 * s.grad[None]
    bump(x)
    want = np.arange(n, dtype=np.float32) + 2
    want[5] = -9.0
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert v[6, 4].to_numpy().tolist() == [8.0, 10.0, 12.0]
    assert v[0, 0].to_numpy().tolist() == [2.0, 4.0, 0.0] and v[3, 3].z == 6.0
    assert s[None] == 0.0 and s.grad[None] == 0.0
    for k in range(5000):                 # the pinned ring goes round more than once
        x[k % 100] = float(k)
    bump(x)
    np.testing.assert_array_equal(x.to_numpy()[:100], np.arange(4900, 5000) + 1.0)


@gpu_only
def test_small_constant_adstacks_in_local_memory_give_exact_gradients():
    # a stack of 7 f32 entries lives in each thread's local memory (docs/gpu.md, "Autodiff
    # on the GPU"); the data-dependent one beside it stays in the heap
    n = 50_000

    @jr.kernel
    def chain(x: nd(dtype=jr.f32, ndim=1), c: nd(dtype=jr.i32, ndim=1),
              loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(6):
                v = jr.sin(v) * 1.1 + 0.1
            w = x[i]
            for _ in range(c[i]):
                w = w * 0.9 + 0.05
            loss[None] += v + w

    x = jr.ndarray(jr.f32, shape=(n,), needs_grad=True)
    c = jr.ndarray(jr.i32, shape=(n,))
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    xs = np.linspace(-1.0, 1.0, n)
    cs = np.arange(n) % 5
    x.from_numpy(xs.astype(np.float32))
    c.from_numpy(cs.astype(np.int32))
    for _ in range(2):                  # the second launch hits the sizing caches
        x.grad.fill(0)
        loss.grad.fill(1)
        chain.grad(x, c, loss)
    v, d = xs.copy(), np.ones(n)
    for _ in range(6):
        d *= np.cos(v) * 1.1
        v = np.sin(v) * 1.1 + 0.1
    np.testing.assert_allclose(x.grad.to_numpy(), d + 0.9 ** cs, rtol=2e-5, atol=2e-6)


def test_a_repeated_tape_step_gives_the_gradients_of_its_launches(arch):
    # with tape_graph on a GPU the third and later reverse passes are one graph replay:
    # the gradients and the parameter updates stay those of the launches
    jr.init(arch=arch, offline_cache=False, enable_fallback=False, tape_graph=True)
    n, steps = 64, 12
    x = jr.field(jr.f32, shape=(steps, n), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def advance(t: jr.i32, c: jr.f32):
        for i in range(n):
            x[t, i] = x[t - 1, i] * c

    @jr.kernel
    def compute_loss():
        for i in range(n):
            loss[None] += x[steps - 1, i] * x[steps - 1, i]

    x0 = np.linspace(-1, 1, n)
    factors = [1 + 0.01 * t for t in range(1, steps)]
    gain = float(np.prod(factors))
    x.from_numpy(np.vstack([x0, np.zeros((steps - 1, n))]).astype(np.float32))
    for _ in range(5):
        with jr.ad.Tape(loss):
            for t in range(1, steps):
                advance(t, factors[t - 1])
            compute_loss()
        want = 2 * x0 * gain * gain
        np.testing.assert_allclose(x.grad.to_numpy()[0], want, rtol=1e-4)
        assert abs(loss[None] - np.sum((x0 * gain) ** 2)) < 1e-4 * np.sum((x0 * gain) ** 2)
        x0 = x0 - 0.01 * want
        x.from_numpy(np.vstack([x0, np.zeros((steps - 1, n))]).astype(np.float32))
    if arch != "cpu":
        assert jr.debug.stats()["graph_replays"] == 3


@gpu_only
def test_fast_math_on_gpus_is_the_peers_and_fast_math_false_is_ieee(arch):
    """`jr.init(fast_math=True)`, the default, fuses `a * b + c` into one FMA (one rounding)
    and makes f32 division and sqrt the hardware's approximations, within 2 ulp of the
    correctly rounded results; `fast_math=False` rounds each operation as numpy's f32
    arithmetic does, bit for bit (docs/gpu.md, "How kernels run")."""
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-2.0, 2.0, 4096).astype(np.float32) for _ in range(3))
    a = np.abs(a) + np.float32(0.25)                  # (sqrt's argument: positive)

    @jr.kernel
    def arith(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1),
              c: nd(dtype=jr.f32, ndim=1), fused: nd(dtype=jr.f32, ndim=1),
              quotient: nd(dtype=jr.f32, ndim=1), root: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            fused[i] = a[i] * b[i] + c[i]
            quotient[i] = a[i] / b[i]
            root[i] = jr.sqrt(a[i])

    def run() -> list[np.ndarray]:
        outs = [np.zeros(4096, np.float32) for _ in range(3)]
        arith(a, b, c, *outs)
        return outs

    fused, quotient, root = run()
    one_rounding = (a.astype(np.float64) * b + c).astype(np.float32)   # (the f64 product is
    np.testing.assert_array_max_ulp(fused, one_rounding, 1)            # exact)
    assert np.any(fused != a * b + c)                 # fused: not two roundings everywhere
    np.testing.assert_array_max_ulp(quotient, a / b, 2)
    np.testing.assert_array_max_ulp(root, np.sqrt(a), 2)
    jr.init(arch=arch, offline_cache=False, enable_fallback=False, fast_math=False)
    fused, quotient, root = run()
    np.testing.assert_array_equal(fused, a * b + c)
    np.testing.assert_array_equal(quotient, a / b)
    np.testing.assert_array_equal(root, np.sqrt(a))


@gpu_only
@pytest.mark.parametrize("serial", [True, False])
def test_a_deferred_read_names_its_first_failure_before_the_store(serial):
    """A read indexed by data in a loop that only computes (a chain of gathers) does not
    branch on its check (`TargetTraits.deferred_reads`): outside its array it reads zero, and
    its thread records the failure (index, axis, array) and stops before its next store, so
    nothing it computed from the zero is written; other threads run on. Of two failures of
    one read, the first is named."""
    pos = jr.ndarray(jr.i32, shape=(6,))
    didx = jr.ndarray(jr.i32, shape=(3, 4))
    count = jr.ndarray(jr.i32, shape=(3,))
    out = jr.ndarray(jr.i32, shape=(3,))

    @jr.kernel
    def envelope(pos: nd(dtype=jr.i32, ndim=1), didx: nd(dtype=jr.i32, ndim=2),
                 count: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
        jr.loop_config(serialize=serial)
        for c in range(3):
            m = 100
            for j in range(count[c]):
                m = jr.min(m, pos[didx[c, j]])
            out[c] = m

    pos.from_numpy(np.array([50, 40, 30, 20, 10, 5], np.int32))
    didx.from_numpy(np.array([[0, 1, 2, 3], [1, 9, 12, 0], [4, 5, 5, 4]], np.int32))
    count.from_numpy(np.array([4, 3, 2], np.int32))
    out.from_numpy(np.full(3, -1, np.int32))
    envelope(pos, didx, count, out)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 9 out of bounds on axis 0 of 'pos' "
                                                    r"\(read\).*the thread that made it stopped"):
        jr.sync()
    if serial:                            # one thread: c = 0 ran whole, then it ended
        assert out.to_numpy().tolist() == [20, -1, -1]
    else:                                 # a thread per c: c = 0 and c = 2 ran whole
        assert out.to_numpy().tolist() == [20, -1, 5]
    didx.from_numpy(np.array([[0, 1, 2, 3], [1, 2, 3, 0], [4, 5, 5, 4]], np.int32))
    envelope(pos, didx, count, out)       # the program stays usable
    assert out.to_numpy().tolist() == [20, 20, 5]


@gpu_only
def test_an_inner_loop_that_stores_runs_unchecked_inside_and_checked_outside():
    """A thread's inner loop that stores at indices affine in its variable is versioned
    (codegen/loop_versions.py): inside, its copy without checks computes what the loop
    says; where the range leaves the array, the checked copy runs and names the first index
    outside (its earlier stores done, as a checked loop does them), and the program stays
    usable."""
    src = jr.ndarray(jr.f32, shape=(8,))
    dst = jr.ndarray(jr.f32, shape=(8,))

    @jr.kernel
    def shifted(src: nd(dtype=jr.f32, ndim=1), dst: nd(dtype=jr.f32, ndim=1), off: jr.i32,
                n: jr.i32):
        for c in range(1):
            for j in range(n):
                dst[j + off] = src[j] * 2.0 + c

    src.from_numpy(np.arange(8, dtype=np.float32))
    dst.from_numpy(np.zeros(8, np.float32))
    shifted(src, dst, 2, 5)
    np.testing.assert_array_equal(dst.to_numpy(), np.array([0, 0, 0, 2, 4, 6, 8, 0], np.float32))
    dst.from_numpy(np.zeros(8, np.float32))
    with pytest.raises(jr.KernelRuntimeError, match=r"index 8 out of bounds on axis 0 of 'dst'"):
        shifted(src, dst, 5, 5)
        jr.sync()
    np.testing.assert_array_equal(dst.to_numpy(), np.array([0, 0, 0, 0, 0, 0, 2, 4], np.float32))
    shifted(src, dst, 0, 8)
    np.testing.assert_array_equal(dst.to_numpy(), 2 * np.arange(8, dtype=np.float32))
