"""Reverse mode through loops: loop-carried locals on adstacks, data-dependent trip counts.

Every kernel here carries a float (and sometimes an int) local across the iterations of a
serial inner loop, so its grad kernel keeps adstacks sized at launch. Gradients are compared
with a numpy reference that runs the same recurrence in f64 together with its derivative
(forward mode, written out by hand), on random inputs and random trip counts that include 0.
"""
from pathlib import Path

import numpy as np
import pytest

import jitrt as jr
from jitrt.ir import sizeexpr

nd = jr.types.ndarray

N = 48
CLOSE = {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(autouse=True)
def f64_literals(fresh_program):
    """Python float literals in these kernels are f64, so the f64 reference matches closely."""
    program = jr.init(arch=fresh_program.arch, offline_cache=False, default_fp=jr.f64)
    yield program
    jr.reset()


def counts(rng, hi, n=N, dtype=np.int32):
    c = rng.integers(0, hi, n).astype(dtype)
    c[0], c[-1] = 0, hi - 1          # an empty loop and the longest one
    return c


def step(v):
    """The recurrence v -> sin(v) * 1.1 + 0.1 and its derivative."""
    return np.sin(v) * 1.1 + 0.1, np.cos(v) * 1.1


def iterate(v, dv, count, fn=step):
    """Apply `fn` count[i] times to element i, carrying d v / d x0 along."""
    for k in range(int(count.max(initial=0))):
        live = k < count
        nv, d = fn(v)
        v, dv = np.where(live, nv, v), np.where(live, dv * d, dv)
    return v, dv


def scalar_fields(n=N):
    x = jr.field(jr.f64, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    return x, loss


def check_loss_and_grad(x, loss, value, grad):
    np.testing.assert_allclose(loss[None], value.sum(), **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)


# ---- where the trip count comes from ----------------------------------------------------------

def test_count_from_ndarray(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 12)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt))


def test_count_from_field_and_from_jr_ndarray(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 10)
    x.from_numpy(xv)
    c_field = jr.field(jr.i32, shape=(N,))
    c_field.from_numpy(cnt)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(c_field[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k()
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt))

    cnt2 = counts(rng, 14)                  # new data, longer loops: sized again at launch
    c_field.from_numpy(cnt2)
    loss[None] = 0.0
    with jr.ad.Tape(loss=loss):
        k()
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt2))


def test_count_traced_through_a_local(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 8)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            m = c[i] * 2 + 1
            for _ in range(m):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt * 2 + 1))


@jr.func
def bound(a: jr.template(), i):
    return min(a[i], 6) + 1


def test_count_traced_through_a_func_return(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 11)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(bound(c, i)):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), np.minimum(cnt, 6) + 1))
    (info,) = jr.debug.sizing_infos(k)
    assert len(info.max_reducer_specs) == 1


def test_loop_with_data_dependent_begin_and_end(rng):
    x, loss = scalar_fields()
    xv = rng.uniform(-1, 1, N)
    begin = counts(rng, 6)
    end = begin + counts(rng, 7) - 2             # some ranges are empty (end < begin)
    x.from_numpy(xv)

    @jr.kernel
    def k(b: nd(dtype=jr.i32, ndim=1), e: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for j in range(b[i], e[i]):
                v = jr.sin(v) * 1.1 + 0.01 * j
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(begin, end)
    value, grad = xv.copy(), np.ones(N)
    for i in range(N):
        for j in range(begin[i], end[i]):
            grad[i] *= np.cos(value[i]) * 1.1
            value[i] = np.sin(value[i]) * 1.1 + 0.01 * j
    check_loss_and_grad(x, loss, value, grad)


def test_nested_data_dependent_loops(rng):
    x, loss = scalar_fields()
    xv = rng.uniform(-1, 1, N)
    outer = counts(rng, 5)
    inner = counts(rng, 4, n=8)
    x.from_numpy(xv)

    @jr.kernel
    def k(a: nd(dtype=jr.i32, ndim=1), b: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for j in range(a[i]):
                for m in range(b[j]):
                    v = jr.sin(v) * (1.0 + 0.05 * j) + 0.02 * m
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(outer, inner)
    value, grad = xv.copy(), np.ones(N)
    for i in range(N):
        for j in range(outer[i]):
            for m in range(inner[j]):
                grad[i] *= np.cos(value[i]) * (1.0 + 0.05 * j)
                value[i] = np.sin(value[i]) * (1.0 + 0.05 * j) + 0.02 * m
    check_loss_and_grad(x, loss, value, grad)
    (info,) = jr.debug.sizing_infos(k)
    caps = dict(zip((name.split(".")[-1] for name in info.stack_names), info.size_exprs))
    text = sizeexpr.text(caps["v"])       # v's capacity depends on both count arrays
    assert "a[i]" in text and "b[j]" in text


# ---- control flow and several stacks ----------------------------------------------------------

def test_if_else_inside_loop_follows_recorded_branches(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 12)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                if v > 0.3:
                    v = jr.sin(v) * 1.2
                else:
                    v = v * v + 0.35
            loss[None] += v

    def branchy(v):
        hi = v > 0.3
        return np.where(hi, np.sin(v) * 1.2, v * v + 0.35), np.where(hi, np.cos(v) * 1.2, 2 * v)

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt, branchy))


