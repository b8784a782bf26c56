"""Iteration-local locals in reverse mode: recomputed in the reverse sweep, never stacked.

A local assigned in a serial inner loop before every read of it in the same iteration (the
parameters and results of inlined `@jr.func`s, index arithmetic, a stencil's value) is not
loop-carried: the grad kernel recomputes it at the start of each reversed iteration instead
of pushing it onto an adstack (`jitrt/passes/ad_recompute.py`). The gradients are compared
with ones derived by hand (numpy, f64); the adstacks are counted through
`jr.debug.sizing_infos`, so that a regression back to stacks shows.
"""
import numpy as np
import pytest

import jitrt as jr

CLOSE = {"rtol": 1e-11, "atol": 1e-12}
G = 12                     # grid side
T = 4                      # time steps held


@pytest.fixture(autouse=True)
def f64_literals(fresh_program):
    program = jr.init(arch=fresh_program.arch, offline_cache=False, default_fp=jr.f64)
    yield program
    jr.reset()


def stack_names(kernel) -> list[str]:
    return [name for info in jr.debug.sizing_infos(kernel) for name in info.stack_names]


def lap(a: np.ndarray) -> np.ndarray:
    """The 5-point Laplacian with zeros outside the grid (a symmetric operator)."""
    pad = np.pad(a, 1)
    return -4 * a + pad[1:-1, :-2] + pad[1:-1, 2:] + pad[2:, 1:-1] + pad[:-2, 1:-1]


def wave_kernels(square: bool):
    """DiffTaichi's wave.py `fdtd` step (funcs in the serial inner loop), with both
    Laplacians used: linearly, or (`square`) the second one squared, whose adjoint needs its
    value in the reverse sweep."""
    p = jr.field(jr.f64, shape=(T, G, G), needs_grad=True)
    w = jr.field(jr.f64, shape=(G, G))
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.func
    def get_p(t, i, j):
        return p[t, i, j] if 0 <= i < G and 0 <= j < G else 0.0

    @jr.func
    def laplacian(t, i, j):
        return -4 * get_p(t, i, j) + get_p(t, i, j - 1) + get_p(t, i, j + 1) + \
            get_p(t, i + 1, j) + get_p(t, i - 1, j)

    @jr.kernel
    def fdtd(t: jr.i32):
        for i in range(G):
            for j in range(G):
                laplacian_p = laplacian(t - 2, i, j)
                laplacian_q = laplacian(t - 1, i, j)
                q = laplacian_q * laplacian_q if jr.static(square) else 0.3 * laplacian_q
                p[t, i, j] = 2 * p[t - 1, i, j] + q - p[t - 2, i, j] - 0.2 * laplacian_p

    @jr.kernel
    def weighted(t: jr.i32):
        for i, j in w:
            loss[None] += w[i, j] * p[t, i, j]

    return p, w, loss, fdtd, weighted


@pytest.mark.parametrize("square", [False, True])
def test_wave_stencil_gradient_matches_the_hand_derived_one(rng, square):
    p, w, loss, fdtd, weighted = wave_kernels(square)
    p0 = rng.standard_normal((T, G, G))
    wv = rng.standard_normal((G, G))
    p.from_numpy(p0)
    w.from_numpy(wv)
    with jr.ad.Tape(loss=loss):
        fdtd(2)
        weighted(2)
    # loss = sum w * (2 p1 + q(lap p1) - p0 - 0.2 lap p0): lap is symmetric, so its adjoint
    # is lap again
    lap1 = lap(p0[1])
    dq = 2 * lap1 if square else 0.3
    grad = np.zeros((T, G, G))
    grad[1] = 2 * wv + lap(wv * dq)
    grad[0] = -wv - 0.2 * lap(wv)
    q = lap1 * lap1 if square else 0.3 * lap1
    np.testing.assert_allclose(p.to_numpy()[2], 2 * p0[1] + q - p0[0] - 0.2 * lap(p0[0]),
                               **CLOSE)
    np.testing.assert_allclose(p.grad.to_numpy(), grad, **CLOSE)


