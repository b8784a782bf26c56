"""Published DiffTaichi programs and the diffsim workloads on jitrt CUDA, jitrt CPU and Taichi
1.7.4 CUDA, end to end: one table (what `programs.sh` runs on the GPU machine).

    python benchmarks/gpu/programs.py table --programs DIR --taichi-path DIR [--out DIR]
    python benchmarks/gpu/programs.py run PROGRAM.py {jitrt,taichi} {cuda,cpu,fakegpu}
                                      [--iters K] [--count]

`run` is one process: it runs a DiffTaichi program (billiards.py, smoke_taichi.py, wave.py of
taichi-dev/difftaichi, unchanged: `import taichi as ti` is given jitrt for the jitrt runs)
under a harness that forces `ti.init`'s arch, makes the GUI (`ti.GUI`), OpenCV and
matplotlib no-ops (OpenCV's `imread` gives one fixed synthetic image, the same for every
runtime: the target the programs fit), seeds `random` and numpy, and stops the program after
`--iters` printed loss lines. With PROGRAMS_PROFILE=1 in the environment it turns on the
runtime's kernel profiler and prints its table to stderr at the end (jitrt times each launch
on the host: add CUDA_LAUNCH_BLOCKING=1 to make that the device time; Taichi's times the
device). It prints one JSON line: the losses, the runtime's import and
`ti.init` time, the time to the first loss (compiles included), the median time per later
iteration and the whole run's wall time. `--count` (jitrt) adds per-iteration counts of the
driver calls that matter: launches, synchronisations, copies each way and their bytes
(`fakegpu`: the fake vendor of tests/fakegpu_lib.py, where kernels do not run: the losses
mean nothing there, the counts are exact).

`table` runs every program and the diffsim workloads (benchmarks/diffsim/worker.py with
`DIFFSIM_ARCH`) in fresh processes, each under a time limit, writes each process's output
under --out, checks the first losses (jitrt CUDA against jitrt CPU, and against Taichi) and
prints the table last. Taichi comes from --taichi-path (`pip install --no-deps --target`).
"""
from __future__ import annotations

import argparse
import builtins
import json
import os
import re
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# program: (iterations run, extra argv): billiards takes no option (an argument makes it scan)
PROGRAMS = {"billiards.py": (20, []), "smoke_taichi.py": (10, ["--iters", "1000"]),
            "wave.py": (10, ["--iters", "1000"])}
# the held-out set (`table --set held-out`): the collection's other training programs, which
# no change to jitrt was measured on before it ran them on CUDA (taichi-dev/difftaichi at
# 9f4ee52, examples/, unchanged; mass_spring.py and rigid_body.py import their robot configs
# from the same folder). electric.py prints its summed loss every 200 iterations, as
# "ITER SUM": its own pattern below, and one "iteration" of the table is 200 of its own.
# Left out: liquid.py calls `ti.clear_all_gradients()`, which Taichi 1.7.4 has only as
# `ti.ad.clear_all_gradients` (it fails on both). The heaviest run last (the time budget).
HELD_OUT = {"mass_spring_simple.py": (10, []),
            "mass_spring.py": (10, ["2", "train", "--iters", "1000"]),
            "rigid_body.py": (10, ["0", "train"]), "electric.py": (3, []),
            "diffmpm_simple.py": (6, []), "diffmpm.py": (6, ["--iters", "1000"]),
            "diffmpm_checkpointing.py": (6, ["--iters", "1000"]),
            "volume_renderer.py": (3, ["--iters", "1000"]),
            "diffmpm3d.py": (3, ["--iters", "1000"])}
SETS = {"tuned": PROGRAMS, "held-out": HELD_OUT}
EVERY = {**PROGRAMS, **HELD_OUT}
LOSS_PATTERNS = {"electric.py": re.compile(r"^\d+ (-?[\d.]+(?:e[-+]?\d+)?)$")}
CONFIGS = (("jitrt", "cuda"), ("jitrt", "cpu"), ("taichi", "cuda"))
LOSS = re.compile(r"loss\s*=?\s*(-?[\d.]+(?:e[-+]?\d+)?)", re.I)