def test_float_and_int_stacks_in_one_task(rng):
    """v and u are float stacks, q an int stack read by the float updates."""
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 9)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            u = 0.0
            q = 1
            for _ in range(c[i]):
                v = jr.sin(v) * (1.0 + 0.1 * q)
                u = u * 0.5 + v * v
                q = q * 2 % 7
            loss[None] += v + u

    with jr.ad.Tape(loss=loss):
        k(cnt)
    v, dv = xv.copy(), np.ones(N)
    u, du = np.zeros(N), np.zeros(N)
    q = np.ones(N, np.int64)
    for it in range(cnt.max()):
        live = it < cnt
        nv = np.sin(v) * (1.0 + 0.1 * q)
        ndv = np.cos(v) * (1.0 + 0.1 * q) * dv
        nu, ndu = u * 0.5 + nv * nv, du * 0.5 + 2 * nv * ndv
        v, dv = np.where(live, nv, v), np.where(live, ndv, dv)
        u, du = np.where(live, nu, u), np.where(live, ndu, du)
        q = np.where(live, q * 2 % 7, q)
    check_loss_and_grad(x, loss, v + u, dv + du)
    (info,) = jr.debug.sizing_infos(k)
    names = {name.split(".")[-1] for name in info.stack_names}
    assert {"q", "u", "v"} <= names


def test_static_bound_loop_has_constant_capacity(rng):
    x, loss = scalar_fields()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(5):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v * v

    with jr.ad.Tape(loss=loss):
        k()
    v, dv = iterate(xv, np.ones(N), np.full(N, 5))
    check_loss_and_grad(x, loss, v * v, 2 * v * dv)
    (info,) = jr.debug.sizing_infos(k)
    assert info.max_reducer_specs == ()
    assert all(type(e).__name__ == "Const" for e in info.size_exprs)


def test_static_range_is_unrolled(rng):
    x, loss = scalar_fields()
    w = jr.field(jr.f64, shape=(N,), needs_grad=True)
    xv, wv = rng.uniform(-1, 1, N), rng.uniform(0.5, 1.5, N)
    x.from_numpy(xv)
    w.from_numpy(wv)

    @jr.kernel
    def k():
        for i in x:
            v = x[i]
            for j in jr.static(range(3)):
                v = v * w[i] + jr.sin(v) * (j + 1)
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k()
    v, dvx, dvw = xv.copy(), np.ones(N), np.zeros(N)
    for j in range(3):
        d = wv + np.cos(v) * (j + 1)
        v, dvx, dvw = v * wv + np.sin(v) * (j + 1), dvx * d, dvw * d + v
    check_loss_and_grad(x, loss, v, dvx)
    np.testing.assert_allclose(w.grad.to_numpy(), dvw, **CLOSE)
    assert jr.debug.sizing_infos(k) == ()          # straight-line: renamed, no adstack


