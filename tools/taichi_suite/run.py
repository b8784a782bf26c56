"""Run Taichi's own test suite (`tests/python/` of a Taichi checkout) against jitrt.

    python tools/taichi_suite/run.py /work/.mirror/taichi-dev+taichi/repo -j 2 \
        --markdown build/taichi_suite.md

SOURCE is a Taichi checkout (a directory holding `tests/python/`) or a Taichi git directory
(then `--ref`, default v1.7.4, is extracted with `git archive`). Nothing of Taichi's is copied
into this repository: the files go to a work directory (`--workdir`, default a temporary one).

Each test file runs in its own `pytest` process (a crash or a hang costs one file, never the
run), `-j` at a time, each with a timeout, with `import taichi` resolving to jitrt
(harness/taichi/) and Taichi's harness replaced by ours (harness/test_utils.py,
harness/conftest.py: every test on the CPU after `ti.init(arch=ti.cpu, **options)`). Files
out of jitrt's scope are listed, not run (classify.NA_FILES). Prints a table per file, the
totals and the most frequent failure causes; `--markdown` writes the same as markdown
(docs/porting.md keeps it) and `--json` the raw rows.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import classify  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
LIVE: set[subprocess.Popen] = set()     # running pytest processes, killed if the run stops
CATEGORIES = ("passed", "missing", "wrong", "error", "crash", "skipped", "n/a")
PYTEST_INI = """[pytest]
markers =
    run_in_serial: Taichi's marker (resource-heavy tests)
    sm70: Taichi's marker (GPU compute capability 7.0)
