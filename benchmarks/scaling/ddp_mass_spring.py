"""Data-parallel differentiable simulation: one process per device, gradients all-reduced.

    python benchmarks/scaling/ddp_mass_spring.py [--arch cpu|cuda] [--envs E] [--steps T]
                                                 [--iters K] [--save DIR]
    torchrun --nproc_per_node=N benchmarks/scaling/ddp_mass_spring.py [same options]

A batch of mass-spring robots (the lattice of benchmarks/diffsim/mass_spring.py: 30 masses,
83 springs, an open-loop controller of 8 sine waves per spring) shares one controller, the
parameter array `params` (83 x 9: 8 wave weights and a bias per spring). Environment number
`g` (of all processes) differs from the others by the phase of its controller, drawn from a
fixed seed, so every environment walks differently. One training step is: zero the
gradients, run `T` time steps of every environment of this process under a `jr.ad.Tape`
(a broadcast of `params` to each environment, then two kernels per time step), the loss
being minus the mean x of the masses at the end; then all-reduce `params.grad` over the
processes and divide by their number; then one gradient-descent update of `params`.

Data parallelism: process `r` of `N` (torchrun's RANK / WORLD_SIZE / LOCAL_RANK; a plain
run is process 0 of 1) runs environments `r*E .. r*E + E - 1` on its own device
(`jr.init(arch=..., device_id=LOCAL_RANK)`), so each loss is the mean over `E` environments
and the average of the `N` gradients is the gradient of the mean over all `N*E`. The
all-reduce runs on `torch.from_dlpack(params.grad)`: a tensor over jitrt's own memory (the
host buffer on the CPU, device memory on a GPU), checked by address, so nothing is copied in
either direction. Backends: NCCL on GPUs, gloo on the CPU. torch is needed only with N > 1.

What it checks (process 0 compares, every process exits 1 on a failure):
- the averaged gradient of the first step equals the gradient process 0 computes alone over
  all `N*E` environments: max |avg - single| / max |single| <= 1e-5 (f32);
- the tensor given to `all_reduce` has the address of jitrt's gradient;
- after the timed steps, every process holds the same `params` (bit for bit).

What it times (K steps after one warm-up step each, `jr.sync()` at the end): process 0 alone
with `E` and with `N*E` environments (the others wait at a barrier), then all `N` processes
with `E` each. The table gives ms per step, the share of the step spent in the all-reduce
(from the end of the backward pass, `jr.sync()`, to the averaged gradient being ready,
waiting for the slowest process included) and the ratio to one device: strong scaling is
`N*E` environments on N devices against the same on one, weak scaling `E` per device
against `E` on one. `--save DIR` writes the averaged gradient (`grad.npy`) and the figures
(`result.json`). docs/scaling.md explains the set-up, on one host and on several.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import jitrt as jr

COLS, ROWS, SPACING = 10, 3, 0.05
N_WAVES = 8
DT = 0.004
OMEGA = 10.0
DECAY = math.exp(-DT * 15.0)
GRAVITY = -4.8
GROUND = 0.1
LEARNING_RATE = 30.0
RTOL = 1e-5
CHUNK = 64              # environments per thread of the broadcast
ND = jr.types.ndarray()


def lattice() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mass positions (M, 2); spring ends (S, 2) i32; spring rest length, stiffness and
    actuation gain (S, 3) f32: rows and columns of the lattice and both diagonals of every
    square, the rows being the muscles."""
    pos = np.array([[0.1 + c * SPACING, GROUND + r * SPACING]
                    for c in range(COLS) for r in range(ROWS)], np.float32)
    ends, props = [], []
    for c in range(COLS):
        for r in range(ROWS):
            k = c * ROWS + r
            pairs = [(k, k + 1, 0.0)] if r + 1 < ROWS else []
            if c + 1 < COLS:
                pairs.append((k, k + ROWS, 0.30))
                if r + 1 < ROWS:
                    pairs += [(k, k + ROWS + 1, 0.0), (k + 1, k + ROWS, 0.0)]
            for a, b, gain in pairs:
                ends.append((a, b))
                props.append((float(np.linalg.norm(pos[a] - pos[b])), 3000.0, gain))
    return pos, np.array(ends, np.int32), np.array(props, np.float32)


