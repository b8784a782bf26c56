"""One fresh measurement process: one workload on one runtime, one JSON line out.

    python worker.py {mpm2d,mass_spring} {taichi,jitrt} --warmup 2 --repeats 5 --steps 3
                     [--dump FILE.npz] [--profile]

Sets DIFFSIM_TI (the workload's only switch) before importing the workload, which then
initialises the runtime with its defaults (every core). The first step compiles; its
`check()` values (loss, gradients) go to --dump for run.py to compare. After --warmup steps
in all, --repeats timed loops of --steps steps each; a timed loop is `perf_counter_ns` around
the steps and the runtime's `sync()`. With --profile the kernel profiler is on and, instead of
timings, the worker prints per-kernel totals over --steps steps (profiler overhead included:
never mix these with the timed figures).
"""
import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def thread_count(ti, runtime: str) -> int:
    """The runtime's CPU thread count as the runtime itself reports it."""
    if runtime == "jitrt":
        from jitrt.runtime import program
        return int(program.current().device.max_resident_threads)
    return int(ti.lang.impl.current_cfg().cpu_max_num_threads)


def ran_on(ti, runtime: str) -> str:
    """The arch the runtime runs on (after a fallback, not the one asked for)."""
    if runtime == "jitrt":
        from jitrt.runtime import program
        return str(program.current().arch)
    name = str(ti.lang.impl.current_cfg().arch).rsplit(".", 1)[-1]
    return "cpu" if name in ("x64", "arm64") else name


def kernel_profile(ti, runtime: str) -> dict[str, dict[str, float]]:
    """{kernel: {"count", "total_ms"}} from the runtime's own kernel profiler."""
    if runtime == "jitrt":
        return {name: {"count": s["count"], "total_ms": s["total_ms"]}
                for name, s in ti.profiler.stats().items()}
    # Taichi 1.7.4's public API only prints its table; these are the records it prints
    prof = ti.profiler.kernel_profiler.get_default_kernel_profiler()
    prof._update_records()
    prof._count_statistics()
    return {name: {"count": r.counter, "total_ms": r.total_time}
            for name, r in prof._statistical_results.items()}


def clear_profile(ti, runtime: str) -> None:
    if runtime == "jitrt":
        ti.profiler.clear()
    else:
        ti.profiler.clear_kernel_profiler_info()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["mpm2d", "mass_spring"])
    ap.add_argument("runtime", choices=["taichi", "jitrt"])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dump", type=Path)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    os.environ["DIFFSIM_TI"] = args.runtime
    os.environ["DIFFSIM_PROFILE"] = "1" if args.profile else "0"
    sys.path.insert(0, str(HERE))
    t0 = time.perf_counter()
    wl = importlib.import_module(args.workload)      # imports the runtime and calls ti.init
    ti = wl.ti
    setup_ms = (time.perf_counter() - t0) * 1e3
    version = ti.__version__        # Taichi: a tuple of ints
    out = {"runtime": args.runtime, "threads": thread_count(ti, args.runtime),
           "ran_on": ran_on(ti, args.runtime),
           "version": version if isinstance(version, str) else ".".join(map(str, version)),
           "setup_ms": setup_ms}
    t0 = time.perf_counter()
    wl.step()
    ti.sync()
    out["first_ms"] = (time.perf_counter() - t0) * 1e3
    if args.dump:
        import numpy as np
        np.savez(args.dump, **wl.check())
    for _ in range(args.warmup - 1):
        wl.step()
    ti.sync()
    if args.profile:
        clear_profile(ti, args.runtime)
        t0 = time.perf_counter_ns()
        for _ in range(args.steps):
            wl.step()
        ti.sync()
        out["profiled_ms_per_step"] = (time.perf_counter_ns() - t0) / 1e6 / args.steps
        out["kernels"] = kernel_profile(ti, args.runtime)
        out["steps"] = args.steps
    else:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter_ns()
            for _ in range(args.steps):
                wl.step()
            ti.sync()
            times.append((time.perf_counter_ns() - t0) / 1e6 / args.steps)
        out["ms_per_step"] = times
    out["final_loss"] = float(wl.loss[None])
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
