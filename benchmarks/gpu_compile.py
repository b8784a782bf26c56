"""Cold compile time per kernel: the CPU's against CUDA's, with no GPU needed.

    python benchmarks/gpu_compile.py [--sm 80] [--repeats 3] [--clock wall|cpu]
                                     [--kernels collide,advance] [--libdevice cold|kept]
                                     [--assembler ptxas|driver]

Compiles each kernel of a small billiards-like program for the CPU and for CUDA: balls on a
table with pairwise collisions (the shape of DiffTaichi's billiards, nine kernels counting
the gradients; the loss takes a log, the start a sin and cos) and a tenth and eleventh that
roll the balls with sin, cos, atan2 and exp.
Prints per kernel, in ms: the passes and codegen (Python; the same work for both targets),
the CPU's LLVM time for its quick -O0 copy (what a tiered first launch waits for) and for
its -O3 copy, CUDA's LLVM -> PTX and ptxas, and the ratio of CUDA's whole compile to the
CPU's (passes, codegen and the -O3 copy; then the quick copy). Each figure is the minimum
over `--repeats` fresh processes, each compiling every kernel once, in order: LLVM's set-up
for both targets and the imports of the compile pipeline are done first and not counted;
what a kernel is the first to need (libdevice for math functions) counts in that kernel's
time, as a program's first launch of it pays. Python's cyclic garbage collector is paused
while a kernel compiles, as a launch pauses it (`long_lived.paused`): its passes over the
whole heap would otherwise land on whichever stage crossed a threshold.
The CUDA side is what `jr.init(arch="cuda")` runs before the driver loads the cubin
(`backends/cuda.py`, `compile_artifact`); the load of a ready cubin (about 0.1 ms) needs a
GPU and is not included. Without ptxas (`pip install 'jitrt[cuda]'`) its column reads nan.
`--assembler driver` (on a machine with a GPU): PTX up to `cuda.IN_PROCESS_PTX_BYTES` is
assembled by the CUDA driver in the process, as an open CUDA device does (the "ptxas" column
then holds that time: no process to start); larger PTX still goes to ptxas.
`--clock cpu` counts CPU time (this thread's, and ptxas's) instead of elapsed time: steadier
on a shared machine, where elapsed time also counts the waits for a core.
`--libdevice kept`: the part of libdevice codegen calls, and each of its functions optimised
for the `--sm`, are in the offline cache already (put there by an earlier process, as on a
machine where CUDA programs ran with this jitrt and LLVM), so a kernel with math functions
reads them instead of parsing all of libdevice and optimising what it calls; `cold` (the
default): nothing is on disk, each process does both for the functions it needs.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

try:
    import jitrt as jr
except ImportError:  # run from a source checkout without installing: use the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import jitrt as jr

N_BALLS, STEPS, DT, RADIUS, ELASTICITY = 16, 256, 0.003, 0.03, 0.8


def program() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """The kernels (forward and gradient) by name, each with the arguments it compiles for."""
    x = jr.Vector.field(2, jr.f32, shape=(STEPS, N_BALLS), needs_grad=True)
    v = jr.Vector.field(2, jr.f32, shape=(STEPS, N_BALLS), needs_grad=True)
    impulse = jr.Vector.field(2, jr.f32, shape=(STEPS, N_BALLS), needs_grad=True)
    shift = jr.Vector.field(2, jr.f32, shape=(STEPS, N_BALLS), needs_grad=True)
    start_x = jr.Vector.field(2, jr.f32, shape=(), needs_grad=True)
    start_v = jr.Vector.field(2, jr.f32, shape=(), needs_grad=True)
    goal = jr.Vector.field(2, jr.f32, shape=())
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    spin = jr.field(jr.f32, shape=(STEPS, N_BALLS), needs_grad=True)

    @jr.kernel
    def collide(t: jr.i32):
        for i in range(N_BALLS):
            for j in range(N_BALLS):
                if i != j:
                    gap = (x[t, i] + DT * v[t, i]) - (x[t, j] + DT * v[t, j])
                    dist = gap.norm()
                    closing = v[t, i] - v[t, j]
                    if dist < 2.0 * RADIUS:
                        normal = gap / dist
                        speed = normal.dot(closing)
                        if speed < 0.0:
                            push = -(1.0 + ELASTICITY) * 0.5 * speed * normal
                            toi = (dist - 2.0 * RADIUS) / jr.min(-1e-3, speed)
                            impulse[t + 1, i] += push
                            shift[t + 1, i] += toi * DT * push

    @jr.kernel
    def advance(t: jr.i32):
        for i in range(N_BALLS):
            v[t, i] = v[t - 1, i] + impulse[t, i]
            x[t, i] = x[t - 1, i] + DT * v[t, i] + shift[t, i]

    @jr.kernel
    def roll(t: jr.i32):
        for i in range(N_BALLS):
            heading = jr.atan2(v[t, i][1], v[t, i][0])
            turn = DT * v[t, i].norm() / RADIUS * jr.cos(heading - spin[t - 1, i])
            spin[t, i] = spin[t - 1, i] + turn * jr.exp(-DT * t) + 0.1 * jr.sin(turn)

    @jr.kernel
    def compute_loss(t: jr.i32):
        d = x[t, 0] - goal[None]
        loss[None] = jr.log(1.0 + d.dot(d))

    @jr.kernel
    def initialize(spread: jr.f32):
        for i in range(N_BALLS):
            row = jr.cast(jr.sqrt(2.0 * i + 0.25) - 0.5, jr.i32)
            col = i - row * (row + 1) // 2
            x[0, i] = jr.Vector([0.5 + row * spread, 0.5 + (col - 0.5 * row) * spread])
            wobble = 0.1 * spread * i
            v[0, i] = jr.Vector([wobble * jr.cos(1.0 * i), wobble * jr.sin(1.0 * i)])
        x[0, N_BALLS - 1] = start_x[None]
        v[0, N_BALLS - 1] = start_v[None]

    @jr.kernel
    def clear():
        for t, i in jr.ndrange(STEPS, N_BALLS):
            impulse[t, i] = jr.Vector([0.0, 0.0])
            shift[t, i] = jr.Vector([0.0, 0.0])

    spread = 2.0 * RADIUS
    forward = {"collide": (collide, (1,)), "advance": (advance, (1,)),
               "roll": (roll, (1,)), "compute_loss": (compute_loss, (1,)),
               "initialize": (initialize, (spread,)), "clear": (clear, ())}
    grads = {f"{k}.grad": (kern.grad, args) for k, (kern, args) in forward.items()
             if k != "clear"}
    return {**forward, **grads}


@dataclasses.dataclass
class Times:
    """Milliseconds of one compile of one kernel (the minimum over repeats of each)."""
    lower: float = float("inf")       # passes + codegen for the CPU
    cpu_quick: float = float("inf")   # LLVM: the quick -O0 copy (tiered first launch)
    cpu_o3: float = float("inf")      # LLVM: the -O3 copy
    lower_cuda: float = float("inf")  # passes + codegen for NVPTX
    ptx: float = float("inf")         # LLVM -> PTX (libdevice linked where used)
    ptxas: float = float("inf")       # ptxas -> cubin (nan: no ptxas)


def cpu_seconds() -> float:
    """CPU time of this thread and of the child processes waited for (ptxas) so far."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + kids.ru_utime + kids.ru_stime