START, ENDS, PROPS = lattice()
N_MASSES, N_SPRINGS = len(START), len(ENDS)


@jr.kernel
def broadcast(params: ND, w_env: ND):
    """Every environment's copy of the controller: one thread per parameter and block of
    CHUNK environments, so that the adjoint sums a block's gradients in a register and adds
    the sum to params.grad once (an atomic add per block, not per environment)."""
    for c, s, k in jr.ndrange((w_env.shape[0] + CHUNK - 1) // CHUNK, params.shape[0],
                              params.shape[1]):
        p = params[s, k]
        for e in range(c * CHUNK, jr.min(c * CHUNK + CHUNK, w_env.shape[0])):
            w_env[e, s, k] = p


@jr.kernel
def springs(t: jr.i32, x: ND, w_env: ND, phase: ND, ends: ND, props: ND, v_inc: ND):
    """Actuation and spring impulses of time step `t`, one thread per (environment, spring)."""
    for e, s in jr.ndrange(x.shape[0], ends.shape[0]):
        a = w_env[e, s, N_WAVES]
        for k in jr.static(range(N_WAVES)):
            a += w_env[e, s, k] * jr.sin(OMEGA * DT * t + phase[e]
                                         + 2.0 * math.pi / N_WAVES * k)
        i, j = ends[s, 0], ends[s, 1]
        d = x[e, t, i] - x[e, t, j]
        length = d.norm() + 1e-4
        target = props[s, 0] * (1.0 + props[s, 2] * jr.tanh(a))
        impulse = (DT * props[s, 1] * (length - target) / length) * d
        v_inc[e, t + 1, i] += -impulse
        v_inc[e, t + 1, j] += impulse


@jr.kernel
def integrate(t: jr.i32, x: ND, v: ND, v_inc: ND):
    """Velocities and positions at time step `t`, with a sticky ground."""
    for e, i in jr.ndrange(x.shape[0], x.shape[2]):
        vel = DECAY * v[e, t - 1, i] + jr.Vector([0.0, DT * GRAVITY]) + v_inc[e, t, i]
        old = x[e, t - 1, i]
        if old[1] < GROUND and vel[1] < 0.0:
            vel = jr.Vector([0.0, 0.0])
        v[e, t, i] = vel
        x[e, t, i] = old + DT * vel


@jr.kernel
def walked(x: ND, loss: ND, scale: jr.f32):
    for e, i in jr.ndrange(x.shape[0], x.shape[2]):
        loss[None] += -x[e, x.shape[1] - 1, i][0] * scale


@jr.kernel
def descend(params: ND, grad: ND, lr: jr.f32):
    for s, k in jr.ndrange(params.shape[0], params.shape[1]):
        params[s, k] -= lr * grad[s, k]


