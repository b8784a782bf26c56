"""`jr.profiler`: per-kernel launch counts and times, on request.

Stage: API over the runtime. With `jr.init(kernel_profiler=True)` (or
`JITRT_KERNEL_PROFILER=1`) every launcher the program generates times its native call with
`time.perf_counter` and adds it to the program's `KernelProfile`, keyed by the content-stable
kernel name (the adjoint is a separate row: its name ends in `.grad[...]`). When the option is
off the launchers contain no timing code at all, so it costs nothing per launch.

    jr.profiler.print_info()   # a table: kernel, launches, total/min/mean/max ms
    jr.profiler.stats()        # the same as {kernel name: {"count", "total_ms", ...}}
    jr.profiler.clear()

Taichi's names work too: `print_kernel_profiler_info()`, `clear_kernel_profiler_info()`,
`query_kernel_profiler_info(name)` (an object with `counter`, `min`, `max`, `avg` in ms, over
the kernel's specializations) and `get_kernel_profiler_total_time()` (seconds).
"""
from __future__ import annotations

from .runtime import program as program_mod
from .runtime.profile import KernelProfile, KernelTimes

__all__ = ["KernelProfile", "KernelTimes", "clear", "clear_kernel_profiler_info",
           "get_kernel_profiler_total_time", "print_info", "print_kernel_profiler_info",
           "query_kernel_profiler_info", "stats"]


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


class KernelQuery:
    """Taichi's `KernelProfilerQueryResult`: launches and times (ms) of one kernel."""

    def __init__(self, counter: int, min: float, max: float, avg: float) -> None:
        self.counter, self.min, self.max, self.avg = counter, min, max, avg

    def __repr__(self) -> str:
        return (f"KernelQuery(counter={self.counter}, min={self.min:.4f}, max={self.max:.4f}, "
                f"avg={self.avg:.4f})")


def query_kernel_profiler_info(name: str) -> KernelQuery:
    """Taichi's query by kernel name: every specialization of the kernel `name` (rows
    `module.name[...]`; the adjoint's `module.name.grad[...]`, queried as "name.grad") taken
    together; zeros if never launched."""
    def base(row: str) -> str:
        return row.split("[", 1)[0]
    rows = [s for row, s in stats().items()
            if base(row) == name or base(row).endswith("." + name)]
    count = sum(int(s["count"]) for s in rows)
    if not count:
        return KernelQuery(0, 0.0, 0.0, 0.0)
    return KernelQuery(count, min(s["min_ms"] for s in rows), max(s["max_ms"] for s in rows),
                       sum(s["total_ms"] for s in rows) / count)


def get_kernel_profiler_total_time() -> float:
    """Taichi's name: the time of every profiled launch, in seconds."""
    return sum(s["total_ms"] for s in stats().values()) / 1e3


def print_kernel_profiler_info(mode: str = "count") -> None:
    """Taichi's name for `print_info()` (its `mode` only changes Taichi's layout)."""
    print_info()


def clear_kernel_profiler_info() -> None:
    """Taichi's name for `clear()`."""
    clear()


def __getattr__(name: str) -> object:
    """A name of Taichi's ti.profiler jitrt lacks: an AttributeError that says what to use."""
    from .peer_names import missing
    raise missing("jitrt.profiler", name)