class Stop(Exception):
    """Raised from `print` once the program printed its last counted loss."""


def synthetic_image(shape: tuple[int, ...] = (256, 256, 3)) -> Any:
    """The image every stubbed `cv2.imread` returns: soft discs, values 0..255, uint8."""
    import numpy as np
    h, w = shape[:2]
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    img = 0.5 + 0.5 * np.sin(9 * x) * np.cos(7 * y) * ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.16)
    return np.repeat((255 * img)[:, :, None], shape[2], axis=2).astype(np.uint8)


def resize(img: Any, dsize: Any = None, fx: float = 0, fy: float = 0, **_: Any) -> Any:
    """cv2.resize by nearest neighbour (dsize is (width, height))."""
    import numpy as np
    h, w = img.shape[:2]
    nw, nh = dsize if dsize else (int(w * fx), int(h * fy))
    return img[(np.arange(nh) * h // nh)[:, None], (np.arange(nw) * w // nw)[None, :]]


def install_stubs() -> None:
    """No-op OpenCV and matplotlib modules (the programs import them at the top)."""
    def nothing(*_: Any, **__: Any) -> None:
        return None
    cv2 = types.ModuleType("cv2")
    cv2.imread = lambda *_a, **_k: synthetic_image()          # type: ignore[attr-defined]
    cv2.resize = resize                                       # type: ignore[attr-defined]
    cv2.__getattr__ = lambda name: nothing    # type: ignore[attr-defined]  # imshow, circle, ...
    plt = types.ModuleType("matplotlib.pyplot")
    plt.__getattr__ = lambda name: Anything()                 # type: ignore[method-assign]
    mpl = types.ModuleType("matplotlib")
    mpl.pyplot = plt                                          # type: ignore[attr-defined]
    mpl.use = nothing                                         # type: ignore[attr-defined]
    toolkits, mplot3d, imageio = (types.ModuleType(m) for m in
                                  ("mpl_toolkits", "mpl_toolkits.mplot3d", "imageio"))
    mplot3d.Axes3D = Anything()                               # type: ignore[attr-defined]
    imageio.imwrite = nothing                                 # type: ignore[attr-defined]
    sys.modules.update({"cv2": cv2, "matplotlib": mpl, "matplotlib.pyplot": plt,
                        "mpl_toolkits": toolkits, "mpl_toolkits.mplot3d": mplot3d,
                        "imageio": imageio})


def synthetic_volume(path: Path, res: int = 128) -> None:
    """volume_renderer.py's input (it downloads the Stanford bunny as 128**3 f32 densities
    unless `bunny_128.bin` is in its folder; the GPU machine has no network): a torus of
    density 1/res, the same for every runtime."""
    import numpy as np
    if path.exists():
        return
    c = (np.arange(res) + 0.5) / res - 0.5
    z, y, x = np.meshgrid(c, c, c, indexing="ij")
    torus = (np.sqrt(x ** 2 + y ** 2) - 0.25) ** 2 + z ** 2 < 0.1 ** 2
    (torus / res).astype(np.float32).tofile(path)


class Anything:
    """A figure, axes or plot of the stubbed matplotlib: every attribute and call is another
    (`plt.figure().add_subplot(111, projection="3d").scatter(...)` draws nothing)."""

    def __call__(self, *_: Any, **__: Any) -> "Anything":
        return self

    def __getattr__(self, name: str) -> "Anything":
        return self


class NoGui:
    """`ti.GUI` that draws nothing."""
    running = True

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *_a, **_k: None


def import_runtime(runtime: str, arch: str) -> Any:
    """The runtime as `taichi`, with `init` forced to `arch` and the GUI a no-op."""
    if arch == "fakegpu":
        sys.path.insert(0, str(ROOT / "tests"))
        from jitrt.backends import registry
        registry.register(registry.Backend("fakegpu", "fakegpu_backend", stream_gpu=True,
                                           host_memory=False))
    if runtime == "jitrt":
        import jitrt as ti
        sys.modules["taichi"] = ti
    else:
        import taichi as ti  # type: ignore[import-not-found, no-redef]
    init = ti.init

    def forced_init(*args: Any, **options: Any) -> Any:
        options["arch"] = arch if arch == "fakegpu" else getattr(ti, arch)
        if os.environ.get("PROGRAMS_PROFILE"):
            options["kernel_profiler"] = True
        return init(*args[1:], **options)
    ti.init = forced_init
    ti.GUI = NoGui
    return ti


class Counting:
    """A vendor binding whose functions count their calls (and the bytes of copies)."""

    def __init__(self, lib: Any) -> None:
        self.lib, self.counts = lib, {}

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.lib, name)
        if not callable(found) or not name[:1].islower():
            return found            # enums, types, constants

        def call(*args: Any) -> Any:
            key = name
            self.counts[key] = self.counts.get(key, 0) + 1
            if "Memcpy" in name:
                self.counts[key + " bytes"] = self.counts.get(key + " bytes", 0) + int(args[2])
            return found(*args)
        return call


def count_driver_calls(ti: Any) -> dict[str, int] | None:
    """Install a `Counting` binding under the program's GPU driver; its counts, or None on
    the CPU. jitrt's native launches call libcuda directly: launches are counted by
    `jr.debug.stats()["launches"]` instead."""
    from jitrt.runtime import program
    driver = getattr(program.current().device, "driver", None)
    if driver is None:
        return None
    driver.lib = Counting(driver.lib)
    return driver.lib.counts  # type: ignore[no-any-return]


class LossWatch:
    """`print` replaced: loss lines are parsed and timed; the program stops after `iters`."""

    def __init__(self, iters: int, ti: Any, counts: dict[str, int] | None,
                 pattern: re.Pattern[str] = LOSS) -> None:
        self.iters, self.ti, self.counts, self.pattern = iters, ti, counts, pattern
        self.losses: list[float] = []
        self.times: list[float] = []
        self.snapshots: list[dict[str, int]] = []
        self.print = builtins.print

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        text = " ".join(str(a) for a in args)
        found = self.pattern.search(text)
        if not found:
            return
        self.losses.append(float(found.group(1)))
        self.times.append(time.perf_counter())
        if self.counts is not None:
            stats = self.ti.debug.stats()
            self.snapshots.append({**self.counts, "launches": stats["launches"]})
        if len(self.losses) >= self.iters:
            raise Stop

    def per_iteration(self) -> dict[str, int]:
        """The counts of the last iteration (between the last two loss lines)."""
        if len(self.snapshots) < 2:
            return {}
        a, b = self.snapshots[-2], self.snapshots[-1]
        return {k: v - a.get(k, 0) for k, v in sorted(b.items()) if v - a.get(k, 0)}


def actual_arch(ti: Any, runtime: str) -> str:
    """The arch the program ran on (after a fallback, not the one asked for)."""
    if runtime == "jitrt":
        from jitrt.runtime import program
        return str(program.current().arch)
    name = str(ti.lang.impl.current_cfg().arch).rsplit(".", 1)[-1]
    return "cpu" if name in ("x64", "arm64") else name


def run(path: Path, runtime: str, arch: str, iters: int, count: bool) -> dict[str, Any]:
    """One program under the harness (module docstring); the JSON-ready result."""
    import random

    import numpy as np
    install_stubs()
    random.seed(0)
    np.random.seed(0)
    t0 = time.perf_counter()
    ti = import_runtime(runtime, arch)
    counts: dict[str, int] | None = None
    if count and runtime == "jitrt":
        init = ti.init

        def counting_init(*args: Any, **options: Any) -> Any:
            nonlocal counts
            prog = init(*args, **options)
            counts = count_driver_calls(ti)
            watch.counts = counts
            return prog
        ti.init = counting_init
    watch = LossWatch(iters, ti, counts, LOSS_PATTERNS.get(path.name, LOSS))
    t1 = time.perf_counter()
    builtins.print = watch
    if path.name == "volume_renderer.py":
        synthetic_volume(Path("bunny_128.bin"))
    sys.argv = [str(path), *EVERY.get(path.name, (0, []))[1]]
    sys.path.insert(0, str(path.parent))        # the robot configs beside the programs
    try:
        runpy.run_path(str(path), run_name="__main__")
    except Stop:
        pass
    finally:
        builtins.print = watch.print
    t2 = time.perf_counter()
    if os.environ.get("PROGRAMS_PROFILE"):
        sys.stdout, out = sys.stderr, sys.stdout
        try:
            ti.profiler.print_kernel_profiler_info()
        finally:
            sys.stdout = out
    later = [b - a for a, b in zip(watch.times, watch.times[1:])]
    return {"program": path.name, "runtime": runtime, "arch": arch,
            "ran_on": actual_arch(ti, runtime), "losses": watch.losses,
            "import_s": t1 - t0, "first_s": watch.times[0] - t1 if watch.times else None,
            "iter_ms": statistics.median(later) * 1e3 if later else None,
            "wall_s": t2 - t0, "iterations": len(watch.losses),
            "per_iteration": watch.per_iteration()}


def child_env(runtime: str, taichi_path: Path, tmp: Path, arch: str) -> dict[str, str]:
    """A fresh process's environment: the runtime on the path, empty compile caches (both
    runtimes compile cold: end to end includes compiling), the diffsim arch."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) if runtime == "jitrt" else str(taichi_path)
    env["JITRT_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitrt-cache-", dir=tmp)
    env["TI_OFFLINE_CACHE_FILE_PATH"] = tempfile.mkdtemp(prefix="ti-cache-", dir=tmp)
    env["DIFFSIM_ARCH"] = arch
    env["PYTHONUNBUFFERED"] = "1"
    return env


def spawn(cmd: list[str], env: dict[str, str], log: Path, limit: float, cwd: Path
          ) -> dict[str, Any]:
    """Run one process, its output to `log`; its last JSON line, or {"error": ...}."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=limit)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err, rc = f"timed out after {limit:.0f} s", None
    log.write_text(f"$ {' '.join(cmd)}\n{out}\n--- stderr ---\n{err}\n")
    found = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc != 0 or not found:
        tail = (err or out).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"rc {rc}: {tail[0][:120]}", "process_s": time.perf_counter() - t0}
    result: dict[str, Any] = json.loads(found[-1])
    result["process_s"] = time.perf_counter() - t0
    return result


