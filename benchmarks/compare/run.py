"""jitrt against numba, Warp, Quadrants and Taichi: the same workloads on the CPU, one table.

    python benchmarks/compare/run.py [--quick] [--venvs DIR] [--processes 2] [--repeats 5]
                                     [--only jitrt,warp,...] [--out DIR]

Each peer gets a virtual environment of its own under --venvs (default ~/.cache/jitrt-compare),
created on first use and reused afterwards, with the pinned version from PyPI. jitrt runs from
this checkout (PYTHONPATH = the repository root) in the checkout's .venv when it has jitrt's
dependencies, else in a venv of its own. The driver itself re-runs inside a harness venv that
holds matplotlib (for the chart; none of this is a jitrt dependency).

For every runtime it starts worker.py in fresh processes: --processes "steady" processes
(launch overheads and the adstack step, --repeats timed loops each) and --processes pairs of
"first" processes (an empty kernel cache, then the same cache again). Each figure is the median
over all timed loops (or processes). A peer that fails to install or to run gets "failed:
<reason>" in its column; the others are still measured. Writes results.md and results.png next
to this script (or into --out) and prints the table last. README.md says what each row means.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# (name for worker.py, column title, pip requirement; None: jitrt from this checkout)
RUNTIMES = [("jitrt", "jitrt", None), ("numba", "numba", "numba==0.68.1"),
            ("warp", "Warp", "warp-lang~=1.19.0"), ("quadrants", "Quadrants", "quadrants==1.3.3"),
            ("taichi", "Taichi", "taichi==1.7.4")]
JITRT_DEPS = ["llvmlite>=0.45,<0.51", "numpy", "xxhash"]
ROWS = [("import (ms)", "import_ms"),
        ("L0 launch, 1 array of 16 f32 (us/call)", "L0"),
        ("L0 bound / recorded launch (us/call)", "L0 bound"),
        ("L1 launch, 4 arrays + 2 scalars (us/call)", "L1"),
        ("L1 bound / recorded launch (us/call)", "L1 bound"),
        ("adstack step N=1024, by hand (us/step)", "adstack by hand"),
        ("adstack step N=1024, under Tape (us/step)", "adstack Tape"),
        ("first fwd+grad, cold cache (ms)", "cold"),
        ("first fwd+grad, warm cache (ms)", "warm"),
        ("adstack gradient, max rel. error", "grad_err")]


class Failed(Exception):
    """A runtime (or one of its workloads) could not be installed or run; str() is short."""


def ensure_venv(venv: Path, reqs: list[str]) -> Path:
    """The python of `venv` with `reqs` installed; reused when a previous run installed them."""
    py, stamp = venv / "bin" / "python", venv / ".compare-installed"
    if stamp.exists() and stamp.read_text() == " ".join(reqs):
        return py
    print(f"creating {venv} with {' '.join(reqs)} ...", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with open(venv / "install.log", "w") as log:
        rc = subprocess.run([str(py), "-m", "pip", "install", *reqs], stdout=log,
                            stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise Failed(f"pip install {' '.join(reqs)} (log: {venv / 'install.log'})")
    stamp.write_text(" ".join(reqs))
    return py


def jitrt_python(venvs: Path) -> Path:
    """The checkout's .venv when it can import jitrt's dependencies, else a venv of our own."""
    py = ROOT / ".venv" / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import llvmlite, numpy, xxhash"],
                                      capture_output=True).returncode == 0:
        return py
    return ensure_venv(venvs / "jitrt-deps", JITRT_DEPS)


def short(text: str, width: int = 60) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "no output"
    return last if len(last) <= width else last[:width - 3] + "..."


def run_worker(py: Path, name: str, task: str, cache: Path, args) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)      # imports as from an installed package
    env.pop("PYTHONPATH", None)
    if name == "jitrt":
        env["PYTHONPATH"] = str(ROOT)
    cmd = [str(py), str(HERE / "worker.py"), name, task, str(cache),
           "--target-s", str(args.target_s), "--repeats", str(args.repeats)]
    try:
        proc = subprocess.run(cmd, env=env, cwd=cache.parent, capture_output=True, text=True,
                              timeout=900)
    except subprocess.TimeoutExpired:
        raise Failed(f"{task} worker timed out") from None
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not found:
        raise Failed(short(proc.stderr or proc.stdout))
    return json.loads(found[-1])


def measure(pythons: dict[str, Path], args, tmp: Path) -> dict[str, dict]:
    """Run every worker; per runtime: version, note, samples per row key, failures."""
    res = {n: {"samples": {}, "errors": {}, "version": "", "note": ""} for n in pythons}

    def record(name: str, out: dict, values: dict) -> None:
        r = res[name]
        r["version"], r["note"] = out["version"], out["note"]
        for key, value in values.items():
            if isinstance(value, str):
                r["errors"][key] = short(value, 40)
            elif value is not None:
                r["samples"].setdefault(key, []).extend(
                    value if isinstance(value, list) else [value])

    for name in pythons:
        (tmp / name).mkdir()
    for p in range(args.processes):     # runtimes interleaved: the machine's noise hits all
        for name, py in pythons.items():
            if "all" in res[name]["errors"]:
                continue
            print(f"[{p + 1}/{args.processes}] {name}: launches and adstack steps", flush=True)
            try:
                out = run_worker(py, name, "steady", tmp / name / "steady", args)
            except Failed as e:
                res[name]["errors"]["all"] = str(e)
                continue
            record(name, out, {"import_ms": out["import_ms"], "grad_err": out["grad_err"],
                               **out["times"]})
    for p in range(args.processes):
        for name, py in pythons.items():
            if "all" in res[name]["errors"]:
                continue
            print(f"[{p + 1}/{args.processes}] {name}: first fwd+grad, cold then warm cache",
                  flush=True)
            for key in ("cold", "warm"):
                try:
                    out = run_worker(py, name, "first", tmp / name / f"first{p}", args)
                except Failed as e:
                    res[name]["errors"].setdefault(key, short(str(e), 40))
                    continue
                record(name, out, {"import_ms": out["import_ms"], key: out["first_ms"],
                                   "grad_err": out["grad_err"]})
    return res


def cell(r: dict, key: str) -> str:
    if "all" in r["errors"]:
        return f"failed: {short(r['errors']['all'], 40)}"
    if key in r["errors"] and key not in r["samples"]:
        return f"failed: {r['errors'][key]}"
    if key not in r["samples"]:
        return "n/a"
    if key == "grad_err":
        return f"{max(r['samples'][key]):.1e}"
    v = statistics.median(r["samples"][key])
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 \
        else f"{v:.0f}"


def jitrt_label() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *a],
                              capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "--", "jitrt")
                     else "")


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def table(res: dict[str, dict], titles: dict[str, str]) -> tuple[str, list[str]]:
    """The markdown table and its footnotes (notes and failures)."""
    notes, head = [], ["workload"]
    for name, r in res.items():
        title = f"{titles[name]} {r['version']}".strip()
        if r["note"] or "all" in r["errors"]:
            notes.append(f"- [{len(notes) + 1}] {titles[name]}: "
                         + (f"failed: {r['errors']['all']}" if "all" in r["errors"]
                            else r["note"]))
            title += f" [{len(notes)}]"
        head.append(title)
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, key in ROWS:
        lines.append("| " + " | ".join([label] + [cell(r, key) for r in res.values()]) + " |")
    return "\n".join(lines), notes


def chart(res: dict[str, dict], titles: dict[str, str], path: Path) -> None:
    """One bar subplot per row (but the gradient check), one colour per runtime."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [(label, key) for label, key in ROWS if key != "grad_err"]
    fig, axes = plt.subplots(3, 3, figsize=(15, 12))
    for ax, (label, key) in zip(axes.flat, rows):
        texts = [cell(r, key).split(":")[0] for r in res.values()]    # "failed: why"
        values = [statistics.median(r["samples"][key]) if key in r["samples"] else 0.0
                  for r in res.values()]
        ax.bar([titles[n] for n in res], values, color=[f"C{i}" for i in range(len(res))])
        shown = [v for v in values if v > 0]
        if shown and max(shown) / min(shown) > 10:
            ax.set_yscale("log")
        for i, (v, text) in enumerate(zip(values, texts)):
            ax.annotate(text, (i, v if v > 0 else (min(shown) if shown else 0)),
                        ha="center", va="bottom", fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("jitrt against its peers on the CPU (lower is better; log scale where the "
                 "values span more than 10x)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def harness(venvs: Path) -> None:
    """Re-run this script inside the harness venv (matplotlib) unless already there."""
    venv = venvs / "harness"
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    try:
        py = ensure_venv(venv, ["matplotlib"])
    except (Failed, subprocess.CalledProcessError) as e:
        print(f"no chart: the harness venv failed ({e})", flush=True)
        return
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


def main() -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 process x 3 repeats, shorter loops (a smoke run)")
    ap.add_argument("--venvs", type=Path, default=Path.home() / ".cache" / "jitrt-compare")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--target-s", type=float, default=0.2, help="seconds per timed loop")
    ap.add_argument("--only", default=",".join(n for n, _, _ in RUNTIMES))
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    if args.quick:
        args.processes, args.repeats, args.target_s = 1, 3, 0.05
    harness(args.venvs)
    started = datetime.datetime.now().astimezone()
    load0 = os.getloadavg()
    only = args.only.split(",")
    titles = {n: t for n, t, _ in RUNTIMES}
    pythons, failed = {}, {}
    for name, _, req in RUNTIMES:
        if name not in only:
            continue
        try:
            pythons[name] = (jitrt_python(args.venvs) if req is None else
                             ensure_venv(args.venvs / name, [req]))
        except (Failed, subprocess.CalledProcessError) as e:
            failed[name] = str(e)
    with tempfile.TemporaryDirectory(prefix="jitrt-compare-") as tmp:
        res = measure(pythons, args, Path(tmp))
    for name, reason in failed.items():
        res[name] = {"samples": {}, "errors": {"all": reason}, "version": "", "note": ""}
    res = {n: res[n] for n, _, _ in RUNTIMES if n in res}     # column order
    (args.venvs / "last-run.json").write_text(json.dumps(res, indent=1))
    text, notes = table(res, titles)
    cmd = "python benchmarks/compare/run.py" + "".join(f" {a}" for a in sys.argv[1:])
    load1 = os.getloadavg()
    header = [f"Date: {started:%Y-%m-%d %H:%M %Z}. Command: `{cmd}` "
              f"({args.processes} process(es) x {args.repeats} repeats per runtime, medians).",
              f"Machine: {machine()}; load average {load0[0]:.2f} at the start, "
              f"{load1[0]:.2f} at the end.",
              f"jitrt: this checkout, commit {jitrt_label()}."]
    body = "\n\n".join(["# jitrt against numba, Warp, Quadrants and Taichi (CPU)",
                        "\n".join(header), text, "\n".join(notes) if notes else "",
                        "What each row means, and how it is measured: README.md."])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(body.replace("\n\n\n\n", "\n\n") + "\n")
    try:
        chart(res, titles, args.out / "results.png")
    except ImportError as e:
        print(f"no chart: {e}")
    print("\n".join(header + notes), "", text, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