class Batch:
    """The arrays of environments `first .. first + count - 1` (of all processes), for
    `steps` time steps: every state of the rollout is kept for the reverse pass."""

    def __init__(self, first: int, count: int, steps: int, total: int) -> None:
        self.count, self.steps = count, steps
        shape = (count, steps + 1, N_MASSES)
        self.x = jr.Vector.ndarray(2, jr.f32, shape, needs_grad=True)
        self.v = jr.Vector.ndarray(2, jr.f32, shape, needs_grad=True)
        self.v_inc = jr.Vector.ndarray(2, jr.f32, shape, needs_grad=True)
        self.w_env = jr.ndarray(jr.f32, (count, N_SPRINGS, N_WAVES + 1), needs_grad=True)
        self.loss = jr.ndarray(jr.f32, (), needs_grad=True)
        self.phase = jr.ndarray(jr.f32, (count,))
        self.ends = jr.ndarray(jr.i32, ENDS.shape)
        self.props = jr.ndarray(jr.f32, PROPS.shape)
        phases = np.random.default_rng(1).uniform(0.0, 2.0 * math.pi, total)
        self.phase.from_numpy(phases[first:first + count].astype(np.float32))
        self.ends.from_numpy(ENDS)
        self.props.from_numpy(PROPS)
        self.x.from_numpy(np.broadcast_to(START, (*shape, 2)).copy())
        self.v.from_numpy(np.zeros((*shape, 2), np.float32))

    def gradient(self, params: Any) -> None:
        """One forward and backward pass: d loss / d params lands in `params.grad` (the Tape
        zeroes the gradients of the ndarrays its launches took before the reverse pass)."""
        self.v_inc.fill(0)
        with jr.ad.Tape(loss=self.loss):
            broadcast(params, self.w_env)
            for t in range(1, self.steps + 1):
                springs(t - 1, self.x, self.w_env, self.phase, self.ends, self.props,
                        self.v_inc)
                integrate(t, self.x, self.v, self.v_inc)
            walked(self.x, self.loss, 1.0 / (self.count * N_MASSES))


def initial_params() -> np.ndarray:
    rng = np.random.default_rng(0)
    p = np.zeros((N_SPRINGS, N_WAVES + 1), np.float32)
    p[:, :N_WAVES] = rng.standard_normal((N_SPRINGS, N_WAVES)) * 0.3
    return p


def jitrt_address(a: Any, gpu: bool) -> int:
    """Where jitrt keeps `a`'s data: device memory on a GPU program, else the host buffer."""
    if gpu:
        return int(a.__cuda_array_interface__["data"][0])
    return int(a.__array_interface__["data"][0])


class World:
    """This process's place among the others; the all-reduce and the agreements go through
    torch.distributed (initialised from torchrun's environment) when there are others."""

    def __init__(self, arch: str) -> None:
        self.rank = int(os.environ.get("RANK", "0"))
        self.size = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.gpu = arch != "cpu"
        self.dist: Any = None
        self.torch: Any = None
        if self.size > 1:
            import torch
            import torch.distributed as dist
            self.torch, self.dist = torch, dist
            if self.gpu:
                torch.cuda.set_device(self.local_rank)
            dist.init_process_group("nccl" if self.gpu else "gloo")

    def close(self, finished: bool) -> None:
        """End the process group before the interpreter exits (left to exit, gloo's threads
        were once destroyed still running: `terminate called`, SIGABRT after the run's OK).
        The ranks wait for each other first only after a run that finished: a rank that
        raised could leave a peer inside a collective, which a barrier would then meet."""
        if self.dist is not None and self.dist.is_initialized():
            if finished:
                self.dist.barrier()
            self.dist.destroy_process_group()

    def sync_torch(self) -> None:
        if self.gpu:
            self.torch.cuda.current_stream().synchronize()

    def average(self, grad: Any) -> bool:
        """All-reduce `grad` (a jitrt array) in place and divide it by the process count,
        through a torch tensor over the same memory; True when that tensor's address is
        jitrt's (no copy was made)."""
        jr.sync()                              # the backward pass has run
        tensor = self.torch.from_dlpack(grad)
        shared = tensor.data_ptr() == jitrt_address(grad, self.gpu)
        self.dist.all_reduce(tensor)
        tensor.div_(self.size)
        self.sync_torch()                      # before the next jitrt launch reads it
        del tensor
        grad.touch()                           # written behind jitrt's back (docs/gpu.md)
        return shared

    def all_true(self, flag: bool) -> bool:
        if self.size == 1:
            return flag
        t = self.torch.tensor([1 if flag else 0], dtype=self.torch.int32,
                              device="cuda" if self.gpu else "cpu")
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN)
        return bool(t.item())

    def barrier(self) -> None:
        if self.size > 1:
            if self.gpu:
                self.dist.barrier(device_ids=[self.local_rank])
            else:
                self.dist.barrier()

    def gathered(self, value: int) -> list[int]:
        """`value` of every process, in rank order."""
        if self.size == 1:
            return [value]
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, value)
        return [int(v) for v in out]

    def same_everywhere(self, values: np.ndarray) -> bool:
        """True when every process holds these values, bit for bit."""
        if self.size == 1:
            return True
        t = self.torch.from_numpy(values.copy())
        if self.gpu:
            t = t.cuda()
        low, high = t.clone(), t.clone()
        self.dist.all_reduce(low, op=self.dist.ReduceOp.MIN)
        self.dist.all_reduce(high, op=self.dist.ReduceOp.MAX)
        return bool(self.torch.equal(low, high))


