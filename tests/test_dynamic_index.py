"""Run-time indices into vectors and matrices (Taichi's `dynamic_index=True`): `v[k]`,
`m[i, j]`, `m[i]` of values in registers (a select over the components) and `x[i][k]` of
fields and ndarrays of vectors (one more index into memory); values against numpy,
out-of-range indices, and gradients in both modes against central finite differences (f64).
"""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray
H = 1e-6
FD = {"rtol": 1e-6, "atol": 1e-8}


# ---- values -----------------------------------------------------------------------------------

def test_reads_and_writes_of_vector_and_matrix_locals():
    out = jr.field(jr.f64, shape=(3, 8))

    @jr.kernel
    def k():
        for j in range(3):
            v = jr.Vector([1.0, 2.0, 3.0])
            a = jr.Matrix([[1.0, 2.0], [3.0, 4.0]])
            out[j, 0] = v[j]
            v[j] = 10.0
            out[j, 1] = v[0] * 100 + v[1] * 10 + v[2]
            v[j] += 1.0
            out[j, 2] = v.sum()
            r = j % 2
            out[j, 3] = a[r, 1 - r]                 # both indices at run time
            row = a[r]                               # a row
            out[j, 4] = row[0] * 10 + row[1]
            a[r] = [7.0, 8.0]                        # a whole row
            out[j, 5] = a[0, 0] * 1000 + a[0, 1] * 100 + a[1, 0] * 10 + a[1, 1]
            a[r, 0] *= 2.0
            out[j, 6] = a[r, 0]
            out[j, 7] = a[r][1 - r]                  # a run-time row, then a component
    k()
    got = out.to_numpy()
    for j in range(3):
        v = np.array([1.0, 2.0, 3.0])
        a = np.array([[1.0, 2.0], [3.0, 4.0]])
        want = [v[j]]
        v[j] = 10.0
        want.append(v[0] * 100 + v[1] * 10 + v[2])
        v[j] += 1.0
        want.append(v.sum())
        r = j % 2
        want += [a[r, 1 - r], a[r][0] * 10 + a[r][1]]
        a[r] = [7.0, 8.0]
        want.append(a[0, 0] * 1000 + a[0, 1] * 100 + a[1, 0] * 10 + a[1, 1])
        a[r, 0] *= 2.0
        want += [a[r, 0], a[r][1 - r]]
        np.testing.assert_array_equal(got[j], want, err_msg=f"j={j}")


def test_an_index_read_from_data_and_a_64_bit_index():
    idx = jr.field(jr.i32, shape=6)
    big = jr.field(jr.i64, shape=6)
    out = jr.field(jr.f32, shape=(6, 2))
    idx.from_numpy(np.array([2, 0, 1, 1, 0, 2], np.int32))
    big.from_numpy(np.array([1, 2, 0, 0, 2, 1], np.int64))

    @jr.kernel
    def k():
        for i in range(6):
            v = jr.math.vec3(i, 10 * i, 100 * i)
            out[i, 0] = v[idx[i]]
            out[i, 1] = v[big[i]] + jr.Vector([5.0, 6.0, 7.0])[idx[i]]
    k()
    i = np.arange(6)
    table = np.stack([i, 10 * i, 100 * i], axis=1).astype(np.float32)
    want0 = table[i, idx.to_numpy()]
    want1 = table[i, big.to_numpy()] + np.array([5.0, 6.0, 7.0])[idx.to_numpy()]
    np.testing.assert_array_equal(out.to_numpy(), np.stack([want0, want1], axis=1))


def test_components_of_field_and_ndarray_elements():
    vf = jr.Vector.field(3, jr.f32, shape=4)
    mf = jr.Matrix.field(2, 3, jr.f32, shape=4)
    out = jr.field(jr.f32, shape=(4, 3))

    @jr.kernel
    def k(a: nd(dtype=jr.math.vec3, ndim=1)):
        for i in range(4):
            for c in range(3):
                vf[i][c] = i * 10 + c                # a write straight into memory
                mf[i][i % 2, c] = vf[i][c] + 0.5     # two indices, one at run time
                a[i][c] += c * 1.0                   # atomic add into an ndarray
            r = i % 2
            out[i, 0] = mf[i][r, 2 - r] + a[i][2 - r]
            row = mf[i][r]                           # a run-time row of a field element
            out[i, 1] = row[0] + row[1] + row[2]
            out[i, 2] = jr.atomic_add(vf[i][r], 100.0)   # the old value
    a = np.ones((4, 3), np.float32)
    k(a)
    want_v = np.array([[i * 10 + c for c in range(3)] for i in range(4)], np.float32)
    want_m = np.zeros((4, 2, 3), np.float32)
    for i in range(4):
        want_m[i, i % 2] = want_v[i] + 0.5
    want_a = 1.0 + np.arange(3, dtype=np.float32)[None, :].repeat(4, 0)
    np.testing.assert_array_equal(mf.to_numpy(), want_m)
    np.testing.assert_array_equal(a, want_a)
    for i in range(4):
        r = i % 2
        assert out[i, 0] == want_m[i, r, 2 - r] + want_a[i, 2 - r]
        assert out[i, 1] == want_m[i, r].sum()
        assert out[i, 2] == want_v[i, r]
        want_v[i, r] += 100.0
    np.testing.assert_array_equal(vf.to_numpy(), want_v)