def test_straight_line_renaming_keeps_branches_and_loops_right(rng):
    """A local reassigned at the top level and also in a branch or a loop keeps its adstack;
    one reassigned only at the top level is renamed, also where a loop reads it in between."""
    x, loss = scalar_fields()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)

    @jr.kernel
    def k():
        for i in x:
            a = x[i]
            b = x[i] * 2.0
            t = 0.0
            for j in range(2):
                t += a * b             # reads a's first version
            a = a * a                  # top level only: renamed
            if x[i] > 0:
                b = b * 3.0            # also in a branch: b stays a stack
            a = a + b
            loss[None] += a + t

    with jr.ad.Tape(loss=loss):
        k()
    b = np.where(xv > 0, 6.0 * xv, 2.0 * xv)
    expect = np.sum(xv * xv + b + 4.0 * xv * xv)
    db = np.where(xv > 0, 6.0, 2.0)
    check_loss_and_grad(x, loss, expect, 2 * xv + db + 8.0 * xv)
    (info,) = jr.debug.sizing_infos(k)
    assert "b" in info.stack_names and "a" not in info.stack_names


def test_ndrange_outer_loop_2d(rng):
    m, n = 6, 9
    x = jr.field(jr.f64, shape=(m, n), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, (m, n))
    cnt = rng.integers(0, 7, (m, n)).astype(np.int32)
    cnt[2, 3] = 11
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=2)):
        for i, j in jr.ndrange(c.shape[0], c.shape[1]):
            v = x[i, j]
            for _ in range(c[i, j]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v * (i + 1) + j

    with jr.ad.Tape(loss=loss):
        k(cnt)
    v, dv = iterate(xv, np.ones((m, n)), cnt)
    rows = np.arange(1, m + 1)[:, None]
    np.testing.assert_allclose(loss[None], (v * rows + np.arange(n)[None, :]).sum(), **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), dv * rows, **CLOSE)


def test_loop_writing_outputs_each_iteration(rng):
    steps = 6
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    out = jr.field(jr.f64, shape=(N, steps), needs_grad=True)
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, steps + 1)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for j in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
                out[i, j] = v * v

    wv = rng.uniform(-1, 1, (N, steps))
    x.grad.fill(0)
    out.grad.from_numpy(wv)
    k.grad(cnt)
    v, dv, grad = xv.copy(), np.ones(N), np.zeros(N)
    for j in range(steps):
        live = j < cnt
        nv, d = step(v)
        v, dv = np.where(live, nv, v), np.where(live, dv * d, dv)
        grad += np.where(live, wv[:, j] * 2 * v * dv, 0.0)
    np.testing.assert_allclose(x.grad.to_numpy(), grad, **CLOSE)


def test_if_without_else_inside_loop(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 12)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = v * 0.8 + 0.3
                if v > 0.5:
                    v = jr.sin(v) * 1.3
            loss[None] += v

    def fn(v):
        t = v * 0.8 + 0.3
        hi = t > 0.5
        return np.where(hi, np.sin(t) * 1.3, t), 0.8 * np.where(hi, np.cos(t) * 1.3, 1.0)

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt, fn))


def test_plain_local_read_in_every_iteration(rng):
    """A float local assigned once before the loop: its adjoint sums over all iterations."""
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 10)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            s = x[i] * 0.5
            v = s
            for _ in range(c[i]):
                v = jr.sin(v) * s + 0.2
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt)
    s = 0.5 * xv
    v, dv = s.copy(), 0.5 * np.ones(N)
    for it in range(cnt.max()):
        live = it < cnt
        nv, ndv = np.sin(v) * s + 0.2, np.cos(v) * dv * s + np.sin(v) * 0.5
        v, dv = np.where(live, nv, v), np.where(live, ndv, dv)
    check_loss_and_grad(x, loss, v, dv)


def test_int_stack_as_index_into_a_gradient_array(rng):
    """Loads indexed by an int stack: the reverse sweep must replay the exact indices."""
    x, loss = scalar_fields()
    m = 7
    w = jr.ndarray(jr.f64, shape=(m,), needs_grad=True)
    xv, wv, cnt = rng.uniform(-1, 1, N), rng.uniform(0.5, 1.5, m), counts(rng, 9)
    x.from_numpy(xv)
    w.from_numpy(wv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1), wt: nd(dtype=jr.f64, ndim=1)):
        for i in x:
            v = x[i]
            q = i % 7
            for _ in range(c[i]):
                v = jr.sin(v) * wt[q] + 0.1
                q = (q * 3 + 1) % 7
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt, w)
    gx, gw, total = np.zeros(N), np.zeros(m), 0.0
    for i in range(N):                       # reverse mode by hand, element by element
        v, q, trail = xv[i], i % 7, []
        for _ in range(cnt[i]):
            trail.append((v, q))
            v, q = np.sin(v) * wv[q] + 0.1, (q * 3 + 1) % 7
        total += v
        g = 1.0
        for v_old, q_old in reversed(trail):
            gw[q_old] += g * np.sin(v_old)
            g *= np.cos(v_old) * wv[q_old]
        gx[i] = g
    np.testing.assert_allclose(loss[None], total, **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), gx, **CLOSE)
    np.testing.assert_allclose(w.grad.to_numpy(), gw, **CLOSE)


