"""Cold start versus warm start (offline cache) for the demo's kernels, in fresh processes.

    python benchmarks/cold_warm_start.py [--repeats 5]

Each run is a new Python process that imports jitrt, calls `jr.init` with its own cache
directory, builds the demo's kernels (integrate, kinetic_energy, max_height) and the adjoint of
a data-dependent adstack kernel, and launches each once. "import" is `import numpy, jitrt`;
"init" is `jr.init`; "first result" is the time from `jr.init` to the last of those results
(what the cache can change; the demo's scene, plain numpy, is built before it starts: its
`numpy.random` import is not jitrt's start-up); "process" is the whole process wall time seen
by the parent (interpreter start and imports included). Cold runs use an empty directory; warm
runs reuse the directory of a cold run. Medians of `--repeats` runs. Children run with bytecode
caching on (PYTHONDONTWRITEBYTECODE removed), as an installed package would.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import jitrt as jr
t_import = time.perf_counter()
from jitrt import demo
n = 1024
scene = demo.make_scene(n)
t1 = time.perf_counter()
jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=sys.argv[1])
t_init = time.perf_counter()
k = demo.build_kernels(n)
for name in ("x", "y", "vx", "vy"):
    k[name].from_numpy(getattr(scene, name))
contacts = jr.ndarray(jr.i32, shape=(n,)); contacts.from_numpy(scene.contacts)
history = jr.ndarray(jr.f32, shape=(4,))
k["integrate"](contacts, demo.DT)
k["kinetic_energy"](history, 0)
top = k["max_height"]()
w = jr.field(jr.f32, shape=(n,), needs_grad=True)
loss = jr.field(jr.f32, shape=(), needs_grad=True)
@jr.kernel
def recurrence(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
    for i in w:
        v = w[i]
        for _ in range(cnt[i]):
            v = jr.sin(v) * 1.1 + 0.1
        loss[None] += v
with jr.ad.Tape(loss=loss):
    recurrence(contacts)
t2 = time.perf_counter()
print(json.dumps({"import": t_import - t0, "init": t_init - t1, "first_result": t2 - t1,
                  "top": top,
                  "stats": jr.debug.stats()}))
"""


def run_child(script: str, cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: imports use cached bytecode
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, script, cache_dir], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed:\n{proc.stderr}")
    wall = time.perf_counter() - t0
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process"] = wall
    return out


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    cold, warm = [], []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")   # kernels need a source file
        pathlib.Path(script).write_text(CHILD)
        for r in range(args.repeats):
            d = os.path.join(tmp, f"cache{r}")
            cold.append(run_child(script, d))
            warm.append(run_child(script, d))
    for c, w in zip(cold, warm):
        assert c["stats"]["compiles"] == 5 and w["stats"]["compiles"] == 0, (c, w)
        assert c["top"] == w["top"]

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows) * 1e3

    print(f"cold vs warm start, {args.repeats} fresh processes each (median, ms)")
    print(f"{'':<6} {'import':>7} {'init':>6} {'first result':>13} {'process':>9} "
          f"{'compiles':>9} {'cache hits':>11}")
    for label, rows in (("cold", cold), ("warm", warm)):
        print(f"{label:<6} {med(rows, 'import'):7.1f} {med(rows, 'init'):6.1f} "
              f"{med(rows, 'first_result'):13.1f} {med(rows, 'process'):9.1f} "
              f"{rows[0]['stats']['compiles']:9d} {rows[0]['stats']['offline_cache_hits']:11d}")
    print("import: numpy and jitrt; init: jr.init, part of the first result")
    ratio = med(cold, "first_result") / med(warm, "first_result")
    print(f"warm start is {ratio:.1f}x faster to the first result "
          f"({med(cold, 'process') / med(warm, 'process'):.1f}x for the whole process); "
          "target: >= 5x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