def test_an_index_with_a_side_effect_is_evaluated_once():
    counter = jr.field(jr.i32, shape=())
    out = jr.field(jr.f32, shape=4)

    @jr.kernel
    def k():
        for _ in range(1):
            v = jr.math.vec4(0.0, 1.0, 2.0, 3.0)
            for j in range(4):
                v[jr.atomic_add(counter[None], 1) % 4] += 10.0
            for j in range(4):
                out[j] = v[j]
    k()
    assert counter[None] == 4
    np.testing.assert_array_equal(out.to_numpy(), [10.0, 11.0, 12.0, 13.0])


# ---- out of range -------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [3, -1, 1 << 20])
def test_an_out_of_range_read_of_a_value_gives_0_and_raises(bad):
    out = jr.field(jr.f32, shape=2)

    @jr.kernel
    def k(j: jr.i32):
        for _ in range(1):
            v = jr.math.vec3(1.0, 2.0, 3.0)
            out[0] = v[j] + 5.0
    with pytest.raises(jr.KernelRuntimeError, match=r"index \[j\] out of range for a "
                       r"3-component vector .*the read gave 0") as info:
        k(bad)
        jr.sync()                    # a GPU reports faults at the next synchronisation
    assert "out[0] = v[j] + 5.0" in str(info.value)
    assert out[0] == 5.0
    k(2)                                       # the program stays usable
    assert out[0] == 8.0


def test_an_out_of_range_write_of_a_value_writes_nothing_and_raises():
    out = jr.field(jr.f32, shape=4)

    @jr.kernel
    def k(i: jr.i32, j: jr.i32):
        for _ in range(1):
            m = jr.Matrix([[1.0, 2.0], [3.0, 4.0]])
            m[i, j] = 9.0
            for r, c in jr.static(jr.ndrange(2, 2)):
                out[r * 2 + c] = m[r, c]
    # (0, 2) would be the flat position of m[1, 0]: each axis is checked on its own
    for i, j in ((0, 2), (2, 0), (-1, 1)):
        with pytest.raises(jr.KernelRuntimeError, match=r"2x2 matrix .*nothing was written"):
            k(i, j)
            jr.sync()
        np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.0, 3.0, 4.0])
    k(1, 0)
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.0, 9.0, 4.0])


def test_an_out_of_range_component_of_a_field_element_is_a_bounds_error():
    x = jr.Vector.field(3, jr.f32, shape=2)
    out = jr.field(jr.f32, shape=())

    @jr.kernel
    def read(j: jr.i32):
        for i in range(1):
            out[None] = x[i][j]

    @jr.kernel
    def write(j: jr.i32):
        for i in range(1):
            x[i][j] = 7.0
    x.fill(1.0)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 3 out of bounds on axis 1 of 'x' "
                       r"\(read\)"):
        read(3)
        jr.sync()
    with pytest.raises(jr.KernelRuntimeError, match=r"index -1 out of bounds on axis 1 of 'x' "
                       r"\(write\)"):
        write(-1)
        jr.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.ones((2, 3)))   # x[1][0] is untouched


# ---- compile-time errors ------------------------------------------------------------------------

def test_a_float_index_is_a_located_compile_error():
    @jr.kernel
    def k(t: jr.f32) -> jr.f32:
        v = jr.math.vec3(1.0, 2.0, 3.0)
        return v[t]
    with pytest.raises(jr.KernelCompileError, match="index must be an integer.*got a f32 value"
                       ) as info:
        k(1.0)
    assert info.value.line == k.fn.__code__.co_firstlineno + 3


def test_too_many_indices_is_a_compile_error():
    @jr.kernel
    def k(j: jr.i32) -> jr.f32:
        v = jr.math.vec3(1.0, 2.0, 3.0)
        return v[j, j]
    with pytest.raises(jr.KernelCompileError, match="too many indices"):
        k(1)


# ---- gradients ----------------------------------------------------------------------------------

N = 5
PICK = np.array([[2, 0], [1, 1], [0, 2], [1, 0], [2, 1]], np.int32)


def dynamic_fields(needs_dual=False):
    x = jr.field(jr.f64, shape=(N, 3), needs_grad=True, needs_dual=needs_dual)
    w = jr.Vector.field(2, jr.f64, shape=N, needs_grad=True, needs_dual=needs_dual)
    y = jr.field(jr.f64, shape=N, needs_grad=True, needs_dual=needs_dual)
    pick = jr.field(jr.i32, shape=(N, 2))
    pick.from_numpy(PICK)
    return x, w, y, pick


