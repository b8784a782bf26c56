"""Whole programs in Taichi's language (tests/programs/, written for these tests; each runs
on Taichi 1.7.4 when its one `import jitrt as ti` line says `import taichi as ti`), checked
against numpy (float64) implementations of the same algorithms:

- mls_mpm_fluid: 2-D MLS-MPM (vector and matrix fields, int() of a vector, a func returning
  a tuple with a list of vectors indexed by static loop variables, x[base + offset] with a
  vector index, `/=` and `.y -=` on vector locals, ti.Vector.zero / ti.Matrix.zero /
  ti.Matrix.identity, outer_product, trace, ti.grouped, ti.random);
- mass_spring_opt: a differentiable mass-spring truss trained by gradient descent through
  `ti.ad.Tape` (time-indexed fields, atomics on vector elements, unpacking an int vector,
  a module-level ti.Vector constant), gradients against central and complex-step differences;
- pbf_particles: position-based fluids with a cell grid (ti.atomic_add slots, neighbor
  search over the 3x3 cells with `for k in range(count)` loops, chained comparisons, funcs),
  neighbors against a brute-force search;
- fem_neohookean: linear triangles, F from the rest shape (ti.Matrix.cols, inverse,
  determinant, log), forces as minus the energy gradient from `ti.ad.Tape`, symplectic
  Euler, against the analytic first Piola-Kirchhoff stress.

The programs are large kernels, so they are not also built for the GPUs in every run."""
import importlib.util
import os
import re
from types import ModuleType

import numpy as np
import pytest

import jitrt as jr

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")
NAMES = ("mls_mpm_fluid", "mass_spring_opt", "pbf_particles", "fem_neohookean")
pytestmark = pytest.mark.no_gpu_builds