def timed(batch: Batch, params: Any, world: World | None, iters: int) -> dict:
    """ms per training step over `iters` steps after one warm-up step, and the share of it
    spent averaging the gradient (all-reduce) when `world` is given."""
    reduce_s = 0.0
    for i in range(iters + 1):
        if i == 1:
            jr.sync()
            start, reduce_s = time.perf_counter(), 0.0
        batch.gradient(params)
        if world is not None:
            jr.sync()
            t0 = time.perf_counter()
            world.average(params.grad)
            reduce_s += time.perf_counter() - t0
        descend(params, params.grad, LEARNING_RATE)
    jr.sync()
    total = time.perf_counter() - start
    return {"ms": 1e3 * total / iters, "allreduce_share": reduce_s / total if world else None}


def compile_once_per_host(world: World, params: Any) -> None:
    """Local process 0 of each host compiles every kernel while the others wait; they load
    them from the offline cache (docs/scaling.md) instead of compiling them all at once. One
    environment over one time step is enough: the kernels' specialisations depend on the
    arguments' types, not on their sizes."""
    if world.size == 1:
        return
    if world.local_rank == 0:
        Batch(0, 1, 1, 1).gradient(params)
        descend(params, params.grad, 0.0)
        jr.sync()
    world.barrier()


def check_gradient(args: argparse.Namespace, world: World, params: Any,
                   local: Batch) -> tuple[dict, Batch | None]:
    """The first step's averaged gradient against process 0's over every environment."""
    local.gradient(params)
    result: dict = {"shares_memory": None, "loss": float(local.loss[None])}  # None: no others
    if world.size == 1:
        return dict(result, grad=params.grad.to_numpy()), None
    result["shares_memory"] = world.all_true(world.average(params.grad))
    result["grad"] = params.grad.to_numpy()
    full = None
    if world.rank == 0:
        full = Batch(0, args.envs * world.size, args.steps, args.envs * world.size)
        full.gradient(params)
        single = params.grad.to_numpy()
        result["max_rel_diff"] = float(np.abs(result["grad"] - single).max()
                                       / np.abs(single).max())
    world.barrier()
    result["gradient_ok"] = world.all_true(result.get("max_rel_diff", 0.0) <= RTOL)
    return result, full


def measure(args: argparse.Namespace, world: World, params: Any, start: np.ndarray,
            local: Batch, full: Batch | None) -> list[dict]:
    """The table's rows: process 0 alone (E, then N*E environments), then every process."""
    rows = []
    if world.rank == 0:
        params.from_numpy(start)
        rows.append(dict(devices=1, envs=args.envs, **timed(local, params, None, args.iters)))
        if full is not None:
            params.from_numpy(start)
            rows.append(dict(devices=1, envs=full.count,
                             **timed(full, params, None, args.iters)))
    world.barrier()
    if world.size > 1:
        params.from_numpy(start)
        row = timed(local, params, world, args.iters)
        rows.append(dict(devices=world.size, envs=args.envs * world.size, **row))
    return rows


