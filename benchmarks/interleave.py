"""Interleaved iterations (passes/interleave.py) and taped partials (autodiff.tape_partials)
on the CPU, each turned off and on, in one process.

    python benchmarks/interleave.py [--n 1024] [--rounds 7] [--calls 300]

Each kernel is compiled three times under different names: "plain" with both off, "lanes"
with iterations interleaved (a parallel task with an inner loop runs 4 indices per pass of
its body), and "lanes+tape", which is what jitrt compiles (partials of the gradient's math
calls computed in the forward sweep, where LLVM pairs sin and cos into one sincos call). A
switch is off by patching its pass while that copy compiles (a benchmark-only switch). The
copies are timed in alternating rounds, so that the VM's load falls on all; the table gives
the median over rounds of each round's per-call time, and the ratios to "plain".

Kernels: the adstack benchmark's recurrence `v = sin(v) * 1.1 + 0.1` repeated n[i] times
(n[i] in 1..8 as in benchmarks/compare, or 8 everywhere), its forward and its gradient, and
a whole step as benchmarks/compare times it "by hand" (zero loss and grads, forward, seed,
gradient).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import jitrt as jr
from jitrt.passes import autodiff, interleave

VARIANTS = ("plain", "lanes", "lanes+tape")


def build(n: int, variant: str):
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    def chain(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v
    chain.__name__ = chain.__qualname__ = "chain_" + variant.replace("+", "_")
    kernel = jr.kernel(chain)
    return x, loss, kernel


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls / 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    jr.init(arch=jr.cpu, offline_cache=False)
    rng = np.random.default_rng(0)
    x0 = rng.random(args.n).astype(np.float32)
    counts = {"n[i] in 1..8": rng.integers(1, 9, args.n).astype(np.int32),
              "n[i] = 8": np.full(args.n, 8, np.int32)}
    variants = {}
    real_interleaved, real_taped = interleave.interleaved, autodiff.TAPED
    for variant in VARIANTS:
        if variant == "plain":
            interleave.interleaved = lambda task, lanes: None    # type: ignore[assignment]
        if variant != "lanes+tape":
            autodiff.TAPED = frozenset()
        x, loss, kernel = build(args.n, variant)
        x.from_numpy(x0)
        cnt = jr.ndarray(jr.i32, shape=(args.n,))

        def step(x=x, loss=loss, kernel=kernel, cnt=cnt) -> None:
            loss[None] = 0
            x.grad.fill(0)
            kernel(cnt)
            loss.grad[None] = 1
            kernel.grad(cnt)
        cnt.from_numpy(counts["n[i] in 1..8"])
        step()
        jr.sync()       # the optimised copies (built with the switches as set) have landed
        variants[variant] = (kernel, cnt, step)
        interleave.interleaved, autodiff.TAPED = real_interleaved, real_taped
    rows = []
    for label, data in counts.items():
        for _, cnt, _ in variants.values():
            cnt.from_numpy(data)
        for what in ("forward", "gradient", "step by hand"):
            times: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for _ in range(args.rounds):
                for variant, (kernel, cnt, step) in variants.items():
                    fn = {"forward": lambda k=kernel, c=cnt: k(c),
                          "gradient": lambda k=kernel, c=cnt: k.grad(c),
                          "step by hand": step}[what]
                    fn()
                    times[variant].append(per_call_us(fn, args.calls))
            rows.append((f"{what}, {label}", [statistics.median(times[v]) for v in VARIANTS]))
    print(f"N={args.n}, {args.rounds} rounds x {args.calls} calls, us per call (median of "
          "rounds)")
    print(f"{'kernel':34s}" + "".join(f"{v:>11s}" for v in VARIANTS) + "   ratios to plain")
    for name, us in rows:
        print(f"{name:34s}" + "".join(f"{t:11.1f}" for t in us) + "   " +
              " ".join(f"{t / us[0]:.2f}" for t in us[1:]))


if __name__ == "__main__":
    main()
