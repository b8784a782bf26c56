"""`python -m jitrt demo`: particles falling under gravity onto a bumpy floor.

Stage: example (uses only the public API). N particles in a periodic box [0, 1) fall under
gravity onto a floor made of parabolic bumps. Each particle advances in `contacts[i]` sub-steps
per time step (a per-particle count read from an ndarray, so the inner loop's trip count is
data-dependent) and bounces off the floor with restitution and friction. Every step launches
three kernels: `integrate`, `kinetic_energy` (a `+=` reduction into a 0-d field) and
`max_height` (a kernel returning a scalar). The same simulation is re-run in numpy and
compared; the demo exits non-zero when they disagree.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import jitrt as jr

GRAVITY = 9.8
DT = 1.0 / 120.0
RESTITUTION = 0.6      # normal velocity kept after a bounce
FRICTION = 0.9         # tangential velocity kept after a bounce
BUMPS = 4.0            # bumps per unit length
BUMP_HEIGHT = 0.08
MAX_CONTACTS = 4       # contacts[i] is drawn from 1..MAX_CONTACTS
KERNELS_PER_STEP = 3
REPORT_EVERY = 50

# Tolerances of the numpy check. Positions and velocities use the same float32 operations in
# the same order, so they agree to rounding; the energy is an atomic float32 sum whose order
# depends on the threads.
POS_ATOL = 1e-4
ENERGY_RTOL = 2e-3


@dataclass(frozen=True)
class Scene:
    x: np.ndarray
    y: np.ndarray
    vx: np.ndarray
    vy: np.ndarray
    contacts: np.ndarray


@dataclass(frozen=True)
class Trace:
    """What a run produces: per-step energy and max height, and the final state."""
    energy: np.ndarray
    max_height: np.ndarray
    x: np.ndarray
    y: np.ndarray
    vx: np.ndarray
    vy: np.ndarray


def make_scene(n: int, seed: int = 0) -> Scene:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return Scene(x=rng.uniform(0.0, 1.0, n).astype(f32),
                 y=rng.uniform(0.3, 1.0, n).astype(f32),
                 vx=rng.uniform(-0.5, 0.5, n).astype(f32),
                 vy=np.zeros(n, f32),
                 contacts=rng.integers(1, MAX_CONTACTS + 1, n).astype(np.int32))


# ---- the jitrt simulation -------------------------------------------------------------------

@jr.func
def floor_height(px):
    s = px * BUMPS - jr.floor(px * BUMPS)
    return BUMP_HEIGHT * 4.0 * s * (1.0 - s)


@jr.func
def floor_slope(px):
    s = px * BUMPS - jr.floor(px * BUMPS)
    return BUMP_HEIGHT * 4.0 * BUMPS * (1.0 - 2.0 * s)


def build_kernels(n: int) -> dict[str, Any]:
    """Fields of `n` particles and the kernels that reach them by closure."""
    x, y = jr.field(jr.f32, shape=(n,), name="x"), jr.field(jr.f32, shape=(n,), name="y")
    vx, vy = jr.field(jr.f32, shape=(n,), name="vx"), jr.field(jr.f32, shape=(n,), name="vy")
    energy = jr.field(jr.f32, shape=(), name="energy")
    top = jr.field(jr.f32, shape=(), name="top")

    @jr.kernel
    def integrate(contacts: jr.types.ndarray(dtype=jr.i32, ndim=1), dt: jr.f32):
        for i in range(contacts.shape[0]):           # parallel over particles
            sub = contacts[i]
            h = dt / sub
            px, py = x[i], y[i]
            ux, uy = vx[i], vy[i] - GRAVITY * dt
            for _ in range(sub):                     # serial, data-dependent trip count
                px = px + ux * h
                py = py + uy * h
                px = px - jr.floor(px)               # periodic in x
                ground = floor_height(px)
                if py < ground:
                    slope = floor_slope(px)
                    inv = 1.0 / jr.sqrt(1.0 + slope * slope)
                    nx, ny = -slope * inv, inv
                    vn = ux * nx + uy * ny
                    if vn < 0.0:
                        tx, ty = ux - vn * nx, uy - vn * ny
                        ux = FRICTION * tx - RESTITUTION * vn * nx
                        uy = FRICTION * ty - RESTITUTION * vn * ny
                    py = ground
            x[i], y[i] = px, py
            vx[i], vy[i] = ux, uy

    @jr.kernel
    def kinetic_energy(history: jr.types.ndarray(dtype=jr.f32, ndim=1), step: jr.i32):
        energy[None] = 0.0                           # a serial task before the loop
        for i in vx:                                 # every index of the field
            energy[None] += 0.5 * (vx[i] * vx[i] + vy[i] * vy[i])   # atomic
        history[step] = energy[None]

    @jr.kernel
    def max_height() -> jr.f32:
        top[None] = -1.0e30
        for i in y:
            jr.atomic_max(top[None], y[i])
        return top[None]

    return {"x": x, "y": y, "vx": vx, "vy": vy, "energy": energy, "integrate": integrate,
            "kinetic_energy": kinetic_energy, "max_height": max_height}


def run_jitrt(scene: Scene, steps: int) -> tuple[Trace, float]:
    """Simulate with jitrt; also returns the seconds the steady-state steps took."""
    k = build_kernels(len(scene.x))
    for name in ("x", "y", "vx", "vy"):
        k[name].from_numpy(getattr(scene, name))
    contacts = jr.ndarray(jr.i32, shape=scene.contacts.shape, name="contacts")
    contacts.from_numpy(scene.contacts)
    history = jr.ndarray(jr.f32, shape=(steps,), name="history")
    integrate, kinetic_energy, max_height = k["integrate"], k["kinetic_energy"], k["max_height"]
    heights = np.zeros(steps, np.float32)
    # Step 0 compiles the three kernels (on the CPU, quick copies first: the sync waits for
    # their optimised copies); time the steps after it.
    integrate(contacts, DT)
    kinetic_energy(history, 0)
    heights[0] = max_height()
    jr.sync()
    start = time.perf_counter()
    for step in range(1, steps):
        integrate(contacts, DT)
        kinetic_energy(history, step)
        heights[step] = max_height()
    jr.sync()
    elapsed = time.perf_counter() - start
    trace = Trace(history.to_numpy(), heights, k["x"].to_numpy(), k["y"].to_numpy(),
                  k["vx"].to_numpy(), k["vy"].to_numpy())
    return trace, elapsed


# ---- the numpy reference --------------------------------------------------------------------

def _np_floor_height(px: np.ndarray) -> np.ndarray:
    s = px * BUMPS - np.floor(px * BUMPS)
    return np.float32(BUMP_HEIGHT * 4.0) * s * (np.float32(1.0) - s)


def _np_floor_slope(px: np.ndarray) -> np.ndarray:
    s = px * BUMPS - np.floor(px * BUMPS)
    return np.float32(BUMP_HEIGHT * 4.0 * BUMPS) * (np.float32(1.0) - np.float32(2.0) * s)


def _np_step(x: np.ndarray, y: np.ndarray, vx: np.ndarray, vy: np.ndarray,
             contacts: np.ndarray) -> tuple[np.ndarray, ...]:
    f32 = np.float32
    dt = f32(DT)
    h = dt / contacts.astype(f32)
    px, py, ux = x.copy(), y.copy(), vx.copy()
    uy = vy - f32(GRAVITY) * dt
    for sub in range(int(contacts.max())):
        active = sub < contacts
        npx = px + ux * h
        npy = py + uy * h
        npx = npx - np.floor(npx)
        ground = _np_floor_height(npx)
        hit = active & (npy < ground)
        slope = _np_floor_slope(npx)
        inv = f32(1.0) / np.sqrt(f32(1.0) + slope * slope)
        nx, ny = -slope * inv, inv
        vn = ux * nx + uy * ny
        bounce = hit & (vn < f32(0.0))
        tx, ty = ux - vn * nx, uy - vn * ny
        ux = np.where(bounce, f32(FRICTION) * tx - f32(RESTITUTION) * vn * nx, ux)
        uy = np.where(bounce, f32(FRICTION) * ty - f32(RESTITUTION) * vn * ny, uy)
        px = np.where(active, npx, px)
        py = np.where(hit, ground, np.where(active, npy, py))
    return px, py, ux, uy


def run_numpy(scene: Scene, steps: int) -> Trace:
    x, y, vx, vy = scene.x, scene.y, scene.vx, scene.vy
    energy = np.zeros(steps, np.float64)
    heights = np.zeros(steps, np.float32)
    for step in range(steps):
        x, y, vx, vy = _np_step(x, y, vx, vy, scene.contacts)
        energy[step] = np.sum((np.float32(0.5) * (vx * vx + vy * vy)).astype(np.float64))
        heights[step] = y.max()
    return Trace(energy, heights, x, y, vx, vy)


def compare(got: Trace, want: Trace) -> list[str]:
    """Disagreements between two traces, as readable lines (empty: they agree)."""
    problems = []
    for name in ("x", "y", "vx", "vy", "max_height"):
        delta = np.abs(getattr(got, name) - getattr(want, name))
        if name == "x":
            delta = np.minimum(delta, 1.0 - delta)   # periodic: 0.0 and 0.99999 are close
        diff = float(np.max(delta))
        if not diff <= POS_ATOL:
            problems.append(f"{name}: max |jitrt - numpy| = {diff:.3g} > {POS_ATOL:g}")
    rel = np.abs(got.energy - want.energy) / np.maximum(np.abs(want.energy), 1e-12)
    worst = int(np.argmax(rel))
    if not rel[worst] <= ENERGY_RTOL:
        problems.append(f"energy at step {worst}: jitrt {got.energy[worst]:.6g} vs numpy "
                        f"{want.energy[worst]:.6g} (relative error {rel[worst]:.3g})")
    return problems


# ---- entry point ----------------------------------------------------------------------------

def main(particles: int = 4096, steps: int = 300, arch: str = "cpu") -> int:
    """Run the demo, print its results; 0 when jitrt agrees with numpy, else 1."""
    if particles < 1 or steps < 2:
        raise ValueError("the demo needs at least 1 particle and 2 steps")
    t0 = time.perf_counter()
    jr.init(arch=arch)
    scene = make_scene(particles)
    print(f"jitrt {jr.__version__} demo: {particles} particles falling onto a bumpy floor, "
          f"{steps} steps of {DT * 1000:.2f} ms, 1..{MAX_CONTACTS} contact sub-steps each")
    got, elapsed = run_jitrt(scene, steps)
    stats = jr.debug.stats()
    for step in sorted(set(range(0, steps, REPORT_EVERY)) | {steps - 1}):
        print(f"  step {step:4d}: kinetic energy {got.energy[step]:10.4f}   "
              f"max height {got.max_height[step]:.4f}")
    launches = (steps - 1) * KERNELS_PER_STEP
    print(f"{steps - 1} steps x {KERNELS_PER_STEP} kernels: {elapsed / launches * 1e6:.1f} us "
          f"per launch, {elapsed * 1e3:.1f} ms total (step 0, which compiles, not counted)")
    print(f"kernels: {stats['compiles']} compiled, {stats['offline_cache_hits']} loaded from the "
          f"offline cache; {stats['launches']} launches")
    want = run_numpy(scene, steps)
    problems = compare(got, want)
    wall = time.perf_counter() - t0
    if problems:
        print("check vs numpy: FAILED")
        for line in problems:
            print("  " + line)
        return 1
    print(f"check vs numpy: OK ({steps} steps, {particles} particles; demo took {wall:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