def table(rows: list[dict], envs: int, size: int) -> str:
    """Strong scaling: N*E environments on N devices against one; weak: E per device."""
    one = {r["envs"]: r["ms"] for r in rows if r["devices"] == 1}
    lines = ["| scaling | devices | envs per device | total envs | ms / step | all-reduce share |"
             " vs 1 device |", "|---|---|---|---|---|---|---|"]

    def line(kind: str, r: dict, base: float | None) -> str:
        share = "-" if r["allreduce_share"] is None else f"{100 * r['allreduce_share']:.1f}%"
        ratio = "1.00x" if base is None else f"{r['ms'] / base:.2f}x"
        return (f"| {kind} | {r['devices']} | {r['envs'] // r['devices']} | {r['envs']} | "
                f"{r['ms']:.2f} | {share} | {ratio} |")

    many = [r for r in rows if r["devices"] > 1]
    for r in rows:
        if r["devices"] == 1 and r["envs"] == envs:
            lines.append(line("weak", r, None))
    for r in many:
        lines.append(line("weak", r, one.get(envs)))
    for r in rows:
        if r["devices"] == 1 and r["envs"] == envs * size and size > 1:
            lines.append(line("strong", r, None))
    for r in many:
        lines.append(line("strong", r, one.get(r["envs"])))
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--envs", type=int, default=None,
                    help="environments per device (default: 32 on the CPU, 16384 on a GPU)")
    ap.add_argument("--steps", type=int, default=128, help="time steps of a rollout")
    ap.add_argument("--iters", type=int, default=5, help="timed training steps (0: none)")
    ap.add_argument("--save", type=Path, default=None,
                    help="process 0 writes grad.npy and result.json here")
    args = ap.parse_args(argv)
    if args.envs is None:
        args.envs = 32 if args.arch == "cpu" else 16384
    if args.envs < 1 or args.steps < 1 or args.iters < 0:
        ap.error("--envs and --steps must be at least 1, --iters at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    world = World(args.arch)
    try:
        result = run(args, world)
    except BaseException:
        world.close(finished=False)
        raise
    world.close(finished=True)
    return result


def run(args: argparse.Namespace, world: World) -> int:
    jr.init(arch=args.arch, device_id=world.local_rank if world.gpu else 0,
            enable_fallback=False)
    start = initial_params()
    params = jr.ndarray(jr.f32, start.shape, needs_grad=True)
    params.from_numpy(start)
    compile_once_per_host(world, params)
    params.from_numpy(start)                 # whatever the warm-up did to it
    local = Batch(world.rank * args.envs, args.envs, args.steps, args.envs * world.size)
    result, full = check_gradient(args, world, params, local)
    rows = measure(args, world, params, start, local, full) if args.iters else []
    in_sync = world.same_everywhere(params.to_numpy())
    result["compiles"] = world.gathered(jr.debug.stats()["compiles"])
    ok = result["shares_memory"] is not False and result.get("gradient_ok", True) and in_sync
    if world.rank == 0:
        report(args, world, result, rows, in_sync, ok)
    return 0 if ok else 1


def report(args: argparse.Namespace, world: World, result: dict, rows: list[dict],
           in_sync: bool, ok: bool) -> None:
    grad = result.pop("grad")
    summary = dict(result, arch=args.arch, devices=world.size, envs_per_device=args.envs,
                   steps=args.steps, iters=args.iters, params_in_sync=in_sync, ok=ok,
                   rows=rows)
    print(f"{args.arch}: {world.size} process(es), {args.envs} environments each, "
          f"{args.steps} time steps; loss of process 0's environments {result['loss']:.6f}")
    if "max_rel_diff" in result:
        print(f"averaged gradient vs one process over all {args.envs * world.size} "
              f"environments: max |diff| / max |single| = {result['max_rel_diff']:.2e} "
              f"(<= {RTOL:g}: {'yes' if result['gradient_ok'] else 'NO'})")
    if result["shares_memory"] is not None:
        print(f"all-reduce tensor shares jitrt's gradient memory: {result['shares_memory']}; "
              f"params equal on every process after the steps: {in_sync}")
    print(f"kernels compiled per process: {result['compiles']}")
    if rows:
        print(table(rows, args.envs, world.size))
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
        np.save(args.save / "grad.npy", grad)
        (args.save / "result.json").write_text(json.dumps(summary, indent=1))
    print("OK" if ok else "FAILED")


if __name__ == "__main__":
    sys.exit(main())