CLOCK = [time.perf_counter]      # `--clock cpu`: cpu_seconds


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = CLOCK[0]()
    out = fn()
    return out, (CLOCK[0]() - start) * 1e3


class _Target:
    """What `compiler.lower_artifact` asks of a device: its codegen target, no tiers."""

    def __init__(self, codegen_target: Any) -> None:
        self.codegen_target, self.tiered = codegen_target, False


def libdevice_host(directory: str) -> Any:
    """What the CUDA device hands the compile step: an offline cache in `directory`."""
    from jitrt.backends.base import HostServices
    from jitrt.cache.store import CacheStore
    return HostServices(None, 1, CacheStore(pathlib.Path(directory), 1 << 30, 0.5),
                        lambda: "benchmarks/gpu_compile.py")


def measure(kernel: Any, args: tuple[Any, ...], sm: int, times: Times,
            host: Any = None) -> None:
    """One compile of `kernel` for the CPU and for CUDA, folded into `times` (minima)."""
    from jitrt.backends import cpu, cpu_tiers, nvptx
    from jitrt.runtime import compiler
    from jitrt.runtime.arguments import bind_args, specialize
    program_ = jr.runtime.program.current()
    cfg = program_.config
    params, _, templates, name = specialize(kernel, bind_args(kernel, args, {}), cfg)
    for device, is_cpu in ((_Target(cpu.cpu_target()), True),
                           (_Target(nvptx.codegen_target()), False)):
        ctx, kir = compiler.frontend(kernel, params, templates, name, cfg)
        (module, artifact, _, _), lower_ms = timed(
            lambda: compiler.lower_artifact(kernel, params, name, ctx, kir, cfg, device))
        text = str(module)
        if is_cpu:
            times.lower = min(times.lower, lower_ms)
            symbols = [s for s in artifact.symbols if module.globals.get(s) is not None]
            times.cpu_quick = min(times.cpu_quick,
                                  timed(lambda: cpu_tiers.quick_object(text, symbols))[1])
            times.cpu_o3 = min(times.cpu_o3, timed(lambda: cpu.compile_object(text))[1])
            continue
        times.lower_cuda = min(times.lower_cuda, lower_ms)
        ptx, ptx_ms = timed(lambda: nvptx.compile_ptx(text, sm, host))
        times.ptx = min(times.ptx, ptx_ms)
        cubin, ptxas_ms = timed(lambda: assemble(ptx, sm))
        times.ptxas = min(times.ptxas, ptxas_ms if cubin is not None else float("nan"))


