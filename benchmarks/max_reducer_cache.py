"""Per-launch cost of the adstack sizing service for kernels with 1 to 1000 max-reducer specs.

    python benchmarks/max_reducer_cache.py [--specs 1,10,100,1000] [--repeats 5]
                                           [--max-compile 60]

The kernels. For K specs, one grad kernel over two i32 ndarrays `a`, `b` (N = 4 elements) with
K inlined `chain(x[i], n_k)` calls, each a loop carrying its own local v -> sin(v) * 1.1 + 0.1,
so each gets its own adstack and its own max-reducer spec. Loop k is bounded by
`max(a[i], b[i]) - k` (k even) or `a[i] - k` (k odd): every spec is distinct, all specs read the
same two arrays (three distinct dependencies: a, a.shape[0], b), and the trip counts stay tiny
(the subtraction saturates at 0), so the kernel's own work does not drown the sizing work.
The chains are unrolled with `jr.static(range(...))`, ten per parallel loop (K/10 tasks): one
LLVM function with hundreds of loops compiles in super-linear time, ten per task in linear time.
If the extrapolated compile time of 1000 specs exceeds --max-compile seconds, 300 are used
instead and the output says so.

What is measured (median of --repeats repeats):
- "hit ns": the sizing service's own cost on a launch-cache hit, isolated. The launcher of a
  grad kernel is generated Python; its sizing part is three lines (build the dependency
  snapshot tuple, compare it with the cached one, count the hit). Those exact lines are
  taken from the generated launcher's source and compiled into a probe function with the
  launcher's own globals; the probe is timed in a loop, minus an empty function with the same
  signature (each repeat: the best of 5 interleaved bursts of 4000 calls, which filters
  preemption by other processes). This is the per-launch price of the service on hits; it
  should be flat in K.
- "launch us": a whole grad launch on a hit, for scale (it grows with K through the kernel's
  own work: K chains, K/10 parallel tasks).
- "miss +us": a launch after `b[0] = 0` (a host write: b's generation moves, the launch cache
  misses, the per-spec cache serves the specs that read only `a` and the reducers of the specs
  that read `b` run) minus a launch after `c[0] = 0` to an ndarray the kernel does not read
  (a hit). Both loops make one host write per launch, so the difference is the miss path.
Each size's gradient is checked against numpy.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    import jitrt as jr
except ImportError:  # run from a source checkout without installing: use the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import jitrt as jr

from jitrt.runtime import program as program_mod

N = 4
PER_TASK = 10
A_VALUE, B_VALUE = 2, 3


def build(k_specs: int, x: Any, loss: Any) -> Any:
    """The grad-able kernel with `k_specs` chains, `PER_TASK` per parallel loop."""
    per_task = min(k_specs, PER_TASK)
    tasks = k_specs // per_task

    @jr.func
    def chain(v, n):
        for _ in range(n):
            v = jr.sin(v) * 1.1 + 0.1
        return v

    @jr.kernel
    def many(a: jr.types.ndarray(dtype=jr.i32, ndim=1),
             b: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for t in jr.static(range(tasks)):
            for i in range(a.shape[0]):
                for g in jr.static(range(per_task)):
                    if jr.static((t * per_task + g) % 2 == 0):
                        loss[None] += chain(x[i], max(a[i], b[i]) - (t * per_task + g))
                    else:
                        loss[None] += chain(x[i], a[i] - (t * per_task + g))

    return many


def expected_grad(x0: np.ndarray, k_specs: int) -> np.ndarray:
    total = np.zeros_like(x0)
    for k in range(k_specs):
        count = max((max(A_VALUE, B_VALUE) if k % 2 == 0 else A_VALUE) - k, 0)
        v, d = x0.copy(), np.ones_like(x0)
        for _ in range(count):
            v, d = np.sin(v) * 1.1 + 0.1, d * np.cos(v) * 1.1
        total += d
    return total


def handle_of(kernel: Any) -> Any:
    program = program_mod.current()
    (handle,) = [h for h in kernel.grad.handles.values() if h.program is program]
    return handle


def sizing_probe(kernel: Any) -> tuple[Callable, Callable, Any]:
    """The sizing lines of `kernel.grad`'s generated launcher as a function of the launcher's
    arguments, an empty function of the same signature, and the handle's sizing state."""
    handle = handle_of(kernel)
    source = handle.launcher.source.split("\n")
    body = ["    " + line.strip() for line in source if line.strip().startswith("snap = ")
            or "lsz_last[0]" in line or "lsz_hits[0]" in line]
    if len(body) != 3:
        raise RuntimeError("unexpected launcher layout:\n" + handle.launcher.source)
    namespace = dict(handle.launcher.__globals__)
    header = source[0].replace("def launch(", "def probe(")
    exec("\n".join([header, *body]), namespace)  # noqa: S102
    exec(header.replace("def probe(", "def empty(") + "\n    pass", namespace)  # noqa: S102
    return namespace["probe"], namespace["empty"], handle.sizing


