"""Differentiable 2-D MLS-MPM: forward substeps and their gradient under one Tape.

    python benchmarks/diffsim/mpm2d.py --ti=jitrt      # or --ti=taichi (default), or
    DIFFSIM_TI=jitrt python benchmarks/diffsim/mpm2d.py

The same file runs with `import taichi as ti` and with `import jitrt as ti`: the only switch
is the import below. 8,192 particles of an elastic block (fixed-corotated stress through a
polar decomposition), a 128 x 128 grid, f32. One step is one `ti.ad.Tape(loss=...)` over
`DIFFSIM_SUBSTEPS` substeps (default 8) of clear grid / P2G / grid update / G2P; the loss is
the particles' mean squared distance to a target point. Every substep has its own grid, so the
reverse pass reads the grid its forward substep wrote. The block starts stretched (F0 =
diag(1.1, 0.9)), so its stress matters from the first substep. The parameters are the initial
velocity `v0` (one vector shared by all particles) and the initial positions `x0`: the Tape
leaves d loss / d v0 in `v0.grad` and d loss / d x0 in `x0.grad`.

Environment: DIFFSIM_TI (taichi | jitrt), DIFFSIM_ARCH (cpu | cuda; default cpu),
DIFFSIM_SUBSTEPS, DIFFSIM_PROFILE=1 (kernel profiler on).
"""
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

n_particles = 8192
n_grid = 128
substeps = int(os.environ.get("DIFFSIM_SUBSTEPS", "8"))
dx = 1.0 / n_grid
inv_dx = float(n_grid)
dt = 2e-4
p_vol = (0.5 * dx) ** 2              # four particles per cell
p_mass = p_vol * 1.0                 # density 1
youngs, poisson = 400.0, 0.2
mu = youngs / (2.0 * (1.0 + poisson))
lam = youngs * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
gravity = 9.8
stretch = 0.1                        # the block starts stretched in x, squeezed in y
target_x, target_y = 0.7, 0.6         # the loss: mean squared distance of the particles to it
wall = 3                             # grid cells of wall on every side

