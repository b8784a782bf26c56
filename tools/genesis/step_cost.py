"""The host's cost of a Genesis step on jitrt's GPU path, measured without a GPU.

    PYTHONPATH=$PWD /tmp/jitrt-genesis/jitrt/bin/python tools/genesis/step_cost.py \
        [--scene box|franka] [--n-envs N] [--performance-mode] [--warm 20] [--steps 200]
        [--native] [--profile FILE] [--top 30] [--backend gpu|cpu]

(the Genesis venv of run.py; the checkout first on the path; jitrt's offline cache as usual,
so set `JITRT_CACHE_DIR` to keep a fake-GPU build apart). With `--backend gpu` (default) the
scene runs on `fake_gpu.py`'s fake CUDA vendor (kernels compiled for sm_90, launches no-ops):
what a step costs here is the host's side of a step on a GPU. `--native`: the fake driver
also offers native words, as CUDA's does (`CudaDriver.native_words`), whose launch and
get-current functions are two small functions compiled here with llvmlite (a launch counts
itself per kernel function and returns): the launches the native GPU entry can take run
without Python, as on the H200. Without it every launch goes through the generated Python
entry and the fake binding (a Python function per driver call: dearer than cuda-bindings').

After the build and `--warm` steps, `--steps` steps are timed one by one and counted:
per step, jitrt kernel launches (per kernel, from each handle's launch count), device
launches through the Python entry and through the native entry (per device function),
every fake driver call (synchronisations, copies, memsets, graph launches), and
`jr.graph.do_while` flag reads (each a device->host copy and a wait on a GPU; here the flag
reads 0, so each loop runs once). `--profile FILE`: cProfile of the timed steps only (also
printed, the `--top` entries by own time). `--backend cpu`: the same scene and counts on
jitrt's CPU (the fake parts left out). `--null-launches`: after the warm steps every kernel's
`__call__` returns 0 without launching, so the timed steps measure what is not a launch
(Genesis's Python and jitrt's Python around launches: `jr.perf_dispatch`, do-while loops).
"""
from __future__ import annotations

import argparse
import cProfile
import collections
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import fake_gpu  # noqa: E402
import scene as sc  # noqa: E402

FLAG_READS = [0]
NATIVE_FUNCTIONS: list[str] = []     # native function handle - 1 -> kernel function name
NATIVE_SLOTS = 1 << 14
NATIVE_IR = f"""
@counts = global [{NATIVE_SLOTS} x i64] zeroinitializer
define i32 @fake_launch(i64 %f, i32 %gx, i32 %gy, i32 %gz, i32 %bx, i32 %by, i32 %bz,
                        i32 %sh, i8* %stream, i8* %params, i8* %extra) {{
  %p = getelementptr [{NATIVE_SLOTS} x i64], [{NATIVE_SLOTS} x i64]* @counts, i64 0, i64 %f
  %v = load i64, i64* %p
  %w = add i64 %v, 1
  store i64 %w, i64* %p
  ret i32 0
}}
define i32 @fake_current(i64* %out) {{
  store i64 30464, i64* %out
  ret i32 0
}}
"""
_ENGINE: list[Any] = []


def plug_native() -> Any:
    """Native words for the fake driver: returns the counts array (ctypes, per handle)."""
    import ctypes

    import fakegpu_backend
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(NATIVE_IR)
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    _ENGINE.append(engine)
    launch, current = (engine.get_function_address(n) for n in ("fake_launch", "fake_current"))
    counts = (ctypes.c_int64 * NATIVE_SLOTS).from_address(engine.get_global_value_address(
        "counts"))

    def native_words(self: Any) -> tuple[int, int, int, int]:
        return launch, current, 30464, 0x55

    def function_handle(self: Any, function: Any) -> int:
        NATIVE_FUNCTIONS.append(str(function))
        return len(NATIVE_FUNCTIONS)

    fakegpu_backend.FakeGpuDriver.native_words = native_words
    fakegpu_backend.FakeGpuDriver.function_handle = function_handle
    return counts


def count_flag_reads() -> None:
    """`jr.graph.do_while` reads its flag as 0 (one pass) and counts the reads."""
    from jitrt.quadrants import graph_loop

    def flag_value(v: Any, name: str, where: str) -> int:
        FLAG_READS[0] += 1
        return 0
    graph_loop.flag_value = flag_value     # type: ignore[assignment]


class Counts:
    """What one step did, from the counters before and after it."""

    def __init__(self, lib: Any, native: Any) -> None:
        self.lib, self.native = lib, native

    def snapshot(self) -> dict[str, Any]:
        from jitrt.runtime import program
        handles = collections.Counter()
        for h in program.current().handles:
            handles[h.compiled.name.split("[")[0].rsplit(".", 1)[-1]] += h.launch_count[0]
        snap: dict[str, Any] = {"kernels": handles, "flag": FLAG_READS[0]}
        if self.lib is not None:
            snap["log"], snap["calls"] = len(self.lib.log), len(self.lib.calls)
        if self.native is not None:
            snap["native"] = collections.Counter(
                {name: self.native[k + 1] for k, name in enumerate(NATIVE_FUNCTIONS)})
        return snap

    def diff(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, collections.Counter]:
        out: dict[str, collections.Counter] = {
            "kernels": b["kernels"] - a["kernels"],
            "flag reads": collections.Counter({"jr.graph.do_while": b["flag"] - a["flag"]})}
        if self.lib is not None:
            out["driver calls"] = collections.Counter(
                name for name, _ in self.lib.log[a["log"]:b["log"]])
            out["python launches"] = collections.Counter(
                c[1] for c in self.lib.calls[a["calls"]:b["calls"]] if c[0] == "launch")
            out["copies"] = collections.Counter(
                f"{c[0]} {c[2]} B" for c in self.lib.calls[a["calls"]:b["calls"]]
                if c[0] in ("h2d", "d2h"))
        if self.native is not None:
            out["native launches"] = b["native"] - a["native"]
        return out


