"""`jr.algorithms.parallel_sort(keys, values=None)` (Taichi's `ti.algorithms.parallel_sort`):
keys sorted ascending in place, values permuted alike, for fields (offsets too) and
ndarrays; what is not a 1-D buffer of scalar keys is refused."""
import numpy as np
import pytest

import jitrt as jr


SIZES = [(1, 0), (2, -1), (13, 3), (256, 0), (1000, -23333)]


# every size and offset with one key type, and every key type with the largest (each case
# compiles the stage kernel for its own fields: the full product was 20 compiles)
@pytest.mark.parametrize("dtype,n,offset", [(jr.f32, n, offset) for n, offset in SIZES] + [
    (dtype, 1000, -23333) for dtype in (jr.i32, jr.i64, jr.f64)])
def test_field_keys_sorted_and_values_moved_with_them(dtype, n, offset, rng):
    keys = jr.field(dtype, n, offset=offset)
    values = jr.field(jr.i32, n, offset=offset)
    a = (rng.random(n) * n - n / 2).astype(dtype.np)
    keys.from_numpy(a)
    values.from_numpy(np.arange(n, dtype=np.int32))     # where each key came from
    jr.algorithms.parallel_sort(keys, values)
    k, v = keys.to_numpy(), values.to_numpy()
    np.testing.assert_array_equal(k, np.sort(a))
    np.testing.assert_array_equal(a[v], k)              # each value followed its key
    assert sorted(v.tolist()) == list(range(n))


def test_keys_alone_and_ndarrays_with_vector_values():
    k = jr.field(jr.i32, 7)
    k.from_numpy(np.array([3, -1, 7, 7, 0, 2, -5], np.int32))
    gen = k.gen
    jr.algorithms.parallel_sort(k)
    assert k.to_numpy().tolist() == [-5, -1, 0, 2, 3, 7, 7] and k.gen > gen
    keys = jr.ndarray(jr.u32, 5)
    keys.from_numpy(np.array([5, 3, 4, 1, 2], np.uint32))
    vals = jr.Vector.ndarray(2, jr.f32, 5)
    vals.from_numpy(np.arange(10, dtype=np.float32).reshape(5, 2))
    jr.algorithms.parallel_sort(keys, vals)
    assert keys.to_numpy().tolist() == [1, 2, 3, 4, 5]
    assert vals.to_numpy().tolist() == [[6, 7], [8, 9], [2, 3], [4, 5], [0, 1]]


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="keys must be a 1-D field or ndarray of scalars"):
        jr.algorithms.parallel_sort(jr.field(jr.i32, (2, 2)))
    with pytest.raises(TypeError, match="keys must be a 1-D"):
        jr.algorithms.parallel_sort(jr.Vector.field(2, jr.i32, 4))
    with pytest.raises(TypeError, match=r"values must be a 1-D field \(as the keys\) of shape"):
        jr.algorithms.parallel_sort(jr.field(jr.i32, 4), jr.field(jr.i32, 5))
    with pytest.raises(ValueError, match="give both the same offset"):
        jr.algorithms.parallel_sort(jr.field(jr.i32, 4, offset=1), jr.field(jr.i32, 4))