x = ti.Vector.field(2, ti.f32, shape=(substeps + 1, n_particles), needs_grad=True)
v = ti.Vector.field(2, ti.f32, shape=(substeps + 1, n_particles), needs_grad=True)
C = ti.Matrix.field(2, 2, ti.f32, shape=(substeps + 1, n_particles), needs_grad=True)
F = ti.Matrix.field(2, 2, ti.f32, shape=(substeps + 1, n_particles), needs_grad=True)
grid_v = ti.Vector.field(2, ti.f32, shape=(substeps, n_grid, n_grid), needs_grad=True)
grid_m = ti.field(ti.f32, shape=(substeps, n_grid, n_grid), needs_grad=True)
grid_out = ti.Vector.field(2, ti.f32, shape=(substeps, n_grid, n_grid), needs_grad=True)
x0 = ti.Vector.field(2, ti.f32, shape=n_particles, needs_grad=True)
v0 = ti.Vector.field(2, ti.f32, shape=(), needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def zero_loss():
    loss[None] = 0.0


@ti.kernel
def start():
    for p in range(n_particles):
        x[0, p] = x0[p]
        v[0, p] = v0[None]
        F[0, p] = ti.Matrix([[1.0 + stretch, 0.0], [0.0, 1.0 - stretch]])
        C[0, p] = ti.Matrix.zero(ti.f32, 2, 2)


@ti.kernel
def clear_grid(f: ti.i32):
    for i, j in ti.ndrange(n_grid, n_grid):
        grid_v[f, i, j] = ti.Vector([0.0, 0.0])
        grid_m[f, i, j] = 0.0


@ti.kernel
def p2g(f: ti.i32):
    for p in range(n_particles):
        cell = x[f, p] * inv_dx
        base = (cell - 0.5).cast(ti.i32)
        fx = cell - base.cast(ti.f32)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        Fn = (ti.Matrix.identity(ti.f32, 2) + dt * C[f, p]) @ F[f, p]
        F[f + 1, p] = Fn
        R, S = ti.polar_decompose(Fn)
        J = Fn.determinant()
        kirchhoff = 2.0 * mu * (Fn - R) @ Fn.transpose() \
            + ti.Matrix.identity(ti.f32, 2) * (lam * J * (J - 1.0))
        affine = (-dt * p_vol * 4.0 * inv_dx * inv_dx) * kirchhoff + p_mass * C[f, p]
        mv = p_mass * v[f, p]
        for i, j in ti.static(ti.ndrange(3, 3)):
            dpos = (ti.Vector([i, j]) - fx) * dx
            weight = w[i][0] * w[j][1]
            grid_v[f, base[0] + i, base[1] + j] += weight * (mv + affine @ dpos)
            grid_m[f, base[0] + i, base[1] + j] += weight * p_mass


@ti.kernel
def grid_update(f: ti.i32):
    for i, j in ti.ndrange(n_grid, n_grid):
        m = grid_m[f, i, j]
        out = ti.Vector([0.0, 0.0])
        if m > 0.0:
            out = grid_v[f, i, j] / m
            out[1] -= dt * gravity
            if i < wall and out[0] < 0.0:
                out[0] = 0.0
            if i > n_grid - wall and out[0] > 0.0:
                out[0] = 0.0
            if j < wall and out[1] < 0.0:
                out[1] = 0.0
            if j > n_grid - wall and out[1] > 0.0:
                out[1] = 0.0
        grid_out[f, i, j] = out


@ti.kernel
def g2p(f: ti.i32):
    for p in range(n_particles):
        cell = x[f, p] * inv_dx
        base = (cell - 0.5).cast(ti.i32)
        fx = cell - base.cast(ti.f32)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        vel = ti.Vector([0.0, 0.0])
        aff = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
        for i, j in ti.static(ti.ndrange(3, 3)):
            offset = ti.Vector([i, j]) - fx
            gv = grid_out[f, base[0] + i, base[1] + j]
            weight = w[i][0] * w[j][1]
            vel += weight * gv
            aff += (4.0 * inv_dx * weight) * gv.outer_product(offset)
        v[f + 1, p] = vel
        C[f + 1, p] = aff
        x[f + 1, p] = x[f, p] + dt * vel


@ti.kernel
def distance_to_target():
    for p in range(n_particles):
        d = x[substeps, p] - ti.Vector([target_x, target_y])
        loss[None] += d.dot(d) * (1.0 / n_particles)


def setup() -> None:
    """An elastic block of 64 x 128 particles, two per cell width, moving up and right."""
    i, j = np.meshgrid(np.arange(64), np.arange(128), indexing="ij")
    pos = np.stack([0.30 + (i.ravel() + 0.5) * 0.5 * dx,
                    0.15 + (j.ravel() + 0.5) * 0.5 * dx], axis=1)
    x0.from_numpy(pos.astype(np.float32))
    v0.from_numpy(np.array([0.6, 0.3], np.float32))


def forward() -> None:
    start()
    for f in range(substeps):
        clear_grid(f)
        p2g(f)
        grid_update(f)
        g2p(f)
    distance_to_target()


def step() -> None:
    """One timed step: the forward substeps and their gradient."""
    zero_loss()     # Taichi's Tape zeroes the loss on entry, jitrt's does not
    with ti.ad.Tape(loss=loss):
        forward()


def check() -> dict:
    """What the two runtimes must agree on after a step."""
    return {"loss": np.array([loss[None]]), "v0.grad": v0.grad.to_numpy(),
            "x0.grad": x0.grad.to_numpy(), "x_final": x.to_numpy()[substeps]}


setup()

if __name__ == "__main__":
    step()
    out = check()
    print(f"{_which()}: {substeps} substeps, loss {out['loss'][0]:.7f}, "
          f"d loss / d v0 {out['v0.grad']}, |d loss / d x0| {np.linalg.norm(out['x0.grad']):.6f}")
