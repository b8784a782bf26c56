"""One table of `gpu.sh run` logs in a folder: per scene and batch size, each run's device time
a step (with `PROFILE`), synchronised step time and build time, its ratio to the Quadrants run
of the same scene and size, and the largest difference of its final state from Quadrants'.

    python3 tools/genesis/compare_runs.py DIR [DIR ...]

Logs are `<mode>[-<tree>]-<scene>-<n_envs>.log` (gpu.sh's names); a folder per Genesis array
mode (performance or not) keeps the two apart. Prints nothing of its own otherwise.
"""
from __future__ import annotations

import os
import re
import sys


def read(path: str) -> dict[str, object]:
    text = open(path, errors="replace").read()

    def number(pattern: str) -> float | None:
        m = re.search(pattern, text)
        return float(m.group(1)) if m else None
    state = re.search(r"^RESULT state (.*)$", text, re.M)
    return {"device": number(r"PROFILE total [\d.]+ device activities a step, ([\d.]+) us"),
            "synced": number(r"RESULT synced_ms_per_step ([\d.]+)"),
            "build": number(r"STAGE build ok ([\d.]+)"),
            "failed": "FAILED" in text,
            "state": [float(v) for v in state.group(1).split()] if state else None}


def main(folders: list[str]) -> None:
    print(f"{'folder':14s} {'scene':7s} {'n_envs':>6s} {'run':22s} {'device us':>9s} {'x Q':>6s} "
          f"{'synced ms':>9s} {'x Q':>6s} {'build s':>7s} {'state diff':>10s}")
    for folder in folders:
        runs: dict[tuple[str, int], dict[str, dict[str, object]]] = {}
        for name in sorted(os.listdir(folder)):
            m = re.match(r"(.+)-(box|franka|grasp)-(\d+)\.log$", name)
            if m:
                runs.setdefault((m.group(2), int(m.group(3))), {})[m.group(1)] = \
                    read(os.path.join(folder, name))
        for (scene, n_envs), by_run in sorted(runs.items()):
            ref = by_run.get("quadrants", {})
            for run, r in sorted(by_run.items(), key=lambda kv: kv[0] == "quadrants"):
                def ratio(key: str) -> str:
                    a, b = r.get(key), ref.get(key)
                    return f"{a / b:6.2f}" if isinstance(a, float) and isinstance(b, float) \
                        and run != "quadrants" else f"{'':6s}"

                def show(key: str, width: int, digits: int) -> str:
                    v = r.get(key)
                    return f"{v:{width}.{digits}f}" if isinstance(v, float) else f"{'-':>{width}s}"
                sa, sb = r.get("state"), ref.get("state")
                diff = (f"{max(abs(x - y) for x, y in zip(sa, sb)):10.2e}"
                        if isinstance(sa, list) and isinstance(sb, list) and run != "quadrants"
                        else f"{'':10s}")
                print(f"{os.path.basename(folder.rstrip('/'))[:14]:14s} {scene:7s} {n_envs:6d} "
                      f"{run[:22] + (' FAILED' if r['failed'] else ''):22s} "
                      f"{show('device', 9, 1)} {ratio('device')} {show('synced', 9, 3)} "
                      f"{ratio('synced')} {show('build', 7, 1)} {diff}")


if __name__ == "__main__":
    main(sys.argv[1:])