@jr.func
def iterate_in_func(v, n):
    for _ in range(n):
        v = jr.sin(v) * 1.1 + 0.1
    return v


def test_loop_inside_a_func(rng):
    x, loss = scalar_fields()
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 10)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            loss[None] += iterate_in_func(x[i], c[i])

    with jr.ad.Tape(loss=loss):
        k(cnt)
    check_loss_and_grad(x, loss, *iterate(xv, np.ones(N), cnt))


@pytest.mark.parametrize("construct", ["while", "break", "continue"])
def test_loops_that_cannot_be_differentiated(construct):
    x, loss = scalar_fields()

    @jr.kernel
    def with_while():
        for i in x:
            v = x[i]
            while v < 1.0:  # not-differentiable-while
                v = v + 0.5
            loss[None] += v

    @jr.kernel
    def with_break():
        for i in x:
            v = x[i]
            for _ in range(4):
                v = v * 2.0
                if v > 1.0:
                    break  # not-differentiable-break
            loss[None] += v

    @jr.kernel
    def with_continue():
        for i in x:
            v = x[i]
            for _ in range(4):
                if v > 1.0:
                    continue  # not-differentiable-continue
                v = v * 2.0
            loss[None] += v

    k = {"while": with_while, "break": with_break, "continue": with_continue}[construct]
    k()                                          # the forward kernel runs
    with pytest.raises(jr.KernelCompileError, match="cannot be differentiated") as info:
        k.grad()
    lines = Path(__file__).read_text().splitlines()
    expect = [j + 1 for j, t in enumerate(lines) if t.endswith(f"# not-differentiable-{construct}")]
    assert info.value.line == expect[0] and info.value.filename == __file__
    instead = {"while": "for loop over range(n) with the trip count as its bound",
               "break": "keep a flag instead: `done = 0` before the loop, `if done == 0:` "
                        "around the body, and `done = 1` where you would break",
               "continue": "put the rest of the loop body under an `if` instead"}[construct]
    assert instead in str(info.value)


def test_the_rewrites_the_errors_suggest_are_differentiated(rng):
    """The flag the break error suggests, and the `if` the continue error suggests, give the
    gradient of the loops they replace (v doubles until it exceeds 1)."""
    x, loss = scalar_fields()
    xv = rng.uniform(0.05, 0.9, N)
    x.from_numpy(xv)

    @jr.kernel
    def with_flag():
        for i in x:
            v = x[i]
            done = 0
            for _ in range(4):
                if done == 0:
                    v = v * 2.0
                    if v > 1.0:
                        done = 1
            loss[None] += v

    @jr.kernel
    def with_if():
        for i in x:
            v = x[i]
            for _ in range(4):
                if not v > 1.0:
                    v = v * 2.0
            loss[None] += v

    doublings = np.array([next((k for k in range(1, 5) if v * 2 ** k > 1.0), 4) for v in xv])
    for k in (with_flag, with_if):
        with jr.ad.Tape(loss=loss):
            k()
        np.testing.assert_allclose(loss[None], np.sum(xv * 2.0 ** doublings), rtol=1e-12)
        np.testing.assert_allclose(x.grad.to_numpy(), 2.0 ** doublings, rtol=1e-12)


# ---- several tasks ----------------------------------------------------------------------------