def diffsim(workload: str, runtime: str, arch: str, env: dict[str, str], out: Path,
            tmp: Path, limit: float) -> dict[str, Any]:
    """benchmarks/diffsim/worker.py: two warm-up steps, three timed loops of three steps."""
    import numpy as np
    dump = tmp / f"{workload}-{runtime}-{arch}.npz"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "diffsim" / "worker.py"), workload,
           runtime, "--warmup", "2", "--repeats", "3", "--steps", "3", "--dump", str(dump)]
    res = spawn(cmd, env, out / f"{workload}-{runtime}-{arch}.log", limit, tmp)
    if "error" not in res:
        res["arch"] = arch
        res["losses"] = [float(np.load(dump)["loss"][0])]
        res["iter_ms"] = statistics.median(res["ms_per_step"])
        res["first_s"] = (res["setup_ms"] + res["first_ms"]) / 1e3
        res["wall_s"] = res["process_s"]
    return res


def relative(a: list[float] | None, b: list[float] | None) -> str:
    """The largest relative difference of the first losses two runs printed."""
    if not a or not b:
        return "-"
    n = min(len(a), len(b), 3)
    err = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a[:n], b[:n]))
    return f"{err:.1e}" + (" (!)" if err > 1e-4 else "")


def cell(res: dict[str, Any] | None) -> str:
    if res is None:
        return "skipped (time)"
    if "error" in res:
        return f"FAILED ({res['error']})"
    where, per = res.get("ran_on"), res.get("iter_ms")
    first = res.get("first_s")
    return (f"{res['wall_s']:.1f} s ({'-' if first is None else f'{first:.1f}'} s first, "
            f"{'-' if per is None else f'{per:.1f}'} ms "
            f"per {'step' if 'ms_per_step' in res else 'iteration'})"
            + (f" RAN ON {where.upper()}" if where and where != res["arch"] else ""))


