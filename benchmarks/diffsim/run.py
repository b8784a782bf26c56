"""Differentiable simulation, jitrt against Taichi 1.7.4 on the CPU or CUDA: one table.

    python benchmarks/diffsim/run.py [--quick] [--processes 2] [--repeats 5] [--profile]
                                     [--only mpm2d,mass_spring] [--threads N]
                                     [--jitrt-root DIR | --jitrt-rev REV] [--venvs DIR]
                                     [--arch cpu|cuda] [--taichi-path DIR]

Two workloads written once in Taichi's language (mpm2d.py, mass_spring.py), each run with
`import taichi as ti` in a Taichi 1.7.4 venv of its own (created on first use under --venvs,
default ~/.cache/jitrt-compare, by benchmarks/compare/run.py's `ensure_venv`) and with
`import jitrt as ti` from this checkout (PYTHONPATH = the repository root, or --jitrt-root, or
a `git archive` of --jitrt-rev). Every figure comes from fresh worker processes (worker.py),
the runtimes interleaved so that the machine's noise hits both; the first step of a process
compiles and is not timed. The script prints each runtime's loss and gradients after its
first step and their largest difference, the thread counts, the machine, and the table last:
the median over every timed loop of every process, and the ratio jitrt / Taichi.
With --profile it also runs one profiled process per runtime and workload and prints
per-kernel milliseconds per step (the profilers' own overhead included).
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TAICHI_REQ = "taichi==1.7.4"
# name: (table label, warm-up steps, steps per timed loop)
WORKLOADS = {
    "mpm2d": ("MPM 2-D, 8,192 particles, 128^2 grid, 8 substeps fwd+grad", 2, 3),
    "mass_spring": ("mass-spring robot, 30 masses, 83 springs, 512 steps fwd+grad+update",
                    2, 3),
}
RUNTIMES = ("taichi", "jitrt")
RTOL = 1e-4        # per array: max |taichi - jitrt| / max |taichi|


def compare_module():
    """benchmarks/compare/run.py, for its venv helpers."""
    spec = importlib.util.spec_from_file_location("compare_run", HERE.parent / "compare" /
                                                  "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def export_rev(rev: str, into: Path) -> Path:
    """A `git archive` of `rev` unpacked under `into` (no checkout, no change to the tree)."""
    tar = into / "jitrt.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), rev], check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / "src")
    return into / "src"


def run_worker(py: Path, workload: str, runtime: str, jitrt_root: Path, cwd: Path,
               extra: list[str], threads: int | None, arch: str = "cpu",
               taichi_path: Path | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["DIFFSIM_ARCH"] = arch
    if runtime == "jitrt":
        env["PYTHONPATH"] = str(jitrt_root)
    elif taichi_path is not None:
        env["PYTHONPATH"] = str(taichi_path)
    if threads:
        env["JITRT_NUM_THREADS" if runtime == "jitrt" else "TI_CPU_MAX_NUM_THREADS"] = \
            str(threads)
    _, warmup, steps = WORKLOADS[workload]
    cmd = [str(py), str(HERE / "worker.py"), workload, runtime, "--warmup", str(warmup),
           "--steps", str(steps), *extra]
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise RuntimeError(f"{runtime} {workload} failed (rc {proc.returncode}):\n  "
                           + "\n  ".join(tail))
    return json.loads(found[-1])


def compare_dumps(a: Path, b: Path) -> list[tuple[str, str, str, float]]:
    """Per array: Taichi's summary, jitrt's summary, relative max difference."""
    import numpy as np
    ta, jb = np.load(a), np.load(b)
    rows = []
    for key in ta.files:
        x, y = ta[key].astype(np.float64), jb[key].astype(np.float64)
        scale = max(float(np.abs(x).max()), 1e-30)
        err = float(np.abs(x - y).max()) / scale

        def summary(z) -> str:
            return (" ".join(f"{v:.7g}" for v in z.ravel()) if z.size <= 2
                    else f"norm {np.linalg.norm(z):.7g}")
        rows.append((key, summary(x), summary(y), err))
    return rows


def canonical(name: str, runtime: str) -> str:
    """One kernel name for both profilers: `p2g`, `p2g.grad`, `(Taichi: clear gradients)`."""
    if runtime == "jitrt":
        return name.split("[", 1)[0].split(".", 1)[1]
    m = re.match(r"(\w+?)_c\d+_\d+_(reverse_grad_)?kernel_\d+_\w+$", name)
    if not m:
        return name
    if m.group(1) in ("clear_gradients", "fill_field"):
        return "(Tape/fill: Taichi's clear-gradient kernels)"
    return m.group(1) + (".grad" if m.group(2) else "")


def print_profile(workload: str, outs: dict[str, dict]) -> None:
    rows: dict[str, dict[str, list[float]]] = {}
    for rt, out in outs.items():
        n = out["steps"]
        for name, s in out["kernels"].items():
            r = rows.setdefault(canonical(name, rt), {}).setdefault(rt, [0.0, 0.0])
            r[0] += s["count"] / n
            r[1] += s["total_ms"] / n
    print(f"\nper-kernel profile, {workload} (ms per step, profiler on):")
    print("| kernel | launches/step | Taichi ms | jitrt ms | jitrt/Taichi |")
    print("|---|---|---|---|---|")
    order = sorted(rows, key=lambda k: -max(v[1] for v in rows[k].values()))
    for k in order:
        t, j = rows[k].get("taichi"), rows[k].get("jitrt")
        count = f"{(t or j)[0]:g}"
        ratio = f"{j[1] / t[1]:.2f}" if t and j and t[1] > 0 else ""
        print(f"| {k} | {count} | {t[1] if t else 0:.3f} | {j[1] if j else 0:.3f} | {ratio} |")
    for rt, out in outs.items():
        total = sum(s["total_ms"] for s in out["kernels"].values()) / out["steps"]
        print(f"{rt}: {out['profiled_ms_per_step']:.2f} ms per profiled step, of which "
              f"{total:.2f} ms inside kernels")


def jitrt_label(args) -> str:
    """Which jitrt was measured: a revision and its commit, or a directory."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *a],
                              capture_output=True, text=True).stdout.strip()
    if args.jitrt_rev:
        return f"git archive of {args.jitrt_rev} ({git('rev-parse', '--short', args.jitrt_rev)})"
    if args.jitrt_root.resolve() != ROOT:
        return str(args.jitrt_root)
    dirty = git("status", "--porcelain", "--", "jitrt")
    return (f"this work tree at {git('rev-parse', '--short', 'HEAD')}"
            + (" + uncommitted changes under jitrt/" if dirty else ""))


