"""`jr.ad.Tape(validation=True)` with `jr.init(debug=True)`: Taichi's global data access rule
checked element by element (frontend/gdar.py). Which patterns fail and which pass is what
Taichi 1.7.4 reports for the same kernels (checked on the same machine)."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import jitrt as jr

N = 4
LINES = Path(__file__).read_text().splitlines()


def line_of(tag: str) -> int:
    return next(k + 1 for k, text in enumerate(LINES) if text.endswith(f"# {tag}"))


@pytest.fixture
def data(arch):
    jr.init(arch=arch, debug=True, offline_cache=False, enable_fallback=False)
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    b = jr.field(jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(1.0, N + 1.0))
    b[None] = 10.0
    return x, b, loss


def record(loss, *kernels, validation=True):
    with jr.ad.Tape(loss=loss, validation=validation):
        for k in kernels:
            k()


def test_a_write_after_a_read_fails_at_the_write(data):
    x, b, loss = data

    @jr.kernel
    def use_then_bump():
        loss[None] = x[1] * b[None]
        b[None] += 100.0  # bump

    with pytest.raises(jr.KernelRuntimeError, match="global data access rule broken: b is "
                       "written here after the tape read the same element") as info:
        record(loss, use_then_bump)
    assert f"{__file__}:{line_of('bump')}" in str(info.value)
    assert "use_then_bump" in str(info.value)
    # not checked at run time: the forward runs, and building its grad kernel refuses the
    # same overwrite statically (passes/ad_check_rules.py), at the same line
    with pytest.raises(jr.NotDifferentiableError, match="'b' is written here after this kernel "
                       "read the same element") as info:
        record(loss, use_then_bump, validation=False)
    assert info.value.line == line_of("bump")


@pytest.mark.parametrize("second", ["store", "add", "atomic_max"])
def test_any_write_in_a_later_kernel_after_a_read_fails(data, second):
    x, b, loss = data

    @jr.kernel
    def read_b():
        loss[None] += b[None]

    @jr.kernel
    def store_b():
        b[None] = 3.0

    @jr.kernel
    def add_b():
        b[None] += 3.0

    @jr.kernel
    def max_b():
        jr.atomic_max(b[None], 1.0)

    write = {"store": store_b, "add": add_b, "atomic_max": max_b}[second]
    with pytest.raises(jr.KernelRuntimeError, match="global data access rule"):
        record(loss, read_b, write)


def test_the_check_is_per_element(data):
    """Reading x[0], x[1] and then writing x[2], x[3] is fine; writing x[1] is not."""
    x, b, loss = data

    @jr.kernel
    def read_front():
        for i in range(2):
            loss[None] += x[i]

    @jr.kernel
    def write_back():
        for i in range(2, N):
            x[i] = 0.5

    @jr.kernel
    def write_second():
        x[1] = 0.5  # second

    record(loss, read_front, write_back)
    with pytest.raises(jr.KernelRuntimeError) as info:
        record(loss, read_front, write_second)
    assert f":{line_of('second')}:" in str(info.value)


def test_patterns_that_keep_the_rule(data):
    x, b, loss = data
    free = jr.field(jr.f64, shape=N)      # no gradient: not checked

    @jr.kernel
    def store_then_read():
        b[None] = 3.0
        loss[None] += b[None]

    @jr.kernel
    def store_twice():
        b[None] = 3.0
        b[None] = 4.0

    @jr.kernel
    def add():
        b[None] += 3.0

    @jr.kernel
    def read_b():
        loss[None] += b[None]

    @jr.kernel
    def free_field():
        loss[None] += free[0]
        free[0] = 1.0

    @jr.kernel
    def untaken_read():
        for i in range(N):
            loss[None] += x[i] if i < 2 else 0.0

    @jr.kernel
    def write_last():
        x[N - 1] = 2.0

    for kernels in [(store_then_read,), (store_twice,), (add, read_b), (add, add),
                    (free_field,), (untaken_read, write_last)]:
        record(loss, *kernels)


def test_each_tape_starts_with_no_reads(data):
    x, b, loss = data

    @jr.kernel
    def read_b():
        loss[None] += b[None]

    @jr.kernel
    def store_b():
        b[None] = 3.0

    read_b()                               # outside a tape: not checked
    record(loss, store_b)
    record(loss, read_b)
    record(loss, store_b)                  # a new tape: the earlier read is forgotten


def test_checking_changes_no_value_or_gradient(data, rng):
    """The checked copies compute what the kernels do: the loss and x.grad agree with an
    unchecked tape and with central differences."""
    x, b, loss = data
    y = jr.field(jr.f64, shape=N, needs_grad=True)
    xv = rng.standard_normal(N)

    @jr.kernel
    def step():
        for i in x:
            y[i] = jr.sin(x[i]) * b[None]

    @jr.kernel
    def total():
        for i in y:
            loss[None] += y[i] * y[i]

    def f(v):
        return np.sum((np.sin(v) * 10.0) ** 2)

    results = []
    for validation in (True, False):
        x.from_numpy(xv)
        record(loss, step, total, validation=validation)
        results.append((loss[None], x.grad.to_numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], f(xv), rtol=1e-12)
    h = 1e-6
    fd = [(f(xv + h * e) - f(xv - h * e)) / (2 * h) for e in np.eye(N)]
    np.testing.assert_allclose(results[0][1], fd, rtol=1e-6)


def test_grad_replaced_steps_and_no_grad_kernels_are_not_checked(data):
    x, b, loss = data

    @jr.kernel
    def use_then_bump():
        loss[None] = x[1] * b[None]
        b[None] += 100.0

    @jr.ad.grad_replaced
    def step():
        use_then_bump()

    @jr.ad.grad_for(step)
    def step_grad():
        pass

    @jr.ad.no_grad
    @jr.kernel
    def bump_untracked():
        loss[None] += b[None]
        b[None] += 1.0

    record(loss, step)
    record(loss, bump_untracked)


def test_without_debug_the_tape_warns_and_records_unchecked(arch):
    x = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def read_write():
        t = x[None]
        x[None] = t + 1.0

    with pytest.warns(UserWarning, match=r"checked only with jr.init\(debug=True\)"):
        with jr.ad.Tape(loss=x, validation=True):
            read_write()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jr.init(arch=arch, debug=True, offline_cache=False, enable_fallback=False)
        y = jr.field(jr.f64, shape=(), needs_grad=True)

        @jr.kernel
        def touch():
            y[None] = 1.0

        with jr.ad.Tape(loss=y, validation=True):     # debug: no warning
            touch()


def test_the_offline_cache_keeps_checked_and_plain_kernels_apart(arch, tmp_path):
    def program():
        jr.init(arch=arch, debug=True, offline_cache=True, offline_cache_file_path=str(tmp_path),
                enable_fallback=False)
        b = jr.field(jr.f64, shape=(), needs_grad=True)
        loss = jr.field(jr.f64, shape=(), needs_grad=True)
        return b, loss

    @jr.kernel
    def use_then_bump(b: jr.template(), loss: jr.template()):
        loss[None] = b[None] * 2.0
        b[None] += 100.0

    for _ in range(2):                      # the second program loads both from the cache
        b, loss = program()
        use_then_bump(b, loss)              # plain: runs
        with pytest.raises(jr.KernelRuntimeError, match="global data access rule"):
            with jr.ad.Tape(loss=loss, validation=True):
                use_then_bump(b, loss)
        use_then_bump(b, loss)
    assert jr.debug.stats()["offline_cache_hits"] >= 1


def test_a_kernel_objects_autodiff_mode():
    @jr.kernel
    def k():
        pass

    modes = (k.autodiff_mode, k.grad.autodiff_mode, k.forward_kernel(()).autodiff_mode,
             k.validation_kernel().autodiff_mode)
    assert modes == (jr.ad.AutodiffMode.NONE, jr.ad.AutodiffMode.REVERSE,
                     jr.ad.AutodiffMode.FORWARD, jr.ad.AutodiffMode.VALIDATION)
