"""Throughput of generated code: jitrt kernels against numpy (and numba when it is installed).

    python benchmarks/throughput.py [--n 16777216] [--grid 2048] [--threads 1,0]
                                    [--rounds 11] [--repeats 5] [--pause 0.2] [--kernels stencil]

Kernels (f32): a copy (the memory-bandwidth reference), saxpy `y = a*x + y`, a 5-point stencil
over a grid x grid array (`jr.ndrange`), a gather `y[i] = x[idx[i]] * 2`, eight `sin` per
element, a sum into one element (`out[0] += x[i]`), and two more of the same kinds: a dot
product into one element and a 2-D blend `v = a*u + (1-a)*v` over the grid. Each is checked
against numpy, warmed up, then timed for each thread count in `--threads` (0: all cores), in
one process. numba (`@njit(parallel=True)`, its defaults) is measured only if it imports; it
is not a dependency.

How it is timed, for a shared machine: the implementations of a kernel take turns, `--rounds`
rounds of one block of `--repeats` calls each (the order rotates every round), with a
`--pause` before each block so that one pool's spinning threads do not run into the other's
block. Each call is timed twice: elapsed time, and the CPU time of the whole process (every
thread's: the caller's and the pools' workers', counting their spinning), which does not count
the waits for a core that a loaded machine adds to elapsed time. A block counts as its median
call. The table gives, per kernel, the median over rounds of each implementation's blocks
(wall ms), GB/s from it, and the ratios jitrt/numba of the two clocks: the median over rounds
of the ratio of the round's two blocks, with its spread (25th and 75th percentiles over the
rounds). On one thread the CPU-time ratio is the one to trust on a busy machine; with more
threads than free cores both clocks are disturbed (a descheduled thread stalls a fixed
split; spinning workers burn CPU while they wait).
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

ND = jr.types.ndarray


@jr.kernel
def copy(x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = x[i]


@jr.kernel
def saxpy(a: jr.f32, x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


@jr.kernel
def stencil(u: ND(dtype=jr.f32, ndim=2), v: ND(dtype=jr.f32, ndim=2)):
    for i, j in jr.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]


@jr.kernel
def gather(x: ND(dtype=jr.f32, ndim=1), idx: ND(dtype=jr.i32, ndim=1),
           y: ND(dtype=jr.f32, ndim=1)):
    for i in range(idx.shape[0]):
        y[i] = x[idx[i]] * 2.0


@jr.kernel
def sines(x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        v = x[i]
        for _ in jr.static(range(8)):
            v = jr.sin(v)
        y[i] = v


@jr.kernel
def total(x: ND(dtype=jr.f32, ndim=1), out: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        out[0] += x[i]


# two more of the same kinds, not among the five: a dot product and a 2-D blend
@jr.kernel
def dot(x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1), out: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        out[0] += x[i] * y[i]


@jr.kernel
def blend(a: jr.f32, u: ND(dtype=jr.f32, ndim=2), v: ND(dtype=jr.f32, ndim=2)):
    for i, j in jr.ndrange(u.shape[0], u.shape[1]):
        v[i, j] = a * u[i, j] + (1.0 - a) * v[i, j]


def numba_kernels() -> dict[str, Any] | None:
    """The same loops under numba's `@njit(parallel=True)` (its defaults), or None when numba
    is not installed (it is not a dependency)."""
    try:
        import numba
    except ImportError:
        return None
    prange = numba.prange

    @numba.njit(parallel=True)
    def nb_copy(x, y):  # type: ignore[no-untyped-def]
        for i in prange(x.shape[0]):
            y[i] = x[i]

    @numba.njit(parallel=True)
    def nb_saxpy(a, x, y):  # type: ignore[no-untyped-def]
        for i in prange(x.shape[0]):
            y[i] = a * x[i] + y[i]

    @numba.njit(parallel=True)
    def nb_stencil(u, v):  # type: ignore[no-untyped-def]
        for i in prange(1, u.shape[0] - 1):
            for j in range(1, u.shape[1] - 1):
                v[i, j] = np.float32(0.25) * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                              + u[i, j + 1]) - u[i, j]

    @numba.njit(parallel=True)
    def nb_gather(x, idx, y):  # type: ignore[no-untyped-def]
        for i in prange(idx.shape[0]):
            y[i] = x[idx[i]] * np.float32(2.0)

    @numba.njit(parallel=True)
    def nb_sines(x, y):  # type: ignore[no-untyped-def]
        for i in prange(x.shape[0]):
            v = x[i]
            for _ in range(8):
                v = np.sin(v)
            y[i] = v

    @numba.njit(parallel=True)
    def nb_total(x):  # type: ignore[no-untyped-def]
        s = np.float32(0.0)
        for i in prange(x.shape[0]):
            s += x[i]
        return s

    @numba.njit(parallel=True)
    def nb_dot(x, y):  # type: ignore[no-untyped-def]
        s = np.float32(0.0)
        for i in prange(x.shape[0]):
            s += x[i] * y[i]
        return s

    @numba.njit(parallel=True)
    def nb_blend(a, u, v):  # type: ignore[no-untyped-def]
        for i in prange(u.shape[0]):
            for j in range(u.shape[1]):
                v[i, j] = a * u[i, j] + (np.float32(1.0) - a) * v[i, j]

    return {"copy": nb_copy, "saxpy": nb_saxpy, "stencil": nb_stencil, "gather": nb_gather,
            "sines": nb_sines, "total": nb_total, "dot": nb_dot, "blend": nb_blend,
            "version": numba.__version__,
            "set_threads": numba.set_num_threads, "max_threads": numba.config.NUMBA_NUM_THREADS}


def block(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(elapsed ms, process CPU ms) of the median call of `calls` calls of `fn`."""
    walls, cpus = [], []
    for _ in range(calls):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def interleaved(impls: dict[str, Callable[[], Any]], rounds: int, calls: int,
                pause: float) -> dict[str, list[tuple[float, float]]]:
    """Per implementation, its blocks (`block`), one a round, the implementations taking
    turns in an order that rotates every round."""
    for fn in impls.values():
        fn()
    jr.sync()      # jitrt: the optimised copy of a tiered compile lands before the timing
    names = list(impls)
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(pause)
            out[name].append(block(impls[name], calls))
    return out


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[1], q[2]


