"""Field offsets, as in Taichi's `offset=` (issue 29; Taichi's tests/python/test_offset.py).

A field's indices run from its offset: `for i, j in x` covers the offset range, `x[i]` in
kernels and at Python scope takes the user's index, bounds errors name it, `to_numpy()` and
`from_numpy()` see the storage unchanged, gradients and the offline cache work.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import jitrt as jr


def test_offsets_in_loops_and_python_scope():
    n, m = 6, 3
    x = jr.field(jr.i32, shape=(n, m), offset=(-n // 2, 0))
    assert x.shape == (n, m) and x.offset == (-3, 0)

    @jr.kernel
    def fill():
        for i, j in x:
            x[i, j] = i * 10 + j

    fill()
    for i in range(-3, 3):
        for j in range(m):
            assert x[i, j] == i * 10 + j
    np.testing.assert_array_equal(x.to_numpy()[0], [-30, -29, -28])   # storage order
    x[-3, 0] = 7
    assert x.to_numpy()[0, 0] == 7
    x.from_numpy(np.zeros((n, m), np.int32))
    assert x[2, 2] == 0
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for axis 0 with indices "
                       r"-3..2 \(offset -3\)"):
        x[3, 0]
    with pytest.raises(IndexError, match="index -4 is out of bounds"):
        x[-4, 0] = 1


def test_huge_and_negative_offsets_from_place():
    a = jr.field(jr.i32)
    offset = 1024, 2048, -2100
    jr.root.dense(jr.ijk, 4).place(a, offset=offset)

    @jr.kernel
    def fill():
        for i, j, k in a:
            a[i, j, k] = i + j * 10 + k * 100

    fill()
    for i in range(1024, 1028):
        for k in range(-2100, -2096):
            assert a[i, 2049, k] == i + 2049 * 10 + k * 100
    b = jr.field(jr.f32)                      # a gradient placed with its field
    jr.root.dense(jr.i, 3).place(b, offset=-7)
    assert b.offset == b.grad.offset == (-7,)


def test_vector_and_matrix_fields_with_offsets():
    c = jr.Vector.field(n=2, dtype=jr.i32, shape=16, offset=16)
    b = jr.Matrix.field(3, 3, shape=(4, 4), offset=(-4, 4), dtype=jr.f32)

    @jr.kernel
    def fill():
        for i in c:
            c[i][0] = 2 * i
        for i, j in b:
            b[i, j][0, 0] = i + j
        for g in jr.grouped(c):
            c[g][1] = g[0]

    fill()
    for i in range(16, 32):
        assert c[i][0] == 2 * i and c[i][1] == i
    for i in range(-4, 0):
        for j in range(4, 8):
            assert b[i, j][0, 0] == i + j


def test_kernel_bounds_errors_name_the_users_index():
    x = jr.field(jr.f32, shape=8, offset=-4)

    @jr.kernel
    def put(k: jr.i32):
        x[k] = 1.0

    put(-4)
    put(3)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 4 out of bounds on axis 0 of 'x' "
                       r"\(write\) \(its indices on axis 0 start at -4\)"):
        put(4)
        jr.sync()             # a GPU reports the fault at the next synchronisation
    with pytest.raises(jr.KernelRuntimeError, match="index -5 out of bounds"):
        put(-5)
        jr.sync()
    np.testing.assert_array_equal(x.to_numpy(), [1, 0, 0, 0, 0, 0, 0, 1])


def test_gradients_through_offset_fields():
    x = jr.field(jr.f64, shape=5, offset=-2, needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(5.0))

    @jr.kernel
    def energy():
        for i in x:
            loss[None] += x[i] * x[i] * i

    with jr.ad.Tape(loss=loss):
        energy()
    # loss = sum x_i^2 * i over user indices -2..2; d/dx_i = 2 x_i i
    users = np.arange(-2, 3)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(5.0) * users)
    assert x.grad[2] == pytest.approx(2 * 4.0 * 2)


def test_adstack_sized_from_an_offset_field():
    """A differentiated inner loop whose trip count reads an offset field: the max-reducer
    runs over the user's indices and reads the storage (a capacity too small would raise
    AdStackOverflowError, a wrong element would give another gradient)."""
    n = 6
    x = jr.field(jr.f64, shape=n, offset=-3, needs_grad=True)
    cnt = jr.field(jr.i32, shape=n, offset=-3)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def recurrence():
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = v * 0.5 + 1.0
            loss[None] += v

    x.from_numpy(np.linspace(0.1, 0.6, n))
    cnt.from_numpy(np.array([1, 2, 3, 4, 5, 9], np.int32))
    with jr.ad.Tape(loss=loss):
        recurrence()
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 ** np.array([1, 2, 3, 4, 5, 9]))
    specs = [s for info in jr.debug.sizing_infos(recurrence, grad=True)
             for s in info.max_reducer_specs]
    assert specs and specs[0].begin.value == -3 and specs[0].end.value == 3


def test_offset_errors_in_taichis_words():
    with pytest.raises(ValueError, match="The dimensionality of shape and offset must be "
                       "the same"):
        jr.field(jr.f32, shape=3, offset=(3, 4))
    with pytest.raises(ValueError, match="The dimensionality of shape and offset must be "
                       "the same"):
        jr.Matrix.field(3, 3, dtype=jr.i32, shape=(32, 16, 8), offset=(32, 16))
    with pytest.raises(ValueError, match="shape cannot be None when offset is set"):
        jr.Vector.field(3, dtype=jr.f32, shape=None, offset=(3,))
    with pytest.raises(ValueError, match="shape cannot be None when offset is set"):
        jr.field(jr.f32, offset=(3, 4))
    p = jr.field(jr.f32)
    jr.root.dense(jr.i, 4).place(p, offset=2)
    with pytest.raises(ValueError, match=r"already placed with shape \(4,\) \(offset \(2,\)\)"):
        jr.root.dense(jr.i, 4).place(p)
    for offset in (None, (0, 0), (-23333, -23333), (23333, 23333)):
        val = jr.field(jr.f32, shape=(3, 3), offset=offset)
        val.fill(1.0)
        np.testing.assert_array_equal(val.to_numpy(), np.ones((3, 3), np.float32))


def test_copies_keep_the_offset():
    import copy
    x = jr.field(jr.f32, shape=4, offset=-2)
    x[-2] = 3.0
    y = copy.deepcopy(x)
    assert y.offset == (-2,) and y[-2] == 3.0


PROGRAM = """
import sys, json
import numpy as np
import jitrt as jr
jr.init(offline_cache=True, offline_cache_dir=sys.argv[1])
x = jr.field(jr.i32, shape=4, offset=int(sys.argv[2]))

@jr.kernel
def fill():
    for i in x:
        x[i] = i

fill()
print(json.dumps([x.to_numpy().tolist(), jr.debug.stats()["compiles"]]))
"""


def test_the_offline_cache_tells_offsets_apart(tmp_path):
    """Two processes with the same source and another offset must not share the kernel; a
    third with the first offset reuses the first's."""
    script = tmp_path / "offsets.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def run(offset: int) -> list:
        out = subprocess.run([sys.executable, str(script), str(tmp_path / "cache"),
                              str(offset)], capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        import json
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert run(10) == [[10, 11, 12, 13], 1]
    assert run(-2) == [[-2, -1, 0, 1], 1]
    assert run(10) == [[10, 11, 12, 13], 0]
