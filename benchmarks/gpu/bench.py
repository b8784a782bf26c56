"""GPU benchmarks: one run, one table, ratios against references measured in the same run.

    python benchmarks/gpu/bench.py          (benchmarks/gpu/run.sh runs it after the tests)

Rows: a trivial kernel's launch through jitrt against raw `cuLaunchKernel` (cuda-bindings, the
same loaded function, a prebuilt parameter array), CuPy `RawKernel` and a small torch op; a
100-kernel step launched directly and replayed as a `jr.graph`, against a raw CUDA graph of the
same 100 launches; saxpy over 64M f32 against a device-to-device copy; the adstack step
(forward + grad, trip counts 1..8) at N = 1M and N = 1024 against torch autograd of the same
computation (a masked loop), gradients checked; the same step written with ndarrays as users
write it (`loss.fill(0); x.grad.fill(0); loss.grad.fill(1); fwd(x, c, loss); fwd.grad(x, c,
loss)`) against the field form, at both sizes (issue 32: within 1.2x); whole-array operations
on device data at N = 1M (`fill` as a memset or the fill kernel, `copy_from`, `from_numpy`);
Python-scope element reads and writes of device-newer data (`x.grad[None]`, `x[7]` of a 1M
array, `x[None] = v`, the update `x[None] -= lr * x.grad[None]` of a training loop) against a
launch and a synchronisation alone; the grad launch of an 8-trip chain whose adstack is in
local memory (constant trip count) against the same chain sized at launch (the heap). CuPy and
torch rows are skipped when those packages are missing.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

import jitrt as jr

nd = jr.types.ndarray


def per_call(fn: Callable[[], Any], sync: Callable[[], Any], n: int, repeats: int = 5) -> float:
    """Best-of-`repeats` seconds per call of `fn`, `n` calls between two synchronisations."""
    best = float("inf")
    for _ in range(repeats):
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def launch_rows(drv: Any) -> list[tuple[str, str, str, str]]:
    cu = drv.lib          # the vendor binding module (cuda.bindings.driver)

    @jr.kernel
    def tiny(a: nd(dtype=jr.f32, ndim=1)):
        a[0] = a[0] + 1.0

    a = jr.ndarray(jr.f32, shape=(1,))
    tiny(a)
    entry = next(iter(tiny.handles.values())).entry
    function = entry.tasks[0][0]

    def raw() -> None:
        cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, drv.stream, entry.params_addr, 0)

    jr_s = per_call(lambda: tiny(a), drv.synchronize, 2000)
    raw_s = per_call(raw, drv.synchronize, 2000)
    handle = next(iter(tiny.handles.values()))
    native = handle.native is not None
    py_s = per_call(lambda: handle.python_fallback(a), drv.synchronize, 2000)
    rows = [("trivial launch: jitrt" + (" (native)" if native else " (Python; no native)"),
             f"{jr_s * 1e6:.2f} us", f"raw cuLaunchKernel {raw_s * 1e6:.2f} us",
             f"{jr_s / raw_s:.2f}x raw"),
            ("trivial launch: jitrt's Python launcher", f"{py_s * 1e6:.2f} us", "",
             f"{py_s / raw_s:.2f}x raw")]
    try:
        import cupy
        k = cupy.RawKernel(r'extern "C" __global__ void k(float* a) { a[0] += 1.0f; }', "k")
        c = cupy.zeros(1, cupy.float32)
        cp_s = per_call(lambda: k((1,), (1,), (c,)), cupy.cuda.Device().synchronize, 2000)
        rows.append(("trivial launch: CuPy RawKernel", f"{cp_s * 1e6:.2f} us", "",
                     f"jitrt {cp_s / jr_s:.2f}x faster"))
    except ImportError:
        pass
    try:
        import torch
        t = torch.zeros(1, device="cuda")
        th_s = per_call(lambda: t.add_(1.0), torch.cuda.synchronize, 2000)
        rows.append(("trivial launch: torch add_", f"{th_s * 1e6:.2f} us", "",
                     f"jitrt {th_s / jr_s:.2f}x faster"))
    except ImportError:
        pass

    # a 100-kernel step: direct, as a jr.graph, and as a raw CUDA graph of the same launches
    def step() -> None:
        for _ in range(100):
            tiny(a)

    direct = per_call(step, drv.synchronize, 20)
    g = jr.graph(step)
    g()
    replay = per_call(g, drv.synchronize, 50)
    raw_graph = raw_graph_per_kernel(drv, entry.tasks[0][0], entry.params_addr)
    rows += [("100-kernel step: direct", f"{direct * 1e6 / 100:.2f} us/kernel", "", ""),
             ("100-kernel step: jr.graph replay", f"{replay * 1e6 / 100:.2f} us/kernel",
              f"raw CUDA graph {raw_graph * 1e6:.2f} us/kernel",
              f"{replay / raw_graph / 100:.2f}x raw graph")]
    return rows + graph_floor_rows(drv, entry.params_addr)


def raw_graph_per_kernel(drv: Any, function: Any, params: int) -> float:
    """Seconds per kernel of a raw CUDA graph of 100 launches of `function`, one block of one
    thread each, captured from one stream (so each node waits for the one before)."""
    drv.begin_capture()
    for _ in range(100):
        drv.launch(function, 1, 1, params)
    exe = drv.instantiate(drv.end_capture())
    return per_call(lambda: drv.graph_launch(exe), drv.synchronize, 50) / 100


# Hand-written kernels for the floor of a graph's kernel node on this GPU: no parameters, the
# 16 parameters of the `tiny` kernel above (jitrt's launch context), one store, and the load,
# add and store of `tiny` (what jitrt's kernel does, less its bounds check).
FLOOR_PTX = """.version 7.8
.target sm_{sm}
.address_size 64
.visible .entry empty0() {{ ret; }}
.visible .entry empty16({params16}) {{ ret; }}
.visible .entry store1(.param .u64 p0) {{
  .reg .b64 %rd<2>; .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p0]; mov.b32 %r1, 0f3F800000; st.global.b32 [%rd1], %r1; ret;
}}
.visible .entry increment1(.param .u64 p0) {{
  .reg .b64 %rd<2>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [p0]; ld.global.f32 %f1, [%rd1]; add.rn.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd1], %f2; ret;
}}
"""


def graph_floor_rows(drv: Any, params16: int) -> list[tuple[str, str, str, str]]:
    """Raw CUDA graphs of hand-written kernels: what a graph's kernel node costs on this GPU
    whatever the runtime, for reading the jr.graph row above."""
    import ctypes

    from jitrt.backends.cuda import pack_artifact
    decl = ", ".join(f".param .u64 q{k}" for k in range(16))
    module = drv.load_module(pack_artifact(FLOOR_PTX.format(sm=drv.sm, params16=decl), None))
    buffer = ctypes.c_uint64(drv.alloc(4))
    one = (ctypes.c_void_p * 1)(ctypes.addressof(buffer))
    rows = []
    for name, params in (("empty0", 0), ("empty16", params16), ("store1", ctypes.addressof(one)),
                         ("increment1", ctypes.addressof(one))):
        t = raw_graph_per_kernel(drv, drv.function(module, name), params)
        rows.append((f"graph floor: raw graph of {name}", f"{t * 1e6:.2f} us/kernel", "", ""))
    drv.free(buffer.value)
    return rows


def saxpy_rows(device: Any) -> list[tuple[str, str, str, str]]:
    drv = device.driver

    @jr.kernel
    def saxpy(s: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = s * x[i] + y[i]

    n = 64 << 20
    x, y = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
    x.fill(1.0)
    y.fill(2.0)
    t = per_call(lambda: saxpy(2.0, x, y), drv.synchronize, 20)
    src, dst = device.data_ptr(x), device.alloc(4 * n)
    tc = per_call(lambda: drv.copy_d2d(dst, src, 4 * n), drv.synchronize, 20)
    device.free(dst)
    y_host = y.to_numpy()
    assert np.all(y_host == y_host[0]) and y_host[0] > 2.0
    gbs, copy_gbs = 12 * n / t / 1e9, 8 * n / tc / 1e9
    rows = [("saxpy 64M f32", f"{gbs:.0f} GB/s", f"d2d copy {copy_gbs:.0f} GB/s",
             f"{gbs / copy_gbs:.0%} of copy")]

    @jr.kernel
    def saxpy128(s: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        jr.loop_config(block_dim=128)
        for i in range(x.shape[0]):
            y[i] = s * x[i] + y[i]

    t5 = per_call(lambda: saxpy128(2.0, x, y), drv.synchronize, 20)
    gbs5 = 12 * n / t5 / 1e9
    rows.append(("saxpy 64M f32, block_dim=128", f"{gbs5:.0f} GB/s", "",
                 f"{gbs5 / copy_gbs:.0%} of copy"))
    return rows


def adstack_rows(drv: Any, n: int) -> list[tuple[str, str, str, str]]:
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    cnt = jr.ndarray(jr.i32, shape=(n,))
    rng = np.random.default_rng(0)
    xv = rng.uniform(-1, 1, n).astype(np.float32)
    cv = rng.integers(1, 9, n).astype(np.int32)
    x.from_numpy(xv)
    cnt.from_numpy(cv)

    @jr.kernel
    def forward(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def seed():
        for i in x:
            x.grad[i] = 0.0
        loss.grad[None] = 1.0
        loss[None] = 0.0

    def step() -> None:
        seed()
        forward(cnt)
        forward.grad(cnt)

    t = per_call(step, drv.synchronize, 20)
    grad = x.grad.to_numpy()
    rows = [(f"adstack step N={n}: jitrt", f"{t * 1e6:.0f} us", "", "")]
    fields = [t] + [per_call(f, drv.synchronize, 20)
                    for f in (lambda: forward(cnt), lambda: forward.grad(cnt))]
    nd_rows = ndarray_step_rows(drv, xv, cv, fields, grad)
    try:
        import torch
        tx = torch.tensor(xv, device="cuda", requires_grad=True)
        tc = torch.tensor(cv, device="cuda")

        def torch_step() -> None:
            tx.grad = None
            v = tx
            for k in range(8):
                v = torch.where(k < tc, torch.sin(v) * 1.1 + 0.1, v)
            v.sum().backward()

        tt = per_call(torch_step, torch.cuda.synchronize, 20)
        assert tx.grad is not None
        err = float(np.max(np.abs(tx.grad.cpu().numpy() - grad)))
        assert err < 1e-4, err
        rows = [(f"adstack step N={n}: jitrt", f"{t * 1e6:.0f} us",
                 f"torch autograd {tt * 1e6:.0f} us", f"{tt / t:.1f}x faster (grad max err "
                 f"{err:.1e})")]
    except ImportError:
        pass
    return rows + nd_rows


@jr.kernel
def nd_chain(x: nd(dtype=jr.f32, ndim=1), c: nd(dtype=jr.i32, ndim=1),
             loss: nd(dtype=jr.f32, ndim=0)):
    """The adstack step's forward in the ndarray form users write: c[i] trips of a chain."""
    for i in range(x.shape[0]):
        v = x[i]
        for _ in range(c[i]):
            v = jr.sin(v) * 1.1 + 0.1
        loss[None] += v