"""


@dataclasses.dataclass
class FileResult:
    name: str
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    causes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    na_reason: str = ""
    seconds: float = 0.0
    # (test, category, reason, message) of every failing test, for --json
    failures: list = dataclasses.field(default_factory=list)


def prepare(source: pathlib.Path, ref: str, workdir: pathlib.Path) -> pathlib.Path:
    """Lay out `workdir/tests/python/` (Taichi's files) with our harness beside them."""
    tests = workdir / "tests"
    if (source / "tests" / "python").is_dir():
        shutil.copytree(source / "tests" / "python", tests / "python", dirs_exist_ok=True)
    elif (source / "objects").is_dir() or (source / "HEAD").is_file():
        archive = subprocess.run(["git", f"--git-dir={source}", "archive", ref, "tests/python"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)
    else:
        sys.exit(f"{source}: neither a Taichi checkout (tests/python/) nor a git directory")
    (tests / "__init__.py").write_text("")
    shutil.copy(HERE / "harness" / "test_utils.py", tests / "test_utils.py")
    shutil.copy(HERE / "harness" / "conftest.py", tests / "python" / "conftest.py")
    (workdir / "pytest.ini").write_text(PYTEST_INI)
    return tests / "python"


def run_file(path: pathlib.Path, workdir: pathlib.Path, timeout: float,
             jitrt_root: pathlib.Path) -> FileResult:
    """Run one test file in its own pytest process; its rows and exit status go to
    `workdir/results/` (`tally` reads them)."""
    out = workdir / "results" / (path.stem + ".jsonl")
    out.unlink(missing_ok=True)
    env = dict(os.environ, TAICHI_SUITE_OUT=str(out), PYTHONDONTWRITEBYTECODE="1",
               JITRT_OFFLINE_CACHE_DIR=str(workdir / "jitrt_cache"),
               PYTHONPATH=os.pathsep.join([str(HERE / "harness"), str(workdir),
                                           str(jitrt_root)]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
           str(workdir), "-o", "addopts=", str(path.relative_to(workdir))]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    LIVE.add(proc)
    try:
        code = proc.wait(timeout=timeout)
        crash = f"killed by signal {-code}" if code < 0 else ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
        crash = f"timeout after {timeout:.0f} s"
    finally:
        LIVE.discard(proc)
    status = {"code": code, "crash": crash, "seconds": time.monotonic() - start}
    out.with_suffix(".status").write_text(json.dumps(status))
    return tally(path, workdir)


def tally(path: pathlib.Path, workdir: pathlib.Path) -> FileResult:
    """A file's counts from what its run left in `workdir/results/` (see run_file)."""
    result = FileResult(path.name)
    out = workdir / "results" / (path.stem + ".jsonl")
    status_file = out.with_suffix(".status")
    status = json.loads(status_file.read_text()) if status_file.exists() else {
        "code": 1, "crash": "", "seconds": 0.0}
    code, crash, result.seconds = status["code"], status["crash"], status["seconds"]
    rows = [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []
    for row in rows:
        category, reason = classify.classify(row)
        # a file that fails to import counts as its test functions (its parametrizations unknown)
        weight = _test_functions(path) if row["when"] == "collect" else 1
        result.counts[category] += weight
        if category not in ("passed",):
            result.causes[(category, reason)] += weight
        if category not in ("passed", "skipped"):
            result.failures.append((row["test"], category, reason, row.get("message", "")[:400]))
    if crash or (code not in (0, 1, 5) and not rows):
        reason = crash or f"pytest exited with {code} and recorded nothing"
        result.counts["crash"] += 1
        result.causes[("crash", reason)] += 1
    return result


def _test_functions(path: pathlib.Path) -> int:
    text = path.read_text(encoding="utf-8", errors="replace")
    return max(1, sum(1 for ln in text.splitlines() if ln.startswith("def test_")))


def run_all(files: list[pathlib.Path], workdir: pathlib.Path, jobs: int,
            timeout: float, jitrt_root: pathlib.Path, reuse: bool) -> list[FileResult]:
    results = []
    runnable = []
    for path in files:
        if path.name in classify.NA_FILES:
            results.append(FileResult(path.name, na_reason=classify.NA_FILES[path.name]))
        else:
            runnable.append(path)
    (workdir / "results").mkdir(exist_ok=True)
    if reuse:                          # a new table from an earlier run's results
        return sorted(results + [tally(p, workdir) for p in runnable], key=lambda r: r.name)
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        futures = {pool.submit(run_file, p, workdir, timeout, jitrt_root): p for p in runnable}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            res = fut.result()
            results.append(res)
            print(f"[{done}/{len(runnable)}] {res.name}: {_summary(res.counts)} "
                  f"({res.seconds:.0f} s)", file=sys.stderr, flush=True)
    finally:                          # stopped (Ctrl-C, SIGTERM): no orphaned pytest runs
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(LIVE):
            os.killpg(proc.pid, signal.SIGKILL)
    return sorted(results, key=lambda r: r.name)


def _summary(counts: collections.Counter) -> str:
    return ", ".join(f"{counts[c]} {c}" for c in CATEGORIES if counts[c]) or "no tests"


def totals(results: list[FileResult]) -> collections.Counter:
    total: collections.Counter = collections.Counter()
    for res in results:
        total.update(res.counts)
    return total


def top_causes(results: list[FileResult], limit: int) -> list[tuple[str, str, int, int]]:
    """(category, reason, tests, files) of the most frequent failure causes."""
    tests: collections.Counter = collections.Counter()
    files: collections.Counter = collections.Counter()
    for res in results:
        for key, n in res.causes.items():
            if key[0] in ("missing", "wrong", "error", "crash"):
                tests[key] += n
                files[key] += 1
    return [(k[0], k[1], n, files[k]) for k, n in tests.most_common(limit)]


def markdown(results: list[FileResult], header: str, limit: int) -> str:
    total = totals(results)
    ran = [r for r in results if not r.na_reason]
    lines = [header, "",
             "| tests | " + " | ".join(CATEGORIES) + " |", "|---" * (len(CATEGORIES) + 1) + "|",
             f"| {sum(total.values())} in {len(ran)} files | "
             + " | ".join(str(total[c]) for c in CATEGORIES) + " |", "",
             "Most frequent causes of failure (tests, files):", "",
             "| category | cause | tests | files |", "|---|---|---|---|"]
    lines += [f"| {cat} | {_md(reason)} | {n} | {nf} |"
              for cat, reason, n, nf in top_causes(results, limit)]
    lines += ["", "Per file (first cause of a file's failures):", "",
              "| file | " + " | ".join(CATEGORIES) + " | first cause |",
              "|---" * (len(CATEGORIES) + 2) + "|"]
    for res in ran:
        fails = [(n, k) for k, n in res.causes.items() if k[0] not in ("skipped", "n/a")]
        first = max(fails)[1] if fails else None
        cause = f"{first[0]}: {_md(first[1])}" if first else ""
        lines.append(f"| {res.name} | " + " | ".join(str(res.counts[c] or "") for c in
                                                     CATEGORIES) + f" | {cause} |")
    lines += ["", "Files not run (out of jitrt's scope):", "", "| file | reason |", "|---|---|"]
    lines += [f"| {r.name} | {r.na_reason} |" for r in results if r.na_reason]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=pathlib.Path, help="Taichi checkout or git directory")
    ap.add_argument("--ref", default="v1.7.4", help="git ref when SOURCE is a git directory")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    ap.add_argument("-k", "--files", nargs="*", default=None,
                    help="only these test files (names, e.g. test_abs.py)")
    ap.add_argument("--workdir", type=pathlib.Path, default=None)
    ap.add_argument("--jitrt", type=pathlib.Path, default=REPO,
                    help="the source tree whose jitrt package is tested (default: this one)")
    ap.add_argument("--markdown", type=pathlib.Path, default=None)
    ap.add_argument("--json", type=pathlib.Path, default=None)
    ap.add_argument("--causes", type=int, default=25, help="how many top causes to list")
    ap.add_argument("--label", default=None,
                    help="how the table names the jitrt tested (default: its git commit)")
    ap.add_argument("--reuse", action="store_true",
                    help="run nothing: tabulate the results already in --workdir")
    args = ap.parse_args(argv)
    workdir = args.workdir or pathlib.Path(tempfile.mkdtemp(prefix="taichi_suite_"))
    workdir.mkdir(parents=True, exist_ok=True)
    pydir = workdir.resolve() / "tests" / "python" if args.reuse else prepare(
        args.source.resolve(), args.ref, workdir.resolve())
    files = sorted(pydir.glob("test_*.py"))
    if args.files:
        files = [f for f in files if f.name in set(args.files)]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    jitrt_root = args.jitrt.resolve()
    results = run_all(files, workdir.resolve(), max(1, args.jobs), args.timeout, jitrt_root,
                      args.reuse)
    commit = subprocess.run(["git", "-C", str(jitrt_root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or str(jitrt_root)
    header = (f"Taichi {args.ref} `tests/python/` against jitrt at {args.label or commit} "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, CPU)")
    text = markdown(results, header, args.causes)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) | {
            "counts": dict(r.counts), "causes": [[*k, n] for k, n in r.causes.items()]}
            for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
