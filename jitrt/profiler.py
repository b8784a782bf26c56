"""`jr.profiler`: per-kernel launch counts and times, on request.

Stage: API over the runtime. With `jr.init(kernel_profiler=True)` (or
`JITRT_KERNEL_PROFILER=1`) every launcher the program generates times its native call with
`time.perf_counter` and adds it to the program's `KernelProfile`, keyed by the content-stable
kernel name (the adjoint is a separate row: its name ends in `.grad[...]`). When the option is
off the launchers contain no timing code at all, so it costs nothing per launch.

    jr.profiler.print_info()   # a table: kernel, launches, total/min/mean/max ms
    jr.profiler.stats()        # the same as {kernel name: {"count", "total_ms", ...}}
    jr.profiler.clear()
"""
from __future__ import annotations

from .runtime import program as program_mod
from .runtime.profile import KernelProfile, KernelTimes

__all__ = ["KernelProfile", "KernelTimes", "clear", "print_info", "stats"]


def stats() -> dict[str, dict[str, float]]:
    """Per kernel: count, total_ms, min_ms, mean_ms, max_ms (kernels launched at least once)."""
    profile = program_mod.current().profile
    if profile is None:
        raise RuntimeError("the kernel profiler is off: jr.init(kernel_profiler=True) or "
                           "JITRT_KERNEL_PROFILER=1")
    return {name: {"count": t.count, "total_ms": t.total * 1e3, "min_ms": t.min * 1e3,
                   "mean_ms": t.total / t.count * 1e3, "max_ms": t.max * 1e3}
            for name, t in profile.kernels.items() if t.count}


def print_info() -> None:
    """Print the profile as a table, the most expensive kernel first."""
    rows = sorted(stats().items(), key=lambda kv: -kv[1]["total_ms"])
    width = max([len(name) for name, _ in rows] + [6])
    print(f"{'kernel':<{width}}  {'launches':>8}  {'total ms':>10}  {'min ms':>8}  "
          f"{'mean ms':>8}  {'max ms':>8}")
    for name, s in rows:
        print(f"{name:<{width}}  {s['count']:>8}  {s['total_ms']:>10.3f}  {s['min_ms']:>8.3f}  "
              f"{s['mean_ms']:>8.3f}  {s['max_ms']:>8.3f}")


def clear() -> None:
    profile = program_mod.current().profile
    if profile is not None:
        for t in profile.kernels.values():
            t.count, t.total, t.min, t.max = 0, 0.0, float("inf"), 0.0