LINK: list[Any] = [None]     # `--assembler driver`: the open CUDA device's `link_ptx`


def assemble(ptx: str, sm: int) -> bytes | None:
    """The cubin as `cuda.compile_artifact` makes it: in this process through the driver
    (`--assembler driver`, PTX up to its size limit), else by ptxas."""
    from jitrt.backends import cuda, nvptx
    if LINK[0] is not None and len(ptx) <= cuda.IN_PROCESS_PTX_BYTES:
        cubin = LINK[0](ptx)
        if cubin is not None:
            return cubin  # type: ignore[no-any-return]
    return nvptx.assemble(ptx, sm)


def one_process(sm: int, chosen: list[str], kept: str) -> dict[str, Times]:
    """Each kernel compiled once for the CPU and for CUDA, in this (fresh) process."""
    jr.init(arch="cpu", offline_cache=False)
    kernels = program()
    from jitrt.backends import cpu, nvptx
    from jitrt.backends.llvm_setup import init_all_targets
    from jitrt.runtime import compiler
    init_all_targets()                   # the process's set-up, not timed: LLVM's targets
    nvptx.target_machine(sm), cpu.cpu_target()
    compiler.prefetch_pipeline()         # and the imports of the passes and codegen
    from jitrt.long_lived import paused
    rows = {name: Times() for name in chosen or kernels}
    host = libdevice_host(kept) if kept else None
    for name, times in rows.items():
        gc.collect()
        with paused():           # as a launch compiles: Python's collector paused
            measure(*kernels[name], sm, times, host)
    return rows


def cuda_total(t: Times) -> float:
    return t.lower_cuda + t.ptx + (0.0 if t.ptxas != t.ptxas else t.ptxas)


def row(name: str, t: Times) -> str:
    return (f"{name:<18} {t.lower:7.1f} {t.cpu_quick:8.1f} {t.cpu_o3:8.1f} "
            f"{t.lower_cuda:7.1f} {t.ptx:7.1f} {t.ptxas:7.1f} "
            f"{cuda_total(t) / (t.lower + t.cpu_o3):7.2f}x "
            f"{cuda_total(t) / (t.lower + t.cpu_quick):7.2f}x")


