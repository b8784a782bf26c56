"""Semantics a program ported from Taichi relies on, checked against what Taichi 1.7.4 does:
the autodiff refusals (random numbers, an ndarray's `.grad` in a differentiated kernel) are
RuntimeErrors as well as compile errors at the line; an integer dtype with needs_grad/needs_dual
is refused with Taichi's wording; comparing a vector/matrix element at Python scope
(`assert x[i] == [a, b]`) has a truth value. Gradients against central differences (f64)."""
from pathlib import Path

import numpy as np
import pytest

import jitrt as jr

N = 4
LINES = Path(__file__).read_text().splitlines()


def line_of(tag: str) -> int:
    return next(k + 1 for k, text in enumerate(LINES) if text.endswith(f"# {tag}"))


# ---- jr.random() in a differentiated kernel ------------------------------------------------

@pytest.mark.parametrize("draw", ["random", "randn"])
def test_random_in_a_differentiated_kernel_is_refused_at_the_call(draw):
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    fn = getattr(jr, draw)

    @jr.kernel
    def work():
        for i in x:
            y = x[i] * 2.0
            loss[None] += y * fn()  # random-call

    work()                                       # the forward kernel runs
    with pytest.raises(RuntimeError, match="RandStmt not supported") as info:
        with jr.ad.Tape(loss=loss):
            work()
    err = info.value
    assert isinstance(err, jr.NotDifferentiableError)
    assert isinstance(err, jr.KernelCompileError) and isinstance(err, jr.AutodiffError)
    assert err.filename == __file__ and err.line == line_of("random-call")
    assert "work" in str(err) and "jr.random() and jr.randn() cannot be differentiated" in str(err)
    assert "loss[None] += y * fn()" in str(err)             # the source line with a caret


