"""Launch times per kernel, kept by a program whose `kernel_profiler` option is on.

Stage: runtime. The generated launchers add each launch's native-call time to the
`KernelTimes` of their kernel name (`launch_source.entry_lines`); `jitrt/profiler.py` reads
them for users.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelTimes:
    count: int = 0
    total: float = 0.0
    min: float = float("inf")
    max: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        if seconds < self.min:
            self.min = seconds
        if seconds > self.max:
            self.max = seconds


@dataclass
class KernelProfile:
    """The times of one program's launches, by kernel name."""
    kernels: dict[str, KernelTimes] = field(default_factory=dict)

    def times(self, name: str) -> KernelTimes:
        """The record a launcher adds to (created when the launcher is generated)."""
        return self.kernels.setdefault(name, KernelTimes())
