"""Cold compile and run of the adstack kernel pair, in fresh processes, with its LLVM share.

    python benchmarks/cold_pair.py [--processes 9] [--tree PATH ...]

Each run is a new Python process that imports jitrt, calls `jr.init` with an empty cache
directory (so `jr.init` compiles the runtime module: LLVM is loaded and warm, as in any cold
start), then times what `benchmarks/compare` calls "first fwd+grad, cold cache": defining the
adstack kernel `chain` (v = sin(v) * 1.1 + 0.1, cnt[i] times, summed into a loss) over N=1024,
its forward launch, its gradient launch and reading the gradient. The same process records
jitrt's debug log, which gives each compile's passes, codegen (LLVM IR building) and LLVM
(optimisation and object code) times; with tiered compilation (the default) "LLVM" is the
quick copy's (its IR text, -O0 object code, load), the optimised copy being compiled on a
background thread meanwhile. With several `--tree` checkouts, their processes
alternate (tree A, tree B, tree A, ...), so that load on a shared machine falls on all alike;
medians (and minima of the first result) are printed per tree. Target (issue 13): <= 60 ms.
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

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHILD = r"""
import json, logging, re, sys, time
import numpy as np
import jitrt as jr

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
log = logging.getLogger("jitrt")
log.addHandler(Keep())
log.setLevel(logging.DEBUG)
jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=sys.argv[1])
rng = np.random.default_rng(0)
x0, counts = rng.random(1024).astype(np.float32), rng.integers(1, 9, 1024).astype(np.int32)
records.clear()
t0 = time.perf_counter()
x = jr.field(jr.f32, shape=(1024,), needs_grad=True)
loss = jr.field(jr.f32, shape=(), needs_grad=True)
cnt = jr.ndarray(jr.i32, shape=(1024,))

@jr.kernel
def chain(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
    for i in x:
        v = x[i]
        for _ in range(cnt[i]):
            v = jr.sin(v) * 1.1 + 0.1
        loss[None] += v

x.from_numpy(x0)
cnt.from_numpy(counts)
loss[None] = 0
x.grad.fill(0)
chain(cnt)
loss.grad[None] = 1
chain.grad(cnt)
grad = x.grad.to_numpy()
first = time.perf_counter() - t0
parts = []
for msg in records:
    m = re.search(r"passes ([0-9.]+) ms, codegen ([0-9.]+) ms, LLVM ([0-9.]+) ms", msg)
    if m:
        parts.append([float(g) for g in m.groups()])
v, want = x0.astype(np.float64), np.ones(1024)
for step in range(8):
    live = step < counts
    want = np.where(live, want * np.cos(v) * 1.1, want)
    v = np.where(live, np.sin(v) * 1.1 + 0.1, v)
err = float(np.max(np.abs(grad - want) / (np.abs(want) + 1e-3)))
print(json.dumps({"first_ms": first * 1e3, "parts": parts, "grad_err": err}))
"""


def run_child(script: str, tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: imports use cached bytecode
    env.pop("JITRT_LOG_LEVEL", None)
    with tempfile.TemporaryDirectory() as cache:
        proc = subprocess.run([sys.executable, script, cache], env=env, capture_output=True,
                              text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({tree}):\n{proc.stderr}")
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    if len(out["parts"]) != 2:
        raise RuntimeError(f"expected 2 compiles (forward, gradient), got {out['parts']}")
    return out


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=9, help="fresh processes per tree")
    ap.add_argument("--tree", action="append", default=None,
                    help="a jitrt checkout to measure (repeatable; default: this one)")
    args = ap.parse_args(argv)
    trees = [str(pathlib.Path(t).resolve()) for t in (args.tree or [str(ROOT)])]
    runs: dict[str, list[dict]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")   # kernels need a source file
        pathlib.Path(script).write_text(CHILD)
        for t in trees:                          # one unmeasured run each: bytecode caches
            run_child(script, t)
        for _ in range(args.processes):
            for t in trees:
                runs[t].append(run_child(script, t))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cold compile + run of the adstack pair (forward and gradient of `chain`, N=1024), "
          f"{args.processes} fresh processes per tree, alternating; ms")
    print(f"{'tree':<28} {'first min':>9} {'median':>7} {'LLVM fwd':>9} {'LLVM grad':>10} "
          f"{'passes':>7} {'codegen':>8} {'rest':>6} {'grad err':>9}")
    for t in trees:
        rows = runs[t]

        def med(f) -> float:
            return statistics.median(f(r) for r in rows)
        first = med(lambda r: r["first_ms"])
        llvm_f, llvm_g = med(lambda r: r["parts"][0][2]), med(lambda r: r["parts"][1][2])
        passes = med(lambda r: r["parts"][0][0] + r["parts"][1][0])
        codegen = med(lambda r: r["parts"][0][1] + r["parts"][1][1])
        rest = med(lambda r: r["first_ms"] - sum(p[0] + p[1] + p[2] for p in r["parts"]))
        err = max(r["grad_err"] for r in rows)
        name = t if len(t) <= 28 else "..." + t[-25:]
        print(f"{name:<28} {min(r['first_ms'] for r in rows):9.1f} {first:7.1f} "
              f"{llvm_f:9.1f} {llvm_g:10.1f} {passes:7.1f} {codegen:8.1f} {rest:6.1f} "
              f"{err:9.1e}")
    print("passes, codegen: both kernels; rest: frontend, imports of the compile pipeline, "
          "cache writes, loads, launches")
    print(f"load average at the end: {load:.2f}; target (issue 13): first fwd+grad <= 60 ms")
    ok = all(r["grad_err"] < 1e-3 for rows in runs.values() for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
