"""Gradient against forward time of stencil kernels whose inner serial loop calls funcs: the
shape of DiffTaichi's wave.py (`fdtd`) and smoke (`compute_p`, `advect`), written here anew.

    python benchmarks/ad_recompute.py [--grid 256] [--reps 40]

Their inner loops assign only iteration-local locals (the funcs' parameters and results,
wrapped indices, stencil values), which the grad kernel recomputes instead of stacking
(docs/adstack.md, "Which locals get an adstack"). One process: each kernel and its gradient
are compiled, warmed, then launched `--reps` times at varying time steps; the table gives
the minimum and median ms per launch, the gradient/forward ratio of the minima and the
adstacks of each grad kernel. CPU, f32.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import jitrt as jr


def build(g: int, steps: int) -> dict[str, tuple[Any, Callable[[int], tuple]]]:
    p = jr.field(jr.f32, shape=(steps, g, g), needs_grad=True)
    q = jr.field(jr.f32, shape=(steps, g, g), needs_grad=True)
    vel = jr.Vector.field(2, jr.f32, shape=(steps, g, g), needs_grad=True)

    @jr.func
    def at(t, i, j):
        return p[t, i, j] if 0 <= i < g and 0 <= j < g else 0.0

    @jr.func
    def lap(t, i, j):
        return at(t, i + 1, j) + at(t, i - 1, j) + at(t, i, j + 1) + at(t, i, j - 1) - \
            4.0 * at(t, i, j)

    @jr.kernel
    def wave(t: jr.i32):
        for i in range(g):
            for j in range(g):
                a = lap(t - 1, i, j)
                b = lap(t - 2, i, j)
                p[t, i, j] = 2.0 * p[t - 1, i, j] - p[t - 2, i, j] + 0.1 * a + 0.01 * b

    @jr.func
    def below(i):
        k = i - 1
        if k < 0:
            k = g - 1
        return k

    @jr.func
    def above(i):
        k = i + 1
        if k >= g:
            k = 0
        return k

    @jr.kernel
    def jacobi(t: jr.i32):
        for y in range(g):
            for x in range(g):
                q[t, y, x] = 0.25 * (q[t - 1, below(y), x] + q[t - 1, above(y), x] +
                                     q[t - 1, y, below(x)] + q[t - 1, y, above(x)])

    @jr.func
    def wrap(k):
        r = k % g
        if r < 0:
            r += g
        return r

    @jr.kernel
    def advect(t: jr.i32):
        for y in range(g):
            for x in range(g):
                cy = y - vel[t - 1, y, x][0]
                cx = x - vel[t - 1, y, x][1]
                iy = jr.cast(jr.floor(cy), jr.i32)
                ix = jr.cast(jr.floor(cx), jr.i32)
                fy = cy - iy
                fx = cx - ix
                iy = wrap(iy)
                ix = wrap(ix)
                jy = above(iy)
                jx = above(ix)
                q[t, y, x] = (1 - fy) * ((1 - fx) * q[t - 1, iy, ix] + fx * q[t - 1, iy, jx]) + \
                    fy * ((1 - fx) * q[t - 1, jy, ix] + fx * q[t - 1, jy, jx])

    return {"wave fdtd-like": (wave, lambda k: (2 + k % (steps - 2),)),
            "smoke compute_p-like": (jacobi, lambda k: (1 + k % (steps - 1),)),
            "smoke advect-like": (advect, lambda k: (1 + k % (steps - 1),))}


def timed(fn: Callable, args: Callable[[int], tuple], reps: int) -> tuple[float, float]:
    times = []
    for k in range(reps):
        t0 = time.perf_counter()
        fn(*args(k))
        jr.sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, default=256)
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args()
    jr.init(arch=jr.cpu, offline_cache=False)
    kernels = build(args.grid, 24)
    print(f"grid {args.grid}^2, {args.reps} launches each, ms per launch (min / median)")
    print(f"{'kernel':24} {'forward':>17} {'gradient':>17} {'grad/fwd':>9} {'adstacks':>9}")
    for name, (kernel, kargs) in kernels.items():
        kernel(*kargs(0))
        kernel.grad(*kargs(0))
        fwd = timed(kernel, kargs, args.reps)
        grad = timed(kernel.grad, kargs, args.reps)
        stacks = sum(len(info.stack_names) for info in jr.debug.sizing_infos(kernel))
        print(f"{name:24} {fwd[0]:8.3f} {fwd[1]:8.3f} {grad[0]:8.3f} {grad[1]:8.3f} "
              f"{grad[0] / fwd[0]:8.1f}x {stacks:9d}")


if __name__ == "__main__":
    main()
