"""Cold start, whole: import, init and the first forward + gradient, empty cache, fresh processes.

    python benchmarks/cold_start.py [--processes 3] [--tree PATH ...]
                                    [--peer quadrants=PYTHON] [--peer taichi=PYTHON]
                                    [--env NAME=VALUE[,NAME=VALUE...] ...]

Issue 34's measure. Each run is a new process of `benchmarks/compare/worker.py RUNTIME first
<empty dir>`, numpy imported before the clock starts (every runtime here needs it), which
times three phases: `import <package>`, its `init` on the CPU with the empty directory as its
kernel cache (jitrt builds or loads its runtime module here), and the first forward +
gradient of the adstack step (kernel definitions, allocations, both compiles, one step, the
gradient read into numpy: `compare/README.md`, "first fwd+grad"). The figure is their sum.
jitrt runs from each `--tree` (default: this checkout) with this interpreter; a peer runs in
the interpreter given for it (a venv where `quadrants==1.3.3` or `taichi==1.7.4` is
installed). Processes alternate between trees and peers, round after round, so that load on a
shared machine falls on all alike; medians per column, of the wall time and of the main
thread's CPU time (which a loaded machine inflates less: it leaves out the time the process
waited for a core), and the CPU time of the whole process, every thread (user + sys from
`getrusage`: the interpreter's start, numpy, the background optimiser and the exit
included). `--env` adds a jitrt column (of the first tree) run with those environment variables
set, e.g. `--env OPENBLAS_NUM_THREADS=1` (docs/performance.md, "Cold start: what the main thread
waits for"). Target (issue 34): jitrt's total at most 60 ms and below the peers'.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKER = ROOT / "benchmarks" / "compare" / "worker.py"
PHASES = ("import_ms", "init_ms", "first_ms")
CPU_PHASES = ("import_cpu_ms", "init_cpu_ms", "first_cpu_ms")


def run_once(python: str, runtime: str, tree: str | None,
             extra: dict[str, str] | None = None) -> dict:
    """One fresh process of worker.py's `first` task in an empty cache directory, with the
    environment variables `extra` set."""
    env = dict(os.environ, **(extra or {}))
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # as installed: imports use cached bytecode
    env.pop("JITRT_LOG_LEVEL", None)
    if tree is not None:
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([python, str(WORKER), runtime, "first", cache], env=env,
                              capture_output=True, text=True, cwd=str(WORKER.parent))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{runtime} ({tree or python}) failed:\n{proc.stderr[-2000:]}")
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    out["total_ms"] = sum(out[k] for k in PHASES)
    out["total_cpu_ms"] = sum(out[k] for k in CPU_PHASES)
    # the whole process, every thread: interpreter start, numpy, the phases, the background
    # optimiser and the exit
    out["process_cpu_ms"] = (after.ru_utime + after.ru_stime - before.ru_utime
                             - before.ru_stime) * 1e3
    return out


Column = tuple[str, str, str, "str | None", dict[str, str]]


def columns(args: argparse.Namespace) -> list[Column]:
    """(label, python, runtime, tree, environment variables) for each measured column."""
    cols: list[Column] = []
    for tree in args.tree or [str(ROOT)]:
        t = str(pathlib.Path(tree).resolve())
        label = "jitrt" if not args.tree or len(args.tree) == 1 else f"jitrt {t}"
        cols.append((label, sys.executable, "jitrt", t, {}))
    for spec in args.env:
        pairs = [p.partition("=") for p in spec.split(",")]
        if not all(name and sep for name, sep, _ in pairs):
            raise SystemExit(f"--env {spec!r}: expected NAME=VALUE[,NAME=VALUE...]")
        cols.append((f"jitrt {spec}", sys.executable, "jitrt", cols[0][3],
                     {name: value for name, _, value in pairs}))
    for spec in args.peer:
        name, sep, python = spec.partition("=")
        if not sep or name not in ("quadrants", "taichi", "warp", "numba"):
            raise SystemExit(f"--peer {spec!r}: expected NAME=PYTHON with NAME one of "
                             f"quadrants, taichi, warp, numba")
        cols.append((name, python, name, None, {}))
    return cols


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per column")
    ap.add_argument("--tree", action="append", default=None,
                    help="a jitrt checkout to measure (repeatable; default: this one)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=PYTHON",
                    help="a peer and the interpreter of its venv (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE[,...]",
                    help="a jitrt column run with these environment variables (repeatable)")
    args = ap.parse_args(argv)
    cols = columns(args)
    for _, python, runtime, tree, extra in cols:   # one unmeasured run each: bytecode caches
        run_once(python, runtime, tree, extra)
    runs: dict[str, list[dict]] = {c[0]: [] for c in cols}
    for _ in range(args.processes):
        for label, python, runtime, tree, extra in cols:
            runs[label].append(run_once(python, runtime, tree, extra))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cold start: import + init + first fwd+grad of the adstack step (N=1024), empty "
          f"cache, {args.processes} fresh processes per column, alternating; medians, ms; "
          f"load {load:.2f} at the end")
    for title, keys, total in (("wall", PHASES, "total_ms"),
                               ("main thread's CPU", CPU_PHASES, "total_cpu_ms")):
        print(f"{title + ':':<40} {'import':>7} {'init':>7} {'first':>7} {'total':>7}  "
              f"{'totals':<24} grad err")
        for label, *_ in cols:
            rows = runs[label]
            med = [statistics.median(r[k] for r in rows) for k in keys + (total,)]
            totals = " ".join(f"{r[total]:.1f}" for r in rows)
            err = max(r["grad_err"] for r in rows)
            print(f"{label:<40} " + " ".join(f"{m:7.1f}" for m in med)
                  + f"  {totals:<24} {err:.1e}")
    print(f"{'main thread not running (wall - CPU):':<40} {'import':>7} {'init':>7} "
          f"{'first':>7} {'total':>7}")
    for label, *_ in cols:
        rows = runs[label]
        waits = [statistics.median(r[w] - r[c] for r in rows)
                 for w, c in zip(PHASES + ("total_ms",), CPU_PHASES + ("total_cpu_ms",))]
        print(f"{label:<40} " + " ".join(f"{m:7.1f}" for m in waits))
    print("process CPU (user+sys of every thread, the whole process: interpreter, numpy, "
          "exit):")
    for label, *_ in cols:
        cpu = [r["process_cpu_ms"] for r in runs[label]]
        print(f"{label:<40} {statistics.median(cpu):7.1f}  "
              + " ".join(f"{c:.1f}" for c in cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
