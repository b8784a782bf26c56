"""The plane-and-box scene, run inside a venv made by tools/genesis/run.py.

Stages, each printed as one line `STAGE <name> ok <seconds>` when it completes: import (of
genesis), init (gs.init on the CPU), scene (plane + one box, rigid solver), build
(scene.build()), steps (the steps asked for), then `RESULT` lines with the box's final
position and the per-step time. The first exception ends the run: `FAILED <stage>` with its
traceback, exit status 1. Prints nothing else of its own (Genesis logs go to stderr).
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback


def _stage(name: str, fn, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    try:
        out = fn(*args)
    except BaseException:
        print(f"FAILED {name}", flush=True)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        raise SystemExit(1)
    print(f"STAGE {name} ok {time.perf_counter() - start:.3f}", flush=True)
    return out


def _import():  # type: ignore[no-untyped-def]
    import genesis as gs
    qd = sys.modules.get("quadrants")
    print(f"INFO quadrants is {getattr(qd, '__name__', None)} from "
          f"{getattr(qd, '__file__', None)}", flush=True)
    return gs


def _scene(gs):  # type: ignore[no-untyped-def]
    scene = gs.Scene(show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.2, 0.2, 0.2)))
    return scene, box


def _steps(scene, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        scene.step()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    gs = _stage("import", _import)
    _stage("init", lambda: gs.init(backend=gs.cpu, logging_level="warning"))
    scene, box = _stage("scene", _scene, gs)
    _stage("build", scene.build)
    times = _stage("steps", _steps, scene, args.steps)
    pos = [float(v) for v in box.get_pos().reshape(-1)[:3]]
    print(f"RESULT box_pos {pos[0]:.6f} {pos[1]:.6f} {pos[2]:.6f}")
    tail = sorted(times[len(times) // 2:])
    print(f"RESULT first_step_ms {times[0] * 1e3:.3f}")
    print(f"RESULT median_step_ms_second_half {tail[len(tail) // 2] * 1e3:.4f}")
    print(f"RESULT mean_step_ms_second_half {sum(tail) / len(tail) * 1e3:.4f}")


if __name__ == "__main__":
    main()
