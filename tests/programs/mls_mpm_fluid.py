"""A 2-D weakly compressible fluid simulated with MLS-MPM, written in Taichi's language for
jitrt's tests (`import taichi as ti` instead of the line below runs it on Taichi).

Particles carry position `pos`, velocity `vel`, the APIC affine velocity `affine_v` and the
volume ratio `vol_ratio` (J). One step is four kernels:
  clear_grid        zero the background grid
  particles_to_grid scatter mass and APIC momentum (plus the pressure impulse) to the 3x3 nodes
                    around each particle with quadratic B-spline weights
  update_grid       momentum -> velocity, gravity, walls that stop inflowing velocity
  grid_to_particles gather velocity and its affine part back, advect, update J from div v

The caller runs `ti.init(default_fp=ti.f64)` first: the fields are created at import.
"""
import numpy as np

import jitrt as ti

real = ti.f64

cells = 32                     # grid nodes per side
h = 1.0 / cells                # node spacing
inv_h = float(cells)
num_particles = 1024
step_dt = 2e-4
rest_density = 1.0
particle_volume = (0.5 * h) ** 2          # about four particles per cell
particle_mass = rest_density * particle_volume
bulk_modulus = 400.0
gravity = 9.8
wall = 3                       # nodes this close to an edge form the walls
apic_scale = 4.0 * inv_h * inv_h          # inverse of the quadratic kernel's inertia tensor

pos = ti.Vector.field(2, real, shape=num_particles)
vel = ti.Vector.field(2, real, shape=num_particles)
affine_v = ti.Matrix.field(2, 2, real, shape=num_particles)
vol_ratio = ti.field(real, shape=num_particles)
node_mom = ti.Vector.field(2, real, shape=(cells, cells))     # momentum, then velocity
node_mass = ti.field(real, shape=(cells, cells))
centre = ti.Vector.field(2, real, shape=())    # of mass (a field: jitrt refuses a reduction
                                               # into a kernel-scope local, which Taichi allows)


@ti.func
def stencil(p):
    """Lower-left node of the 3x3 stencil around position p, the offset of p from it in
    units of h, and the quadratic B-spline weights of the three nodes along each axis."""
    rel = p * inv_h
    corner = int(rel - 0.5)
    t = rel - corner
    wts = [0.5 * (1.5 - t) ** 2, 0.75 - (t - 1.0) ** 2, 0.5 * (t - 0.5) ** 2]
    return corner, t, wts


@ti.kernel
def clear_grid():
    for i, j in node_mass:
        node_mom[i, j] = ti.Vector.zero(real, 2)
        node_mass[i, j] = 0.0


@ti.kernel
def particles_to_grid():
    for p in pos:
        corner, t, wts = stencil(pos[p])
        # Kirchhoff stress J * sigma of a fluid with pressure bulk * (1 - J), sigma = -pressure I
        pressure = bulk_modulus * (1.0 - vol_ratio[p])
        kirchhoff = -pressure * vol_ratio[p] * ti.Matrix.identity(real, 2)
        impulse = -step_dt * particle_volume * apic_scale * kirchhoff
        a_mom = impulse + particle_mass * affine_v[p]
        for a in ti.static(range(3)):
            for b in ti.static(range(3)):
                node = ti.Vector([a, b])
                arm = (node - t) * h           # from the particle to the node
                weight = wts[a].x * wts[b].y
                node_mom[corner + node] += weight * (particle_mass * vel[p] + a_mom @ arm)
                node_mass[corner + node] += weight * particle_mass


@ti.kernel
def update_grid():
    for node in ti.grouped(node_mass):
        m = node_mass[node]
        if m > 0:
            u = node_mom[node]
            u /= m
            u.y -= step_dt * gravity
            for d in ti.static(range(2)):
                if node[d] < wall and u[d] < 0:
                    u[d] = 0.0
                if node[d] >= cells - wall and u[d] > 0:
                    u[d] = 0.0
            node_mom[node] = u


@ti.kernel
def grid_to_particles():
    for p in pos:
        corner, t, wts = stencil(pos[p])
        u_new = ti.Vector.zero(real, 2)
        b_new = ti.Matrix.zero(real, 2, 2)
        for a, b in ti.static(ti.ndrange(3, 3)):
            node = ti.Vector([a, b])
            weight = wts[a][0] * wts[b][1]
            u_node = node_mom[corner + node]
            u_new += weight * u_node
            b_new += weight * u_node.outer_product((node - t) * h)
        vel[p] = u_new
        affine_v[p] = apic_scale * b_new
        pos[p] += step_dt * u_new
        vol_ratio[p] *= 1.0 + step_dt * affine_v[p].trace()


@ti.kernel
def start(fall: real, spin: real):
    """Every particle moves down at `fall` while the block turns about its centre of mass
    at angular velocity `spin`; no deformation yet."""
    centre[None] = ti.Vector.zero(real, 2)
    for p in pos:
        centre[None] += pos[p] / num_particles
    for p in pos:
        r = pos[p] - centre[None]
        vel[p] = ti.Vector([-spin * r.y, fall + spin * r.x])
        affine_v[p] = ti.Matrix.zero(real, 2, 2)
        vol_ratio[p] = 1.0


@ti.kernel
def scatter_randomly(lo: real, size: real):
    """Positions uniform in the square [lo, lo + size)^2 from Taichi's generator."""
    for p in pos:
        pos[p] = lo + size * ti.Vector([ti.random(), ti.random()])


def reset(positions: np.ndarray, fall: float = -2.0, spin: float = 3.0) -> None:
    pos.from_numpy(positions)
    start(fall, spin)


def step() -> None:
    clear_grid()
    particles_to_grid()
    update_grid()
    grid_to_particles()