def test_while_loops_in_a_differentiated_kernel_are_runtime_errors_too():
    x = jr.field(jr.f64, shape=(), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def work():
        v = x[None]
        while v < 10.0:  # while-loop
            v = v * 2.0
        loss[None] = v

    with pytest.raises(RuntimeError, match="a while loop cannot be differentiated") as info:
        work.grad()
    assert isinstance(info.value, jr.NotDifferentiableError)
    assert info.value.line == line_of("while-loop")


# ---- an ndarray's .grad in a differentiated kernel ---------------------------------------

def test_reading_an_ndarrays_grad_runs_but_is_not_differentiated():
    """Taichi refuses the adjoint (its gradient buffer would be read and written by the same
    launch: the result depends on the order of the threads); the forward kernel runs."""
    a = jr.ndarray(jr.f64, shape=N, needs_grad=True)
    b = jr.ndarray(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def total(x: jr.types.ndarray(), b: jr.types.ndarray()):
        for i in x:
            b[None] += x.grad[i]  # grad-read

    a.grad.fill(2.0)
    total(a, b)
    assert b[None] == 2.0 * N
    with pytest.raises(RuntimeError, match="Cannot automatically differentiate through a "
                       "grad tensor") as info:
        total.grad(a, b)
    err = info.value
    assert isinstance(err, jr.NotDifferentiableError)
    assert err.line == line_of("grad-read") and "reads x.grad" in str(err)
    assert "total" in str(err) and "as an argument of its own" in str(err)  # what to do
    np.testing.assert_array_equal(a.grad.to_numpy(), [2.0] * N)     # nothing ran


@pytest.mark.parametrize("how", ["store", "add"])
def test_writing_an_ndarrays_grad_in_a_differentiated_kernel_is_refused(how):
    a = jr.ndarray(jr.f64, shape=N, needs_grad=True)
    b = jr.ndarray(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def put(x: jr.types.ndarray(), b: jr.types.ndarray()):
        for i in x:
            x.grad[i] = b[None]  # grad-store

    @jr.kernel
    def add(x: jr.types.ndarray(), b: jr.types.ndarray()):
        for i in x:
            x.grad[i] += b[None] * x[i]  # grad-add

    k = put if how == "store" else add
    a.fill(1.0)
    b[None] = 3.0
    k(a, b)
    np.testing.assert_array_equal(a.grad.to_numpy(), [3.0] * N)
    with pytest.raises(jr.NotDifferentiableError, match="x.grad") as info:
        k.grad(a, b)
    assert info.value.line == line_of("grad-store" if how == "store" else "grad-add")
    assert ("writes" if how == "store" else "updates") in str(info.value)


def test_a_fields_grad_read_is_a_constant_when_differentiated(rng):
    """A field's .grad is a field of its own: Taichi and jitrt read it as data (no gradient)."""
    x = jr.field(jr.f64, shape=N, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def weighted():
        for i in x:
            loss[None] += x.grad[i] * jr.sin(x[i])

    xv, g = rng.standard_normal(N), rng.standard_normal(N)
    x.from_numpy(xv)
    x.grad.from_numpy(g)
    loss.grad[None] = 1.0
    weighted.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), g + g * np.cos(xv), rtol=1e-12)


# ---- integer dtypes with needs_grad / needs_dual ---------------------------------------

@pytest.mark.parametrize("make,kind,flag", [
    (lambda: jr.ndarray(jr.i32, shape=3, needs_grad=True), "ndarray", "needs_grad"),
    (lambda: jr.ndarray(jr.math.ivec2, shape=3, needs_dual=True), "ndarray", "needs_dual"),
    (lambda: jr.field(jr.i32, shape=3, needs_grad=True), "field", "needs_grad"),
    (lambda: jr.Vector.field(2, jr.i32, shape=3, needs_dual=True), "field", "needs_dual"),
    (lambda: jr.field(jr.i32, needs_grad=True), "field", "needs_grad"),     # placed later
])
def test_an_integer_dtype_with_a_gradient_or_dual_is_refused(make, kind, flag):
    with pytest.raises(jr.FloatDtypeError,
                       match=f"i32 is not supported for {kind} with `needs_grad=True` or "
                             f"`needs_dual=True`: {flag}=True needs a float dtype") as info:
        make()
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)


def test_the_refusal_names_named_data():
    with pytest.raises(TypeError, match="u8 is not supported for ndarray with `needs_grad=True` "
                                        r"or `needs_dual=True` \(ndarray 'mask'\)"):
        jr.ndarray(jr.u8, shape=3, needs_dual=True, name="mask")


# ---- comparing a vector/matrix element at Python scope -------------------------------

@pytest.fixture(params=["vector field", "vector ndarray"])
def vectors(request):
    if request.param == "vector field":
        return jr.Vector.field(2, jr.f32, shape=N)
    return jr.ndarray(jr.math.vec2, shape=N)


def test_an_element_comparison_is_true_when_every_component_agrees(vectors):
    @jr.kernel
    def fill(p: jr.template()):
        for i in range(N):
            p[i] = jr.Vector([i * 2.0, i * 3.0])

    @jr.kernel
    def fill_nd(p: jr.types.ndarray()):
        for i in p:
            p[i] = jr.Vector([i * 2.0, i * 3.0])

    (fill_nd if isinstance(vectors, jr.Ndarray) else fill)(vectors)
    for i in range(N):
        assert vectors[i] == [2 * i, 3 * i]
        assert [2 * i, 3 * i] == vectors[i]
        assert not (vectors[i] == [2 * i, 3 * i + 1])
        assert vectors[i] != [2 * i, 3 * i + 1]        # != : any component differs
        assert not (vectors[i] != [2 * i, 3 * i])
        assert vectors[i] <= [2 * i, 3 * i] and not (vectors[i] < [2 * i, 3 * i])
        assert vectors[i] == vectors[i]
    assert vectors[1] > 1.0 and not (vectors[1] > 2.0)   # scalars broadcast


def test_an_element_comparison_is_a_numpy_bool_array(vectors):
    vectors[1] = [1.0, 5.0]
    c = vectors[1] == [1.0, 4.0]
    assert isinstance(c, np.ndarray) and c.dtype == np.bool_
    np.testing.assert_array_equal(c, [True, False])
    assert repr(c) == repr(np.array([True, False])) and str(c) == "[ True False]"
    # numpy operations on it follow numpy's rules (plain arrays, no truth value)
    for derived in (~c, c & c, np.logical_not(c)):
        assert type(derived) is np.ndarray
        with pytest.raises(ValueError, match="truth value"):
            bool(derived)
    assert c.all() == np.False_ and c.any() == np.True_ and int(np.sum(c)) == 1
    # arithmetic on an element gives a jr.Vector (Taichi's Matrix, a numpy array underneath);
    # to_numpy and np.asarray give plain arrays
    assert type(vectors[1] + 1) is jr.Vector and type(np.asarray(vectors[1])) is np.ndarray
    np.testing.assert_array_equal(vectors[1] * 2, [2.0, 10.0])
    assert type(vectors.to_numpy()) is np.ndarray and vectors.to_numpy().shape == (N, 2)


def test_matrix_element_comparisons():
    m = jr.Matrix.field(2, 2, jr.f64, shape=2)
    m[0] = [[1, 2], [3, 4]]
    assert m[0] == [[1, 2], [3, 4]]
    assert m[0] != [[1, 2], [3, 5]] and not (m[0] == [[1, 2], [3, 5]])
    assert m[0][1] == [3, 4] and m[0][1] != [3, 3]       # a row
    assert (m[0] == [[1, 2], [3, 5]])[0]                 # a row of the comparison
