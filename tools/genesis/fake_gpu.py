"""Genesis's scene with `gs.init(backend=gs.gpu)` compiled for CUDA on a machine without a GPU.

    PYTHONPATH=$PWD /tmp/jitrt-genesis/jitrt/bin/python tools/genesis/fake_gpu.py \
        [--scene box|franka] [--n-envs N] [--steps 1] [--top 25] [--profile FILE] [--cache]

(the Genesis venv of run.py; the checkout first on the path). jitrt's arch "cuda" is replaced
by the fake GPU vendor of tests/fakegpu_backend.py, registered as the tests register it, with
`FAKEGPU_SM=90` (an H100/H200): every kernel goes through CUDA's real compile (frontend,
passes, NVPTX codegen, LLVM -> PTX, ptxas from the nvidia-cuda-nvcc wheel, found under
$CUDA_HOME or /work/main/.venv) but never runs: launches are no-ops, device memory is host
memory that kernels never write (so what Genesis reads back is zeros or what it uploaded),
and a `jr.graph.do_while` loop runs its body once (nothing would ever clear its flag: the
first runs here looped there forever). Genesis's `get_device` is patched to report a CUDA device
whose torch device is the CPU (the VM's torch has no CUDA). The offline cache is a fresh
temporary folder (a cold build) unless `--cache` (jitrt's usual one).

Prints the scene's STAGE lines (import, init, scene, build, steps), then one table line per
kernel compiled, the slowest `--top` first, and the sums: `frontend` (Python AST -> jitrt IR),
`passes`, `codegen` (jitrt IR -> llvmlite IR objects), `ir text` (str() of the module),
`->ptx` (LLVM parse, optimisation and NVPTX codegen), `ptxas`, `total` (the whole
`compile_now`, cache look-ups included), in CPU seconds (of the compiling thread and of ptxas;
`--clock wall` for wall-clock seconds); the same figures are printed as each kernel is
compiled (`KERNEL` lines). `--profile FILE` writes cProfile's statistics of the stages
import..steps to FILE (`python -m pstats FILE`; `kill -USR1` on the process writes them, and
the table, so far). `--dump DIR` writes each kernel's LLVM IR (`.ll`) and PTX there;
`--ir-only` stops each compile at its LLVM module (no LLVM, no ptxas: what the Python stages
make, in minutes).
"""
from __future__ import annotations

import argparse
import cProfile
import functools
import glob
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

CHECKOUT = Path(__file__).resolve().parents[2]
STAGES = ("frontend", "passes", "codegen", "ir_text", "ptx", "ptxas")
records: list[dict[str, Any]] = []      # one per kernel compile, in order
_open: list[dict[str, Any]] = []        # the compiles under way (a stack)
DUMP: Path | None = None                # --dump: each kernel's LLVM IR and PTX go there


