"""Real Taichi programs ported by changing the import only, against a numpy reference of the
same algorithm: Taichi's mpm88 (2-D MLS-MPM: vector and matrix fields, int() of a vector,
a list of vectors indexed by static loop variables, x[base + offset] with a vector index,
`/=` and `.y -= ` on vector elements, ti.Vector.zero / ti.Matrix.zero, outer_product, trace,
ti.random)."""
import os
import sys

import numpy as np

import jitrt as jr

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "programs"))


def mpm88_reference(m, x, v, C, J, steps):
    """The same substep in numpy (float64)."""
    n_grid, dx, dt, p_vol, p_mass = m.n_grid, m.dx, m.dt, m.p_vol, m.p_mass
    for _ in range(steps):
        grid_v = np.zeros((n_grid, n_grid, 2))
        grid_m = np.zeros((n_grid, n_grid))
        Xp = x / dx
        base = (Xp - 0.5).astype(int)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        stress = -dt * 4 * m.E * p_vol * (J - 1) / dx ** 2
        affine = stress[:, None, None] * np.eye(2) + p_mass * C
        for i in range(3):
            for j in range(3):
                offset = np.array([i, j])
                dpos = (offset - fx) * dx
                weight = w[i][:, 0] * w[j][:, 1]
                idx = base + offset
                mom = weight[:, None] * (p_mass * v + np.einsum("pij,pj->pi", affine, dpos))
                np.add.at(grid_v, (idx[:, 0], idx[:, 1]), mom)
                np.add.at(grid_m, (idx[:, 0], idx[:, 1]), weight * p_mass)
        filled = grid_m > 0
        grid_v[filled] /= grid_m[filled][:, None]
        grid_v[..., 1] -= dt * m.gravity
        ii, jj = np.meshgrid(np.arange(n_grid), np.arange(n_grid), indexing="ij")
        b = m.bound
        for mask, axis, sign in ((ii < b, 0, -1), (ii > n_grid - b, 0, 1), (jj < b, 1, -1),
                                 (jj > n_grid - b, 1, 1)):
            bad = mask & (sign * grid_v[..., axis] > 0)
            grid_v[..., axis][bad] = 0
        new_v = np.zeros_like(v)
        new_C = np.zeros_like(C)
        for i in range(3):
            for j in range(3):
                offset = np.array([i, j])
                dpos = (offset - fx) * dx
                weight = w[i][:, 0] * w[j][:, 1]
                g_v = grid_v[base[:, 0] + i, base[:, 1] + j]
                new_v += weight[:, None] * g_v
                new_C += 4 * weight[:, None, None] * np.einsum("pi,pj->pij", g_v, dpos) / dx ** 2
        v = new_v
        x = x + dt * v
        J = J * (1 + dt * np.trace(new_C, axis1=1, axis2=2))
        C = new_C
    return x, v, C, J


def test_mpm88_matches_numpy(arch):
    jr.init(arch=arch, offline_cache=False, default_fp=jr.f64, random_seed=3)
    import mpm88
    mpm88.init()
    x0 = mpm88.x.to_numpy()
    assert 0.2 <= x0.min() and x0.max() < 0.6 and len(np.unique(x0)) > 900
    steps = 40
    for _ in range(steps):
        mpm88.substep()
    x, v, C, J = mpm88_reference(mpm88, x0, mpm88.v.to_numpy() * 0 + [0, -1],
                                 np.zeros((mpm88.n_particles, 2, 2)),
                                 np.ones(mpm88.n_particles), steps)
    np.testing.assert_allclose(mpm88.x.to_numpy(), x, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mpm88.v.to_numpy(), v, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(mpm88.J.to_numpy(), J, rtol=1e-9)
    assert np.abs(v - [0, -1]).max() > 1e-3          # the step did something
