"""A cold start's instructions per stage, main thread, under callgrind: what load does not move.

    python benchmarks/cold_instructions.py [--tree PATH ...]

The run of `benchmarks/cold_start.py` (import, `jr.init` with an empty cache, the first
forward + gradient of the adstack step) in one process per tree under `valgrind
--tool=callgrind --separate-threads=yes`, the counters zeroed by a call of `os.getpgid(0)`
after numpy and the inputs and dumped by a call of `os.getsid(0)` after each stage
(`--zero-before=getpgid --dump-before=getsid`: neither function is called by anything
else on this path), with `PYTHONHASHSEED=0` (string hashes move dictionary and set orders,
and with them ~3% of the count). Prints the main thread's instructions in each stage; a
process takes about a minute. Needs valgrind. docs/performance.md, "Cold start".
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAGES = ("import", "init", "first")

PROBE = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import worker
import rt_jitrt as rt
x0, counts = worker.adstack_inputs(1024)
os.getpgid(0)
import jitrt as jr
os.getsid(0)
rt.init(jr, sys.argv[2])
os.getsid(0)
steps, grads = rt.adstack(jr, x0, counts)
steps["by hand"]()
np.array(grads(), copy=True)
os.getsid(0)
"""


def summary(path: pathlib.Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"{path}: no summary line")


def run_once(tree: str, out: pathlib.Path) -> list[int]:
    """Main-thread instructions of each stage for the jitrt checkout `tree`."""
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # as installed: imports use cached bytecode
    env.pop("JITRT_LOG_LEVEL", None)
    compare = str(ROOT / "benchmarks" / "compare")
    subprocess.run([sys.executable, "-c", PROBE, compare, str(out / "warmup")], env=env,
                   cwd=str(out), check=True, capture_output=True)    # bytecode caches
    cache = out / "cache"
    cache.mkdir()
    probe = out / "probe.py"
    probe.write_text(PROBE)
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--zero-before=getpgid",
         "--dump-before=getsid", f"--callgrind-out-file={out / 'cg.out'}", sys.executable,
         str(probe), compare, str(cache)],
        env=env, cwd=str(out), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree} failed:\n{proc.stderr[-2000:]}")
    # dump k of thread 1 (the main thread): cg.out.<k>-01
    return [summary(out / f"cg.out.{k}-01") for k in (1, 2, 3)]


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=None,
                    help="a jitrt checkout to measure (repeatable; default: this one)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    trees = [str(pathlib.Path(t).resolve()) for t in (args.tree or [str(ROOT)])]
    width = max(len(t) for t in trees)
    print("main thread's instructions per stage, millions (callgrind, PYTHONHASHSEED=0)")
    print(f"{'':<{width}} " + " ".join(f"{s:>9}" for s in STAGES + ("total",)))
    for tree in trees:
        with tempfile.TemporaryDirectory() as tmp:
            counts = run_once(tree, pathlib.Path(tmp))
        print(f"{tree:<{width}} " + " ".join(f"{c / 1e6:9.1f}" for c in counts)
              + f" {sum(counts) / 1e6:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
