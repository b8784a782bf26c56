"""An explicit 2-D finite-element step for a neo-Hookean sheet: written in Taichi's language
for jitrt's tests (`import taichi as ti` instead of the line below runs it on Taichi).

A rectangle of cols x rows vertices is cut into two linear triangles per square. Each
triangle stores the inverse of its rest edge matrix and its rest area; its deformation
gradient is F = [x1 - x0, x2 - x0] @ inverse(rest edges). The stored energy of the sheet is
the area-weighted sum of the compressible neo-Hookean density
    psi(F) = mu/2 (tr(F^T F) - 2) - mu log J + lam/2 (log J)^2,   J = det F,
and the elastic forces are minus its gradient with respect to the vertex positions, taken by
`ti.ad.Tape`. Vertices move by symplectic Euler with lumped masses; the left column is held.

The caller runs `ti.init(default_fp=ti.f64)` first: the fields are created at import.
"""
import numpy as np

import jitrt as ti

real = ti.f64

cols, rows = 6, 4
spacing = 0.1
num_verts = cols * rows
num_tris = 2 * (cols - 1) * (rows - 1)
young, poisson = 60.0, 0.3
mu = young / (2 * (1 + poisson))
lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
areal_density = 1.0
dt = 1e-3
g = 9.8
damping = 1.0                  # velocity decays as exp(-damping t)

pos = ti.Vector.field(2, real, shape=num_verts, needs_grad=True)
vel = ti.Vector.field(2, real, shape=num_verts)
corners = ti.Vector.field(3, ti.i32, shape=num_tris)
rest_inv = ti.Matrix.field(2, 2, real, shape=num_tris)
rest_area = ti.field(real, shape=num_tris)
lumped_mass = ti.field(real, shape=num_verts)
held = ti.field(ti.i32, shape=num_verts)
energy = ti.field(real, shape=(), needs_grad=True)


def sheet() -> tuple[np.ndarray, np.ndarray]:
    """Rest positions (vertex k at column k % cols, row k // cols) and the triangles, each
    counter-clockwise."""
    where = np.array([[(k % cols) * spacing, (k // cols) * spacing]
                      for k in range(num_verts)])
    tris = []
    for r in range(rows - 1):
        for c in range(cols - 1):
            k = r * cols + c
            tris.append((k, k + 1, k + cols + 1))
            tris.append((k, k + cols + 1, k + cols))
    return where, np.array(tris, dtype=np.int32)


rest_positions, triangles = sheet()


@ti.func
def edges(e):
    a, b, c = corners[e]
    return ti.Matrix.cols([pos[b] - pos[a], pos[c] - pos[a]])


@ti.kernel
def measure_rest_shape():
    for k in lumped_mass:
        lumped_mass[k] = 0.0
    for e in corners:
        ds = edges(e)
        rest_inv[e] = ds.inverse()
        rest_area[e] = 0.5 * ti.abs(ds.determinant())
        for k in ti.static(range(3)):
            lumped_mass[corners[e][k]] += areal_density * rest_area[e] / 3.0


@ti.kernel
def stored_energy():
    for e in corners:
        F = edges(e) @ rest_inv[e]
        log_j = ti.log(F.determinant())
        stretch = (F.transpose() @ F).trace()
        psi = 0.5 * mu * (stretch - 2.0) - mu * log_j + 0.5 * lam * log_j ** 2
        energy[None] += rest_area[e] * psi


@ti.kernel
def symplectic_euler():
    for k in pos:
        if held[k] == 0:
            accel = -pos.grad[k] / lumped_mass[k] + ti.Vector([0.0, -g])
            vel[k] = (vel[k] + dt * accel) * ti.exp(-damping * dt)
            pos[k] += dt * vel[k]


def reset(deformed: np.ndarray) -> None:
    """Rest shape from the lattice, then the sheet placed at `deformed`, at rest."""
    pos.from_numpy(rest_positions)
    corners.from_numpy(triangles)
    measure_rest_shape()
    pos.from_numpy(deformed)
    vel.from_numpy(np.zeros((num_verts, 2)))
    held.from_numpy((np.arange(num_verts) % cols == 0).astype(np.int32))


def elastic_forces() -> np.ndarray:
    """Minus the gradient of the stored energy at the current positions (the energy is left
    in `energy`)."""
    with ti.ad.Tape(loss=energy):
        stored_energy()
    return -pos.grad.to_numpy()


def step() -> None:
    with ti.ad.Tape(loss=energy):
        stored_energy()
    symplectic_euler()