def ndarray_step_rows(drv: Any, xv: np.ndarray, cv: np.ndarray, fields: list[float],
                      grad: np.ndarray) -> list[tuple[str, str, str, str]]:
    """The adstack step written with ndarrays as users write it (fills, forward, grad)
    against the field step above (`fields`: its step, forward and grad launch seconds);
    gradients checked equal."""
    t_field = fields[0]
    n = len(xv)
    x = jr.ndarray(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    c = jr.ndarray(jr.i32, shape=(n,))
    x.from_numpy(xv)
    c.from_numpy(cv)

    def step() -> None:
        loss.fill(0)
        x.grad.fill(0)
        loss.grad.fill(1)
        nd_chain(x, c, loss)
        nd_chain.grad(x, c, loss)

    t = per_call(step, drv.synchronize, 20)
    err = float(np.max(np.abs(x.grad.to_numpy() - grad)))
    assert err < 1e-4, err
    launches = [lambda: nd_chain(x, c, loss), lambda: nd_chain.grad(x, c, loss),
                lambda: x.grad.fill(0)]
    tf, tg, tz = (per_call(f, drv.synchronize, 20) for f in launches)
    return [(f"adstack step N={n}: ndarray form (3 fills + fwd + grad)", f"{t * 1e6:.0f} us",
             f"field form {t_field * 1e6:.0f} us", f"{t / t_field:.2f}x fields (grad max "
             f"err {err:.1e})"),
            (f"  ndarray form N={n}: fwd / grad / x.grad.fill(0)",
             f"{tf * 1e6:.0f} / {tg * 1e6:.0f} / {tz * 1e6:.1f} us",
             f"fields: fwd / grad {fields[1] * 1e6:.0f} / {fields[2] * 1e6:.0f} us",
             f"grad {tg / fields[2]:.2f}x fields")]


def data_op_rows(device: Any) -> list[tuple[str, str, str, str]]:
    """Whole-array operations on device-resident data at N = 1M (issue 32: a fill <= 10 us):
    fills become driver memsets, copy_from a device-to-device copy, from_numpy one upload."""
    drv, n = device.driver, 1 << 20
    a, b = jr.ndarray(jr.f32, shape=(n,)), jr.ndarray(jr.f32, shape=(n,))
    d = jr.ndarray(jr.f64, shape=(n,))
    v = jr.Vector.ndarray(3, jr.f32, shape=(n,))
    host = np.ones(n, np.float32)
    for arr in (a, b, d, v):
        arr.fill(0)
    cases = [("fill 1M f32 (one D32 memset)", lambda: a.fill(1.5)),
             ("fill 1M f64 = 1.5 (fill kernel)", lambda: d.fill(1.5)),
             ("fill 1M vec3 f32 (fill kernel)", lambda: v.fill(jr.Vector([1, 2, 3]))),
             ("copy_from 1M f32 device to device", lambda: b.copy_from(a)),
             ("from_numpy 1M f32 (one async upload)", lambda: a.from_numpy(host))]
    rows = []
    for name, fn in cases:
        t = per_call(fn, drv.synchronize, 200)
        rows.append((name, f"{t * 1e6:.1f} us", "", ""))
    assert float(v[n - 1][2]) == 3.0 and float(d[7]) == 1.5 and float(b[3]) == 1.5
    return rows


def local_stack_rows(drv: Any, n: int) -> list[tuple[str, str, str, str]]:
    """The grad launch of an 8-trip chain whose stack lives in local memory (a constant trip
    count: capacity known when compiling) against the same chain with the count read from
    data (c[i] = 8 everywhere: the heap), gradients equal."""
    x = jr.ndarray(jr.f32, shape=(n,), needs_grad=True)
    c = jr.ndarray(jr.i32, shape=(n,))
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)
    x.from_numpy(np.random.default_rng(1).uniform(-1, 1, n).astype(np.float32))
    c.fill(8)

    @jr.kernel
    def local(x: nd(dtype=jr.f32, ndim=1), c: nd(dtype=jr.i32, ndim=1),
              loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(8):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    heap = nd_chain                # the trips read from data: the stack in the heap
    grads, times = [], []
    for k in (local, heap):
        loss.grad.fill(1)
        x.grad.fill(0)
        k.grad(x, c, loss)
        grads.append(x.grad.to_numpy())
        times.append(per_call(lambda: k.grad(x, c, loss), drv.synchronize, 20))
    err = float(np.max(np.abs(grads[0] - grads[1])))
    assert err < 1e-5, err
    return [(f"grad launch, 8-trip chain N={n}: stack in local memory",
             f"{times[0] * 1e6:.0f} us", f"heap (trips read from data) {times[1] * 1e6:.0f} us",
             f"{times[0] / times[1]:.2f}x heap")]


def graph_loop_rows(device: Any) -> list[tuple[str, str, str, str]]:
    """A `graph=True` kernel with a `jr.graph.do_while` loop of 10 iterations: a call as one
    device graph (the loop a conditional node, where the driver builds them) against the
    host loop (one flag read and a wait per iteration)."""
    x = jr.ndarray(jr.f32, shape=(1024,))
    flag = jr.ndarray(jr.i32, shape=())

    def make() -> Any:
        @jr.kernel(graph=True)
        def loop(x: jr.types.ndarray(jr.f32, ndim=1), flag: jr.types.ndarray(jr.i32, ndim=0)):
            while jr.graph.do_while(flag):
                for i in range(x.shape[0]):
                    x[i] += 1.0
                for _ in range(1):
                    flag[()] = flag[()] - 1
        return loop
    fast, slow = make(), make()
    slow.device_loops = False                      # the host loop at every call

    def call(kernel: Any) -> Callable[[], None]:
        def run() -> None:
            flag[()] = 10
            kernel(x, flag)
        return run
    times = [per_call(call(k), device.driver.synchronize, 50) for k in (fast, slow)]
    where = "device graph" if device.graph_loops else "host loop (no graph loops here)"
    return [("do_while of 10 iterations: " + where, f"{times[0] * 1e6:.1f} us",
             f"host loop {times[1] * 1e6:.1f} us", f"{times[0] / times[1]:.2f}x host loop")]


def element_rows(device: Any) -> list[tuple[str, str, str, str]]:
    """Python-scope element access of device-newer data (issue 32): a read copies the
    element's bytes and synchronises once, a write is one small upload without waiting."""
    drv, n = device.driver, 1 << 20
    x = jr.field(jr.f32, shape=(), needs_grad=True)
    big = jr.ndarray(jr.f32, shape=(n,))

    @jr.kernel
    def grad_step(a: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] + 1.0
        x.grad[None] = x[None] * 0.5

    def launch() -> None:
        grad_step(big)

    def update() -> None:              # the step of a training loop at Python scope
        grad_step(big)
        x[None] -= 0.1 * x.grad[None]

    def write() -> None:
        x[None] = 1.0

    x[None] = 1.0
    t_launch = per_call(launch, drv.synchronize, 200)
    t_update = per_call(update, drv.synchronize, 200)
    t_read0 = per_call(lambda: (grad_step(big), x.grad[None]), drv.synchronize, 200)
    t_read = per_call(lambda: (grad_step(big), big[7]), drv.synchronize, 200)
    t_whole = per_call(lambda: (grad_step(big), big.to_numpy()), drv.synchronize, 50)
    t_write = per_call(write, drv.synchronize, 1000)
    ref = f"launch + sync {t_launch * 1e6:.1f} us"
    return [("0-d read after a launch wrote it (launch + x.grad[None])",
             f"{t_read0 * 1e6:.1f} us", ref, f"read {(t_read0 - t_launch) * 1e6:+.1f} us"),
            ("x[7] of 1M f32 after a launch wrote it (launch + read)",
             f"{t_read * 1e6:.1f} us", f"launch + to_numpy() {t_whole * 1e6:.0f} us",
             f"read {(t_read - t_launch) * 1e6:+.1f} us"),
            ("0-d write x[None] = 1.0 (one 4-byte upload, no wait)", f"{t_write * 1e6:.1f} us",
             "", ""),
            ("launch + x[None] -= 0.1 * x.grad[None]", f"{t_update * 1e6:.1f} us", ref,
             f"update {(t_update - t_launch) * 1e6:+.1f} us")]


def main() -> None:
    program = jr.init(arch=jr.cuda, offline_cache=False, enable_fallback=False)
    device = program.device
    rows = launch_rows(device.driver) + saxpy_rows(device)
    rows += adstack_rows(device.driver, 1 << 20) + adstack_rows(device.driver, 1024)
    rows += local_stack_rows(device.driver, 1 << 20) + local_stack_rows(device.driver, 1024)
    rows += data_op_rows(device) + element_rows(device) + graph_loop_rows(device)
    stats = jr.debug.stats()
    rows.append(("context uploads skipped / done", f"{stats['h2d_skipped']} / "
                 f"{stats['h2d_uploads']}", f"device allocations {stats['allocations']}", ""))
    rows.append(("modules loaded / compiled by the driver from PTX",
                 f"{stats['module_loads']} / {stats['driver_jit_loads']}",
                 f"ptxas runs {stats['ptxas_runs']}",
                 f"in-process PTX compiles {stats.get('driver_links', 0)}"))
    width = [max(len(r[k]) for r in rows) for k in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())


if __name__ == "__main__":
    main()
