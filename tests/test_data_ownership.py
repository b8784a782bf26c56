"""Copies own their memory, shapes are fixed, layouts refuse what Taichi refuses (issue 30).

`copy.deepcopy`, `copy.copy` and `pickle` of a field or ndarray give a new one with its own
buffer (writes to the copy leave the original alone, a copy's gradient is its own, an ndarray
unpickled in another process runs kernels); assigning `shape`, `dtype` or `element_shape` is
an AttributeError; `dense` refuses extents that are not positive integers and an axis named
twice in one level.
"""
import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


@jr.kernel
def add_one(a: nd(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] += 1.0


def test_deepcopy_of_an_ndarray_owns_its_memory():
    a = jr.ndarray(jr.f32, shape=4)
    a.from_numpy(np.arange(4, dtype=np.float32))
    for b in (copy.deepcopy(a), copy.copy(a), pickle.loads(pickle.dumps(a))):
        assert b is not a and b.shape == a.shape and b.dtype == a.dtype
        np.testing.assert_array_equal(b.to_numpy(), [0, 1, 2, 3])
        b[0] = 9.0                                    # host write
        add_one(b)                                    # kernel write
        np.testing.assert_array_equal(b.to_numpy(), [10, 2, 3, 4])
        np.testing.assert_array_equal(a.to_numpy(), [0, 1, 2, 3])


def test_deepcopy_of_a_field_and_its_gradient():
    x = jr.field(jr.f32, shape=3, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    y = copy.deepcopy(x)
    assert y.grad is not None and y.grad is not x.grad

    @jr.kernel
    def square_sum(f: jr.template()):
        for i in f:
            loss[None] += f[i] * f[i]

    with jr.ad.Tape(loss=loss):
        square_sum(y)
    np.testing.assert_allclose(y.grad.to_numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(x.grad.to_numpy(), [0.0, 0.0, 0.0])
    y[0] = 5.0
    assert x[0] == 1.0
    both = copy.deepcopy([x, x.grad])                 # copied together: one gradient
    assert both[0].grad is both[1]


def test_copies_keep_vector_elements_and_names():
    v = jr.Vector.field(3, jr.f32, shape=2, name="v")
    v[1] = [1.0, 2.0, 3.0]
    w = pickle.loads(pickle.dumps(v))
    assert w.n == 3 and w.name == "v" and w.to_numpy().shape == (2, 3)
    np.testing.assert_array_equal(w.to_numpy()[1], [1.0, 2.0, 3.0])
    w[1] = [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(v.to_numpy()[1], [1.0, 2.0, 3.0])


def test_a_field_without_a_shape_refuses_a_copy():
    p = jr.field(jr.f32)
    with pytest.raises(TypeError, match="has no shape yet: place it"):
        copy.deepcopy(p)
    with pytest.raises(TypeError, match="has no shape yet: place it"):
        pickle.dumps(p)


def test_an_ndarray_unpickled_in_another_process_runs_a_kernel(tmp_path):
    a = jr.ndarray(jr.f32, shape=3)
    a.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    blob = tmp_path / "a.pkl"
    blob.write_bytes(pickle.dumps(a))
    script = f"""
import pickle, jitrt as jr
jr.init(offline_cache=False)
a = pickle.loads(open({str(blob)!r}, 'rb').read())

@jr.kernel
def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] *= 2.0

twice(a)
print(a.to_numpy().tolist())
"""
    (tmp_path / "child.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(tmp_path / "child.py")], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[2.0, 4.0, 6.0]"


@pytest.mark.parametrize("make", [
    lambda: jr.field(jr.f32, shape=4),
    lambda: jr.ndarray(jr.f32, shape=4),
    lambda: jr.Vector.field(2, jr.f32, shape=4),
])
def test_shape_and_dtype_are_read_only(make):
    x = make()
    shape = x.shape
    with pytest.raises(AttributeError, match=r"the shape of (field|ndarray) .* cannot be "
                       r"changed"):
        x.shape = (1000,)
    with pytest.raises(AttributeError, match="the dtype of .* cannot be changed"):
        x.dtype = jr.f64
    with pytest.raises(AttributeError, match="the element_shape of .* cannot be changed"):
        x.element_shape = (7,)
    assert x.shape == shape and x.dtype == jr.f32


def test_struct_field_shape_is_read_only():
    s = jr.Struct.field({"a": jr.f32}, shape=3)
    with pytest.raises(AttributeError, match="cannot be changed"):
        s.shape = (10,)
    assert s.shape == (3,)


@pytest.mark.parametrize("axes, extents, error, words", [
    (jr.i, True, TypeError, "positive integer or a tuple"),
    (jr.i, "4", TypeError, "positive integer or a tuple"),
    (jr.i, 2.0, TypeError, "positive integer or a tuple"),
    (jr.ij, (2, "3"), TypeError, "every extent must be a positive integer, got '3'"),
    (jr.ij, (2, False), TypeError, "every extent must be a positive integer, got False"),
    (jr.i, 0, ValueError, "every extent must be a positive integer, got 0"),
    (jr.i, -3, ValueError, "every extent must be a positive integer, got -3"),
    ((jr.i, jr.i), (2, 3), ValueError, "axis i is named twice"),
    ((0, 1, 0), 2, ValueError, "axis i is named twice"),
])
def test_dense_refuses_bad_extents_and_repeated_axes(axes, extents, error, words):
    with pytest.raises(error, match=words):
        jr.root.dense(axes, extents)


def test_dense_accepts_axis_tuples_and_numpy_ints():
    assert jr.root.dense((jr.i, jr.j), (2, 3)).shape == (2, 3)
    assert jr.root.dense(jr.ij, np.int64(4)).shape == (4, 4)
    assert jr.root.dense(jr.i, 2).dense(jr.i, 3).shape == (6,)
