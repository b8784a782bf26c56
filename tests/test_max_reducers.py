"""The max-reducer caching service as a user sees it: when reducers run, and when they must not.

Every grad kernel here carries a float local through a loop whose trip count reads data, with
a non-linear recurrence (v -> sin(v) * 1.1 + c or v -> v * v * 0.5 + 0.3), so the reverse pass
really replays an adstack. Every test checks the gradient against a numpy reference after each
interesting launch: a stale cached capacity shows up as an `AdStackOverflowError` (the launch
needs more slots than the stale size) or as a wrong gradient, not only as a counter.

Counters (`jr.debug.stats()`, `jr.debug.max_reducer_dispatch_count()`) are checked against the
semantics of jitrt/runtime/adstack.py: a launch whose dependency snapshot is unchanged is a
launch-cache hit and runs no reducer; a miss consults the per-spec cache spec by spec and runs
the reducer of each spec whose own observations changed.

The 16M+1-element cases share arrays allocated once per module; each launch over them takes
tens of milliseconds.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

import jitrt as jr
from jitrt.ir import sizeexpr as se
from jitrt.runtime import program as program_mod

nd = jr.types.ndarray
I32_1D = nd(dtype=jr.i32, ndim=1)

N = 40
CLOSE = {"rtol": 1e-10, "atol": 1e-12}
BIG = (1 << 24) + 1


@pytest.fixture(autouse=True)
def f64_literals(fresh_program):
    """Float literals are f64, so the small f64 kernels match the f64 reference closely."""
    program = jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    yield program
    jr.reset()


# ---- references and helpers ---------------------------------------------------------------------

def sin_step(c=0.1):
    return lambda v: (np.sin(v) * 1.1 + c, np.cos(v) * 1.1)


def square_step(v):
    return v * v * 0.5 + 0.3, v


def reference(x0, counts, step=None):
    """The recurrence (default: the sin one) applied counts[i] times (negative counts run no
    iteration): (v, dv/dx0)."""
    step = step or sin_step()
    counts = np.maximum(np.asarray(counts), 0)
    v, dv = np.asarray(x0, dtype=np.float64).copy(), np.ones(len(counts))
    for k in range(int(counts.max(initial=0))):
        live = k < counts
        nv, d = step(v)
        v, dv = np.where(live, nv, v), np.where(live, dv * d, dv)
    return v, dv


def small_fields(n=N):
    x = jr.field(jr.f64, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    return x, loss


def grad_step(kernel, x, loss, *args):
    """Clear x.grad, seed d loss = 1 and run the grad kernel once; returns x.grad."""
    x.grad.fill(0)
    loss.grad[None] = 1.0
    kernel.grad(*args)
    return x.grad.to_numpy()


def dispatches() -> int:
    return jr.debug.max_reducer_dispatch_count()


def counters() -> dict:
    return jr.debug.stats()


def delta(before: dict, *names: str) -> tuple:
    now = counters()
    return tuple(now[k] - before[k] for k in names)


def handle_of(kernel):
    """The one LaunchHandle of `kernel`'s adjoint in the current program."""
    program = program_mod.current()
    (handle,) = [h for h in kernel.grad.handles.values() if h.program is program]
    return handle


def seeded_ints(rng, hi, n=N):
    values = rng.integers(0, hi, n).astype(np.int32)
    values[0] = 0                                      # one empty loop
    return values


# ---- 16M+1-element bound arrays -----------------------------------------------------------------

