"""Lists in kernels are Python lists, as in Taichi (frontend/lists.py): `+` of two lists
concatenates and `*` by an int repeats, also through a local assigned a list; used with a
vector or a run-time scalar, stored or converted, a list is the vector of its items."""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def joined(out: nd(dtype=jr.f32, ndim=1), t: jr.f32):
    a = [t, 2.0]
    b = a + [3.0, 4.0]                # concatenation, not addition
    c = a * 2                         # repetition, not scaling
    d = 3 * [t]
    out[0] = len(b) * 100 + len(c) * 10 + len(d)
    s = 0.0
    for q in jr.static(b):            # iterates over the items
        s += q
    out[1] = s
    out[2] = c[2] + c[3] * 10 + b[3] * 100


@jr.kernel
def as_vector(out: nd(dtype=jr.f32, ndim=1), t: jr.f32):
    a = [t, 2.0]
    v = a + jr.Vector([10.0, 20.0])   # with a vector: element-wise, as Taichi converts it
    w = a * t                         # by a run-time scalar: scales
    u = jr.Vector(a)
    out[0] = v[0] + v[1] * 10
    out[1] = w[0] + w[1] * 10
    out[2] = u.dot(u)


@jr.func
def total(v):
    return v.sum()


@jr.kernel
def stored(x: jr.template(), t: jr.f32) -> jr.f32:
    x[0] = [t, t + 1.0, t + 2.0]      # into a vector field: converted
    return total([t, 1.0])


@jr.kernel
def rebound(out: nd(dtype=jr.f32, ndim=1), t: jr.f32):
    e = [t]
    e = e + [5.0]                     # the name now holds a list of two, as Python rebinds it
    m = [[t, 1.0], [2.0, 3.0]] + [[4.0, 5.0]]
    out[0] = len(e) * 10 + e[1]
    out[1] = len(m) * 10 + m[2][1]


def test_plus_concatenates_and_times_repeats_lists():
    out = np.zeros(3, np.float32)
    joined(out, 1.0)
    assert out.tolist() == [443.0, 10.0, 1.0 + 20.0 + 400.0]


def test_a_list_with_a_vector_or_a_scalar_is_a_vector():
    out = np.zeros(3, np.float32)
    as_vector(out, 3.0)
    assert out.tolist() == [13.0 + 220.0, 9.0 + 60.0, 13.0]


def test_a_list_stored_or_passed_to_a_func_is_a_vector():
    x = jr.Vector.field(3, jr.f32, shape=1)
    assert stored(x, 1.0) == 2.0
    assert x.to_numpy().tolist() == [[1.0, 2.0, 3.0]]


def test_a_name_assigned_a_longer_list_is_rebound():
    out = np.zeros(2, np.float32)
    rebound(out, 1.0)
    assert out.tolist() == [25.0, 35.0]


@jr.kernel
def show(k: jr.f32):
    w = [k, (2, 3)]
    print(w + [3])


def test_print_of_a_list_of_mixed_items(capfd):
    capfd.readouterr()
    show(1.5)
    jr.sync()
    assert capfd.readouterr().out == "[1.500000, [2, 3], 3]\n"


@jr.kernel
def mixed_as_vector(a: nd(dtype=jr.f32, ndim=1)):
    t = [jr.Vector([a[0], a[0]]), a[0]]
    a[0] = jr.Vector(t).sum()


def test_a_list_of_mixed_items_is_not_a_vector():
    with pytest.raises(jr.KernelCompileError, match="neither a vector nor a matrix"):
        mixed_as_vector(np.zeros(1, np.float32))


@jr.func
def grown(v):
    return len(v + [1.0])


@jr.func
def grown_vec(v: jr.types.vector(2, jr.f32)):
    return len(v + [1.0, 2.0])


@jr.kernel
def through_funcs(t: jr.f32) -> jr.i32:
    return grown([t, t]) * 10 + grown_vec([t, t])


def test_an_unannotated_func_parameter_keeps_the_list():
    assert through_funcs(1.0) == 32     # 3 items; the annotated one adds: 2 components


@jr.kernel
def built(t: jr.i32) -> jr.i32:
    m = jr.Matrix([[2, 3], [4, t]])   # a matrix built from a list is no list
    m += jr.Matrix([[3, 4], [5, t]])
    v = jr.Vector([t, 1])
    v += [1, 1]                       # a vector plus a list adds
    return m[1, 1] * 100 + v[0] * 10 + v[1]


def test_a_vector_or_matrix_built_from_a_list_adds():
    assert built(5) == 1000 + 60 + 2


@jr.kernel
def tuples(t: jr.f32) -> jr.f32:
    a = (t, 2.0)
    b = a + (3.0, 4.0)                # tuples concatenate too
    c = a * 2
    d = (t, t) + jr.Vector([1.0, 1.0])
    return len(b) * 1000 + len(c) * 100 + d[0] + b[3] * 10


def test_tuples_concatenate_and_repeat_too():
    assert tuples(1.0) == 4000 + 400 + 2.0 + 40
