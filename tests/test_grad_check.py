"""`jr.ad.Tape(grad_check=[...])` (jitrt/ad_check.py) and `Tape(validation=...)`."""
import warnings

import numpy as np
import pytest

import jitrt as jr


@pytest.fixture(autouse=True)
def f64_program():
    jr.init(default_fp=jr.f64)


def quadratic_setup():
    x = jr.field(jr.f64, shape=4, needs_grad=True)
    y = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(1.0, 5.0))

    @jr.kernel
    def square_sum():
        for i in x:
            y[None] += x[i] ** 2 + jr.sin(x[i])
    return x, y, square_sum


def test_a_right_gradient_passes_and_the_state_is_what_the_reverse_pass_left():
    x, y, square_sum = quadratic_setup()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with jr.ad.Tape(y, grad_check=[x, y]) as tape:
            square_sum()
    assert [(r.name, r.passed) for r in tape.grad_check_results] == [(x.name, True),
                                                                       (y.name, True)]
    xs = np.arange(1.0, 5.0)
    np.testing.assert_allclose(x.to_numpy(), xs)               # not left perturbed
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs + np.cos(xs))
    assert y[None] == pytest.approx(np.sum(xs ** 2 + np.sin(xs)))
    assert y.grad[None] == 1.0


def test_a_wrong_backward_warns_naming_the_input():
    x, y, square_sum = quadratic_setup()

    @jr.ad.grad_replaced
    def step():
        square_sum()

    @jr.ad.grad_for(step)
    def wrong_backward():
        square_sum.grad()
        x.grad.from_numpy(x.grad.to_numpy() * 2)     # twice the true gradient

    with pytest.warns(jr.GradCheckWarning, match=f"gradient of '{x.name}' disagrees"):
        with jr.ad.Tape(y, grad_check=[x]) as tape:
            step()
    (result,) = tape.grad_check_results
    assert not result.passed and result.relative_error > 0.4
    np.testing.assert_allclose(x.to_numpy(), np.arange(1.0, 5.0))


def test_vector_fields_and_ndarray_arguments_are_checked_and_restored():
    v = jr.Vector.field(3, jr.f64, shape=2, needs_grad=True)
    a = jr.ndarray(jr.f64, shape=2, needs_grad=True)
    out = jr.ndarray(jr.f64, shape=2, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    v.from_numpy(np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]))
    a.from_numpy(np.array([0.3, 0.7]))

    @jr.kernel
    def step(a: jr.types.ndarray(), out: jr.types.ndarray()):
        for i in range(2):
            out[i] = v[i].norm() * a[i]       # overwrites out: replays must start afresh
            loss[None] += out[i] * a[i]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with jr.ad.Tape(loss, grad_check=[v, a]) as tape:
            step(a, out)
    assert all(r.passed for r in tape.grad_check_results)
    np.testing.assert_allclose(a.to_numpy(), [0.3, 0.7])
    norms = np.linalg.norm(v.to_numpy(), axis=1)
    np.testing.assert_allclose(out.to_numpy(), norms * [0.3, 0.7])
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * norms * [0.3, 0.7])


def test_bad_grad_check_arguments_are_refused_before_recording():
    x, y, _ = quadratic_setup()
    y32 = jr.field(jr.f32, shape=(), needs_grad=True)
    plain = jr.field(jr.f64, shape=4)
    with pytest.raises(ValueError, match="need an f64 loss"):
        jr.ad.Tape(y32, grad_check=[x])
    with pytest.raises(ValueError, match="needs loss="):
        jr.ad.Tape(grad_check=[x])
    with pytest.raises(TypeError, match="takes a list"):
        jr.ad.Tape(y, grad_check=x)
    with pytest.raises(TypeError, match="takes fields and ndarrays, got int"):
        jr.ad.Tape(y, grad_check=[3])
    with pytest.raises(ValueError, match="has no gradient"):
        jr.ad.Tape(y, grad_check=[plain])


def test_validation_warns_that_the_rule_checker_is_not_in_jitrt():
    x, y, square_sum = quadratic_setup()
    with pytest.warns(UserWarning, match="global data access rule"):
        tape = jr.ad.Tape(y, validation=True)
    with tape:
        square_sum()
    assert x.grad[0] == pytest.approx(2 + np.cos(1.0))


def test_runtime_errors_are_runtime_errors_as_in_taichi():
    for cls in (jr.KernelRuntimeError, jr.AdStackOverflowError, jr.AutodiffError,
                jr.BackendUnavailableError):
        assert issubclass(cls, RuntimeError) and issubclass(cls, jr.JitrtError)
    with pytest.raises(RuntimeError, match="grad_replaced"):
        jr.ad.grad_for(lambda: None)
