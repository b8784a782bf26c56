"""Performance: a local reassigned in a `ti.static` loop goes on an adstack in jitrt's adjoint.

    DIFFSIM_TI=jitrt JITRT_NUM_THREADS=1 PYTHONPATH=. \
        python benchmarks/diffsim/repros/static_adstack.py
    TI_CPU_MAX_NUM_THREADS=1 python benchmarks/diffsim/repros/static_adstack.py    # Taichi venv

`unrolled` and `renamed` compute the same values; after unrolling, `s` is straight-line code
and needs no stack. jitrt's adjoint of `unrolled` pushed and popped `s` (a stack of 10) until
the adjoint pass renamed straight-line reassignments (`rename_straight_line` in
passes/autodiff.py): on the dev VM, one thread, unrolled.grad 2170 -> 258 us (renamed.grad
253). In mpm2d.py the same pattern (vel, aff, gv, offset, weight in G2P; dpos, weight in P2G)
made g2p.grad 2.2x slower than a hand-renamed version.
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
x = ti.field(ti.f32, shape=N, needs_grad=True)
y = ti.field(ti.f32, shape=N, needs_grad=True)


@ti.kernel
def unrolled():
    for i in range(N):
        s = x[i]
        for k in ti.static(range(8)):
            s = s * s * 0.5 + 0.25
        y[i] = s


@ti.kernel
def renamed():
    for i in range(N):
        s0 = x[i]
        s1 = s0 * s0 * 0.5 + 0.25
        s2 = s1 * s1 * 0.5 + 0.25
        s3 = s2 * s2 * 0.5 + 0.25
        s4 = s3 * s3 * 0.5 + 0.25
        s5 = s4 * s4 * 0.5 + 0.25
        s6 = s5 * s5 * 0.5 + 0.25
        s7 = s6 * s6 * 0.5 + 0.25
        s8 = s7 * s7 * 0.5 + 0.25
        y[i] = s8


x.from_numpy(np.linspace(0, 1, N).astype(np.float32))
for name, k in (("unrolled", unrolled), ("renamed", renamed)):
    k()
    x.grad.fill(0.0)
    y.grad.fill(1.0)
    k.grad()
    ti.sync()
    g = x.grad.to_numpy()[N // 2]
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(50):
            k.grad()
        ti.sync()
        best = min(best, (time.perf_counter() - t0) / 50 * 1e6)
    print(f"{WHICH}: {name}.grad {best:.1f} us, x.grad[N/2] {g:.6f}")
if WHICH == "jitrt":
    infos = ti.debug.sizing_infos(unrolled)
    print("stacks of unrolled.grad:", infos[0].stack_names if infos else "none")