def measure_all(args: argparse.Namespace, tmp: Path) -> dict[tuple[str, str, str], Any]:
    """Every (program or workload, runtime, arch) in fresh processes, within the budget."""
    results: dict[tuple[str, str, str], Any] = {}
    start = time.perf_counter()
    programs = SETS[args.set]
    names = [*programs, "mpm2d", "mass_spring"] if args.set == "tuned" else [*programs]
    for name in names:
        for runtime, arch in CONFIGS:
            if time.perf_counter() - start > args.budget:
                results[name, runtime, arch] = None
                continue
            print(f"{name} on {runtime} {arch} ...", flush=True)
            env = child_env(runtime, args.taichi_path, tmp, arch)
            if name in programs:
                cmd = [sys.executable, __file__, "run", str(args.programs / name), runtime,
                       arch, "--iters", str(programs[name][0])]
                res = spawn(cmd, env, args.out / f"{name[:-3]}-{runtime}-{arch}.log",
                            args.limit, tmp)
            else:
                res = diffsim(name, runtime, arch, env, args.out, tmp, args.limit)
            results[name, runtime, arch] = res
            print(f"  {cell(res)}; losses {(res.get('losses') or [])[:3]}", flush=True)
    return results


def table(results: dict[tuple[str, str, str], Any]) -> str:
    lines = ["| program | jitrt CUDA | jitrt CPU | Taichi 1.7.4 CUDA | jitrt/Taichi CUDA end "
             "to end | jitrt CUDA/CPU per iteration | first losses: CUDA vs CPU, vs Taichi |",
             "|---|---|---|---|---|---|---|"]
    names = sorted({k[0] for k in results}, key=[*EVERY, "mpm2d", "mass_spring"].index)
    for name in names:
        cuda, cpu, ti = (results.get((name, rt, arch)) for rt, arch in CONFIGS)
        ok = [r is not None and "error" not in r for r in (cuda, cpu, ti)]
        e2e = f"{cuda['wall_s'] / ti['wall_s']:.2f}x" if ok[0] and ok[2] else "-"
        per = f"{cuda['iter_ms'] / cpu['iter_ms']:.2f}x" if ok[0] and ok[1] and \
            cuda.get("iter_ms") and cpu.get("iter_ms") else "-"
        losses = [r.get("losses") if r else None for r in (cuda, cpu, ti)]
        lines.append(f"| {name} | {cell(cuda)} | {cell(cpu)} | {cell(ti)} | {e2e} | {per} | "
                     f"{relative(losses[0], losses[1])}, {relative(losses[0], losses[2])} |")
    return "\n".join(lines)