def load_program(name: str) -> ModuleType:
    """A fresh copy of tests/programs/<name>.py: its fields belong to the program of the
    jr.init that ran last."""
    spec = importlib.util.spec_from_file_location(f"ported_{name}",
                                                  os.path.join(PROGRAMS, name + ".py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start(arch: str, **options) -> None:
    jr.init(arch=arch, offline_cache=False, enable_fallback=False, default_fp=jr.f64, **options)


@pytest.mark.cpu_only
@pytest.mark.parametrize("name", NAMES)
def test_programs_name_jitrt_only_in_the_import(arch, name):
    """Porting to Taichi is one line: no other mention of jitrt, no `jr.` spelling."""
    with open(os.path.join(PROGRAMS, name + ".py")) as f:
        source = f.read()
    assert re.findall(r"^(?:import|from) +jitrt\b.*$", source, re.M) == ["import jitrt as ti"]
    assert not re.search(r"\bjr\.", source)


# ---- MLS-MPM ------------------------------------------------------------------------------
def mpm_reference(m, x, v, C, J, steps):
    """The same four kernels in numpy, particle-vectorized."""
    n, h, dt = m.cells, m.h, m.step_dt
    node_axes = np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij"), -1)
    for _ in range(steps):
        mom, mass = np.zeros((n, n, 2)), np.zeros((n, n))
        rel = x / h
        corner = (rel - 0.5).astype(int)
        t = rel - corner
        wts = [0.5 * (1.5 - t) ** 2, 0.75 - (t - 1.0) ** 2, 0.5 * (t - 0.5) ** 2]
        kirchhoff = -m.bulk_modulus * (1.0 - J) * J
        impulse = -dt * m.particle_volume * m.apic_scale * kirchhoff
        a_mom = impulse[:, None, None] * np.eye(2) + m.particle_mass * C
        for a in range(3):
            for b in range(3):
                node = np.array([a, b])
                arm = (node - t) * h
                weight = wts[a][:, 0] * wts[b][:, 1]
                at = tuple((corner + node).T)
                np.add.at(mom, at, weight[:, None] * (m.particle_mass * v
                                                      + np.einsum("pij,pj->pi", a_mom, arm)))
                np.add.at(mass, at, weight * m.particle_mass)
        filled = mass > 0
        u = np.zeros_like(mom)
        u[filled] = mom[filled] / mass[filled][:, None]
        u[filled, 1] -= dt * m.gravity
        for d in range(2):
            u[..., d][(node_axes[..., d] < m.wall) & (u[..., d] < 0)] = 0.0
            u[..., d][(node_axes[..., d] >= n - m.wall) & (u[..., d] > 0)] = 0.0
        v, B = np.zeros_like(v), np.zeros_like(C)
        for a in range(3):
            for b in range(3):
                node = np.array([a, b])
                weight = wts[a][:, 0] * wts[b][:, 1]
                u_node = u[tuple((corner + node).T)]
                v += weight[:, None] * u_node
                B += weight[:, None, None] * np.einsum("pi,pj->pij", u_node, (node - t) * h)
        C = m.apic_scale * B
        x = x + dt * v
        J = J * (1.0 + dt * np.trace(C, axis1=1, axis2=2))
    return x, v, C, J


def test_mls_mpm_matches_numpy(arch):
    start(arch)
    m = load_program("mls_mpm_fluid")
    x0 = [0.3, 0.08] + 0.4 * np.random.default_rng(0).random((m.num_particles, 2))
    m.reset(x0, fall=-2.0, spin=3.0)
    r = x0 - x0.mean(axis=0)
    v0 = np.stack([-3.0 * r[:, 1], -2.0 + 3.0 * r[:, 0]], axis=1)
    np.testing.assert_allclose(m.vel.to_numpy(), v0, rtol=1e-12, atol=1e-13)
    steps = 40
    for _ in range(steps):
        m.step()
    x, v, C, J = mpm_reference(m, x0, v0, np.zeros((m.num_particles, 2, 2)),
                               np.ones(m.num_particles), steps)
    np.testing.assert_allclose(m.pos.to_numpy(), x, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(m.vel.to_numpy(), v, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(m.affine_v.to_numpy(), C, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(m.vol_ratio.to_numpy(), J, rtol=1e-10)
    assert J.min() < 0.9 and np.abs(C).max() > 1.0     # the floor squeezed the block


def test_mls_mpm_random_start(arch):
    start(arch, random_seed=3)
    m = load_program("mls_mpm_fluid")
    m.scatter_randomly(0.2, 0.4)
    x = m.pos.to_numpy()
    assert 0.2 <= x.min() and x.max() < 0.6 and len(np.unique(x)) > 0.99 * x.size
    assert abs(x.mean() - 0.4) < 0.02


# ---- differentiable mass-spring -------------------------------------------------------------
def spring_losses(ms, rest, pulse):
    """Loss of a batch of runs: rest and pulse are (batch, springs), real or complex (the
    complex step differentiates through every operation below, which is analytic)."""
    batch = rest.shape[0]
    a, b = ms.spring_pairs[:, 0], ms.spring_pairs[:, 1]
    ends = np.zeros((ms.num_springs, ms.num_masses))
    ends[np.arange(ms.num_springs), a] = 1.0
    ends[np.arange(ms.num_springs), b] = -1.0
    free = (np.arange(ms.num_masses) % ms.columns != 0)[None, :, None]
    x = np.broadcast_to(ms.rest_positions, (batch, ms.num_masses, 2)).astype(rest.dtype)
    v = np.zeros_like(x)
    for t in range(ms.horizon):
        span = x[:, b] - x[:, a]
        length = np.sqrt((span * span).sum(axis=2))
        target = rest * (1.0 + pulse * np.sin(ms.omega * ms.dt * t))
        tension = (ms.stiffness * (length - target) / length)[:, :, None] * span
        force = np.einsum("psk,sn->pnk", tension, ends)
        force[:, :, 1] -= ms.g * ms.unit_mass
        v_new = v * np.exp(-ms.drag * ms.dt) + ms.dt / ms.unit_mass * force
        v = np.where(free, v_new, 0.0)
        x = np.where(free, x + ms.dt * v_new, x)
    gap = x[:, ms.tip] - np.array(ms.goal_xy)
    return (gap * gap).sum(axis=1)


def spring_gradients(ms, rest, pulse, step, complex_step):
    """d loss / d (rest, pulse): complex-step (exact to rounding) or central differences."""
    theta = np.concatenate([rest, pulse])
    k = len(theta)
    if complex_step:
        probe = theta + 1j * step * np.eye(k)
        grad = spring_losses(ms, probe[:, :len(rest)], probe[:, len(rest):]).imag / step
    else:
        probe = np.concatenate([theta + step * np.eye(k), theta - step * np.eye(k)])
        loss = spring_losses(ms, probe[:, :len(rest)], probe[:, len(rest):])
        grad = (loss[:k] - loss[k:]) / (2 * step)
    return grad[:len(rest)], grad[len(rest):]


def test_mass_spring_gradient_descent_matches_numpy(arch):
    start(arch)
    ms = load_program("mass_spring_opt")
    pulse0 = np.random.default_rng(1).uniform(-0.05, 0.05, ms.num_springs)
    ms.reset(pulse0)
    rest, pulse = ms.rest.to_numpy(), pulse0.copy()
    rate, iterations = 0.02, 6
    history = []
    for it in range(iterations):
        with jr.ad.Tape(loss=ms.loss):
            ms.run()
        history.append(ms.loss[None])
        g_rest, g_pulse = ms.rest.grad.to_numpy(), ms.pulse.grad.to_numpy()
        # the numpy run with the parameters jitrt has now, and its exact gradient
        expect = spring_losses(ms, rest[None], pulse[None])[0]
        np.testing.assert_allclose(history[-1], expect, rtol=1e-11)
        e_rest, e_pulse = spring_gradients(ms, rest, pulse, 1e-20, complex_step=True)
        np.testing.assert_allclose(g_rest, e_rest, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g_pulse, e_pulse, rtol=1e-9, atol=1e-12)
        if it == 0:
            d_rest, d_pulse = spring_gradients(ms, rest, pulse, 1e-6, complex_step=False)
            scale = np.abs(np.concatenate([d_rest, d_pulse])).max()
            np.testing.assert_allclose(g_rest, d_rest, rtol=1e-6, atol=1e-7 * scale)
            np.testing.assert_allclose(g_pulse, d_pulse, rtol=1e-6, atol=1e-7 * scale)
            assert scale > 0.1                     # gradients that matter
        ms.descend(rate)
        rest, pulse = rest - rate * e_rest, pulse - rate * e_pulse
        np.testing.assert_allclose(ms.rest.to_numpy(), rest, rtol=1e-12)
        np.testing.assert_allclose(ms.pulse.to_numpy(), pulse, rtol=1e-9, atol=1e-13)
    assert all(later < earlier for earlier, later in zip(history, history[1:]))
    assert history[-1] < 0.2 * history[0]
    ms.reset(pulse0)                               # the program's own loop: the same losses
    np.testing.assert_allclose(ms.train(iterations, rate), history, rtol=1e-12)


# ---- position-based fluids ------------------------------------------------------------------
def pbf_block(pb) -> np.ndarray:
    """A 20 x 20 block packed a little tighter than the rest spacing, jittered."""
    ij = np.stack(np.meshgrid(np.arange(20), np.arange(20), indexing="ij"), -1).reshape(-1, 2)
    return [0.05, 0.05] + 0.045 * ij + np.random.default_rng(2).uniform(-0.004, 0.004,
                                                                         (pb.num_particles, 2))


def pbf_reference_step(pb, x, v):
    """One step with neighbors from all pairs closer than the radius (no cells); the new
    positions and velocities and the matrix of neighbor pairs."""
    h, rho0, n = pb.radius, pb.rest_density, len(x)
    v = v.copy()
    v[:, 1] -= pb.dt * pb.g
    p = np.clip(x + pb.dt * v, pb.box_lo, pb.box_hi)
    near = (((p[:, None] - p[None]) ** 2).sum(axis=2) < h * h) & ~np.eye(n, dtype=bool)
    me, other = np.nonzero(near)

    def per_particle(values):              # sums over each particle's neighbors
        if values.ndim == 1:
            return np.bincount(me, values, n)
        return np.stack([np.bincount(me, values[:, k], n) for k in range(2)], axis=1)

    poly6_dq = pb.poly6_norm * (h * h - pb.corr_dq ** 2) ** 3
    for _ in range(pb.iterations):
        d = p[me] - p[other]
        r2 = (d ** 2).sum(axis=1)
        r = np.sqrt(r2)
        w = np.where(r2 < h * h, pb.poly6_norm * (h * h - r2) ** 3, 0.0)
        rho = pb.poly6_norm * h ** 6 + per_particle(w)
        slope = np.where((r > 0) & (r < h),
                         pb.spiky_norm * (h - r) ** 2 / np.where(r > 0, r, 1.0), 0.0)
        spiky = slope[:, None] * d
        grads = spiky / rho0
        sum_sq = per_particle((grads ** 2).sum(axis=1)) + (per_particle(grads) ** 2).sum(axis=1)
        lam = -np.maximum(rho / rho0 - 1.0, 0.0) / (sum_sq + pb.relaxation)
        tensile = -pb.corr_k * (w / poly6_dq) ** pb.corr_n
        move = per_particle((lam[me] + lam[other] + tensile)[:, None] * spiky) / rho0
        p = np.clip(p + move, pb.box_lo, pb.box_hi)
    return p, (p - x) / pb.dt, near


def test_pbf_matches_brute_force_numpy(arch):
    start(arch)
    pb = load_program("pbf_particles")
    x = pbf_block(pb)
    v = np.zeros_like(x)
    pb.reset(x)
    for _ in range(8):
        pb.step()
        x, v, near = pbf_reference_step(pb, x, v)
        counts = pb.neighbor_count.to_numpy()
        np.testing.assert_array_equal(counts, near.sum(axis=1))
        lists = pb.neighbors.to_numpy()
        for i in range(0, pb.num_particles, 37):
            assert sorted(lists[i, :counts[i]]) == list(np.flatnonzero(near[i]))
        assert pb.cell_count.to_numpy().sum() == pb.num_particles
    assert pb.dropped[None] == 0
    np.testing.assert_allclose(pb.pos.to_numpy(), x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pb.vel.to_numpy(), v, rtol=1e-8, atol=1e-9)
    assert counts.max() > 12 and np.abs(v).max() > 0.5      # crowded, and pushed apart


# ---- FEM ----------------------------------------------------------------------------------
def fem_rest(fe):
    a, b, c = fe.triangles.T
    x = fe.rest_positions
    ds = np.stack([x[b] - x[a], x[c] - x[a]], axis=2)
    area = 0.5 * np.abs(np.linalg.det(ds))
    mass = np.zeros(fe.num_verts)
    for k in (a, b, c):
        np.add.at(mass, k, fe.areal_density * area / 3.0)
    return np.linalg.inv(ds), area, mass


def fem_energy_forces(fe, x, rest_inv, area):
    """The stored energy and minus its gradient from the first Piola-Kirchhoff stress
    P = mu (F - F^-T) + lam log(J) F^-T."""
    a, b, c = fe.triangles.T
    F = np.stack([x[b] - x[a], x[c] - x[a]], axis=2) @ rest_inv
    J = np.linalg.det(F)
    inv_t = np.linalg.inv(F).transpose(0, 2, 1)
    psi = (0.5 * fe.mu * (np.einsum("eij,eij->e", F, F) - 2.0) - fe.mu * np.log(J)
           + 0.5 * fe.lam * np.log(J) ** 2)
    P = fe.mu * (F - inv_t) + fe.lam * np.log(J)[:, None, None] * inv_t
    H = area[:, None, None] * P @ rest_inv.transpose(0, 2, 1)   # dE/d(edge matrix)
    forces = np.zeros_like(x)
    np.add.at(forces, b, -H[:, :, 0])
    np.add.at(forces, c, -H[:, :, 1])
    np.add.at(forces, a, H[:, :, 0] + H[:, :, 1])
    return (area * psi).sum(), forces


def test_fem_step_matches_numpy(arch):
    start(arch)
    fe = load_program("fem_neohookean")
    rng = np.random.default_rng(4)
    x = fe.rest_positions * [1.15, 1.0] + rng.uniform(-0.005, 0.005, (fe.num_verts, 2))
    fe.reset(x)
    rest_inv, area, mass = fem_rest(fe)
    np.testing.assert_allclose(fe.rest_inv.to_numpy(), rest_inv, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fe.rest_area.to_numpy(), area, rtol=1e-12)
    np.testing.assert_allclose(fe.lumped_mass.to_numpy(), mass, rtol=1e-12)

    energy, forces = fem_energy_forces(fe, x, rest_inv, area)
    # the analytic forces are the energy's gradient (central differences)
    eps, k = 1e-6, 7
    probe = x.copy()
    probe[k, 0] += eps
    up = fem_energy_forces(fe, probe, rest_inv, area)[0]
    probe[k, 0] -= 2 * eps
    down = fem_energy_forces(fe, probe, rest_inv, area)[0]
    assert abs(-(up - down) / (2 * eps) - forces[k, 0]) < 1e-6 * np.abs(forces).max()
    np.testing.assert_allclose(fe.elastic_forces(), forces, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fe.energy[None], energy, rtol=1e-12)

    v = np.zeros_like(x)
    free = (np.arange(fe.num_verts) % fe.cols != 0)[:, None]
    for _ in range(100):
        fe.step()
        forces = fem_energy_forces(fe, x, rest_inv, area)[1]
        v_new = (v + fe.dt * (forces / mass[:, None] + [0.0, -fe.g])) * np.exp(-fe.damping
                                                                                * fe.dt)
        v = np.where(free, v_new, v)
        x = np.where(free, x + fe.dt * v_new, x)
    np.testing.assert_allclose(fe.pos.to_numpy(), x, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(fe.vel.to_numpy(), v, rtol=1e-8, atol=1e-10)
    assert np.abs(x - fe.rest_positions * [1.15, 1.0]).max() > 0.05    # it moved
