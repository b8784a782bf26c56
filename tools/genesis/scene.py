"""Genesis scenes (plane and box, plane and Franka arm, the arm grasping a cube), run in a
venv made by run.py.

Stages, each printed as one line `STAGE <name> ok <seconds>` when it completes: import (of
genesis), init (gs.init on the CPU), scene (plane + one box, rigid solver), build
(scene.build()), steps (the steps asked for), then `RESULT` lines with the body's final
position, its whole generalised state (`RESULT state`: dof positions then velocities, 9
significant digits) and the per-step time. `--scene box` (default), `franka` or `grasp`;
`--backend cpu|gpu`; `--n-envs N` (a batch of N environments). The first exception ends
the run: `FAILED <stage>` with its traceback, exit status 1. Prints nothing else of its own
(Genesis logs go to stderr).
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback


def _stage(name: str, fn, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    try:
        out = fn(*args)
    except BaseException:
        print(f"FAILED {name}", flush=True)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        raise SystemExit(1)
    print(f"STAGE {name} ok {time.perf_counter() - start:.3f}", flush=True)
    return out


def _import():  # type: ignore[no-untyped-def]
    import genesis as gs
    qd = sys.modules.get("quadrants")
    print(f"INFO quadrants is {getattr(qd, '__name__', None)} from "
          f"{getattr(qd, '__file__', None)}", flush=True)
    return gs


GAINS = ([4500, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100],
         [450, 450, 350, 350, 200, 200, 200, 10, 10])


def _scene(gs, name: str):  # type: ignore[no-untyped-def]
    """`box`: a plane and a 0.2 m box dropped from 0.5 m. `franka`: a plane and Genesis's
    Franka Emika Panda arm (its MJCF: 9 joints, 11 bodies), held by its position
    controllers at a fixed target, as in Genesis's examples/tutorials/control_your_robot.py.
    `grasp`: the arm and a 4 cm cube on the plane (box-box contacts on), the arm taken to the
    cube by inverse kinematics, its fingers closed on it, then lifted (the body reported is
    the cube), as in Genesis's examples/rigid/franka_cube.py."""
    if name == "grasp":
        scene = gs.Scene(show_viewer=False, sim_options=gs.options.SimOptions(dt=0.01),
                         rigid_options=gs.options.RigidOptions(box_box_detection=True))
    else:
        scene = gs.Scene(show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    if name == "box":
        return scene, scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.2, 0.2, 0.2)))
    arm = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
    if name == "franka":
        return scene, arm
    cube = scene.add_entity(gs.morphs.Box(size=(0.04, 0.04, 0.04), pos=(0.65, 0.0, 0.02)))
    scene.grasp_arm = arm
    return scene, cube


def _control(scene, body, name: str, n_envs: int):  # type: ignore[no-untyped-def]
    """Gains and targets after the build: the Franka's set once (the box has none); the
    grasp's as a function of the step number, called before each step (None otherwise)."""
    import numpy as np
    if name == "franka":
        n = body.n_dofs
        body.set_dofs_kp(np.array(GAINS[0][:n]))
        body.set_dofs_kv(np.array(GAINS[1][:n]))
        body.control_dofs_position(np.array([1.0, 1.0, 0.0, -1.5, 0.0, 1.5, 0.5, 0.04, 0.04][:n]))
    if name != "grasp":
        return None
    arm = scene.grasp_arm
    arm.set_dofs_kp(np.array(GAINS[0]))
    arm.set_dofs_kv(np.array(GAINS[1]))
    batch = (lambda a: np.tile(np.asarray(a, dtype=np.float64), (n_envs, 1))) if n_envs else (
        lambda a: np.asarray(a, dtype=np.float64))
    arm.set_qpos(batch([-1.0124, 1.5559, 1.3662, -1.6878, -1.5799, 1.7757, 1.4602, 0.04, 0.04]))
    hand = arm.get_link("hand")
    down = batch([0.0, 1.0, 0.0, 0.0])
    reach = arm.inverse_kinematics(link=hand, pos=batch([0.65, 0.0, 0.135]), quat=down)
    lift = arm.inverse_kinematics(link=hand, pos=batch([0.65, 0.0, 0.3]), quat=down)
    arms, fingers = np.arange(7), np.arange(7, 9)

    def before_step(i: int, n: int) -> None:
        if i == 0:
            arm.control_dofs_position(reach[..., :7], arms)
            arm.control_dofs_position(batch([0.04, 0.04]), fingers)
        elif i == n // 3:
            arm.control_dofs_force(batch([-0.5, -0.5]), fingers)
        elif i == 2 * n // 3:
            arm.control_dofs_position(lift[..., :7], arms)
    return before_step


def _state(body) -> list[float]:  # type: ignore[no-untyped-def]
    """The body's generalised state in the first environment: every dof's position, then
    every dof's velocity (for the free box: position, rotation, linear and angular
    velocity)."""
    qpos = body.get_qpos().reshape(-1, body.n_qs)[0].tolist()
    dofs = body.get_dofs_velocity().reshape(-1, body.n_dofs)[0].tolist()
    return [float(v) for v in qpos + dofs]