def main() -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    one = sub.add_parser("run")
    one.add_argument("program", type=Path)
    one.add_argument("runtime", choices=["jitrt", "taichi"])
    one.add_argument("arch", choices=["cuda", "cpu", "fakegpu"])
    one.add_argument("--iters", type=int, default=5)
    one.add_argument("--count", action="store_true")
    every = sub.add_parser("table")
    every.add_argument("--programs", type=Path, required=True)
    every.add_argument("--taichi-path", type=Path, required=True)
    every.add_argument("--out", type=Path, default=Path("/tmp/jitrt-programs"))
    every.add_argument("--set", choices=sorted(SETS), default="tuned",
                       help="the programs the GPU work was measured on, or the held-out ones")
    every.add_argument("--limit", type=float, default=90.0, help="seconds per process")
    every.add_argument("--budget", type=float, default=330.0,
                       help="seconds after which no further process starts")
    args = ap.parse_args()
    if args.mode == "run":
        print(json.dumps(run(args.program.resolve(), args.runtime, args.arch, args.iters,
                             args.count)), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jitrt-programs-") as name:
        results = measure_all(args, Path(name))
    (args.out / "results.json").write_text(json.dumps(
        {"/".join(k): v for k, v in results.items()}, indent=1))
    print()
    print("First losses: the largest relative difference over the first three; (!) over 1e-4"
          " (expected for wave against Taichi, whose f32 loss is a sequential sum:"
          " docs/porting.md). Harness: benchmarks/gpu/programs.py; logs in " + str(args.out))
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