def cpu_clock() -> float:
    """CPU seconds of this thread (the compile runs on the main thread) and of the child
    processes that ended (ptxas): on a shared machine, what a compile costs, where its wall
    time also counts the other jobs' turns."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


clock: Callable[[], float] = cpu_clock     # --clock wall: time.perf_counter


def _timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` adding its time to the innermost open compile's `stage`."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            if _open:
                rec = _open[-1]
                rec[stage] = rec.get(stage, 0.0) + clock() - t0
    return wrapper


def _instrument() -> None:
    """Wraps the compile pipeline's stage functions (module attributes, looked up at call
    time) with timers."""
    from jitrt.backends import nvptx
    from jitrt.runtime import compiler

    original_now = compiler.compile_now

    def compile_now(kernel: Any, params: Any, template_values: Any, name: str,
                    *rest: Any) -> Any:
        rec: dict[str, Any] = {"name": name}
        _open.append(rec)
        t0 = clock()
        try:
            return original_now(kernel, params, template_values, name, *rest)
        finally:
            rec["total"] = clock() - t0
            _open.pop()
            records.append(rec)
            if "ptxas" in rec:         # compiled, not loaded from the cache
                print("KERNEL " + "".join(f"{v:8.2f}" for v in _row(rec)) + f"  {name}",
                      flush=True)

    compiler.compile_now = compile_now  # type: ignore[assignment]
    compiler.frontend = _timed("frontend", compiler.frontend)
    compiler.passes = _timed("passes", compiler.passes)
    compiler.lower_artifact = _timed("lower", compiler.lower_artifact)
    original_ptx = nvptx.compile_ptx

    def compile_ptx(module: Any, sm: int, *rest: Any) -> str:
        text = _timed("ir_text", str)(module)
        ptx = _timed("ptx", original_ptx)(text, sm, *rest)
        if DUMP and _open:
            stem = DUMP / f"{len(records):03d}-{_open[-1]['name'].split('[')[0]}"
            stem.with_suffix(".ll").write_text(text)
            stem.with_suffix(".ptx").write_text(ptx)
        return ptx

    nvptx.compile_ptx = compile_ptx
    nvptx.assemble = _timed("ptxas", nvptx.assemble)


def _plug_fake_cuda(ir_only: bool) -> None:
    """arch "cuda" -> tests/fakegpu_backend.py with FAKEGPU_SM=90, ptxas from a CUDA wheel
    (`ir_only`: no FAKEGPU_SM, so no LLVM -> PTX and no ptxas; with --dump each module's
    LLVM IR is still written)."""
    if ir_only:
        os.environ.pop("FAKEGPU_SM", None)
        from jitrt.backends import gpu
        original = gpu.GpuDevice.compile

        def compile(self: Any, module: Any) -> bytes:
            if DUMP and _open:
                name = f"{len(records):03d}-{_open[-1]['name'].split('[')[0]}.ll"
                (DUMP / name).write_text(str(module))
            return original(self, module)

        gpu.GpuDevice.compile = compile     # type: ignore[method-assign]
        sys.path.insert(0, str(CHECKOUT / "tests"))
        from jitrt.backends import registry
        for arch in ("cuda", "fakegpu"):
            registry.register(registry.Backend(arch, "fakegpu_backend", stream_gpu=True,
                                               host_memory=False, assembly="PTX"))
        return
    os.environ.setdefault("FAKEGPU_SM", "90")
    if "CUDA_HOME" not in os.environ:
        found = glob.glob("/work/main/.venv/lib/python3*/site-packages/nvidia/cu1*/bin/ptxas")
        if found:
            os.environ["CUDA_HOME"] = str(Path(sorted(found)[-1]).parents[1])
    sys.path.insert(0, str(CHECKOUT / "tests"))
    from jitrt.backends import nvptx, registry
    if nvptx.ptxas_path() is None:
        raise SystemExit("no ptxas: set CUDA_HOME to a CUDA toolkit (or nvidia-cuda-nvcc)")
    for arch in ("cuda", "fakegpu"):    # the arch asked for, the one the device reports
        registry.register(registry.Backend(arch, "fakegpu_backend", stream_gpu=True,
                                           host_memory=False, assembly="PTX"))


def _one_pass_do_while() -> None:
    """`jr.graph.do_while` runs its body once: kernels never run here, so nothing clears the
    flag, and the loop would never end (its body's kernels are compiled by the first pass)."""
    from jitrt.quadrants import graph_loop
    graph_loop.flag_value = lambda v, name, where: 0     # type: ignore[assignment]


def _plug_fake_torch_device(gs: Any) -> None:
    """Genesis asks torch for a CUDA device; the answer is the CPU's torch device."""
    import genesis.utils.misc as misc
    import torch
    original = misc.get_device

    def get_device(backend: Any, device_idx: Any = None) -> Any:
        if backend in (gs.gpu, gs.cuda):
            return torch.device("cpu"), "fake GPU (sm_90)", 80.0, gs.cuda
        return original(backend, device_idx)

    misc.get_device = get_device
    gs.get_device = get_device          # genesis/__init__.py imported it by name


def _row(r: dict[str, Any]) -> list[float]:
    """frontend, passes, codegen, ir text, ->ptx, ptxas, total (s) of one compile record."""
    codegen = r.get("lower", 0.0) - r.get("passes", 0.0)
    return [r.get("frontend", 0.0), r.get("passes", 0.0), codegen, r.get("ir_text", 0.0),
            r.get("ptx", 0.0), r.get("ptxas", 0.0), r["total"]]


def table(top: int) -> str:
    heads = ("frontend", "passes", "codegen", "ir text", "->ptx", "ptxas", "total")
    lines = [f"{'kernel':58}" + "".join(f"{h:>9}" for h in heads)]
    rows = [(r["name"], _row(r)) for r in records]
    rows.sort(key=lambda row: -row[1][-1])
    for name, vals in rows[:top]:
        lines.append(f"{name[:58]:58}" + "".join(f"{v:9.2f}" for v in vals))
    sums = [sum(v[i] for _, v in rows) for i in range(7)]
    lines.append(f"{f'sum of {len(rows)} compiles':58}" + "".join(f"{v:9.2f}" for v in sums))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scene", choices=("box", "franka", "grasp"), default="box")
    parser.add_argument("--n-envs", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--cache", action="store_true", help="jitrt's offline cache as usual")
    parser.add_argument("--dump", type=Path, help="write each kernel's .ll and .ptx there")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--performance-mode", action="store_true",
                        help="gs.init(performance_mode=True): fields instead of ndarrays")
    parser.add_argument("--ir-only", action="store_true",
                        help="stop each compile at the LLVM module (no LLVM, no ptxas)")
    args = parser.parse_args()
    global clock
    clock = cpu_clock if args.clock == "cpu" else time.perf_counter
    global DUMP
    DUMP = args.dump
    if DUMP:
        DUMP.mkdir(parents=True, exist_ok=True)
    if not args.cache:
        os.environ["JITRT_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitrt-fakegpu-")
    sys.path.insert(0, str(Path(__file__).parent))
    import scene as sc                  # tools/genesis/scene.py: the scenes and stage lines
    _plug_fake_cuda(args.ir_only)
    _one_pass_do_while()
    _instrument()
    profile = cProfile.Profile() if args.profile else None
    if profile:
        def dump(*_: Any) -> None:      # `kill -USR1 PID`: the statistics and table so far
            profile.dump_stats(str(args.profile))
            print(table(args.top), flush=True)
        signal.signal(signal.SIGUSR1, dump)
        profile.enable()
    gs = sc._stage("import", sc._import)
    _plug_fake_torch_device(gs)
    sc._stage("init", lambda: gs.init(backend=gs.gpu, logging_level="warning",
                                          performance_mode=args.performance_mode))
    scene, body = sc._stage("scene", sc._scene, gs, args.scene)
    sc._stage("build", lambda: scene.build(n_envs=args.n_envs))
    before_step = sc._control(scene, body, args.scene, args.n_envs)
    sc._stage("steps", sc._steps, scene, args.steps, before_step)
    if profile:
        profile.disable()
        profile.dump_stats(str(args.profile))
    print(table(args.top), flush=True)


if __name__ == "__main__":
    main()
