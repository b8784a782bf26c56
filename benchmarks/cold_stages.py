"""Where a cold start's time goes: the main thread's CPU time per stage, fresh processes.

    python benchmarks/cold_stages.py [--processes 5] [--tree PATH ...]

The run of `benchmarks/cold_start.py` (worker.py's `first` task: import, `jr.init` with an
empty cache, the first forward + gradient of the adstack step), with the compile's stages timed
inside "first" by wrapping jitrt's functions: the frontend (`compiler.frontend`), the passes
(`compiler.passes`), codegen (`kernel_module.build_module`), the IR text (llvmlite's
`Module.__str__`), LLVM for the quick copies (`Tiers.compile_quick` and `load_quick`: parse,
SROA, -O0 object, load) and the rest of "first" (kernel definitions, allocations, launch
handles, launches, sizing, the garbage collector's passes). Each stage's figure includes the
imports it triggers. Main-thread CPU (`time.thread_time`), which a loaded machine inflates less
than the wall time; processes alternate between trees; medians. docs/performance.md, "Cold
start".
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROBE = r"""
import json, sys, tempfile, threading, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import worker
T = {}

def wrap(owner, name, label):
    real = getattr(owner, name)

    def timed(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return real(*args, **kwargs)
        c = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            T[label] = T.get(label, 0.0) + (time.thread_time() - c) * 1e3
    setattr(owner, name, timed)

c = time.thread_time()
import jitrt as jr
T["import"] = (time.thread_time() - c) * 1e3
import rt_jitrt as rt
c = time.thread_time()
rt.init(jr, tempfile.mkdtemp())
T["init"] = (time.thread_time() - c) * 1e3
from jitrt.runtime import compiler
from jitrt.codegen import kernel_module
from jitrt.backends import cpu_tiers
import llvmlite.ir
wrap(compiler, "frontend", "frontend")
wrap(compiler, "passes", "passes")
wrap(kernel_module, "build_module", "codegen")
wrap(llvmlite.ir.Module, "__repr__", "IR text")
wrap(cpu_tiers.Tiers, "compile_quick", "LLVM")     # (what `Tiers.quick` calls, and what a
wrap(cpu_tiers.Tiers, "load_quick", "LLVM")        # compile calls apart)
x0, counts = worker.adstack_inputs(1024)
c = time.thread_time()
steps, grads = rt.adstack(jr, x0, counts)
steps["by hand"]()
np.array(grads(), copy=True)
T["first"] = (time.thread_time() - c) * 1e3
T["rest of first"] = T["first"] - sum(T.get(k, 0.0) for k in
                                      ("frontend", "passes", "codegen", "IR text", "LLVM"))
print(json.dumps(T))
"""
STAGES = ("import", "init", "first", "frontend", "passes", "codegen", "IR text", "LLVM",
          "rest of first")


def run_once(tree: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # as installed: imports use cached bytecode
    env.pop("JITRT_LOG_LEVEL", None)
    compare = str(ROOT / "benchmarks" / "compare")
    proc = subprocess.run([sys.executable, "-c", PROBE, compare], env=env, cwd=compare,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree} failed:\n{proc.stderr[-2000:]}")
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=5, help="fresh processes per tree")
    ap.add_argument("--tree", action="append", default=None,
                    help="a jitrt checkout to measure (repeatable; default: this one)")
    args = ap.parse_args(argv)
    trees = [str(pathlib.Path(t).resolve()) for t in (args.tree or [str(ROOT)])]
    for tree in trees:      # one unmeasured run each: bytecode caches
        run_once(tree)
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.processes):
        for tree in trees:
            runs[tree].append(run_once(tree))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"main thread's CPU per stage, ms, medians of {args.processes} fresh processes "
          f"per tree, alternating; load {load:.2f} at the end")
    width = max(len(t) for t in trees)
    print(f"{'':<{width}} " + " ".join(f"{s:>9}" for s in STAGES))
    for tree in trees:
        meds = [statistics.median(r.get(s, 0.0) for r in runs[tree]) for s in STAGES]
        print(f"{tree:<{width}} " + " ".join(f"{m:9.1f}" for m in meds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