def main(argv: list[str] | None = None) -> int:
    # the processes it starts leave no process finishing their dropped optimised copies
    # behind to load the machine under the next measurement (cache/finishing.py)
    os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sm", type=int, default=80, help="CUDA compute capability (80: sm_80)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes")
    ap.add_argument("--kernels", default="", help="comma-separated names (default: all)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: elapsed time; cpu: CPU time of the compiling thread and of "
                         "ptxas (steadier on a shared machine)")
    ap.add_argument("--libdevice", choices=("cold", "kept"), default="cold",
                    help="cold: every process parses all of libdevice; kept: the part codegen "
                         "calls, optimised, is in the offline cache already")
    ap.add_argument("--assembler", choices=("ptxas", "driver"), default="ptxas",
                    help="driver: small PTX is assembled by the CUDA driver in the process, "
                         "as on a machine with a GPU (needs one; its set-up is not timed)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a worker process
    ap.add_argument("--kept-dir", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.clock == "cpu":
        CLOCK[0] = cpu_seconds
    chosen = [k for k in args.kernels.split(",") if k]
    if args.one:
        if args.assembler == "driver":
            from jitrt.backends.cuda import CudaDriver
            driver = CudaDriver(0)
            LINK[0] = driver.link_ptx
            LINK[0](".version 7.0\n.target sm_%d\n.address_size 64\n" % args.sm)  # set-up
        print(json.dumps({k: dataclasses.asdict(t) for k, t in
                          one_process(args.sm, chosen, args.kept_dir).items()}))
        return 0
    with tempfile.TemporaryDirectory(prefix="jitrt-gpu-compile-") as kept:
        if args.libdevice == "kept":
            from jitrt.backends import nvptx_math
            from jitrt.backends.llvm_setup import LLVM_LOCK
            with LLVM_LOCK:                 # an earlier process's work: not timed
                nvptx_math.prepare(args.sm, libdevice_host(kept))
        rows = run_workers(args, argv, kept if args.libdevice == "kept" else "")
    print_table(args, rows)
    return 0


def run_workers(args: argparse.Namespace, argv: list[str] | None,
                kept: str) -> dict[str, Times]:
    """`args.repeats` fresh processes, each compiling every kernel once; minima per field."""
    rows: dict[str, Times] = {}
    for _ in range(args.repeats):
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one",
                               *(argv if argv is not None else sys.argv[1:]),
                               *(["--kept-dir", kept] if kept else [])],
                              capture_output=True, text=True)
        if proc.returncode != 0:    # the worker's own error, not only its exit status
            raise SystemExit(f"a worker failed (exit status {proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}")
        out = proc.stdout
        for name, got in json.loads(out.splitlines()[-1]).items():
            best = rows.setdefault(name, Times())
            for k, v in got.items():
                setattr(best, k, min(getattr(best, k), v))
    return rows


def print_table(args: argparse.Namespace, rows: dict[str, Times]) -> None:
    from jitrt.backends import nvptx
    print(f"cold compile per kernel, ms of {args.clock} time (min over {args.repeats} fresh "
          f"processes); CUDA for sm_{args.sm}; ptxas: {nvptx.ptxas_path() or 'not installed'}; "
          f"libdevice {args.libdevice}; assembler {args.assembler}")
    print(f"{'':<18} {'(cpu)':>7} {'':>8} {'':>8} {'(cuda)':>7}")
    print(f"{'kernel':<18} {'lower':>7} {'cpu -O0':>8} {'cpu -O3':>8} {'lower':>7} "
          f"{'->PTX':>7} {'ptxas':>7} {'cuda/O3':>8} {'cuda/O0':>8}")
    total = Times(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for name, t in rows.items():
        print(row(name, t))
        for f in dataclasses.fields(Times):
            setattr(total, f.name, getattr(total, f.name) + getattr(t, f.name))
    print(row("all", total))


if __name__ == "__main__":
    raise SystemExit(main())