def test_wave_stencil_grad_kernel_has_no_adstack():
    """Every local of the inner loop (the funcs' parameters, the Laplacians, `q`) is assigned
    before it is read in the same iteration: the grad kernel stacks none (it stacked 39)."""
    p, w, loss, fdtd, weighted = wave_kernels(square=True)
    fdtd(2)
    fdtd.grad(2)
    assert stack_names(fdtd) == []
    (text,) = jr.debug.kernel_ir(fdtd, grad=True)
    assert "push(" not in text and "adj$laplacian_q = 0.0" in text


def test_loop_carried_locals_keep_their_stacks(rng):
    """`prev` is read before it is assigned in an iteration (the previous iteration's value),
    `s` accumulates, `last` is read after the loop: stacked; `cur` and `k` are not."""
    n = 6
    x = jr.field(jr.f64, shape=n, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def chain():
        for i in x:
            s = 0.0
            prev = 1.0
            last = 0.0
            for j in range(4):
                k = (i + j) % n
                cur = x[k] * (j + 1)
                s += cur * prev
                prev = cur
                last = cur
            loss[None] += s + last * last

    xv = rng.standard_normal(n)
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        chain()
    grad = np.zeros(n)
    for i in range(n):
        prev_value, prev_grad = 1.0, np.zeros(n)
        for j in range(4):
            k = (i + j) % n
            cur_grad = np.zeros(n)
            cur_grad[k] = j + 1
            cur = xv[k] * (j + 1)
            grad += cur_grad * prev_value + cur * prev_grad
            prev_value, prev_grad = cur, cur_grad
        grad += 2 * prev_value * prev_grad
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)
    assert sorted(stack_names(chain)) == ["last", "prev", "s"]


def test_a_linear_in_place_update_in_a_loop_is_differentiable():
    """`t = x[i]` feeds `x[i] = t * 2.0 + 1.0` only linearly: the reverse sweep needs no value
    of it, recomputes nothing, and so re-reads nothing the loop overwrote (stacked, its push
    counted as a re-read and the kernel was refused)."""
    x = jr.field(jr.f64, shape=4, needs_grad=True)

    @jr.kernel
    def triple():
        for i in x:
            for _ in range(3):
                t = x[i]
                x[i] = t * 2.0 + 1.0

    x.from_numpy(np.arange(4.0))
    triple()
    np.testing.assert_allclose(x.to_numpy(), np.arange(4.0) * 8 + 7, **CLOSE)
    x.grad.from_numpy(np.ones(4))
    triple.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(4, 8.0), **CLOSE)
    assert stack_names(triple) == []


def test_an_overwritten_read_whose_value_the_reverse_sweep_needs_is_still_refused():
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    y = jr.field(jr.f64, shape=(4, 3), needs_grad=True)

    @jr.kernel
    def squares():
        for i in x:
            for j in range(3):
                t = x[i]
                y[i, j] = t * t
                x[i] = 0.5       # the reverse sweep would read this instead of t

    squares()
    with pytest.raises(jr.KernelCompileError, match="global data access rule"):
        squares.grad()


def test_funcs_with_an_early_fix_up_in_a_stencil_loop():
    """DiffTaichi smoke's `compute_p`: wrapped neighbour indices from funcs that assign their
    result twice (`new = i - 1; if new < 0: new = G - 1`). Each assignment becomes a version
    of its own and the `if` a select, so nothing is stacked, and the gradient is the
    transposed wrapped stencil."""
    p = jr.field(jr.f64, shape=(T, G, G), needs_grad=True)

    @jr.func
    def dec_index(index):
        new_index = index - 1
        if new_index < 0:
            new_index = G - 1
        return new_index

    @jr.func
    def inc_index(index):
        new_index = index + 1
        if new_index >= G:
            new_index = 0
        return new_index

    @jr.kernel
    def relax(a: jr.i32):
        for y in range(G):
            for x in range(G):
                p[a + 1, y, x] = (p[a, dec_index(y), x] + 2.0 * p[a, inc_index(y), x] +
                                  3.0 * p[a, y, dec_index(x)] + 4.0 * p[a, y, inc_index(x)])

    p0 = np.zeros((T, G, G))
    p0[1] = np.arange(G * G, dtype=np.float64).reshape(G, G) ** 1.5
    p.from_numpy(p0)
    relax(1)
    src = p0[1]
    expected = np.roll(src, 1, 0) + 2 * np.roll(src, -1, 0) + 3 * np.roll(src, 1, 1) + \
        4 * np.roll(src, -1, 1)
    np.testing.assert_allclose(p.to_numpy()[2], expected, **CLOSE)
    w = np.sin(np.arange(G * G, dtype=np.float64)).reshape(G, G)
    seed = np.zeros((T, G, G))
    seed[2] = w
    p.grad.from_numpy(seed)
    relax.grad(1)
    grad = np.roll(w, -1, 0) + 2 * np.roll(w, 1, 0) + 3 * np.roll(w, -1, 1) + \
        4 * np.roll(w, 1, 1)
    np.testing.assert_allclose(p.grad.to_numpy()[1], grad, **CLOSE)
    assert stack_names(relax) == []