def measure(args, pythons: dict, jitrt_root: Path, tmp: Path) -> tuple[dict, dict]:
    """Timed samples per (workload, runtime) and the first worker's output of each."""
    samples = {(w, r): [] for w in args.only for r in RUNTIMES}
    first: dict = {}
    for p in range(args.processes):
        for w in args.only:
            for rt in RUNTIMES:
                print(f"[{p + 1}/{args.processes}] {w} on {rt}", flush=True)
                extra = ["--repeats", str(args.repeats)]
                if p == 0:
                    extra += ["--dump", str(tmp / f"{w}-{rt}.npz")]
                out = run_worker(pythons[rt], w, rt, jitrt_root, tmp, extra, args.threads,
                                 args.arch, args.taichi_path)
                samples[(w, rt)].extend(out["ms_per_step"])
                first.setdefault((w, rt), out)
                a, b = out["final_loss"], first[(w, rt)]["final_loss"]
                if a != b:      # parallel atomics add in another order: last bits differ
                    print(f"  note: this process's last loss {a:.9g} differs from the first "
                          f"process's {b:.9g} by {abs(a - b) / max(abs(b), 1e-30):.1e} "
                          "(relative)")
    return samples, first


def report_checks(args, first: dict, tmp: Path) -> bool:
    ok = True
    for w in args.only:
        print(f"\ncheck {w}: after the first step, Taichi | jitrt | max |diff| / max |Taichi|")
        for key, ts, js, err in compare_dumps(tmp / f"{w}-taichi.npz", tmp / f"{w}-jitrt.npz"):
            flag = "ok" if err <= RTOL else f"MISMATCH (> {RTOL:g})"
            ok &= err <= RTOL
            print(f"  {key:14s} {ts:>28s} | {js:>28s} | {err:.2e} {flag}")
        lt, lj = first[(w, "taichi")]["final_loss"], first[(w, "jitrt")]["final_loss"]
        print(f"  loss after every step of the first process: Taichi {lt:.7g}, jitrt {lj:.7g}")
    return ok