def ratio_cell(ours: list[float], theirs: list[float]) -> str:
    """`median [p25-p75]` of the per-round ratios ours/theirs."""
    lo, mid, hi = quartiles([a / b for a, b in zip(ours, theirs)])
    return f"{mid:5.2f}x [{lo:4.2f}-{hi:4.2f}]"


def cases(n: int, grid: int, rng: np.random.Generator,
          nb: dict[str, Any] | None) -> list[tuple[str, int, Any, Any, Any]]:
    """(name, bytes moved, jitrt call, numpy call, numba call or None) per kernel."""
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    idx = rng.integers(0, n, n, dtype=np.int32)
    u = rng.random((grid, grid), dtype=np.float32)
    v = np.zeros_like(u)
    out = np.zeros(1, np.float32)
    ys = np.zeros_like(x)
    f4 = 4

    def np_stencil() -> np.ndarray:
        w = np.zeros_like(u)
        w[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) \
            - u[1:-1, 1:-1]
        return w

    def np_sines() -> np.ndarray:
        w = x
        for _ in range(8):
            w = np.sin(w)
        return w

    def jr_total() -> None:
        out[0] = 0.0
        total(x, out)

    a = np.float32(2.0)
    nbc: dict[str, Any] = {}
    if nb is not None:
        nbc = {"copy": lambda: nb["copy"](x, ys), "saxpy": lambda: nb["saxpy"](a, x, y),
               "stencil": lambda: nb["stencil"](u, v), "gather": lambda: nb["gather"](x, idx, ys),
               "sines": lambda: nb["sines"](x, ys), "total": lambda: nb["total"](x),
               "dot": lambda: nb["dot"](x, y), "blend": lambda: nb["blend"](a, u, v)}

    def jr_dot() -> None:
        out[0] = 0.0
        dot(x, y, out)
    return [
        ("copy", 2 * n * f4, lambda: copy(x, ys), lambda: ys.__setitem__(slice(None), x),
         nbc.get("copy")),
        ("saxpy", 3 * n * f4, lambda: saxpy(2.0, x, y), lambda: np.add(2.0 * x, y),
         nbc.get("saxpy")),
        (f"stencil {grid}x{grid}", 2 * grid * grid * f4, lambda: stencil(u, v), np_stencil,
         nbc.get("stencil")),
        ("gather", 3 * n * f4, lambda: gather(x, idx, ys), lambda: x[idx] * 2,
         nbc.get("gather")),
        ("8 x sin", 2 * n * f4, lambda: sines(x, ys), np_sines, nbc.get("sines")),
        ("sum into out[0]", n * f4, jr_total, lambda: x.sum(), nbc.get("total")),
        ("dot into out[0]", 2 * n * f4, jr_dot, lambda: np.dot(x, y), nbc.get("dot")),
        (f"blend {grid}x{grid}", 3 * grid * grid * f4, lambda: blend(0.25, u, v),
         lambda: 0.25 * u + 0.75 * v, nbc.get("blend")),
    ]