def _steps(scene, n: int, before_step, tracer=None) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for i in range(n):
        if before_step is not None:
            before_step(i, n)
        start = time.perf_counter()
        scene.step()
        times.append(time.perf_counter() - start)
        if tracer is not None:
            tracer.after_step(i)
    return times


def _tracer(scene, body, args):  # type: ignore[no-untyped-def]
    """`--trace DIR`: state_trace.py's snapshots (jitrt only; `-`: none), and one `TRACE`
    line a step with the body's position in the first environment (and the grasp's finger
    positions)."""
    if not args.trace or getattr(sys.modules.get("quadrants"), "__name__", "") != "jitrt":
        return None
    import types

    import state_trace  # tools/genesis/state_trace.py
    a, _, b = args.trace_kernels.partition(":")
    tracer = state_trace.Tracer(args.trace, scene, (int(a), int(b)) if b else None,
                                args.n_envs) if args.trace != "-" else None
    arm = getattr(scene, "grasp_arm", None)

    def after_step(i: int) -> None:
        if tracer is not None:
            tracer.after_step(i)
        pos = body.get_pos().reshape(-1, 3)[0].tolist()
        extra = arm.get_dofs_position().reshape(-1, arm.n_dofs)[0, 7:].tolist() if arm else []
        print("TRACE", i, " ".join(f"{v:.6f}" for v in pos + extra), flush=True)
    return types.SimpleNamespace(after_step=after_step)


def _timed_steps(scene, n: int) -> float:  # type: ignore[no-untyped-def]
    """Mean time of `n` more steps between two device synchronisations (on a GPU a step may
    return before its kernels end; this counts them)."""
    qd = sys.modules["quadrants"]
    qd.sync()
    start = time.perf_counter()
    for _ in range(n):
        scene.step()
    qd.sync()
    return (time.perf_counter() - start) / max(n, 1)


def _profiled_steps(scene, n: int, names: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """`n` more steps under torch's profiler (CUPTI sees every kernel, memset and copy of the
    process, whoever launched it): one `PROFILE` line per device activity, the most device
    time first, with launches and microseconds a step, the same way for jitrt and Quadrants.
    jitrt's `jk_<hash>` kernels are named through `names` (prefix -> Python kernel)."""
    import re
    from torch.profiler import ProfilerActivity, profile
    qd = sys.modules["quadrants"]
    qd.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            scene.step()
        qd.sync()
    rows: dict[str, list[float]] = {}
    for ev in prof.events():
        if str(ev.device_type) == "DeviceType.CPU":
            continue
        total = float(ev.time_range.elapsed_us())
        key = ev.name
        for prefix, name in names.items():
            if key.startswith(prefix):
                key = key[len(prefix):].lstrip("_") + " " + name
                break
        key = re.sub(r"^(\w+?)_c\d+_\d+_kernel_(\d+)_(\w+)$", r"#\2 \3 \1", key)
        row = rows.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += total
    count = sum(r[0] for r in rows.values())
    device = sum(r[1] for r in rows.values())
    print(f"PROFILE total {count / n:.1f} device activities a step, {device / n:.1f} us a step")
    for key, (c, t) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"PROFILE {t / n:8.2f} us/step {c / n:6.1f}/step {t / c:8.2f} us  {key[:90]}")


def _record_kernel_names() -> dict[str, str]:
    """On jitrt, {GPU module prefix: Python kernel name} of every kernel loaded from now on
    (its device kernels are named `<prefix>_...`)."""
    names: dict[str, str] = {}
    qd = sys.modules.get("quadrants")
    if getattr(qd, "__name__", "") != "jitrt":
        return names
    from jitrt.runtime import compiler
    load = compiler.instantiate

    def instantiate(a, *args, **kwargs):  # type: ignore[no-untyped-def]
        names[a.prefix] = a.name
        return load(a, *args, **kwargs)
    compiler.instantiate = instantiate
    return names


def _build_breakdown() -> dict[str, float]:
    """On jitrt, seconds spent from now on in kernel compiles (`compile_kernel`, cache
    look-ups included), in the frontend and in `instantiate` (loading an artifact: the
    driver's module load on a GPU), and the number of compiles: what a warm `scene.build()`
    is made of (printed after the build as `RESULT build_jitrt ...`)."""
    import time
    sums = {"kernels": 0.0, "compile_s": 0.0, "frontend_s": 0.0, "instantiate_s": 0.0}
    qd = sys.modules.get("quadrants")
    if getattr(qd, "__name__", "") != "jitrt":
        return sums
    from jitrt.runtime import compiler, launcher

    def timed(key, fn, count=False):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                sums[key] += time.perf_counter() - start
                sums["kernels"] += count
        return wrapper
    launcher.compile_kernel = timed("compile_s", launcher.compile_kernel, True)
    compiler.frontend = timed("frontend_s", compiler.frontend)
    compiler.instantiate = timed("instantiate_s", compiler.instantiate)
    return sums


