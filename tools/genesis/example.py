"""One of Genesis's example scripts, unchanged, on the CPU and without a viewer, for a bounded
number of steps, then every entity's state: to run the published examples on jitrt and on
Quadrants the same way (in the venvs of run.py) and compare what they computed.

    python tools/genesis/example.py EXAMPLE.py [--steps K] [-- EXAMPLE'S ARGS...]

`gs.init` is given `backend=gs.cpu` (whatever the script asks) and warning-level logging,
`gs.Scene` `show_viewer=False` (and the viewer options no `max_FPS`, which examples of other
Genesis releases set and 1.4.5 refuses); the run stops after K calls of `scene.step()` (default 100)
or at the script's end. Prints `STAGE <name> ok <seconds>` for the script's run and the
steps, then `RESULT steps N`, `RESULT step_ms` (the median step), and one `RESULT state`
line per rigid entity with a state (its generalised positions then velocities in the first
environment, 9 significant digits), or `FAILED <stage>` with the traceback.
"""
from __future__ import annotations

import argparse
import os
import runpy
import statistics
import sys
import time
import traceback
from typing import Any


class _Enough(Exception):
    """Raised from `scene.step` once the steps asked for are done."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("example")
    parser.add_argument("--steps", type=int, default=100)
    argv = sys.argv[1:]
    theirs = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    start = time.perf_counter()
    import genesis as gs
    from genesis.engine.scene import Scene
    print(f"STAGE import ok {time.perf_counter() - start:.3f}", flush=True)
    qd = sys.modules.get("quadrants")
    print(f"INFO quadrants is {getattr(qd, '__name__', None)}", flush=True)
    scenes: list[Any] = []
    times: list[float] = []
    init = gs.init

    def cpu_init(*a: Any, **kw: Any) -> Any:
        kw.update(backend=gs.cpu, logging_level="warning")
        return init(*a, **kw)
    gs.init = cpu_init
    scene_init, step = Scene.__init__, Scene.step

    def headless(self: Any, *a: Any, **kw: Any) -> None:
        kw["show_viewer"] = False
        scene_init(self, *a, **kw)
        scenes.append(self)

    def bounded(self: Any, *a: Any, **kw: Any) -> Any:
        if len(times) >= args.steps:
            raise _Enough
        t0 = time.perf_counter()
        out = step(self, *a, **kw)
        times.append(time.perf_counter() - t0)
        return out
    Scene.__init__, Scene.step = headless, bounded   # type: ignore[method-assign]
    # examples written for other Genesis releases set the viewer's `max_FPS`, which 1.4.5
    # refuses beside its default `refresh_rate`; the viewer is off, so it is dropped
    viewer_post_init = gs.options.ViewerOptions.model_post_init

    def without_max_fps(self: Any, context: Any) -> None:
        object.__setattr__(self, "max_FPS", None)
        viewer_post_init(self, context)
    gs.options.ViewerOptions.model_post_init = without_max_fps  # type: ignore[method-assign]
    sys.argv = [args.example, *theirs]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.example)))
    start = time.perf_counter()
    try:
        runpy.run_path(args.example, run_name="__main__")
    except (_Enough, SystemExit):
        pass
    except BaseException:
        print(f"FAILED run after {len(times)} steps", flush=True)
        traceback.print_exc(file=sys.stdout)
        raise SystemExit(1)
    print(f"STAGE run ok {time.perf_counter() - start:.3f}", flush=True)
    print(f"RESULT steps {len(times)}")
    if times:
        print(f"RESULT step_ms {statistics.median(times[len(times) // 2:]) * 1e3:.4f}")
    for scene in scenes:
        for k, entity in enumerate(scene.entities):
            if not hasattr(entity, "get_qpos") or not getattr(entity, "n_dofs", 0):
                continue
            n_envs = max(scene.n_envs, 1)
            qpos = entity.get_qpos().reshape(n_envs, -1)[0].tolist()
            vel = entity.get_dofs_velocity().reshape(n_envs, -1)[0].tolist()
            print(f"RESULT state {k} " + " ".join(f"{float(v):.9g}" for v in qpos + vel))


if __name__ == "__main__":
    main()