def table(args, samples: dict) -> str:
    lines = ["| workload | Taichi 1.7.4 ms/step | jitrt ms/step | jitrt/Taichi |",
             "|---|---|---|---|"]
    for w in args.only:
        t = statistics.median(samples[(w, "taichi")])
        j = statistics.median(samples[(w, "jitrt")])
        lines.append(f"| {WORKLOADS[w][0]} | {t:.1f} | {j:.1f} | {j / t:.2f} |")
    return "\n".join(lines)


def main() -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 process x 2 timed loops")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="timed loops per process")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for both runtimes (default: each runtime's default, all cores)")
    ap.add_argument("--profile", action="store_true", help="also print per-kernel profiles")
    ap.add_argument("--jitrt-root", type=Path, default=ROOT)
    ap.add_argument("--jitrt-rev", default=None,
                    help="measure this git revision's jitrt (a git archive), not the work tree")
    ap.add_argument("--venvs", type=Path, default=Path.home() / ".cache" / "jitrt-compare")
    ap.add_argument("--arch", default="cpu", choices=["cpu", "cuda"],
                    help="the arch both runtimes run on (ti.init(arch=...))")
    ap.add_argument("--taichi-path", type=Path, default=None,
                    help="a directory holding Taichi 1.7.4 (pip install --no-deps --target): "
                         "both runtimes run with this Python, no venv is made")
    args = ap.parse_args()
    if args.quick:
        args.processes, args.repeats = 1, 2
    args.only = args.only.split(",")
    started = datetime.datetime.now().astimezone()
    load0 = os.getloadavg()
    cmp = compare_module()
    if args.taichi_path is not None:       # no network (a GPU machine): this Python for both
        pythons = {"taichi": Path(sys.executable), "jitrt": Path(sys.executable)}
    else:
        pythons = {"taichi": cmp.ensure_venv(args.venvs / "taichi", [TAICHI_REQ]),
                   "jitrt": cmp.jitrt_python(args.venvs)}
    try:
        import numpy  # noqa: F401  (the gradient check reads the workers' .npz files)
    except ImportError:       # re-run in the jitrt venv, which has numpy
        os.execv(str(pythons["jitrt"]), [str(pythons["jitrt"]), __file__, *sys.argv[1:]])
    with tempfile.TemporaryDirectory(prefix="jitrt-diffsim-") as name:
        tmp = Path(name)
        jitrt_root = export_rev(args.jitrt_rev, tmp) if args.jitrt_rev else args.jitrt_root
        samples, first = measure(args, pythons, jitrt_root, tmp)
        ok = report_checks(args, first, tmp)
        if args.profile:
            for w in args.only:
                print_profile(w, {rt: run_worker(pythons[rt], w, rt, jitrt_root, tmp,
                                                 ["--profile"], args.threads, args.arch,
                                                 args.taichi_path)
                                  for rt in RUNTIMES})
    threads = {rt: first[(args.only[0], rt)]["threads"] for rt in RUNTIMES}
    version = {rt: first[(args.only[0], rt)]["version"] for rt in RUNTIMES}
    label = jitrt_label(args)
    load1 = os.getloadavg()
    print()
    print(f"Date: {started:%Y-%m-%d %H:%M %Z}. Command: `python benchmarks/diffsim/run.py"
          + "".join(f" {a}" for a in sys.argv[1:]) + f"` ({args.processes} process(es) x "
          f"{args.repeats} timed loops per runtime and workload, medians).")
    print(f"Arch: {args.arch}. Machine: {cmp.machine()}; load average {load0[0]:.2f} at the start, "
          f"{load1[0]:.2f} at the end.")
    print(f"Threads: Taichi {version['taichi']} {threads['taichi']} "
          f"(cpu_max_num_threads), jitrt {version['jitrt']} {threads['jitrt']} (pool); "
          f"jitrt from {label}. Gradients agree within {RTOL:g}: {'yes' if ok else 'NO'}.")
    print()
    print(table(args, samples))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