@pytest.fixture(scope="module")
def big_data():
    """Allocated once: x (f32, with grad), loss, an i32 bound array `a` and a scalar field."""
    x = jr.field(jr.f32, shape=(BIG,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    a = jr.ndarray(jr.i32, shape=(BIG,))
    f = jr.field(jr.i32, shape=())
    x.fill(0.25)
    return x, loss, a, f


@pytest.fixture
def big(big_data):
    """The shared 16M arrays, with zero counts before and after the test."""
    _, _, a, f = big_data
    a.fill(0)
    f[None] = 0
    yield big_data
    a.fill(0)
    f[None] = 0


def big_kernels(x, loss, f):
    """One grad-able kernel per bound form of the Quadrants max-reducer tests."""
    @jr.kernel
    def plain(a: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def plus_shape_diff(a: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[i] + (a.shape[0] - a.shape[0])):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def max_scalar_field(a: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(max(a[i], f[None])):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def max_identities(a: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(max(a[i] + 0, a[i] * 1 - 0)):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    return dict(zip(BIG_FORMS, (plain, plus_shape_diff, max_scalar_field, max_identities)))


BIG_FORMS = ["a[i]", "a[i] + (a.shape[0] - a.shape[0])", "max(a[i], f[None])",
             "max(a[i] + 0, a[i] * 1 - 0)"]


def big_grad_at(x, index: int) -> float:
    return x.grad[index]


def expected_big(count: int) -> float:
    return reference(np.array([0.25]), np.array([count]))[1][0]


@pytest.mark.parametrize("form", BIG_FORMS)
def test_16m_axis_dispatches_once_per_change_and_never_on_repeats(big, form):
    x, loss, a, f = big
    kernel = big_kernels(x, loss, f)[form]
    mid, last = BIG // 3, BIG - 1            # `last` lies past 1 << 24: the tail must be reduced
    a[mid] = 3
    a[last] = 5
    jr.debug.reset_max_reducer_dispatch_count()
    grad_step(kernel, x, loss, a)
    (info,) = jr.debug.sizing_infos(kernel)
    assert len(info.max_reducer_specs) == 1 and dispatches() == 1
    assert "shape[0]" in se.text(info.max_reducer_specs[0])
    for index, count in ((mid, 3), (last, 5), (0, 0), (BIG // 2, 0)):
        assert big_grad_at(x, index) == pytest.approx(expected_big(count), rel=1e-5)

    before = counters()
    grad_step(kernel, x, loss, a)            # unchanged inputs: a launch-cache hit only
    assert dispatches() == 1
    assert delta(before, "launch_cache_hits", "launch_cache_misses") == (1, 0)
    assert big_grad_at(x, last) == pytest.approx(expected_big(5), rel=1e-5)

    a[last] = 11                             # the longest loop grows at the very last element
    grad_step(kernel, x, loss, a)
    assert dispatches() == 2
    assert big_grad_at(x, last) == pytest.approx(expected_big(11), rel=1e-5)
    assert big_grad_at(x, mid) == pytest.approx(expected_big(3), rel=1e-5)

    f[None] = 1                              # read only by the max(a[i], f[None]) form
    grad_step(kernel, x, loss, a)
    reads_f = "f[None]" in form
    assert dispatches() == 2 + reads_f
    assert big_grad_at(x, 0) == pytest.approx(expected_big(1 if reads_f else 0), rel=1e-5)
    assert big_grad_at(x, last) == pytest.approx(expected_big(11), rel=1e-5)


def test_16m_template_instantiations_get_their_own_ids_and_dispatches(big):
    x, loss, a, _ = big

    @jr.kernel
    def shifted(a: I32_1D, flag: jr.template()):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[i]):
                v = jr.sin(v) * 1.1 + 0.1 * flag
            loss[None] += v

    last = BIG - 1
    a[last] = 4
    jr.debug.reset_max_reducer_dispatch_count()
    for flag, launched in ((1, 1), (2, 2)):
        grad_step(shifted, x, loss, a, flag)
        assert dispatches() == launched      # the second instantiation reduces on its own
        want = reference(np.array([0.25]), np.array([4]), sin_step(0.1 * flag))[1][0]
        assert big_grad_at(x, last) == pytest.approx(want, rel=1e-5)
    one, two = jr.debug.sizing_infos(shifted)
    assert one.kernel_name != two.kernel_name
    assert one.registry_id != two.registry_id
    for info in (one, two):
        assert info.registry_id == jr.debug.registry_id(info.kernel_name, 0)
    assert se.text(one.max_reducer_specs[0]) == se.text(two.max_reducer_specs[0])

    before = counters()
    for flag in (1, 2):                      # both cached: no reducer runs
        grad_step(shifted, x, loss, a, flag)
    assert dispatches() == 2 and delta(before, "launch_cache_hits") == (2,)
    a[last] = 6                              # each instantiation sees the change
    for flag, launched in ((1, 3), (2, 4)):
        grad_step(shifted, x, loss, a, flag)
        want = reference(np.array([0.25]), np.array([6]), sin_step(0.1 * flag))[1][0]
        assert big_grad_at(x, last) == pytest.approx(want, rel=1e-5)
        assert dispatches() == launched


def test_16m_constant_bound_has_no_spec_and_dispatches_nothing(big):
    x, loss, a, _ = big

    @jr.kernel
    def fixed(a: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(3):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    jr.debug.reset_max_reducer_dispatch_count()
    before = counters()
    grad_step(fixed, x, loss, a)
    (info,) = jr.debug.sizing_infos(fixed)
    assert info.max_reducer_specs == ()
    assert all(isinstance(e, se.Const) for e in info.size_exprs)
    assert handle_of(fixed).sizing is None   # nothing to check per launch
    assert dispatches() == 0
    assert delta(before, "launch_cache_misses", "spec_cache_misses") == (0, 0)
    assert big_grad_at(x, BIG - 1) == pytest.approx(expected_big(3), rel=1e-5)


# ---- the field-load bound-variable body matrix ---------------------------------------------------

def matrix_kernels(x, loss, f):
    """Bounds read from a field, optionally combined with ndarrays, and reads indexed by reads."""
    @jr.kernel
    def field_only(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(f[i]):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def field_plus_array(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(f[i] + a[i]):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def field_max_array(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(max(f[i], a[i])):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def field_affine(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(2 * f[i] - 1):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def field_min_array(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(min(f[i], a[i])):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def field_at_read(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(f[b[i]]):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def array_at_read(a: I32_1D, b: I32_1D):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[b[i]]):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    return {"f[i]": field_only, "f[i] + a[i]": field_plus_array,
            "max(f[i], a[i])": field_max_array, "2 * f[i] - 1": field_affine,
            "min(f[i], a[i])": field_min_array, "f[b[i]]": field_at_read,
            "a[b[i]]": array_at_read}


MATRIX = {   # bound -> (numpy counts from (f, a, b), the inputs it reads)
    "f[i]": (lambda f, a, b: f, "f"),
    "f[i] + a[i]": (lambda f, a, b: f + a, "fa"),
    "max(f[i], a[i])": (lambda f, a, b: np.maximum(f, a), "fa"),
    "2 * f[i] - 1": (lambda f, a, b: 2 * f - 1, "f"),
    "min(f[i], a[i])": (lambda f, a, b: np.minimum(f, a), "fa"),
    "f[b[i]]": (lambda f, a, b: f[b], "fb"),
    "a[b[i]]": (lambda f, a, b: a[b], "ab"),
}


@pytest.mark.parametrize("form", list(MATRIX))
def test_field_bound_matrix_follows_every_input_it_reads(rng, form):
    x, loss = small_fields()
    f = jr.field(jr.i32, shape=(N,))
    a = jr.ndarray(jr.i32, shape=(N,))
    b = jr.ndarray(jr.i32, shape=(N,))
    kernel = matrix_kernels(x, loss, f)[form]
    counts_of, reads = MATRIX[form]
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    f.from_numpy(seeded_ints(rng, 5))
    a.from_numpy(seeded_ints(rng, 5))
    b.from_numpy(rng.permutation(N).astype(np.int32))

    def check():
        want = reference(xv, counts_of(f.to_numpy(), a.to_numpy(), b.to_numpy()), square_step)
        np.testing.assert_allclose(x.grad.to_numpy(), want[1], **CLOSE)

    jr.debug.reset_max_reducer_dispatch_count()
    grad_step(kernel, x, loss, a, b)
    check()
    (info,) = jr.debug.sizing_infos(kernel)
    assert len(info.max_reducer_specs) == 1 and dispatches() == 1
    before = counters()
    grad_step(kernel, x, loss, a, b)
    check()
    assert dispatches() == 1 and delta(before, "launch_cache_hits") == (1,)

    j = int(b[0])          # a[j], f[j] high: every form's longest loop grows (min needs both)
    expected = 1
    for name, mutate in (("f", lambda: f.__setitem__(j, 12)),
                         ("a", lambda: a.__setitem__(j, 12)),
                         ("b", lambda: b.from_numpy(np.roll(b.to_numpy(), 1)))):
        mutate()
        before = counters()
        grad_step(kernel, x, loss, a, b)
        check()
        expected += name in reads
        assert dispatches() == expected, f"after a write to {name}"
        assert delta(before, "launch_cache_hits") == (int(name not in reads),)


# ---- invalidation: every way the bound data can change -------------------------------------------

def bound_kernels(x, loss, f):
    """The same recurrence bounded by a field (`by_field`) and by an ndarray (`by_array`)."""
    @jr.kernel
    def by_field(c: I32_1D):
        for i in x:
            v = x[i]
            for _ in range(f[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def by_array(c: I32_1D):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    return by_field, by_array


def writer_kernels(f):
    @jr.kernel
    def set_field_element():
        for i in f:
            if i == 3:
                f[i] = 9

    @jr.kernel
    def set_array_element(c: I32_1D):
        for i in range(c.shape[0]):
            if i == 3:
                c[i] = 9

    @jr.kernel
    def add_to_field():
        for i in f:
            f[i] += 2

    @jr.kernel
    def add_to_array(c: I32_1D):
        for i in range(c.shape[0]):
            c[i] += 2

    @jr.kernel
    def set_template_field(g: jr.template()):
        for i in g:
            if i == 3:
                g[i] = 9

    return {"field": {"kernel": lambda c: set_field_element(),
                      "kernel +=": lambda c: add_to_field(),
                      "template kernel": lambda c: set_template_field(f)},
            "ndarray": {"kernel": set_array_element, "kernel +=": add_to_array}}


def host_mutations(target):
    grown = target.to_numpy()
    grown[3] = 9
    return {"x[3] = 9": lambda c: target.__setitem__(3, 9),
            "same value x[1] = x[1]": lambda c: target.__setitem__(1, target[1]),
            "from_numpy": lambda c: target.from_numpy(grown),
            "fill": lambda c: target.fill(6)}


MUTATIONS = ["x[3] = 9", "same value x[1] = x[1]", "from_numpy", "fill", "kernel", "kernel +="]
CHANGES = [(where, m) for where in ("field", "ndarray") for m in MUTATIONS] + [
    ("field", "template kernel")]          # template parameters take fields only


@pytest.mark.parametrize(("where", "mutation"), CHANGES)
def test_bound_data_changes_invalidate_the_cache(rng, where, mutation):
    """Generations are bumped by every write, even one that stores the value already there:
    the cache never re-reads data to find out."""
    x, loss = small_fields()
    f = jr.field(jr.i32, shape=(N,))
    c = jr.ndarray(jr.i32, shape=(N,))
    target = f if where == "field" else c
    by_field, by_array = bound_kernels(x, loss, f)
    kernel = by_field if where == "field" else by_array
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    target.from_numpy(seeded_ints(rng, 4))

    def check():
        np.testing.assert_allclose(x.grad.to_numpy(), reference(xv, target.to_numpy())[1],
                                   **CLOSE)

    jr.debug.reset_max_reducer_dispatch_count()
    grad_step(kernel, x, loss, c)
    grad_step(kernel, x, loss, c)
    check()
    assert dispatches() == 1
    mutate = {**host_mutations(target), **writer_kernels(f)[where]}[mutation]
    mutate(c)
    before = counters()
    grad_step(kernel, x, loss, c)             # a stale capacity would overflow here
    check()
    assert dispatches() == 2
    assert delta(before, "launch_cache_misses", "launch_cache_hits") == (1, 0)
    grad_step(kernel, x, loss, c)
    check()
    assert dispatches() == 2


def test_writes_to_other_data_keep_the_cache(rng):
    """Writing the float data, a forward launch, or another field: no reducer runs, and the
    gradients still see the new float data."""
    x, loss = small_fields()
    f = jr.field(jr.i32, shape=(N,))
    other = jr.field(jr.i32, shape=(N,))
    by_field, _ = bound_kernels(x, loss, f)
    unused = jr.ndarray(jr.i32, shape=(N,))

    @jr.kernel
    def halve():
        for i in x:
            x[i] = x[i] * 0.5
            other[i] = 7

    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    f.from_numpy(seeded_ints(rng, 6))
    jr.debug.reset_max_reducer_dispatch_count()
    grad_step(by_field, x, loss, unused)
    before = counters()
    halve()
    xv = xv * 0.5
    other[2] = 5
    x[1] = 0.125
    xv[1] = 0.125
    by_field(unused)                            # the forward kernel sizes nothing
    g = grad_step(by_field, x, loss, unused)
    np.testing.assert_allclose(g, reference(xv, f.to_numpy())[1], **CLOSE)
    assert dispatches() == 1
    assert delta(before, "launch_cache_hits", "launch_cache_misses") == (1, 0)


def test_grad_writes_do_not_resize_and_do_not_break(rng):
    x, loss = small_fields()
    f = jr.field(jr.i32, shape=(N,))
    _, by_array = bound_kernels(x, loss, f)
    w = jr.ndarray(jr.f64, shape=(N,), needs_grad=True)

    @jr.kernel
    def weighted(c: I32_1D, w: nd(dtype=jr.f64, ndim=1)):
        for i in x:
            v = x[i] * w[i]
            for _ in range(c[i]):
                v = v * v * 0.5 + 0.3
            loss[None] += v

    @jr.kernel
    def clear_grads(w: nd(dtype=jr.f64, ndim=1)):
        for i in x:
            x.grad[i] = 0.0
            w.grad[i] = 0.0

    xv, wv = rng.uniform(-1, 1, N), rng.uniform(0.5, 1.5, N)
    cv = seeded_ints(rng, 7)
    c = jr.ndarray(jr.i32, shape=(N,))
    x.from_numpy(xv)
    w.from_numpy(wv)
    c.from_numpy(cv)
    d = reference(xv * wv, cv, square_step)[1]
    jr.debug.reset_max_reducer_dispatch_count()
    weighted.grad(c, w)                                 # loss.grad is 0: zero gradients
    before = counters()
    for _ in range(3):
        clear_grads(w)                                  # a kernel writing .grad
        w.grad.fill(0)
        x.grad[2] = 0.0                                 # host writes to .grad
        loss.grad[None] = 1.0
        weighted.grad(c, w)
        np.testing.assert_allclose(x.grad.to_numpy(), d * wv, **CLOSE)
        np.testing.assert_allclose(w.grad.to_numpy(), d * xv, **CLOSE)
    for _ in range(2):                                  # a Tape clears and seeds grads
        with jr.ad.Tape(loss=loss):
            by_array(c)
        np.testing.assert_allclose(x.grad.to_numpy(), reference(xv, cv)[1], **CLOSE)
    assert dispatches() == 2                            # one per kernel, on its first launch
    assert delta(before, "launch_cache_misses", "launch_cache_hits") == (1, 4)


def test_numpy_bound_is_observed_by_content(rng):
    x, loss = small_fields()
    _, by_array = bound_kernels(x, loss, jr.field(jr.i32, shape=(N,)))
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cv = seeded_ints(rng, 4)
    jr.debug.reset_max_reducer_dispatch_count()
    for _ in range(2):
        g = grad_step(by_array, x, loss, cv)
        np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    assert dispatches() == 1
    cv[N - 1] = 13                                      # in place: same object, new content
    g = grad_step(by_array, x, loss, cv)
    np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    assert dispatches() == 2
    g = grad_step(by_array, x, loss, cv.copy())         # a new array with equal content
    np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    before = counters()
    g = grad_step(by_array, x, loss, cv)
    np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    cv[N - 1] = 1                                       # shrinking is fine too
    g = grad_step(by_array, x, loss, cv)
    np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    assert delta(before, "launch_cache_misses") == (2,)


def test_scalar_argument_bound_is_observed_by_value(rng):
    x, loss = small_fields()

    @jr.kernel
    def shifted(c: I32_1D, extra: jr.i32):
        for i in x:
            v = x[i]
            for _ in range(c[i] + extra):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    xv, cv = rng.uniform(-1, 1, N), seeded_ints(rng, 4)
    c = jr.ndarray(jr.i32, shape=(N,))
    c.from_numpy(cv)
    x.from_numpy(xv)
    jr.debug.reset_max_reducer_dispatch_count()
    for extra, total in ((2, 1), (2, 1), (5, 2), (5, 2), (0, 3)):
        g = grad_step(shifted, x, loss, c, extra)
        np.testing.assert_allclose(g, reference(xv, cv + extra)[1], **CLOSE)
        assert dispatches() == total


def test_switching_bound_arrays_resizes_each_time(rng):
    x, loss = small_fields()
    _, by_array = bound_kernels(x, loss, jr.field(jr.i32, shape=(N,)))
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    short, long = jr.ndarray(jr.i32, shape=(N,)), jr.ndarray(jr.i32, shape=(N,))
    short.from_numpy(seeded_ints(rng, 3))
    long.from_numpy(seeded_ints(rng, 15))
    before = counters()
    for c in (short, long, short, long, long):
        g = grad_step(by_array, x, loss, c)
        np.testing.assert_allclose(g, reference(xv, c.to_numpy())[1], **CLOSE)
    assert delta(before, "launch_cache_misses", "launch_cache_hits") == (4, 1)


# ---- counters -----------------------------------------------------------------------------------

def two_spec_kernel(x, loss):
    @jr.kernel
    def two(a: I32_1D, b: I32_1D):
        for i in x:
            u = x[i]
            w = x[i]
            for _ in range(a[i]):
                u = jr.sin(u) * 1.1 + 0.1
            for _ in range(b[i]):
                w = w * w * 0.5 + 0.3
            loss[None] += u + w

    return two


def test_steady_state_is_launch_cache_hits_only(rng):
    x, loss = small_fields()
    two = two_spec_kernel(x, loss)
    a, b = jr.ndarray(jr.i32, shape=(N,)), jr.ndarray(jr.i32, shape=(N,))
    av, bv = seeded_ints(rng, 6), seeded_ints(rng, 6)
    a.from_numpy(av)
    b.from_numpy(bv)
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    want = reference(xv, av)[1] + reference(xv, bv, square_step)[1]
    jr.debug.reset_stats()
    grad_step(two, x, loss, a, b)
    first = counters()
    assert (first["launch_cache_misses"], first["spec_cache_misses"],
            first["max_reducer_dispatches"], first["launch_cache_hits"]) == (1, 2, 2, 0)
    for _ in range(25):
        g = grad_step(two, x, loss, a, b)
    np.testing.assert_allclose(g, want, **CLOSE)
    assert delta(first, "launch_cache_hits", "launches") == (25, 25)
    assert delta(first, "launch_cache_misses", "spec_cache_hits", "spec_cache_misses",
                 "max_reducer_dispatches") == (0, 0, 0, 0)


@pytest.mark.parametrize("changed", ["a", "b"])
def test_two_specs_one_input_changed_is_one_hit_one_miss(rng, changed):
    x, loss = small_fields()
    two = two_spec_kernel(x, loss)
    arrays = {"a": jr.ndarray(jr.i32, shape=(N,)), "b": jr.ndarray(jr.i32, shape=(N,))}
    for arr in arrays.values():
        arr.from_numpy(seeded_ints(rng, 5))
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    grad_step(two, x, loss, arrays["a"], arrays["b"])
    (info,) = jr.debug.sizing_infos(two)
    assert len(info.max_reducer_specs) == 2
    before = counters()
    arrays[changed][N - 1] = 11
    g = grad_step(two, x, loss, arrays["a"], arrays["b"])
    assert delta(before, "launch_cache_misses", "spec_cache_hits", "spec_cache_misses",
                 "max_reducer_dispatches", "launch_cache_hits") == (1, 1, 1, 1, 0)
    want = reference(xv, arrays["a"].to_numpy())[1] + \
        reference(xv, arrays["b"].to_numpy(), square_step)[1]
    np.testing.assert_allclose(g, want, **CLOSE)
    before = counters()
    arrays["a"][1] = 12
    arrays["b"][2] = 12
    g = grad_step(two, x, loss, arrays["a"], arrays["b"])
    assert delta(before, "spec_cache_hits", "spec_cache_misses") == (0, 2)
    want = reference(xv, arrays["a"].to_numpy())[1] + \
        reference(xv, arrays["b"].to_numpy(), square_step)[1]
    np.testing.assert_allclose(g, want, **CLOSE)


def test_identical_specs_of_two_tasks_reduce_once(rng):
    x, loss = small_fields()

    @jr.kernel
    def twice(c: I32_1D):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v
        for i in x:
            u = x[i]
            for _ in range(c[i]):
                u = u * u * 0.5 + 0.3
            loss[None] += u

    xv, cv = rng.uniform(-1, 1, N), seeded_ints(rng, 6)
    x.from_numpy(xv)
    jr.debug.reset_stats()
    g = grad_step(twice, x, loss, cv)
    np.testing.assert_allclose(g, reference(xv, cv)[1] + reference(xv, cv, square_step)[1],
                               **CLOSE)
    infos = jr.debug.sizing_infos(twice)
    assert len(infos) == 2 and infos[0].max_reducer_specs == infos[1].max_reducer_specs
    assert infos[0].registry_id != infos[1].registry_id
    stats = counters()
    assert (stats["max_reducer_dispatches"], stats["spec_cache_misses"]) == (1, 1)


def test_reinit_starts_with_empty_caches(rng):
    x, loss = small_fields()
    _, by_array = bound_kernels(x, loss, jr.field(jr.i32, shape=(N,)))
    xv, cv = rng.uniform(-1, 1, N), seeded_ints(rng, 5)
    x.from_numpy(xv)
    grad_step(by_array, x, loss, cv)
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    assert dispatches() == 0 and program_mod.current().spec_cache == {}
    g = grad_step(by_array, x, loss, cv)
    np.testing.assert_allclose(g, reference(xv, cv)[1], **CLOSE)
    assert dispatches() == 1


# ---- results map and sizing infos: shared, never copied -----------------------------------------

def test_results_map_is_read_only_and_shared_across_hits(rng):
    x, loss = small_fields()
    two = two_spec_kernel(x, loss)
    av, bv = seeded_ints(rng, 6), seeded_ints(rng, 9)
    a, b = jr.ndarray(jr.i32, shape=(N,)), jr.ndarray(jr.i32, shape=(N,))
    a.from_numpy(av)
    b.from_numpy(bv)
    program = program_mod.current()
    grad_step(two, x, loss, a, b)
    results = program.current_results
    assert isinstance(results, MappingProxyType)
    assert results is handle_of(two).sizing.results
    with pytest.raises(TypeError):
        results[next(iter(results))] = 0                # type: ignore[index]
    (info,) = jr.debug.sizing_infos(two)
    # each spec reduces max over i of (1 initial entry + 1 push of the seed + the trip count)
    assert sorted(results.values()) == sorted([int(av.max()) + 2, int(bv.max()) + 2])
    assert {text for _, text in results} == {se.text(s) for s in info.max_reducer_specs}
    assert all(rid == info.registry_id for rid, _ in results)
    for _ in range(5):
        grad_step(two, x, loss, a, b)
        assert program.current_results is results       # a hit copies nothing
    b[3] = 20
    grad_step(two, x, loss, a, b)
    assert program.current_results is not results       # a miss makes a new map
    assert sorted(program.current_results.values()) == sorted([int(av.max()) + 2, 22])
    assert sorted(results.values()) == sorted([int(av.max()) + 2, int(bv.max()) + 2])


def test_sizing_infos_are_one_tuple_per_handle(rng):
    x, loss = small_fields()
    _, by_array = bound_kernels(x, loss, jr.field(jr.i32, shape=(N,)))
    c = jr.ndarray(jr.i32, shape=(N,))
    c.from_numpy(seeded_ints(rng, 5))
    grad_step(by_array, x, loss, c)
    handle = handle_of(by_array)
    infos = handle.sizing_infos
    first = jr.debug.sizing_infos(by_array)
    for k in range(3):
        c[k] = 7 + k                                    # misses and hits alike
        grad_step(by_array, x, loss, c)
        grad_step(by_array, x, loss, c)
        assert handle.sizing_infos is infos
        again = jr.debug.sizing_infos(by_array)
        assert again == first and all(p is q for p, q in zip(again, first))
    assert isinstance(infos, tuple) and infos == first


# ---- regressions found while writing this suite -------------------------------------------------

def test_fields_with_equal_names_and_generations_do_not_share_results(rng):
    """Two template instantiations over fields of one name, dtype and shape share a registry
    id and print the same spec text; their write generations are equal. The per-spec cache
    used to hand the second the first one's result (an adstack overflow)."""
    x, loss = small_fields()
    short = jr.field(jr.i32, shape=(N,), name="cnt")
    long = jr.field(jr.i32, shape=(N,), name="cnt")

    @jr.kernel
    def by_template(cnt: jr.template()):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    short.fill(2)
    long.fill(9)
    assert short.gen == long.gen
    for cnt in (short, long, short, long):
        g = grad_step(by_template, x, loss, cnt)
        np.testing.assert_allclose(g, reference(xv, cnt.to_numpy())[1], **CLOSE)


def test_two_bound_fields_of_one_name_in_one_kernel(rng):
    x, loss = small_fields()
    p = jr.field(jr.i32, shape=(N,), name="cnt")
    q = jr.field(jr.i32, shape=(N,), name="cnt")

    @jr.kernel
    def both():
        for i in x:
            u = x[i]
            w = x[i]
            for _ in range(p[i]):
                u = jr.sin(u) * 1.1 + 0.1
            for _ in range(q[i]):
                w = w * w * 0.5 + 0.3
            loss[None] += u + w

    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    p.fill(1)
    q.fill(8)
    for _ in range(2):
        g = grad_step(both, x, loss)
        np.testing.assert_allclose(
            g, reference(xv, p.to_numpy())[1] + reference(xv, q.to_numpy(), square_step)[1],
            **CLOSE)


BOUND_LAUNCH = textwrap.dedent("""
    import numpy as np
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    x = jr.field(jr.f64, shape=(16,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k(c: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    c = jr.ndarray(jr.i32, shape=(16,))
    c.fill(3)
    x.fill(0.3)
    loss.grad[None] = 1.0
    k.grad(c)
    want = x.grad.to_numpy()
    x.grad.fill(0)
    launch = k.grad.bind(c)
    launch()
    assert np.allclose(x.grad.to_numpy(), want), x.grad.to_numpy()
    # a data change is seen by the bound launch's own sizing (no overflow, right gradient)
    c.fill(9)
    x.grad.fill(0)
    k.grad(c)
    want9 = x.grad.to_numpy()
    x.grad.fill(0)
    launch()
    assert np.allclose(x.grad.to_numpy(), want9), x.grad.to_numpy()
    # rebinding to another array (a plain numpy one: fingerprinted)
    d = np.full(16, 2, dtype=np.int32)
    launch.set_arg("c", d)
    x.grad.fill(0)
    launch()
    x2 = x.grad.to_numpy()
    x.grad.fill(0)
    k.grad(d)
    assert np.allclose(x2, x.grad.to_numpy())
    d[:] = 12
    x.grad.fill(0)
    launch()
    x12 = x.grad.to_numpy()
    x.grad.fill(0)
    k.grad(d)
    assert np.allclose(x12, x.grad.to_numpy())
    # constant-bound grad kernels have their capacities written at bind time
    @jr.kernel
    def kc(c: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(5):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v
    x.grad.fill(0)
    kc.grad.bind(c)()
    assert np.all(x.grad.to_numpy() != 0)
    print("OK")
""")


def test_bound_launch_of_a_grad_kernel_sizes_its_adstacks(tmp_path):
    script = tmp_path / "bound_grad.py"
    script.write_text(BOUND_LAUNCH)
    root = str(Path(jr.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          check=False, timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-2000:]
