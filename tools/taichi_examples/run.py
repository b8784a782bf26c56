"""Run Taichi 1.7.4's own example programs on Taichi and on jitrt and compare their fields.

    python tools/taichi_examples/run.py --taichi-python /tmp/tivenv/bin/python \
        --workdir /tmp/tex --markdown /tmp/tex/t.md [-k mpm88 regression ...]

The examples (`python/taichi/examples/` at `--ref` of the Taichi git directory `--source`) are
extracted to the work directory; nothing of Taichi's is copied into this repository. Each
example runs twice, each in its own process (driver.py): once with Taichi's interpreter
(`import taichi` is Taichi, the reference) and once with ours, where `import taichi` is jitrt
through tools/taichi_suite/harness (the same alias the suite uses, no name mapping). Both
sides run on the CPU with one thread, with the GUI drawing nothing, the program stopped after
`--frames` frames (FRAMES lowers that for chaotic programs) and `ti.random` a counter hash that
gives both sides the same numbers (driver.py says how). Then every field of the program's
module is compared:

- same: every value within 1e-4 of Taichi's, relative to the field's largest value (or
  absolute, for fields within [-1, 1]);
- close: within 1e-2 the same way (float rounding of a different but valid order of
  operations, amplified by the program; the table names the field);
- differs: beyond that, or a field missing or shaped differently;
- jitrt error: the program raised on jitrt (first line of the error);
- refused (bounds): the program reads outside a field, which Taichi's release build lets
  through and jitrt always reports (docs/porting.md);
- not supported: jitrt stopped it with its clear "not supported" error naming the feature;
- n/a: Taichi itself cannot run it here, or it needs what jitrt leaves out (NA says why).
A result other than "same" is compared again against Taichi run with `fast_math=False`
(Taichi's default fast math replaces divisions by multiplications with the reciprocal, which
moves `int(i / n * m)` across an integer): "same (exact)" / "close (exact)" then.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXAMPLES = "python/taichi/examples"
NA = {
    "features/sparse/": "sparse SNodes (pointer, bitmasked, dynamic)",
    "graph/": "compute graphs (ti.graph) are AOT, for Vulkan/CUDA deployment",
    "ggui_examples/": "GGUI rendering (ti.ui scenes, meshes, particles drawn by the GPU)",
    "rendering/simple_texture.py": "textures (ti.Texture) need Vulkan/OpenGL",
    "real_func/graph/": "compute graphs (ti.graph) are AOT, for Vulkan/CUDA deployment",
    "features/gui/": "GUI-only (windows, widgets, keyboard: nothing computed)",
    "features/io/export_videos.py": "video export only (ffmpeg)",
    "simulation/karman_vortex_street.py": "draws with matplotlib's colormaps (not installed)",
}
# programs whose state after a few frames depends on float rounding (chaotic): first frame only
FRAMES = {"nbody.py": 1, "pbf2d.py": 1, "karman_vortex_street.py": 1, "physarum.py": 1,
          "comet.py": 1, "vortex_rings.py": 1, "two_stream_instability.py": 1,
          "mpm128.py": 1, "mpm99.py": 1, "mpm3d.py": 1, "euler.py": 1}
SAME, CLOSE = 1e-4, 1e-2


def extract(source: pathlib.Path, ref: str, workdir: pathlib.Path) -> pathlib.Path:
    archive = subprocess.run(["git", f"--git-dir={source}", "archive", ref, EXAMPLES],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)
    return workdir / EXAMPLES


def na_reason(rel: str) -> str:
    return next((why for prefix, why in NA.items() if rel.startswith(prefix)), "")


def run_side(python: str, program: pathlib.Path, prefix: pathlib.Path, frames: int,
             seconds: int, env: dict, *extra: str) -> dict:
    """Run driver.py on one side; its outcome (driver.py's json). The program's stdout goes
    to PREFIX.out, the tail of its stdout and stderr to PREFIX.log."""
    cmd = [python, str(HERE / "driver.py"), str(program), str(prefix),
           "--frames", str(frames), "--seconds", str(seconds), *extra]
    try:
        proc = subprocess.run(cmd, cwd=program.parent, env=env, capture_output=True,
                              text=True, timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        return {"outcome": "error", "message": f"killed after {seconds + 120} s"}
    tail = (proc.stdout + proc.stderr)[-3000:]
    pathlib.Path(f"{prefix}.out").write_text(proc.stdout)
    pathlib.Path(f"{prefix}.log").write_text(tail)
    meta = pathlib.Path(f"{prefix}.json")
    if not meta.exists():
        last = [ln for ln in tail.splitlines() if ln.strip()][-1:] or ["(no output)"]
        return {"outcome": "error", "message": f"crashed (exit {proc.returncode}): {last[0]}"}
    return json.loads(meta.read_text())


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def printed_numbers(prefix: pathlib.Path) -> list[float]:
    """The numbers a program printed (losses, energies, ...), Taichi's and jitrt's own
    banner and warning lines left out."""
    path = pathlib.Path(f"{prefix}.out")
    text = path.read_text() if path.exists() else ""
    lines = [ln for ln in text.splitlines() if not ln.startswith(("[Taichi]", "[jitrt]", "[W"))]
    return [float(x) for ln in lines for x in NUMBER.findall(ln)][:2000]


def compare_printed(ref: list[float], got: list[float]) -> str:
    """'' if jitrt printed the same numbers as Taichi (to SAME, relative to max(1, |x|)),
    else where they first differ."""
    if len(ref) != len(got):
        return f"printed {len(got)} numbers, Taichi {len(ref)}"
    for k, (want, have) in enumerate(zip(ref, got)):
        if abs(have - want) > SAME * max(1.0, abs(want)) and not (want != want and have != have):
            return f"printed number {k}: {have:.7g}, Taichi {want:.7g}"
    return ""


def compare(ref: dict, got: dict) -> tuple[str, str]:
    """(verdict, detail) of jitrt's arrays against Taichi's."""
    worst, worst_name = 0.0, ""
    for name, want in ref.items():
        if name not in got:
            return "differs", f"{name}: missing on jitrt"
        have = got[name]
        if want.dtype.kind not in "biuf":
            continue
        if have.shape != want.shape:
            return "differs", f"{name}: shape {have.shape}, Taichi's {want.shape}"
        if want.size == 0:
            continue
        both_nan = np.isnan(want) & np.isnan(have)
        scale = max(1.0, float(np.nanmax(np.abs(want))) if not np.isnan(want).all() else 1.0)
        diff = np.where(both_nan, 0.0, np.abs(have - want))
        rel = float(np.nan_to_num(diff, nan=np.inf).max()) / scale
        if rel > worst:
            worst, worst_name = rel, name
    if worst <= SAME:
        return "same", f"max rel diff {worst:.1e}" + (f" ({worst_name})" if worst_name else "")
    verdict = "close" if worst <= CLOSE else "differs"
    return verdict, f"max rel diff {worst:.1e} ({worst_name})"


def run_example(rel: str, examples: pathlib.Path, args: argparse.Namespace) -> dict:
    row: dict = {"example": rel}
    if why := na_reason(rel):
        return {**row, "verdict": "n/a", "detail": why}
    program = examples / rel
    frames = FRAMES.get(program.name, args.frames)
    stem = args.workdir / "out" / rel.replace("/", "__")[:-3]
    stem.parent.mkdir(parents=True, exist_ok=True)
    ref_prefix, jr_prefix = (stem.with_name(f"{stem.name}.{side}") for side in ("ref", "jr"))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    jr_env = dict(base, PYTHONPATH=os.pathsep.join(
        [str(REPO / "tools" / "taichi_suite" / "harness"), str(args.jitrt)]),
        JITRT_OFFLINE_CACHE_DIR=str(args.workdir / "jitrt_cache"))
    side = (program, frames, args.seconds)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ref_meta: dict = {}
        if args.reuse_ref and pathlib.Path(f"{ref_prefix}.json").exists():
            ref_meta = json.loads(pathlib.Path(f"{ref_prefix}.json").read_text())
        ref_job = None if ref_meta else pool.submit(
            run_side, args.taichi_python, side[0], ref_prefix, side[1], side[2], base)
        jr_meta = pool.submit(run_side, sys.executable, side[0], jr_prefix, side[1], side[2],
                              jr_env).result()
        ref_meta = ref_job.result() if ref_job else ref_meta
    row.update(frames=frames, ref=ref_meta, jitrt=jr_meta)
    if ref_meta["outcome"] == "error":
        return {**row, "verdict": "n/a", "detail": "Taichi fails: " + ref_meta["message"]}
    if jr_meta["outcome"] == "error":
        unsupported = any(words in jr_meta["message"] for words in (
            "not supported", "not in jitrt", "Taichi's internals"))
        refused = "Out of bound access" in jr_meta["message"]
        return {**row, "verdict": "not supported" if unsupported else
                "refused (bounds)" if refused else "jitrt error", "detail": jr_meta["message"]}
    if "timeout" in (ref_meta["outcome"], jr_meta["outcome"]) or \
            ref_meta["frames"] != jr_meta["frames"]:
        return {**row, "verdict": "ran", "detail":
                f"stopped by the time budget ({ref_meta['frames']} vs {jr_meta['frames']} "
                "frames): not compared"}
    verdict, detail = verdict_of(ref_prefix, jr_prefix)
    if verdict != "same":
        exact_prefix = stem.with_name(f"{stem.name}.refx")
        exact = run_side(args.taichi_python, program, exact_prefix, frames, args.seconds,
                         base, "--exact")
        if exact["outcome"] == jr_meta["outcome"] and exact["frames"] == jr_meta["frames"]:
            exact_verdict, exact_detail = verdict_of(exact_prefix, jr_prefix)
            if exact_verdict == "same" or (exact_verdict, verdict) == ("close", "differs"):
                verdict, detail = f"{exact_verdict} (exact)", (
                    f"against Taichi with fast_math=False: {exact_detail}; against Taichi's "
                    f"fast math: {detail}")
    return {**row, "verdict": verdict, "detail": detail}


def verdict_of(ref_prefix: pathlib.Path, jr_prefix: pathlib.Path) -> tuple[str, str]:
    """Compare the fields, then the printed numbers, of two runs."""
    ref = dict(np.load(f"{ref_prefix}.npz"))
    got = dict(np.load(f"{jr_prefix}.npz"))
    verdict, detail = compare(ref, got)
    detail += f"; {len(ref)} values"
    printed = compare_printed(printed_numbers(ref_prefix), printed_numbers(jr_prefix))
    if printed and verdict == "same":
        verdict = "differs"
    return verdict, detail + (f"; {printed}" if printed else "")


def table(rows: list[dict]) -> str:
    lines = ["| example | frames | result | detail |", "|---|---|---|---|"]
    for row in rows:
        detail = row["detail"].replace("|", "\\|")
        lines.append(f"| {row['example']} | {row.get('frames', '')} | {row['verdict']} | "
                     f"{detail} |")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    lines.append("")
    lines.append("Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def run_all(args: argparse.Namespace) -> list[dict]:
    args.workdir.mkdir(parents=True, exist_ok=True)
    examples = extract(args.source, args.ref, args.workdir)
    rels = sorted(str(p.relative_to(examples)) for p in examples.rglob("*.py"))
    rels = [r for r in rels if not args.k or any(k in r for k in args.k)]
    rows = []
    for rel in rels:
        row = run_example(rel, examples, args)
        print(f"{row['example']:55s} {row['verdict']:12s} {row['detail'][:140]}", flush=True)
        rows.append(row)
    return rows


def merged(paths: list[pathlib.Path]) -> list[dict]:
    """The rows of several runs' --json files, by example; a later file's row wins."""
    rows: dict[str, dict] = {}
    for path in paths:
        rows.update((row["example"], row) for row in json.loads(path.read_text()))
    return [rows[k] for k in sorted(rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=pathlib.Path,
                        default=pathlib.Path("/work/.mirror/taichi-dev+taichi/repo"))
    parser.add_argument("--ref", default="v1.7.4")
    parser.add_argument("--taichi-python", default="/tmp/tivenv/bin/python")
    parser.add_argument("--jitrt", type=pathlib.Path, default=REPO)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("build/examples"))
    parser.add_argument("--frames", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=120, help="time budget of one run")
    parser.add_argument("-k", nargs="*", default=[], help="only examples whose path has one")
    parser.add_argument("--reuse-ref", action="store_true",
                        help="keep Taichi's results of an earlier run in the work directory")
    parser.add_argument("--merge", nargs="*", type=pathlib.Path, default=[],
                        help="tabulate earlier runs' --json files (later ones win) instead")
    parser.add_argument("--markdown", type=pathlib.Path)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    rows = merged(args.merge) if args.merge else run_all(args)
    commit = subprocess.run(["git", "-C", str(args.jitrt), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    header = (f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"jitrt {commit}, Taichi {args.ref}, CPU, one thread.\n\n")
    text = header + table(rows)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
