"""One measurement process for one runtime; run.py starts it in that runtime's venv.

    python worker.py RUNTIME TASK CACHE_DIR [--target-s 0.2] [--repeats 5]

RUNTIME is jitrt, numba, warp, taichi or quadrants (its kernels are in rt_<name>.py). It
imports the runtime (timed: `import_ms`, numpy already loaded), initialises it on the CPU with
CACHE_DIR as its kernel cache (timed: `init_ms`), then does TASK (`*_cpu_ms`: the CPU time of
the main thread in the same phases, which load on a shared machine moves less than the wall
time):
- `steady`: every launch case of `rt.launches` and every adstack step of `rt.adstack`, each
  warmed up, then timed `--repeats` times as one loop of calls between two
  `time.perf_counter_ns()` reads followed by the runtime's sync; microseconds per call;
- `first`: the time from after init to the first forward + gradient result of the adstack
  step (kernel definitions, allocations, compiles or cache loads included; `first_ms`).
Both check the adstack gradient against the analytic derivative (`grad_err`, max relative
error). The last line printed is one JSON object; a case that raised gives its error instead
of times.
"""
from __future__ import annotations

import argparse
import importlib
import json
import time

import numpy as np

RUNTIMES = {"jitrt": ("rt_jitrt", "jitrt"), "numba": ("rt_numba", "numba"),
            "warp": ("rt_warp", "warp"), "taichi": ("rt_taichi", "taichi"),
            "quadrants": ("rt_taichi", "quadrants")}
N_ADSTACK = 1024


def adstack_inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random(n).astype(np.float32), rng.integers(1, 9, n).astype(np.int32)


def grad_error(grad: np.ndarray, x0: np.ndarray, counts: np.ndarray) -> float:
    """Max relative error against d/dx of the chain v <- sin(v) * 1.1 + 0.1, counts[i] times."""
    v, want = x0.astype(np.float64), np.ones(len(x0))
    for step in range(int(counts.max())):
        live = step < counts
        want = np.where(live, want * np.cos(v) * 1.1, want)
        v = np.where(live, np.sin(v) * 1.1 + 0.1, v)
    return float(np.max(np.abs(np.asarray(grad, np.float64) - want) / (np.abs(want) + 1e-3)))


def loop_s(fn, args: tuple, calls: int, sync) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(*args)
    sync()
    return (time.perf_counter_ns() - t0) * 1e-9


def per_call_us(fn, args: tuple, sync, target_s: float, repeats: int) -> list[float]:
    """Warm up (the first call compiles; the sync waits for what it left running: a GPU's
    queue, jitrt's optimised copy of a tiered CPU compile), size the loop to about target_s,
    time `repeats` loops; microseconds per call for each."""
    fn(*args)
    sync()
    calls, spent = 1, loop_s(fn, args, 1, sync)
    while spent < target_s / 5:
        calls *= 4
        spent = loop_s(fn, args, calls, sync)
    calls = max(1, int(calls * target_s / spent))
    return [loop_s(fn, args, calls, sync) / calls * 1e6 for _ in range(repeats)]


def steady(rt, pkg, target_s: float, repeats: int) -> dict:
    def sync() -> None:
        rt.sync(pkg)

    times: dict[str, list[float] | str] = {}
    cases: dict = {}
    try:
        cases.update(rt.launches(pkg))
    except Exception as e:      # reported in its cell; the other workloads go on
        times["L0"] = times["L1"] = f"{type(e).__name__}: {e}"
    x0, counts = adstack_inputs(N_ADSTACK)
    grads, grad_err = None, None
    try:
        steps, grads = rt.adstack(pkg, x0, counts)
        cases.update({f"adstack {k}": (fn, ()) for k, fn in steps.items()})
    except Exception as e:
        times["adstack by hand"] = f"{type(e).__name__}: {e}"
    for name, (fn, args) in cases.items():
        try:
            times[name] = per_call_us(fn, args, sync, target_s, repeats)
            if name.startswith("adstack"):
                err = grad_error(np.array(grads(), copy=True), x0, counts)
                grad_err = err if grad_err is None else max(grad_err, err)
        except Exception as e:
            times[name] = f"{type(e).__name__}: {e}"
    return {"times": times, "grad_err": grad_err}


def first(rt, pkg) -> dict:
    x0, counts = adstack_inputs(N_ADSTACK)
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    steps, grads = rt.adstack(pkg, x0, counts)
    steps["by hand"]()
    grad = np.array(grads(), copy=True)
    first_ms = (time.perf_counter_ns() - t0) * 1e-6
    return {"first_ms": first_ms, "first_cpu_ms": (time.thread_time_ns() - c0) * 1e-6,
            "grad_err": grad_error(grad, x0, counts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runtime", choices=sorted(RUNTIMES))
    ap.add_argument("task", choices=("steady", "first"))
    ap.add_argument("cache_dir")
    ap.add_argument("--target-s", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    module, package = RUNTIMES[args.runtime]
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    pkg = importlib.import_module(package)
    import_ms = (time.perf_counter_ns() - t0) * 1e-6
    import_cpu_ms = (time.thread_time_ns() - c0) * 1e-6
    rt = importlib.import_module(module)
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    version = rt.init(pkg, args.cache_dir)
    init_ms = (time.perf_counter_ns() - t0) * 1e-6
    out = {"import_ms": import_ms, "init_ms": init_ms, "import_cpu_ms": import_cpu_ms,
           "init_cpu_ms": (time.thread_time_ns() - c0) * 1e-6, "version": version,
           "note": rt.NOTES.get(package, "")}
    if args.task == "steady":
        out.update(steady(rt, pkg, args.target_s, args.repeats))
    else:
        out.update(first(rt, pkg))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
