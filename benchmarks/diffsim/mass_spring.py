"""A mass-spring robot learns to walk: one gradient-descent step on its actuation weights.

    python benchmarks/diffsim/mass_spring.py --ti=jitrt     # or --ti=taichi (default), or
    DIFFSIM_TI=jitrt python benchmarks/diffsim/mass_spring.py

The same file runs with `import taichi as ti` and with `import jitrt as ti`: the only switch
is the import below. The robot is a 10 x 3 lattice of masses (30) joined by 83 springs
(rows, columns and both diagonals of every square); each spring's rest length is modulated by
an open-loop controller, tanh(bias + sum of weighted sine waves). One step is: clear the
impulse buffer, run `DIFFSIM_SPRING_STEPS` time steps (default 512; three kernels each:
actuation, spring impulses, integration with ground contact) under `ti.ad.Tape(loss=...)`,
then one gradient-descent update of the weights and biases. The loss is minus the mean x of
the masses at the end: the robot should move right.

Environment: DIFFSIM_TI (taichi | jitrt), DIFFSIM_ARCH (cpu | cuda; default cpu),
DIFFSIM_SPRING_STEPS, DIFFSIM_PROFILE=1.
"""
import math
import os
import sys

import numpy as np


def _which() -> str:
    for arg in sys.argv[1:]:
        if arg.startswith("--ti="):
            return arg.split("=", 1)[1]
    return os.environ.get("DIFFSIM_TI", "taichi")


if _which() == "jitrt":
    import jitrt as ti
else:
    import taichi as ti

ti.init(arch=getattr(ti, os.environ.get("DIFFSIM_ARCH", "cpu")), default_fp=ti.f32,
        kernel_profiler=os.environ.get("DIFFSIM_PROFILE", "0") == "1")

steps = int(os.environ.get("DIFFSIM_SPRING_STEPS", "512"))
cols, rows = 10, 3
spacing = 0.05
dt = 0.004
n_waves = 8
omega = 10.0
decay = math.exp(-dt * 15.0)         # velocity damping per time step
gravity = -4.8
ground = 0.1
learning_rate = 30.0


def lattice() -> tuple[np.ndarray, list[tuple[int, int, float, float, float]]]:
    """Mass positions and springs (a, b, rest length, stiffness, actuation gain)."""
    pos = np.array([[0.1 + c * spacing, ground + r * spacing]
                    for c in range(cols) for r in range(rows)], np.float32)
    springs = []

    def join(a: int, b: int, gain: float) -> None:
        springs.append((a, b, float(np.linalg.norm(pos[a] - pos[b])), 3000.0, gain))

    for c in range(cols):
        for r in range(rows):
            k = c * rows + r
            if r + 1 < rows:
                join(k, k + 1, 0.0)                       # columns: passive
            if c + 1 < cols:
                join(k, k + rows, 0.30)                   # rows: muscles
                if r + 1 < rows:
                    join(k, k + rows + 1, 0.0)            # diagonals: passive
                    join(k + 1, k + rows, 0.0)
    return pos, springs


start_pos, spring_list = lattice()
n_masses, n_springs = len(start_pos), len(spring_list)

x = ti.Vector.field(2, ti.f32, shape=(steps + 1, n_masses), needs_grad=True)
v = ti.Vector.field(2, ti.f32, shape=(steps + 1, n_masses), needs_grad=True)
v_inc = ti.Vector.field(2, ti.f32, shape=(steps + 1, n_masses), needs_grad=True)
end_a = ti.field(ti.i32, shape=n_springs)
end_b = ti.field(ti.i32, shape=n_springs)
rest = ti.field(ti.f32, shape=n_springs)
stiffness = ti.field(ti.f32, shape=n_springs)
gain = ti.field(ti.f32, shape=n_springs)
weights = ti.field(ti.f32, shape=(n_springs, n_waves), needs_grad=True)
bias = ti.field(ti.f32, shape=n_springs, needs_grad=True)
act = ti.field(ti.f32, shape=(steps, n_springs), needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def clear_impulses():
    for t, i in ti.ndrange(steps + 1, n_masses):
        v_inc[t, i] = ti.Vector([0.0, 0.0])


@ti.kernel
def zero_loss():
    loss[None] = 0.0


@ti.kernel
def actuate(t: ti.i32):
    for s in range(n_springs):
        a = bias[s]
        for k in ti.static(range(n_waves)):
            a += weights[s, k] * ti.sin(omega * dt * t + 2.0 * math.pi / n_waves * k)
        act[t, s] = ti.tanh(a)


@ti.kernel
def spring_impulses(t: ti.i32):
    for s in range(n_springs):
        a = end_a[s]
        b = end_b[s]
        d = x[t, a] - x[t, b]
        length = d.norm() + 1e-4
        target = rest[s] * (1.0 + gain[s] * act[t, s])
        impulse = (dt * stiffness[s] * (length - target) / length) * d
        v_inc[t + 1, a] += -impulse
        v_inc[t + 1, b] += impulse


@ti.kernel
def integrate(t: ti.i32):
    for i in range(n_masses):
        vel = decay * v[t - 1, i] + ti.Vector([0.0, dt * gravity]) + v_inc[t, i]
        old = x[t - 1, i]
        if old[1] < ground and vel[1] < 0.0:
            vel = ti.Vector([0.0, 0.0])        # sticky ground
        v[t, i] = vel
        x[t, i] = old + dt * vel


@ti.kernel
def distance_walked():
    for i in range(n_masses):
        loss[None] += -x[steps, i][0] * (1.0 / n_masses)


@ti.kernel
def descend(lr: ti.f32):
    for s in range(n_springs):
        for k in ti.static(range(n_waves)):
            weights[s, k] -= lr * weights.grad[s, k]
        bias[s] -= lr * bias.grad[s]


def setup() -> None:
    rng = np.random.default_rng(0)
    x.from_numpy(np.broadcast_to(start_pos, (steps + 1, n_masses, 2)).copy())
    v.from_numpy(np.zeros((steps + 1, n_masses, 2), np.float32))
    table = np.array(spring_list, np.float64)
    end_a.from_numpy(table[:, 0].astype(np.int32))
    end_b.from_numpy(table[:, 1].astype(np.int32))
    rest.from_numpy(table[:, 2].astype(np.float32))
    stiffness.from_numpy(table[:, 3].astype(np.float32))
    gain.from_numpy(table[:, 4].astype(np.float32))
    weights.from_numpy((rng.standard_normal((n_springs, n_waves)) * 0.3).astype(np.float32))
    bias.from_numpy(np.zeros(n_springs, np.float32))


def forward() -> None:
    for t in range(1, steps + 1):
        actuate(t - 1)
        spring_impulses(t - 1)
        integrate(t)
    distance_walked()


def step() -> None:
    """One timed step: simulate, back-propagate, update the controller."""
    clear_impulses()
    zero_loss()     # Taichi's Tape zeroes the loss on entry, jitrt's does not
    with ti.ad.Tape(loss=loss):
        forward()
    descend(learning_rate)


def check() -> dict:
    """What the two runtimes must agree on after a step (gradients of that step's loss)."""
    return {"loss": np.array([loss[None]]), "weights.grad": weights.grad.to_numpy(),
            "bias.grad": bias.grad.to_numpy(), "x_final": x.to_numpy()[steps]}


setup()

if __name__ == "__main__":
    for it in range(10):
        step()
        print(f"{_which()}: iteration {it}, loss {loss[None]:.6f}")
