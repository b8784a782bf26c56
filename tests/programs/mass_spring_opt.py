"""A differentiable 2-D mass-spring truss, optimised by gradient descent: written in Taichi's
language for jitrt's tests (`import taichi as ti` instead of the line below runs it on Taichi).

Six unit masses on a 3x2 lattice are joined by eleven springs (lattice edges and both
diagonals of each square); the two masses of the left column are clamped to a wall, so the
truss is a small cantilever sagging under gravity. Each spring's rest length breathes in time,
rest * (1 + pulse * sin(omega t)), and both `rest` and `pulse` are trained so that the free
tip mass ends the run at a goal point. Every time step keeps its own state (positions and
velocities have a time axis) so the whole run can be replayed backwards by `ti.ad.Tape`.

The caller runs `ti.init(default_fp=ti.f64)` first: the fields are created at import.
"""
import numpy as np

import jitrt as ti

real = ti.f64

spacing = 0.1
columns, rows = 3, 2
num_masses = columns * rows
horizon = 100                  # time steps per run
dt = 4e-3
unit_mass = 1.0
stiffness = 2000.0             # per unit of stretch
drag = 2.0                     # velocity decays as exp(-drag t)
g = 9.8
omega = 12.0
tip = num_masses - 1           # the free top-right mass
goal_xy = (2 * spacing + 0.03, spacing + 0.02)   # where the tip should end
goal = ti.Vector(goal_xy)


def lattice() -> tuple[np.ndarray, np.ndarray]:
    """Rest positions (mass k sits at column k % columns, row k // columns) and spring ends."""
    where = np.array([[(k % columns) * spacing, (k // columns) * spacing]
                      for k in range(num_masses)])
    pairs = []
    for r in range(rows):
        for c in range(columns):
            k = r * columns + c
            if c + 1 < columns:
                pairs.append((k, k + 1))
            if r + 1 < rows:
                pairs.append((k, k + columns))
            if c + 1 < columns and r + 1 < rows:
                pairs.append((k, k + columns + 1))
                pairs.append((k + 1, k + columns))
    return where, np.array(pairs, dtype=np.int32)


rest_positions, spring_pairs = lattice()
num_springs = len(spring_pairs)

pos = ti.Vector.field(2, real, shape=(horizon + 1, num_masses), needs_grad=True)
vel = ti.Vector.field(2, real, shape=(horizon + 1, num_masses), needs_grad=True)
force = ti.Vector.field(2, real, shape=(horizon, num_masses), needs_grad=True)
ends = ti.Vector.field(2, ti.i32, shape=num_springs)
clamped = ti.field(ti.i32, shape=num_masses)
rest = ti.field(real, shape=num_springs, needs_grad=True)
pulse = ti.field(real, shape=num_springs, needs_grad=True)
loss = ti.field(real, shape=(), needs_grad=True)


@ti.kernel
def gather_forces(t: ti.i32):
    for k in range(num_masses):
        force[t, k] = ti.Vector([0.0, -g * unit_mass])
    for s in range(num_springs):
        a, b = ends[s]
        span = pos[t, b] - pos[t, a]
        length = span.norm()
        target = rest[s] * (1.0 + pulse[s] * ti.sin(omega * dt * t))
        tension = stiffness * (length - target) / length * span
        force[t, a] += tension
        force[t, b] -= tension


@ti.kernel
def integrate(t: ti.i32):
    for k in range(num_masses):
        if clamped[k] == 1:
            vel[t + 1, k] = ti.Vector.zero(real, 2)
            pos[t + 1, k] = pos[t, k]
        else:
            v_new = vel[t, k] * ti.exp(-drag * dt) + dt / unit_mass * force[t, k]
            vel[t + 1, k] = v_new
            pos[t + 1, k] = pos[t, k] + dt * v_new


@ti.kernel
def miss_distance():
    gap = pos[horizon, tip] - goal
    loss[None] = gap.dot(gap)


@ti.kernel
def descend(rate: real):
    for s in range(num_springs):
        rest[s] -= rate * rest.grad[s]
        pulse[s] -= rate * pulse.grad[s]


def reset(pulse0: np.ndarray) -> None:
    """The truss at rest at time 0, rest lengths from the lattice, the given pulse sizes."""
    start = np.zeros((horizon + 1, num_masses, 2))
    start[0] = rest_positions
    pos.from_numpy(start)
    vel.from_numpy(np.zeros((horizon + 1, num_masses, 2)))
    ends.from_numpy(spring_pairs)
    clamped.from_numpy((np.arange(num_masses) % columns == 0).astype(np.int32))
    a, b = spring_pairs[:, 0], spring_pairs[:, 1]
    rest.from_numpy(np.linalg.norm(rest_positions[b] - rest_positions[a], axis=1))
    pulse.from_numpy(pulse0)


def run() -> None:
    for t in range(horizon):
        gather_forces(t)
        integrate(t)
    miss_distance()


def train(iterations: int, rate: float) -> list[float]:
    """Gradient descent on `rest` and `pulse`; the loss before each update."""
    history = []
    for _ in range(iterations):
        with ti.ad.Tape(loss=loss):
            run()
        history.append(loss[None])
        descend(rate)
    return history