def check(n: int, grid: int) -> None:
    """The kernels compute what numpy computes (small sizes)."""
    rng = np.random.default_rng(1)
    x = rng.random(n, dtype=np.float32)
    idx = rng.integers(0, n, n, dtype=np.int32)
    y = np.zeros_like(x)
    gather(x, idx, y)
    assert np.allclose(y, x[idx] * 2)
    sines(x, y)
    w = x
    for _ in range(8):
        w = np.sin(w)
    assert np.allclose(y, w, rtol=1e-5)
    u = rng.random((grid, grid), dtype=np.float32)
    v = np.zeros_like(u)
    stencil(u, v)
    ref = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - u[1:-1, 1:-1]
    assert np.allclose(v[1:-1, 1:-1], ref, rtol=1e-5, atol=1e-6)
    out = np.zeros(1, np.float32)
    total(x, out)
    assert np.isclose(out[0], x.sum(dtype=np.float64), rtol=1e-4)
    out[0] = 0.0
    dot(x, x, out)
    assert np.isclose(out[0], (x.astype(np.float64) ** 2).sum(), rtol=1e-4)
    w = v.copy()
    blend(0.25, u, v)
    assert np.allclose(v, 0.25 * u + 0.75 * w, rtol=1e-6)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--grid", type=int, default=2048)
    ap.add_argument("--threads", default="1,0", help="thread counts, 0 = all cores")
    ap.add_argument("--rounds", type=int, default=11, help="blocks of each implementation")
    ap.add_argument("--repeats", type=int, default=5, help="calls per block")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds before each block")
    ap.add_argument("--kernels", default="", help="comma-separated name prefixes (default: all)")
    args = ap.parse_args(argv)
    nb = numba_kernels()
    chosen = [k for k in args.kernels.split(",") if k]
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        jr.init(offline_cache=False, num_threads=threads or None)
        check(4096, 64)
        count = jr.runtime.program.current().pool.num_threads
        if nb is not None:
            nb["set_threads"](min(count, nb["max_threads"]))
        for name, nbytes, jr_call, np_call, nb_call in cases(args.n, args.grid,
                                                               np.random.default_rng(0), nb):
            if chosen and not any(name.startswith(k) for k in chosen):
                continue
            impls = {"jitrt": jr_call, "numpy": np_call}
            if nb_call is not None:
                impls["numba"] = nb_call
            got = interleaved(impls, args.rounds, args.repeats, args.pause)
            rows.append((count, name, nbytes, got))
    print_table(args, nb, rows)
    return 0


def print_table(args: argparse.Namespace, nb: dict[str, Any] | None,
                rows: list[tuple[int, str, int, dict[str, list[tuple[float, float]]]]]) -> None:
    print(f"throughput: n={args.n}, grid={args.grid}, f32, {args.rounds} interleaved rounds "
          f"of {args.repeats} calls (median call of a block, median block; ratios: median "
          f"[p25-p75] over rounds); numpy {np.__version__} (single-threaded)"
          + (f"; numba {nb['version']} @njit(parallel=True)" if nb else "; numba not installed"))
    print(f"{'threads':>7}  {'kernel':<18} {'jitrt ms':>9} {'GB/s':>6} {'numpy ms':>9} "
          f"{'numba ms':>9} {'jitrt/numba wall':>21} {'jitrt/numba cpu':>21}")
    for count, name, nbytes, got in rows:
        wall = {k: [w for w, _ in v] for k, v in got.items()}
        cpu = {k: [c for _, c in v] for k, v in got.items()}
        jr_ms = statistics.median(wall["jitrt"])
        nb_ms = statistics.median(wall["numba"]) if "numba" in got else float("nan")
        cells = [ratio_cell(clock["jitrt"], clock["numba"]) if "numba" in got else
                 f"{'nan':>21}" for clock in (wall, cpu)]
        print(f"{count:>7}  {name:<18} {jr_ms:9.2f} {nbytes / jr_ms / 1e6:6.1f} "
              f"{statistics.median(wall['numpy']):9.2f} {nb_ms:9.2f} {cells[0]:>21} "
              f"{cells[1]:>21}")


if __name__ == "__main__":
    raise SystemExit(main())