GC: dict[str, Any] = {"on": False, "start": 0.0, "time": collections.Counter(),
                     "runs": collections.Counter()}


def watch_gc() -> None:
    """Counts the garbage collector's runs (per generation) and their time, while `GC["on"]`."""
    import gc

    def callback(phase: str, info: dict[str, Any]) -> None:
        if not GC["on"]:
            return
        if phase == "start":
            if GC.get("verbose"):
                print("GC", info["generation"], [len(gc.get_objects(g)) for g in range(3)],
                      gc.get_count(), gc.get_threshold(), flush=True)
            GC["start"] = time.perf_counter()
        else:
            GC["runs"][info["generation"]] += 1
            GC["time"][info["generation"]] += time.perf_counter() - GC["start"]
    gc.callbacks.append(callback)


def report(per_step: list[dict[str, collections.Counter]], times: list[float]) -> None:
    n = len(times)
    ordered = sorted(times)
    print(f"STEP host ms: median {ordered[n // 2] * 1e3:.4f}, mean {sum(times) / n * 1e3:.4f}, "
          f"min {ordered[0] * 1e3:.4f} over {n} steps")
    for gen in sorted(GC["runs"]):
        print(f"GC generation {gen}: {GC['runs'][gen] / n:.3f} runs a step, "
              f"{GC['time'][gen] / n * 1e3:.4f} ms a step")
    for key in per_step[0]:
        total: collections.Counter = collections.Counter()
        for d in per_step:
            total.update(d[key])
        print(f"PER STEP {key}: {sum(total.values()) / n:.2f}")
        for name, count in total.most_common():
            print(f"    {count / n:8.2f}  {name[:100]}")


def null_launches() -> None:
    """Every kernel launched so far returns 0 without launching (each kernel has a class of
    its own, whose `__call__` is its fast path)."""
    from jitrt.runtime import program

    def nothing(*args: Any, **kwargs: Any) -> int:
        return 0
    for h in program.current().handles:
        type(h.kernel).__call__ = nothing


def print_handles(names: set[str]) -> None:
    """Per kernel launched in the timed steps: its tasks (serial or parallel) and, on a GPU,
    the kernel parameters each launch passes (one 64-bit word per context slot)."""
    from jitrt.runtime import program
    for h in program.current().handles:
        name = h.compiled.name.split("[")[0].rsplit(".", 1)[-1]
        if name not in names:
            continue
        tasks = "".join("s" if t.kind == "serial" else "p" for t in h.plan.tasks)
        slots = getattr(h.entry, "slots", None)
        print(f"KERNEL {name}: tasks {tasks}, parameter words {slots}, native "
              f"{h.native is not None}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scene", choices=("box", "franka", "grasp"), default="box")
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--n-envs", type=int, default=0)
    parser.add_argument("--performance-mode", action="store_true")
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--null-launches", action="store_true")
    args = parser.parse_args()
    native = lib = None
    if args.backend == "gpu":
        fake_gpu._plug_fake_cuda(False)
        native = plug_native() if args.native else None
    count_flag_reads()
    gs = sc._stage("import", sc._import)
    if args.backend == "gpu":
        fake_gpu._plug_fake_torch_device(gs)
        import fakegpu_backend
        lib = fakegpu_backend.LIB[0]
    backend = gs.gpu if args.backend == "gpu" else gs.cpu
    sc._stage("init", lambda: gs.init(backend=backend, logging_level="warning",
                                      performance_mode=args.performance_mode))
    scene, body = sc._stage("scene", sc._scene, gs, args.scene)
    sc._stage("build", lambda: scene.build(n_envs=args.n_envs))
    before_step = sc._control(scene, body, args.scene, args.n_envs)
    if os.environ.get("GSTEP_GC_PROBE"):
        sys.path.insert(0, "/tmp/gstep")
        import gcprobe
        gcprobe.probe("after build")
    sc._stage("warm", sc._steps, scene, args.warm, before_step)
    if args.null_launches:
        null_launches()
    counts = Counts(lib, native)
    profile = cProfile.Profile() if args.profile else None
    times, per_step = [], []
    watch_gc()
    GC["on"] = True
    GC["verbose"] = bool(os.environ.get("GSTEP_GC_VERBOSE"))
    for _ in range(args.steps):
        before = counts.snapshot()
        if profile:
            profile.enable()
        start = time.perf_counter()
        scene.step()
        times.append(time.perf_counter() - start)
        if profile:
            profile.disable()
        per_step.append(counts.diff(before, counts.snapshot()))
    GC["on"] = False
    report(per_step, times)
    launched = set(per_step[-1]["kernels"]) | set(per_step[0]["kernels"])
    print_handles(launched)
    if profile:
        profile.dump_stats(str(args.profile))
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