def _dump_asm(path: str) -> None:
    """On Quadrants: every kernel's PTX into `path` (`print_kernel_asm` writes
    `quadrants_kernel_nvptx_NNNN.ptx` into the working directory, so the process moves there
    at init), its offline cache off so that every kernel compiles. (jitrt's: `fake_gpu.py
    --dump DIR`, no GPU needed.)"""
    import os
    qd = sys.modules.get("quadrants")
    if getattr(qd, "__name__", "") != "quadrants":
        return
    init = qd.init
    path = os.path.abspath(path)

    def with_asm(*args, **kwargs):  # type: ignore[no-untyped-def]
        os.makedirs(path, exist_ok=True)
        os.chdir(path)
        kwargs.update(print_kernel_asm=True, offline_cache=False)
        return init(*args, **kwargs)
    qd.init = with_asm


def _override_init(options: dict[str, str]) -> None:
    """`--init fast_math=0`: qd.init gets these options whatever Genesis passes (a value is
    read as a Python literal where it is one: 0, False, 1e-3; else kept as text)."""
    import ast
    qd = sys.modules["quadrants"]
    init = qd.init
    values = {}
    for key, text in options.items():
        try:
            values[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            values[key] = text

    def overridden(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.update(values)
        return init(*args, **kwargs)
    qd.init = overridden


def _graph_counts(after: str) -> None:
    """jitrt's graph counters so far (`RESULT graphs`; nothing on Quadrants): recordings,
    in-place updates and replays of `graph=True` kernels' graphs."""
    jr = sys.modules.get("jitrt")
    if jr is not None:
        stats = jr.debug.stats()
        print(f"RESULT graphs after {after}: " + " ".join(
            f"{k} {stats.get(k, 0)}" for k in ("graph_instantiations", "graph_updates",
                                               "graph_replays")), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--scene", choices=("box", "franka", "grasp"), default="box")
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--n-envs", type=int, default=0, help="0: no batch dimension")
    parser.add_argument("--performance-mode", action="store_true",
                        help="gs.init(performance_mode=True): fields instead of ndarrays")
    parser.add_argument("--timed-steps", type=int, default=0,
                        help="then this many more steps between two synchronisations")
    parser.add_argument("--profile-steps", type=int, default=0,
                        help="then this many more steps under torch's profiler (PROFILE lines)")
    parser.add_argument("--dump-asm", default="",
                        help="Quadrants runs: write every kernel's PTX to this folder")
    parser.add_argument("--trace", default="",
                        help="jitrt runs: trace.py's state snapshots into this folder")
    parser.add_argument("--trace-kernels", default="",
                        help="A:B: with --trace, also a snapshot after each kernel of steps A..B-1")
    parser.add_argument("--init", action="append", default=[], metavar="OPTION=VALUE",
                        help="override an option Genesis passes to qd.init (e.g. fast_math=0)")
    args = parser.parse_args()
    gs = _stage("import", _import)
    names = _record_kernel_names() if args.profile_steps else {}
    if args.dump_asm:
        _dump_asm(args.dump_asm)
    if args.init:
        _override_init(dict(o.split("=", 1) for o in args.init))
    backend = gs.cpu if args.backend == "cpu" else gs.gpu
    _stage("init", lambda: gs.init(backend=backend, logging_level="warning",
                                   performance_mode=args.performance_mode))
    scene, body = _stage("scene", _scene, gs, args.scene)
    breakdown = _build_breakdown()
    _stage("build", lambda: scene.build(n_envs=args.n_envs))
    if breakdown["kernels"]:
        print("RESULT build_jitrt " + " ".join(f"{k} {v:.3f}" if k != "kernels" else
                                                f"{k} {int(v)}" for k, v in breakdown.items()),
              flush=True)
    before_step = _control(scene, body, args.scene, args.n_envs)
    tracer = _tracer(scene, body, args)
    times = _stage("steps", _steps, scene, args.steps, before_step, tracer)
    _graph_counts("steps")
    if args.timed_steps:
        synced = _stage("timed", _timed_steps, scene, args.timed_steps)
        print(f"RESULT synced_ms_per_step {synced * 1e3:.4f}")
        _graph_counts("timed")
    if args.profile_steps:
        _stage("profiled", _profiled_steps, scene, args.profile_steps, names)
    pos = [float(v) for v in body.get_pos().reshape(-1, 3)[0]]
    print(f"RESULT body_pos {pos[0]:.6f} {pos[1]:.6f} {pos[2]:.6f}")
    print("RESULT state " + " ".join(f"{v:.9g}" for v in _state(body)))
    tail = sorted(times[len(times) // 2:])
    print(f"RESULT first_step_ms {times[0] * 1e3:.3f}")
    print(f"RESULT median_step_ms_second_half {tail[len(tail) // 2] * 1e3:.4f}")
    print(f"RESULT mean_step_ms_second_half {sum(tail) / len(tail) * 1e3:.4f}")
    slowest = sorted(range(len(times)), key=lambda i: -times[i])[:5]
    print("RESULT slowest_steps_ms " + " ".join(f"#{i}:{times[i] * 1e3:.2f}" for i in slowest))


if __name__ == "__main__":
    main()