def dynamic_kernel(x, w, y, pick):
    @jr.kernel
    def k():
        for i in range(N):
            v = jr.Vector([x[i, 0], x[i, 1] * x[i, 0], jr.sin(x[i, 2])])
            a, b = pick[i, 0], pick[i, 1]
            m = jr.Matrix([[v[0], v[1]], [v[2], v[a]]])
            v[b] = v[a] * w[i][b % 2] + m[b % 2, a % 2]     # a write at a run-time index
            s: jr.f64 = 0.0
            for j in range(3):                              # a loop: adstacks
                s += v[(a + j) % 3] * w[i][j % 2] ** 2
            m[a % 2] = [s, v[b]]                            # a run-time row
            y[i] = m[1, 0] * m[0, 1] + jr.cos(m[a % 2, b % 2])
    return k


def reference(xv, wv):
    out = np.zeros(N)
    for i in range(N):
        v = [xv[i, 0], xv[i, 1] * xv[i, 0], np.sin(xv[i, 2])]
        a, b = PICK[i]
        m = np.array([[v[0], v[1]], [v[2], v[a]]])
        v[b] = v[a] * wv[i, b % 2] + m[b % 2, a % 2]
        s = sum(v[(a + j) % 3] * wv[i, j % 2] ** 2 for j in range(3))
        m[a % 2] = [s, v[b]]
        out[i] = m[1, 0] * m[0, 1] + np.cos(m[a % 2, b % 2])
    return out


def fd_gradient(run, f, seed):
    """d(seed . run()) / d f by central differences, one entry at a time."""
    base = f.to_numpy()
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        for sign in (1.0, -1.0):
            bumped = base.copy()
            bumped[idx] += sign * H
            f.from_numpy(bumped)
            grad[idx] += sign * float(seed @ run()) / (2 * H)
    f.from_numpy(base)
    return grad


def test_reverse_mode_through_run_time_indices_matches_finite_differences(rng):
    x, w, y, pick = dynamic_fields()
    k = dynamic_kernel(x, w, y, pick)
    x.from_numpy(rng.uniform(0.5, 1.5, (N, 3)))
    w.from_numpy(rng.uniform(0.5, 1.5, (N, 2)))
    k()
    np.testing.assert_allclose(y.to_numpy(), reference(x.to_numpy(), w.to_numpy()),
                               rtol=1e-12)
    seed = rng.uniform(-1, 1, N)

    def run():
        k()
        return y.to_numpy()
    want_x, want_w = fd_gradient(run, x, seed), fd_gradient(run, w, seed)
    k()
    x.grad.fill(0)
    w.grad.fill(0)
    y.grad.from_numpy(seed)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), want_x, **FD)
    np.testing.assert_allclose(w.grad.to_numpy(), want_w, **FD)
    assert np.abs(want_x).max() > 0.1 and np.abs(want_w).max() > 0.1   # not vacuous


def test_forward_mode_through_run_time_indices_matches_finite_differences(rng):
    x, w, y, pick = dynamic_fields(needs_dual=True)
    k = dynamic_kernel(x, w, y, pick)
    x.from_numpy(rng.uniform(0.5, 1.5, (N, 3)))
    w.from_numpy(rng.uniform(0.5, 1.5, (N, 2)))
    u = rng.uniform(-1, 1, (N, 3))
    with jr.ad.FwdMode(loss=y, param=x, seed=u.ravel().tolist()):
        k()
    got = y.dual.to_numpy()
    base = x.to_numpy()
    outs = []
    for sign in (1.0, -1.0):
        x.from_numpy(base + sign * H * u)
        k()
        outs.append(y.to_numpy())
    x.from_numpy(base)
    np.testing.assert_allclose(got, (outs[0] - outs[1]) / (2 * H), **FD)


def test_gradients_of_run_time_components_of_field_elements(rng):
    """Taichi's test_matrix_non_constant_index, and a read and a write in one kernel: the
    adjoint goes to the component the index named."""
    m = jr.Matrix.field(2, 2, jr.f64, 5, needs_grad=True)
    src = jr.Matrix.field(2, 2, jr.f64, 5, needs_grad=True)
    loss = jr.field(jr.f64, (), needs_grad=True)

    @jr.kernel
    def k():
        for i in range(5):
            for j, c in jr.ndrange(2, 2):
                m[i][j, c] = (j + 1) * (c + 1) * src[i][j, c] ** 2
                loss[None] += m[i][j, c]
    src.from_numpy(rng.uniform(0.5, 1.5, (5, 2, 2)))
    loss.grad[None] = 1.0
    k.grad()
    weights = np.array([[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_allclose(src.grad.to_numpy(), 2 * weights * src.to_numpy(), rtol=1e-12)