def test_a_float_fixed_up_in_a_branch(rng):
    """`v = x[k]; if v < 0: v = -0.5 * v`, then `v * v`: the branch becomes a select whose
    adjoint follows the side taken; no stack."""
    n = 10
    x = jr.field(jr.f64, shape=n, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def leaky():
        for i in x:
            for j in range(3):
                v = x[(i + j) % n]
                if v < 0:
                    v = -0.5 * v
                else:
                    v = v + 1.0
                loss[None] += v * v * (j + 1)

    xv = rng.standard_normal(n)
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        leaky()
    grad = np.zeros(n)
    for i in range(n):
        for j in range(3):
            k = (i + j) % n
            v, dv = (-0.5 * xv[k], -0.5) if xv[k] < 0 else (xv[k] + 1.0, 1.0)
            grad[k] += 2 * v * dv * (j + 1)
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)
    assert stack_names(leaky) == []


def test_a_branch_that_also_updates_a_loop_carried_local_is_kept(rng):
    """The branch assigns the running maximum `m` (loop-carried) and `arg`: it stays a branch,
    `m`, `arg` and the flag stay on stacks, and the gradient goes to the maxima."""
    n = 8
    x = jr.field(jr.f64, shape=(n, 5), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def running_max():
        for i in range(n):
            m = x[i, 0]
            arg = 0
            for j in range(1, 5):
                c = x[i, j]
                if c > m:
                    m = c
                    arg = j
            loss[None] += m * (arg + 1)

    xv = rng.standard_normal((n, 5))
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        running_max()
    grad = np.zeros((n, 5))
    best = xv.argmax(axis=1)
    grad[np.arange(n), best] = best + 1
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)
    assert sorted(stack_names(running_max)) == ["$flag1", "arg", "m"]


def test_a_trip_count_fixed_up_in_a_branch_is_refused_under_its_own_name():
    """The clamp `if m > 4: m = 4` becomes a select of versions `m$i1`, `m$i2`; a loop whose
    trip count it is still cannot be sized, and the error names `m` as the user wrote it."""
    x = jr.field(jr.f64, shape=6, needs_grad=True)
    y = jr.field(jr.f64, shape=6, needs_grad=True)
    c = jr.field(jr.i32, shape=6)

    @jr.kernel
    def clamped():
        for i in x:
            v = x[i]
            for _ in range(2):
                m = c[i]
                if m > 4:
                    m = 4
                for _ in range(m):
                    v = jr.sin(v)
            y[i] = v

    with pytest.raises(jr.KernelCompileError, match="'m' is assigned inside a branch"):
        clamped.grad()


def test_a_flag_on_a_stacked_value_is_recomputed_from_its_stack_top(rng):
    """`s = sin(...)` is stacked (a libm call is not computed twice), but pushed once per
    iteration and read after: the flag `s < 0` and the fixed-up version of `s` are recomputed
    from its top, so it is the only stack."""
    n = 10
    x = jr.field(jr.f64, shape=n, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def folded():
        for i in x:
            for j in range(3):
                s = jr.sin(x[(i + j) % n] * 2.0)
                if s < 0:
                    s = -3.0 * s
                loss[None] += s * s * (j + 1)

    xv = rng.standard_normal(n)
    x.from_numpy(xv)
    with jr.ad.Tape(loss=loss):
        folded()
    grad = np.zeros(n)
    for i in range(n):
        for j in range(3):
            k = (i + j) % n
            s, ds = np.sin(2 * xv[k]), 2 * np.cos(2 * xv[k])
            s, ds = (-3 * s, -3 * ds) if s < 0 else (s, ds)
            grad[k] += 2 * s * ds * (j + 1)
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)
    assert stack_names(folded) == ["s$i1"]
