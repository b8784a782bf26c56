"""What a differentiated kernel may not do with a global it reads (passes/ad_check_rules.py):
overwrite an element the reverse pass reads again (Taichi's global data access rule), or read
in one parallel iteration what another iteration writes. Both are refused when the grad
kernel is built, at the write; the patterns beside them keep working."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import jitrt as jr

LINES = Path(__file__).read_text().splitlines()


def line_of(tag: str) -> int:
    return next(k + 1 for k, t in enumerate(LINES) if t.endswith(f"# {tag}"))


@pytest.fixture
def fields():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    x = jr.field(jr.f64, shape=(4,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    return x, loss


def refused(kernel, *args, tape_of=None):
    """The error the grad kernel of `kernel` raises (inside a Tape, with `tape_of`'s loss)."""
    with pytest.raises(jr.KernelCompileError) as info:
        if tape_of is None:
            kernel.grad(*args)
        else:
            with jr.ad.Tape(loss=tape_of):
                kernel(*args)
    assert isinstance(info.value, jr.NotDifferentiableError)
    assert info.value.filename == __file__
    return info.value


# ---- an element read and later overwritten --------------------------------------------------

def test_square_in_place_is_refused_at_the_write(fields):
    """`x[i] = x[i] * x[i]` used to give x.grad [2, 8, ...] (the reverse pass read the squares)
    instead of 2 x."""
    x, loss = fields

    @jr.kernel
    def square():
        for i in x:
            x[i] = x[i] * x[i]  # square-in-place

    @jr.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    with pytest.raises(jr.NotDifferentiableError) as info:
        with jr.ad.Tape(loss=loss):
            square()
            total()
    err = info.value
    assert err.line == line_of("square-in-place") and err.filename == __file__
    msg = str(err)
    assert "square.grad" in msg and "'x' is written here after this kernel read the same " \
        "element" in msg and "global data access rule" in msg
    assert "x[t + 1, i] = f(x[t, i])" in msg           # what to do instead
    np.testing.assert_allclose(x.to_numpy(), [1.0, 4.0, 9.0, 16.0])   # the forward ran


def test_overwrite_in_serial_code_and_in_a_later_loop(fields):
    x, loss = fields

    @jr.kernel
    def serial():
        loss[None] += x[0] * x[0]
        x[0] = 0.0  # serial-overwrite

    @jr.kernel
    def later_loop():
        for i in x:
            loss[None] += jr.sin(x[i])
        for i in x:
            x[i] = 1.0  # later-loop-overwrite

    assert refused(serial).line == line_of("serial-overwrite")
    assert refused(later_loop).line == line_of("later-loop-overwrite")


def test_a_loop_bound_overwritten_by_its_own_loop(fields):
    """The grad kernel replays the loop with the bound it reads then: another trip count."""
    x, loss = fields
    count = jr.field(jr.i32, shape=())
    count[None] = 4

    @jr.kernel
    def shrink():
        for i in range(count[None]):
            loss[None] += x[i] * x[i]
            count[None] = 1  # bound-overwrite

    assert refused(shrink).line == line_of("bound-overwrite")


def test_reads_whose_values_no_adjoint_needs_may_be_overwritten(fields):
    """In-place linear updates, `+=` into what is read, writes to fields without gradients
    and loss accumulation: the grad kernel never reads those values, so nothing is refused."""
    x, loss = fields
    plain = jr.field(jr.f64, shape=(4,))

    @jr.kernel
    def step():
        for i in x:
            plain[i] = x[i] * x[i]
            plain[i] = plain[i] + 1.0
            x[i] = 2.0 * x[i] + 1.0
            x[i] += x[i]
        for i in x:
            loss[None] += x[i] * x[i]

    with jr.ad.Tape(loss=loss):
        step()
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    new = 2 * (2 * xv + 1)
    np.testing.assert_allclose(loss[None], np.sum(new ** 2))
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * new * 4)
    np.testing.assert_allclose(plain.to_numpy(), xv ** 2 + 1)


