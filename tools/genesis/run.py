"""Run Genesis's plane-and-box scene on jitrt (or, with --reference, on Quadrants 1.3.3).

    python tools/genesis/run.py                # install if needed, then run on jitrt
    python tools/genesis/run.py --reference    # the same on the real quadrants==1.3.3
    python tools/genesis/run.py --install-only [--reference]
    python tools/genesis/run.py --compare [--scene franka] [--steps N]   # both, then a table

Arguments it does not know go to scene.py (`--steps`, `--scene box|franka`, `--backend
cpu|gpu`, `--n-envs N`).

Each mode has a venv of its own under --home (default $JITRT_GENESIS_HOME or
/tmp/jitrt-genesis): `jitrt/` and `reference/`. Both get torch 2.13.0 first (the CPU wheel on
this machine's disk; asked for after genesis, pip would pull a CUDA build of several GB), then
genesis-world 1.4.5. The reference venv takes Genesis's pinned quadrants==1.3.3 with it. The
jitrt venv takes Genesis's other requirements, genesis-world itself without dependencies,
jitrt's requirements, a .pth file putting this checkout on the path, and the alias package
`quadrants` (ALIAS below). A venv whose marker file exists is not reinstalled (--reinstall
forces it). The scene itself is tools/genesis/scene.py, run by the venv's Python; this script
prints its stage lines and the first error with its traceback.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
GENESIS = "genesis-world==1.4.5"
QUADRANTS = "quadrants==1.3.3"
TORCH = "torch==2.13.0"
MARKER = ".genesis-installed"

# `import quadrants` gives the module jitrt itself. Submodules Genesis imports by name (so
# they must be in sys.modules, not only attributes):
#   quadrants.lang       -- genesis/utils/array_class.py: `from quadrants.lang import impl`
#   quadrants.algorithms -- genesis/engine/bvh.py: `from quadrants.algorithms import sort`
# Both are jitrt.quadrants.* modules (docs/porting.md, "Genesis").
ALIAS = '''"""Written by jitrt's tools/genesis/run.py: `import quadrants` is jitrt."""
import importlib
import sys

import jitrt

sys.modules["quadrants"] = jitrt
for _name in ("lang", "algorithms"):
    sys.modules["quadrants." + _name] = importlib.import_module("jitrt.quadrants." + _name)
'''


def _run(cmd: list[str], log: Path) -> None:
    print("+", " ".join(cmd), flush=True)
    with log.open("a") as out:
        out.write("+ " + " ".join(cmd) + "\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"install step failed ({done.returncode}); see {log}")


def _site_packages(venv: Path) -> Path:
    out = subprocess.check_output([str(venv / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Path(out.decode().strip())


def _genesis_requirements(venv: Path) -> list[str]:
    """genesis-world's requirements (no extras), less quadrants: read from its metadata."""
    code = ("import importlib.metadata as m; print('\\n'.join(r for r in "
            "m.requires('genesis-world') if 'extra ==' not in r))")
    out = subprocess.check_output([str(venv / "bin" / "python"), "-c", code]).decode()
    return [r for r in out.splitlines()
            if r and not r.replace(" ", "").lower().startswith("quadrants")]


def install(venv: Path, reference: bool, reinstall: bool) -> None:
    if (venv / MARKER).exists() and not reinstall:
        return
    log = venv.parent / f"install-{venv.name}.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", "--clear", str(venv)], log)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    _run(pip + ["--upgrade", "pip"], log)
    _run(pip + [TORCH], log)
    if reference:
        _run(pip + [GENESIS, QUADRANTS], log)
    else:
        _run(pip + ["--no-deps", GENESIS], log)
        _run(pip + _genesis_requirements(venv) + ["llvmlite>=0.45,<0.51", "xxhash>=3.0"], log)
        site = _site_packages(venv)
        (site / "jitrt-checkout.pth").write_text(str(CHECKOUT) + "\n")
        (site / "quadrants").mkdir(exist_ok=True)
        (site / "quadrants" / "__init__.py").write_text(ALIAS)
    (venv / MARKER).write_text("ok\n")


def run_scene(venv: Path, scene_args: list[str]) -> tuple[int, dict[str, list[str]]]:
    """Runs scene.py in `venv`, echoing its output; returns the exit status and its STAGE and
    RESULT lines by name (`build` -> ["ok", "4.512"], `state` -> the numbers, ...)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)             # jitrt comes from the .pth file, the checkout's
    cmd = [str(venv / "bin" / "python"), str(Path(__file__).with_name("scene.py")), *scene_args]
    found: dict[str, list[str]] = {}
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            words = line.split()
            if len(words) >= 2 and words[0] in ("STAGE", "RESULT"):
                found[words[1]] = words[2:]
    return proc.returncode, found


def compare(home: Path, scene_args: list[str]) -> int:
    """Quadrants, then jitrt, the same scene; a table of build time, step times and the
    largest difference of the final states (issue 35's acceptance: at most 1e-5)."""
    runs = {}
    for name in ("reference", "jitrt"):
        print(f"== {name}", flush=True)
        rc, found = run_scene(home / name, scene_args)
        if rc:
            return rc
        runs[name] = found
    ref, ours = runs["reference"]["state"], runs["jitrt"]["state"]
    diff = max((abs(float(a) - float(b)) for a, b in zip(ref, ours)), default=float("nan"))
    print(f"{'':12}{'build s':>10}{'median step ms':>16}{'mean step ms':>14}")
    for name, label in (("reference", "quadrants"), ("jitrt", "jitrt")):
        f = runs[name]
        print(f"{label:12}{float(f['build'][1]):>10.2f}"
              f"{float(f['median_step_ms_second_half'][0]):>16.4f}"
              f"{float(f['mean_step_ms_second_half'][0]):>14.4f}")
    verdict = "equal to 1e-5" if diff <= 1e-5 and len(ref) == len(ours) else "DIFFERENT"
    print(f"final state: {len(ours)} numbers, largest difference {diff:.3g} ({verdict})")
    return 0 if verdict == "equal to 1e-5" else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", action="store_true", help="run on quadrants==1.3.3")
    parser.add_argument("--compare", action="store_true",
                        help="run on both, then print a table and the state difference")
    parser.add_argument("--home", type=Path, default=Path(
        os.environ.get("JITRT_GENESIS_HOME", "/tmp/jitrt-genesis")))
    parser.add_argument("--install-only", action="store_true")
    parser.add_argument("--reinstall", action="store_true")
    args, scene_args = parser.parse_known_args()   # the rest goes to scene.py
    modes = [True, False] if args.compare else [args.reference]
    for reference in modes:
        install(args.home / ("reference" if reference else "jitrt"), reference, args.reinstall)
    if args.install_only:
        return
    if args.compare:
        raise SystemExit(compare(args.home, scene_args))
    venv = args.home / ("reference" if args.reference else "jitrt")
    raise SystemExit(run_scene(venv, scene_args)[0])


if __name__ == "__main__":
    main()
