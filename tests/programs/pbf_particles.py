"""2-D position-based fluids on a uniform grid of cells: written in Taichi's language for
jitrt's tests (`import taichi as ti` instead of the line below runs it on Taichi).

One step: gravity moves the particles to predicted positions; the particles are binned into
cells the size of the smoothing radius (a count per cell and a slot list); each particle
collects the neighbors closer than the radius from the 3x3 cells around its own, walking each
cell's list with a loop as long as that cell's count; then a few Jacobi iterations of the
density constraint rho_i / rho_0 - 1 = 0 (poly6 density, spiky gradients, the tensile
correction term) move the predicted positions, and velocities follow from the displacement.

The caller runs `ti.init(default_fp=ti.f64)` first: the fields are created at import.
"""
import math

import numpy as np

import jitrt as ti

real = ti.f64

radius = 0.1                   # smoothing radius = cell size
grid_n = 10                    # cells per side of the unit box
box_lo, box_hi = 1e-3, 1.0 - 1e-3
num_particles = 400
cell_cap = 32                  # particles one cell can list
neighbor_cap = 48
dt = 1.0 / 60.0
g = 9.8
iterations = 3
relaxation = 600.0             # softens lambda's denominator (the CFM term)
corr_k, corr_n, corr_dq = 1e-4, 4, 0.3 * radius
poly6_norm = 4.0 / (math.pi * radius ** 8)
spiky_norm = -30.0 / (math.pi * radius ** 5)


def rest_density_of(spacing: float) -> float:
    """The density a particle sees in a square lattice of the given spacing (its own share
    included), so a block packed more tightly than `spacing` starts compressed."""
    reach = int(radius / spacing) + 1
    total = 0.0
    for a in range(-reach, reach + 1):
        for b in range(-reach, reach + 1):
            r2 = (a * a + b * b) * spacing * spacing
            if r2 < radius * radius:
                total += poly6_norm * (radius * radius - r2) ** 3
    return total


rest_density = rest_density_of(0.05)

pos = ti.Vector.field(2, real, shape=num_particles)
guess = ti.Vector.field(2, real, shape=num_particles)
vel = ti.Vector.field(2, real, shape=num_particles)
shift = ti.Vector.field(2, real, shape=num_particles)
lam = ti.field(real, shape=num_particles)
density = ti.field(real, shape=num_particles)
cell_count = ti.field(ti.i32, shape=(grid_n, grid_n))
cell_slots = ti.field(ti.i32, shape=(grid_n, grid_n, cell_cap))
neighbor_count = ti.field(ti.i32, shape=num_particles)
neighbors = ti.field(ti.i32, shape=(num_particles, neighbor_cap))
dropped = ti.field(ti.i32, shape=())   # list entries that did not fit (0 in a good run)


@ti.func
def poly6(r2):
    w = 0.0
    if r2 < radius * radius:
        w = poly6_norm * (radius * radius - r2) ** 3
    return w


@ti.func
def spiky_gradient(d):
    grad = ti.Vector.zero(real, 2)
    r = d.norm()
    if 0.0 < r < radius:
        grad = spiky_norm * (radius - r) ** 2 / r * d
    return grad


@ti.func
def cell_of(p):
    return ti.min(ti.max(int(p / radius), 0), grid_n - 1)


@ti.func
def inside_box(p):
    return ti.min(ti.max(p, box_lo), box_hi)


@ti.kernel
def predict():
    for i in pos:
        vel[i].y -= dt * g
        guess[i] = inside_box(pos[i] + dt * vel[i])


@ti.kernel
def bin_particles():
    for c in ti.grouped(cell_count):
        cell_count[c] = 0
    for i in guess:
        c = cell_of(guess[i])
        slot = ti.atomic_add(cell_count[c], 1)
        if slot < cell_cap:
            cell_slots[c, slot] = i
        else:
            dropped[None] += 1


@ti.kernel
def find_neighbors():
    for i in guess:
        home = cell_of(guess[i])
        found = 0
        for offset in ti.static(ti.grouped(ti.ndrange((-1, 2), (-1, 2)))):
            c = home + offset
            if 0 <= c[0] < grid_n and 0 <= c[1] < grid_n:
                for k in range(ti.min(cell_count[c], cell_cap)):
                    j = cell_slots[c, k]
                    if j != i and (guess[i] - guess[j]).norm_sqr() < radius * radius:
                        if found < neighbor_cap:
                            neighbors[i, found] = j
                        found += 1
        if found > neighbor_cap:
            dropped[None] += found - neighbor_cap
        neighbor_count[i] = ti.min(found, neighbor_cap)


@ti.kernel
def solve_lambda():
    for i in guess:
        rho = poly6(0.0)
        grad_i = ti.Vector.zero(real, 2)
        sum_sq = 0.0
        for k in range(neighbor_count[i]):
            d = guess[i] - guess[neighbors[i, k]]
            rho += poly6(d.norm_sqr())
            grad_j = spiky_gradient(d) / rest_density
            grad_i += grad_j
            sum_sq += grad_j.norm_sqr()
        density[i] = rho
        sum_sq += grad_i.norm_sqr()
        squeeze = ti.max(rho / rest_density - 1.0, 0.0)   # a free surface does not pull
        lam[i] = -squeeze / (sum_sq + relaxation)


@ti.kernel
def solve_shift():
    for i in guess:
        move = ti.Vector.zero(real, 2)
        for k in range(neighbor_count[i]):
            j = neighbors[i, k]
            d = guess[i] - guess[j]
            tensile = -corr_k * (poly6(d.norm_sqr()) / poly6(corr_dq ** 2)) ** corr_n
            move += (lam[i] + lam[j] + tensile) * spiky_gradient(d)
        shift[i] = move / rest_density


@ti.kernel
def apply_shift():
    for i in guess:
        guess[i] = inside_box(guess[i] + shift[i])


@ti.kernel
def finish():
    for i in pos:
        vel[i] = (guess[i] - pos[i]) / dt
        pos[i] = guess[i]


def reset(positions: np.ndarray) -> None:
    pos.from_numpy(positions)
    vel.from_numpy(np.zeros_like(positions))
    dropped[None] = 0


def step() -> None:
    predict()
    bin_particles()
    find_neighbors()
    for _ in range(iterations):
        solve_lambda()
        solve_shift()
        apply_shift()
    finish()