def test_two_parallel_loops_with_serial_code_between(rng):
    x, loss = scalar_fields()
    y = jr.field(jr.f64, shape=(N,), needs_grad=True)
    z = jr.field(jr.f64, shape=(), needs_grad=True)
    xv, cnt = rng.uniform(-1, 1, N), counts(rng, 7)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            y[i] = v
        m = c[0] + c[N - 1] + 1          # a kernel-scope bound for the second loop
        z[None] = y[1] * 2.0 + y[2]
        for i in x:
            u = y[i]
            for _ in range(m):
                u = u * 0.9 + z[None] * 0.1
            loss[None] += u

    with jr.ad.Tape(loss=loss):
        k(cnt)
    yv, dy = iterate(xv, np.ones(N), cnt)
    zv = yv[1] * 2 + yv[2]
    mv = int(cnt[0] + cnt[-1] + 1)
    u = yv.copy()
    for _ in range(mv):
        u = u * 0.9 + zv * 0.1
    du_dy = 0.9 ** mv                                   # d u_i / d y_i
    du_dz = sum(0.1 * 0.9 ** p for p in range(mv))      # d u_i / d z
    g_y = np.full(N, du_dy)
    g_z = N * du_dz
    g_y[1] += 2 * g_z
    g_y[2] += g_z
    np.testing.assert_allclose(loss[None], u.sum(), **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), g_y * dy, **CLOSE)
    assert len(jr.debug.sizing_infos(k)) == 2


def test_serialized_outer_loop_carries_a_kernel_scope_local(rng):
    """jr.loop_config(serialize=True): the loop runs in a serial task and `acc` lives on an
    adstack sized from the scalar argument (no reducer needed)."""
    x, loss = scalar_fields()
    w = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    w[None] = 0.8

    @jr.kernel
    def k(n: jr.i32):
        acc = w[None]
        jr.loop_config(serialize=True)
        for i in range(n):
            acc = acc * 0.5 + jr.sin(x[i])
        loss[None] += acc * acc

    n = N - 5
    with jr.ad.Tape(loss=loss):
        k(n)
    acc = 0.8
    for i in range(n):
        acc = acc * 0.5 + np.sin(xv[i])
    gx = np.zeros(N)
    gx[:n] = 2 * acc * 0.5 ** np.arange(n - 1, -1, -1) * np.cos(xv[:n])
    np.testing.assert_allclose(loss[None], acc * acc, **CLOSE)
    np.testing.assert_allclose(x.grad.to_numpy(), gx, **CLOSE)
    np.testing.assert_allclose(w.grad[None], 2 * acc * 0.5 ** n, **CLOSE)
    (info,) = jr.debug.sizing_infos(k)
    assert info.max_reducer_specs == () and "$n" in sizeexpr.text(info.size_exprs[0])


def test_gradient_through_serial_kernel_scope_float_local(rng):
    x, loss = scalar_fields()
    w = jr.field(jr.f64, shape=(), needs_grad=True)
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    w[None] = 0.7

    @jr.kernel
    def k():
        for i in x:
            loss[None] += x[i]
        scale = w[None] * 3.0
        for i in x:
            loss[None] += x[i] * x[i] * scale

    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 1 + 2 * xv * 2.1, **CLOSE)
    np.testing.assert_allclose(w.grad[None], 3 * np.sum(xv ** 2), **CLOSE)


def test_two_kernels_on_one_tape(rng):
    x, loss = scalar_fields()
    y = jr.field(jr.f64, shape=(N,), needs_grad=True)
    xv, c1, c2 = rng.uniform(-1, 1, N), counts(rng, 6), counts(rng, 9)
    x.from_numpy(xv)

    @jr.kernel
    def first(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            y[i] = v

    @jr.kernel
    def second(c: nd(dtype=jr.i32, ndim=1)):
        for i in y:
            v = y[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        first(c1)
        second(c2)
    yv, dy = iterate(xv, np.ones(N), c1)
    value, dv = iterate(yv, dy, c2)
    check_loss_and_grad(x, loss, value, dv)


def test_f32_recurrence_against_f64_reference(rng):
    x = jr.field(jr.f32, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    xv, cnt = rng.uniform(-1, 1, N).astype(np.float32), counts(rng, 10)
    x.from_numpy(xv)

    @jr.kernel
    def k(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    with jr.ad.Tape(loss=loss):
        k(cnt)
    _, dv = iterate(xv.astype(np.float64), np.ones(N), cnt)
    np.testing.assert_allclose(x.grad.to_numpy(), dv, rtol=2e-5, atol=1e-6)
