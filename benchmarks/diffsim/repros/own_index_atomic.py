"""Performance: an atomic add at the parallel loop's own index, as jitrt's adjoints emit.

    DIFFSIM_TI=jitrt JITRT_NUM_THREADS=1 PYTHONPATH=. \
        python benchmarks/diffsim/repros/own_index_atomic.py
    TI_CPU_MAX_NUM_THREADS=1 python benchmarks/diffsim/repros/own_index_atomic.py   # Taichi venv

Every adjoint accumulation into a gradient (x.grad[f, p] += ...) is an `atomicrmw fadd` in
jitrt's grad kernels, even where the index is the loop's own (p2g.grad has 24 per particle:
x, v, C, F). On x86 that is a lock cmpxchg loop, and it blocks vectorization. Taichi demotes
atomics on addresses that only the current iteration touches. Here `atomic_form` is written
with `+=` (atomic in a parallel loop) and `plain_form` as a load and a store.
"""
import os
import time

import numpy as np

WHICH = os.environ.get("DIFFSIM_TI", "taichi")
if WHICH == "jitrt":
    import jitrt as ti
else:
    import taichi as ti
ti.init(arch=ti.cpu, default_fp=ti.f32)
N = 1 << 16
x = ti.field(ti.f32, shape=N)
y = ti.field(ti.f32, shape=N)


@ti.kernel
def atomic_form():
    for i in range(N):
        y[i] += x[i] * x[i] * 0.5


@ti.kernel
def plain_form():
    for i in range(N):
        y[i] = y[i] + x[i] * x[i] * 0.5


x.from_numpy(np.linspace(0, 1, N).astype(np.float32))
for name, k in (("atomic_form", atomic_form), ("plain_form", plain_form)):
    k()
    ti.sync()
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100):
            k()
        ti.sync()
        best = min(best, (time.perf_counter() - t0) / 100 * 1e6)
    print(f"{WHICH}: {name} {best:.1f} us for {N} elements")
