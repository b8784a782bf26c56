"""Sum an Nsight Compute CSV (`--metrics gpu__time_duration.sum --csv --print-units base`)
per kernel: launches, total and mean device time, and the device time a step.

    python3 tools/genesis/ncu_table.py LOG.csv STEPS [TOP] [SCENE_LOG]

SCENE_LOG: scene.py's output, whose `KERNEL <prefix> <name>` lines (jitrt runs) name the
`jk_<hash>` device kernels.

Kernel names are shortened to what jitrt and Quadrants both keep of the Python kernel's
name, so the two runs' tables can be read side by side.
"""
from __future__ import annotations

import csv
import re
import sys
from collections import defaultdict


def _short(name: str, kernels: dict[str, str]) -> str:
    """`jk_<hash>_<task>` (jitrt, named through `kernels`) /
    `kernel_step_1_c80_0_kernel_3_range_for` (Quadrants) -> `kernel_step_1` plus the task."""
    name = name.split("(")[0]
    for prefix, py in kernels.items():
        if name.startswith(prefix):
            return py + " " + name[len(prefix):].lstrip("_")
    return re.sub(r"_c\d+_\d+_kernel_(\d+)_(\w+)$", r" #\1 \2", name)


def main() -> None:
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    kernels: dict[str, str] = {}
    if len(sys.argv) > 4:
        for line in open(sys.argv[4], encoding="utf-8", errors="replace"):
            if line.startswith("KERNEL "):
                _, prefix, py = line.split(maxsplit=2)
                kernels[prefix] = py.strip()
    rows = [line for line in open(path, encoding="utf-8", errors="replace")
            if line.startswith('"')]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for rec in csv.DictReader(rows):
        if rec.get("Metric Name") != "gpu__time_duration.sum":
            continue
        entry = totals[_short(rec["Kernel Name"], kernels)]
        entry[0] += 1
        entry[1] += float(rec["Metric Value"].replace(",", "")) * 1e-3  # ns -> us
    launches = sum(int(c) for c, _ in totals.values())
    device = sum(t for _, t in totals.values())
    print(f"ncu {path}: {launches} launches in {steps} steps, "
          f"{launches / max(steps, 1):.1f} a step, device {device / max(steps, 1):.1f} us a step")
    print(f"{'kernel':<70} {'launches':>8} {'us/step':>9} {'mean us':>8}")
    for name, (count, total) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{name[:70]:<70} {int(count):>8} {total / steps:>9.2f} {total / count:>8.2f}")


if __name__ == "__main__":
    main()
