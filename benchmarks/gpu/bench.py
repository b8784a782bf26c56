"""GPU benchmarks, one table, ratios against references measured in the same run.

Rows: the launch of a trivial kernel through jitrt against raw `cuLaunchKernel` (cuda-bindings,
the same loaded function and a prebuilt parameter array); saxpy over 64M f32 against a
device-to-device copy of the same bytes. Run on the GPU machine: python benchmarks/gpu/bench.py
(benchmarks/gpu/run.sh runs it after the tests).
"""
from __future__ import annotations

import time

import numpy as np

import jitrt as jr

nd = jr.types.ndarray


def per_call(fn, sync, n: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    program = jr.init(arch=jr.cuda, offline_cache=False)
    device = program.device
    drv = device.driver
    cu = drv.cu

    @jr.kernel
    def tiny(a: nd(dtype=jr.f32, ndim=1)):
        a[0] = a[0] + 1.0

    a = jr.ndarray(jr.f32, shape=(1,))
    tiny(a)
    handle = next(iter(tiny.handles.values()))
    launch = handle.entry
    function = launch.tasks[0][0]
    jr_us = per_call(lambda: tiny(a), drv.synchronize, 2000) * 1e6
    raw_us = per_call(lambda: cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, drv.stream,
                                                launch.params_addr, 0),
                      drv.synchronize, 2000) * 1e6
    rows = [("trivial kernel launch", f"{jr_us:.2f} us", f"raw cuLaunchKernel {raw_us:.2f} us",
             f"{jr_us / raw_us:.2f}x")]

    @jr.kernel
    def saxpy(s: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = s * x[i] + y[i]

    n = 64 << 20
    x = jr.ndarray(jr.f32, shape=(n,))
    y = jr.ndarray(jr.f32, shape=(n,))
    x.fill(1.0)
    y.fill(2.0)
    saxpy(2.0, x, y)
    t = per_call(lambda: saxpy(2.0, x, y), drv.synchronize, 20)
    saxpy_gbs = 3 * 4 * n / t / 1e9
    src, dst = device.data_ptr(x), device.alloc(4 * n)
    tc = per_call(lambda: drv.copy_d2d(dst, src, 4 * n), drv.synchronize, 20)
    device.free(dst)
    copy_gbs = 2 * 4 * n / tc / 1e9
    rows.append(("saxpy 64M f32", f"{saxpy_gbs:.0f} GB/s", f"d2d copy {copy_gbs:.0f} GB/s",
                 f"{saxpy_gbs / copy_gbs:.0%}"))
    y_host = y.to_numpy()
    assert np.all(y_host == y_host[0]) and y_host[0] > 2.0
    rows.append(("modules loaded from PTX (driver JIT)", str(drv.ptx_loads), "", ""))
    stats = jr.debug.stats()
    rows.append(("steady-state uploads skipped", str(stats["h2d_skipped"]),
                 f"uploads {stats['h2d_uploads']}", ""))
    width = [max(len(r[k]) for r in rows) for k in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width)))


if __name__ == "__main__":
    main()