def test_patterns_that_keep_their_values(fields):
    """Write first and read after; other components of a vector; a time axis with the step
    an argument (DiffTaichi's x[t + 1, i] = f(x[t, i])); a recurrence along an inner loop."""
    x, loss = fields
    v = jr.Vector.field(2, jr.f64, shape=(4,), needs_grad=True)
    s = jr.field(jr.f64, shape=(3, 4), needs_grad=True)
    r = jr.field(jr.f64, shape=(4, 3), needs_grad=True)

    @jr.kernel
    def k(t: jr.i32):
        for i in x:
            v[i][0] = x[i] * 3.0
            v[i][1] = v[i][0] * v[i][0]                 # write first, then read
            s[t + 1, i] = s[t, i] * s[t, i] + v[i][1]
            r[i, 0] = x[i]
            for j in range(2):
                r[i, j + 1] = r[i, j] * r[i, j]
            loss[None] += s[t + 1, i] + r[i, 2]

    s.from_numpy(np.full((3, 4), 0.5))
    with jr.ad.Tape(loss=loss):
        k(1)
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(loss[None], np.sum(0.25 + 9 * xv ** 2 + xv ** 4))
    np.testing.assert_allclose(x.grad.to_numpy(), 18 * xv + 4 * xv ** 3)
    np.testing.assert_allclose(s.grad.to_numpy()[1], np.full(4, 1.0))


# ---- another iteration's element ------------------------------------------------------------

def test_cross_iteration_read_after_write_is_refused(fields):
    """`x[i + 1] = x[i] * 2` in a parallel loop used to give x.grad 1.0 or 2.0 where the
    sequential answer is 8: refused, as Taichi and Quadrants refuse it."""
    x, loss = fields

    @jr.kernel
    def shift():
        for i in range(3):
            x[i + 1] = x[i] * 2.0  # shift-right

    @jr.kernel
    def shift_back():
        for i in range(3):
            x[i] += x[i + 1]  # add-neighbour

    for k, tag in ((shift, "shift-right"), (shift_back, "add-neighbour")):
        err = refused(k)
        assert err.line == line_of(tag)
        assert "another iteration of this parallel loop may read" in str(err)
        assert "cross-iteration read-after-write" in str(err)


def test_a_parallel_loop_of_one_iteration_is_checked_as_serial_code():
    """DiffTaichi's electric.py: `for _ in range(1):` around `v[t] = ...; x[t] = x[t - 1] +
    dt * v[t]` (written, then read at the same loop-invariant index) has no other iteration
    to race with: differentiated, while two iterations are refused."""
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    v = jr.field(jr.f64, shape=(3,), needs_grad=True)
    x = jr.field(jr.f64, shape=(3,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def advance(t: jr.i32):
        for _ in range(1):
            v[t] = v[t - 1] * 0.5 + 1.0
            x[t] = x[t - 1] + 2.0 * v[t]

    @jr.kernel
    def twice(t: jr.i32):
        for _ in range(2):
            v[t] = v[t - 1] * 0.5 + 1.0
            x[t] = x[t - 1] + 2.0 * v[t]  # twice-read

    @jr.kernel
    def total():
        loss[None] += x[2]

    v.from_numpy(np.array([4.0, 0.0, 0.0]))
    with jr.ad.Tape(loss=loss):
        advance(1)
        advance(2)
        total()
    # v1 = 3, x1 = 6; v2 = 2.5, x2 = 11; dx2/dv0 = 2 * (0.5 + 0.25) = 1.5
    np.testing.assert_allclose(loss[None], 11.0)
    np.testing.assert_allclose(v.grad.to_numpy()[0], 1.5)
    err = refused(twice, 1)
    assert "cross-iteration read-after-write" in str(err)


def test_other_fields_and_the_same_index_are_allowed(fields):
    x, loss = fields
    y = jr.field(jr.f64, shape=(5,), needs_grad=True)

    @jr.kernel
    def k():
        for i in x:
            y[i + 1] = x[i] * 2.0
            x[i] = x[i] * 3.0
        for i in x:
            loss[None] += y[i + 1] * x[i]

    with jr.ad.Tape(loss=loss):
        k()
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(loss[None], np.sum(6 * xv ** 2))
    np.testing.assert_allclose(x.grad.to_numpy(), 12 * xv)


def test_ndarrays_and_stepped_loops():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    a = jr.ndarray(jr.f64, shape=(6,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    a.from_numpy(np.arange(1.0, 7.0))

    @jr.kernel
    def pairs(arr: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in range(0, 6, 2):
            arr[i + 1] = arr[i] * arr[i]      # even indices read, odd written: disjoint
        for i in range(6):
            loss[None] += arr[i]

    @jr.kernel
    def overlap(arr: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in range(0, 4):
            arr[i + 2] = arr[i] * arr[i]  # overlap

    with jr.ad.Tape(loss=loss):
        pairs(a)
    np.testing.assert_allclose(a.grad.to_numpy(), [3.0, 0.0, 7.0, 0.0, 11.0, 0.0])
    assert refused(overlap, a).line == line_of("overlap")
