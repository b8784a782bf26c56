"""What a `jr.ad.Tape` records: bound launches (`k.bind(...)()`) like plain ones, and the
launches of its own thread only (a tape belongs to the thread that entered it)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jitrt as jr


@pytest.fixture
def setup():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    x = jr.field(jr.f64, shape=(2,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0]))

    @jr.kernel
    def squares():
        for i in x:
            loss[None] += x[i] * x[i]
    return x, loss, squares


def test_bound_launch_is_recorded(setup):
    """A bound launch inside a Tape used to run unrecorded: every gradient 0."""
    x, loss, squares = setup
    bound = squares.bind()
    bound()                                    # outside a tape: runs, nothing recorded
    with jr.ad.Tape(loss=loss) as tape:
        bound()
    assert [k.qualname for k, _ in tape.entries] == [squares.qualname]
    assert loss[None] == 5.0
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0])


def test_bound_launch_with_arguments_is_recorded_with_them():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    a = jr.ndarray(jr.f64, shape=(3,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    a.from_numpy(np.array([1.0, 2.0, 3.0]))

    @jr.kernel
    def scaled(arr: jr.types.ndarray(dtype=jr.f64, ndim=1), k: jr.f64):
        for i in arr:
            loss[None] += k * arr[i] * arr[i]

    bound = scaled.bind(a, 2.0)
    bound.set_arg("k", 3.0)
    with jr.ad.Tape(loss=loss):
        bound()
    assert loss[None] == 3.0 * 14.0
    np.testing.assert_allclose(a.grad.to_numpy(), [6.0, 12.0, 18.0])


def test_another_threads_launches_are_neither_recorded_nor_broken(setup):
    """Thread B launches while thread A's tape records: B's launches run, unrecorded (they
    used to be recorded on A's tape, or fail with "'NoneType' object has no attribute
    'record'" when A's tape closed meanwhile)."""
    x, loss, squares = setup
    y = jr.field(jr.f64, shape=(2,))

    @jr.kernel
    def bump():
        for i in y:
            y[i] += 1.0
    bump()
    bump.bind()()
    recording, launched = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    tapes = []

    def a():
        with jr.ad.Tape(loss=loss) as tape:
            tapes.append(tape)
            squares()
            recording.set()
            launched.wait(60)

    def b():
        recording.wait(60)
        try:
            bump()
            bump.bind()()
        except BaseException as e:      # noqa: BLE001 (reported below)
            errors.append(e)
        launched.set()
    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert [k.qualname for k, _ in tapes[0].entries] == [squares.qualname]
    np.testing.assert_allclose(y.to_numpy(), [4.0, 4.0])
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0])


def test_launching_while_tapes_open_and_close_in_another_thread(setup):
    x, loss, squares = setup
    y = jr.field(jr.f64, shape=(2,))

    @jr.kernel
    def bump():
        for i in y:
            y[i] += 1.0
    stop = threading.Event()
    errors: list[BaseException] = []
    count = [0]

    def launcher():
        try:
            while not stop.is_set():
                bump()
                count[0] += 1
        except BaseException as e:      # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=launcher)
    t.start()
    try:
        for _ in range(50):
            with jr.ad.Tape(loss=loss):
                squares()
            np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0])
    finally:
        stop.set()
        t.join(120)
    assert not errors
    assert y[0] == count[0]


def test_two_threads_with_tapes_of_their_own():
    """Each thread's tape records its own launches; they used to be told "cannot be
    nested"."""
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    xs = [jr.field(jr.f64, shape=(2,), needs_grad=True) for _ in range(2)]
    losses = [jr.field(jr.f64, shape=(), needs_grad=True) for _ in range(2)]

    @jr.kernel
    def cube(x: jr.template(), loss: jr.template()):
        for i in x:
            loss[None] += x[i] * x[i] * x[i]
    for k, x in enumerate(xs):
        x.from_numpy(np.array([1.0, 2.0]) * (k + 1))
    both_inside = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []
    entries: dict[int, list[str]] = {}

    def run(k: int) -> None:
        try:
            with jr.ad.Tape(loss=losses[k], clear_gradients=False) as tape:
                both_inside.wait()
                cube(xs[k], losses[k])
                both_inside.wait()
            entries[k] = [kern.qualname for kern, _ in tape.entries]
        except BaseException as e:      # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert entries == {0: [cube.qualname], 1: [cube.qualname]}
    np.testing.assert_allclose(xs[0].grad.to_numpy(), [3.0, 12.0])
    np.testing.assert_allclose(xs[1].grad.to_numpy(), [12.0, 48.0])


def test_nesting_in_one_thread_is_still_refused(setup):
    x, loss, squares = setup
    with jr.ad.Tape(loss=loss):
        with pytest.raises(RuntimeError, match="cannot be used inside jr.ad.Tape"):
            with jr.ad.Tape(loss=loss):
                pass


def test_forward_mode_does_not_start_while_another_thread_records(setup):
    """FwdMode applies to every thread's launches: refused while another thread's tape
    records, with a message that says so."""
    x, loss, squares = setup
    xd = jr.field(jr.f64, shape=(2,), needs_dual=True)
    ld = jr.field(jr.f64, shape=(), needs_dual=True)
    recording, checked = threading.Event(), threading.Event()

    def a():
        with jr.ad.Tape(loss=loss):
            squares()
            recording.set()
            checked.wait(60)
    t = threading.Thread(target=a)
    t.start()
    try:
        recording.wait(60)
        with pytest.raises(RuntimeError, match="FwdMode cannot start while a jr.ad.Tape"):
            with jr.ad.FwdMode(loss=ld, param=xd, seed=[1.0, 0.0]):
                pass
    finally:
        checked.set()
        t.join(120)
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0])