def per_call_ns(fn: Callable, args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(None, *args)
    return (time.perf_counter() - start) / calls * 1e9


def sizing_hit_ns(kernel: Any, args: tuple, repeats: int = 5, bursts: int = 5,
                  calls: int = 4000) -> float:
    """Median over `repeats` of the ns per launch that the sizing service adds on a
    launch-cache hit; each repeat takes the best of `bursts` interleaved bursts of probe and
    empty calls, so that a burst preempted by another process does not count."""
    probe, empty, sizing = sizing_probe(kernel)
    hits = sizing.hits[0]
    samples = []
    for _ in range(repeats):
        with_sizing, without = [], []
        for _ in range(bursts):
            with_sizing.append(per_call_ns(probe, args, calls))
            without.append(per_call_ns(empty, args, calls))
        samples.append(min(with_sizing) - min(without))
    if sizing.hits[0] - hits != calls * bursts * repeats:
        raise RuntimeError("the probe did not hit the launch cache")
    return statistics.median(samples)


def launch_us(kernel: Any, args: tuple, touch: Any, launches: int) -> float:
    start = time.perf_counter()
    for _ in range(launches):
        touch[0] = 0
        kernel.grad(*args)
    return (time.perf_counter() - start) / launches * 1e6


def measure(k_specs: int, repeats: int) -> dict:
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    a, b, c = (jr.ndarray(jr.i32, shape=(N,)) for _ in range(3))
    a.fill(A_VALUE)
    b.fill(B_VALUE)
    x0 = np.linspace(0.1, 0.7, N)
    x.from_numpy(x0)
    kernel = build(k_specs, x, loss)
    start = time.perf_counter()
    loss.grad[None] = 1.0
    kernel.grad(a, b)
    jr.sync()                     # the optimised copy (tiered compilation) is part of it
    compile_s = time.perf_counter() - start
    grad_ok = np.allclose(x.grad.to_numpy(), expected_grad(x0, k_specs), rtol=1e-9)
    specs = sum(len(i.max_reducer_specs) for i in jr.debug.sizing_infos(kernel))
    time.sleep(0.2)               # let the worker pool stop spinning: it shares our CPUs
    hit_ns = sizing_hit_ns(kernel, (a, b), repeats=repeats)
    launches = max(20, 2000 // k_specs)
    hit = [launch_us(kernel, (a, b), c, launches) for _ in range(repeats)]
    before = jr.debug.stats()
    miss = [launch_us(kernel, (a, b), b, launches) for _ in range(repeats)]
    after = jr.debug.stats()
    misses = after["launch_cache_misses"] - before["launch_cache_misses"]
    reduced = (after["max_reducer_dispatches"] - before["max_reducer_dispatches"]) / misses
    return {"specs": specs, "tasks": len(jr.debug.sizing_infos(kernel)),
            "deps": len(handle_of(kernel).compiled.sizing.deps), "compile_s": compile_s,
            "hit_ns": hit_ns,
            "launch_us": statistics.median(hit),
            "miss_us": statistics.median(miss) - statistics.median(hit),
            "reduced": reduced, "grad_ok": grad_ok and misses == launches * repeats}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default="1,10,100,1000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-compile", type=float, default=60.0)
    args = ap.parse_args(argv)
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    sizes = [int(s) for s in args.specs.split(",")]
    rows, notes = [], []
    for k in sizes:
        if rows and k > rows[-1]["specs"]:
            per_spec = rows[-1]["compile_s"] / rows[-1]["specs"]
            if per_spec * k > args.max_compile and k > 300:
                notes.append(f"{k} specs would take ~{per_spec * k:.0f} s to compile "
                             f"(> {args.max_compile:.0f} s): measured 300 instead")
                k = 300
        rows.append(measure(k, args.repeats))
    print(f"max-reducer cache, N={N}, median of {args.repeats} repeats, "
          f"{program_mod.current().pool.num_threads} threads, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'specs':>6} {'tasks':>6} {'deps':>5} {'compile s':>10} {'hit ns':>8} "
          f"{'launch us':>10} {'miss +us':>9} {'reduced/miss':>13} {'grad':>5}")
    for r in rows:
        print(f"{r['specs']:>6} {r['tasks']:>6} {r['deps']:>5} {r['compile_s']:>10.1f} "
              f"{r['hit_ns']:>8.0f} {r['launch_us']:>10.1f} {r['miss_us']:>9.1f} "
              f"{r['reduced']:>13.0f} {'OK' if r['grad_ok'] else 'BAD':>5}")
    for note in notes:
        print("note:", note)
    print("hit ns: the sizing service's own work per launch on a launch-cache hit (snapshot "
          "+ compare); launch us: a whole grad launch on a hit; miss +us: extra cost of a "
          "launch after one input changed")
    return 0 if all(r["grad_ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
