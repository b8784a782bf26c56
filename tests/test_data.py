"""Fields, ndarrays and the launch path as a user sees them.

Host access (`x[i]`, `to_numpy`, `from_numpy`, `fill`), generation counters (`.gen`: bumped by
host writes and by launches of kernels that write the data, never by kernels that only read
it), the `jr.debug.stats()` counters (one compile per specialization, launches counted on every
path), bound launches (`k.bind(...)`, `set_arg`) and numpy arrays passed in place of ndarrays.
"""
import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


def stats() -> dict[str, int]:
    return jr.debug.stats()


# ---- host access -------------------------------------------------------------------------------

def test_field_host_access(rng):
    x = jr.field(jr.f32, shape=(5, 3))
    assert x.shape == (5, 3) and x.dtype == jr.f32 and isinstance(x, jr.Field)
    v = rng.standard_normal((5, 3)).astype(np.float32)
    x.from_numpy(v)
    assert x[2, 1] == v[2, 1] and isinstance(x[2, 1], float)
    x[4, 0] = 7.25
    v[4, 0] = 7.25
    np.testing.assert_array_equal(x.to_numpy(), v)
    copy = x.to_numpy()
    copy[:] = 0                                   # to_numpy returns a copy
    np.testing.assert_array_equal(x.to_numpy(), v)
    x.fill(-1.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((5, 3), -1.5, np.float32))


def test_zero_dim_field_and_int_dtypes():
    s = jr.field(jr.i64, shape=())
    assert s.shape == ()
    s[None] = 2**40 + 3
    assert s[None] == 2**40 + 3 and isinstance(s[None], int)
    u = jr.field(jr.u8, shape=4)                 # an int shape means (n,)
    assert u.shape == (4,)
    u.from_numpy(np.array([0, 1, 254, 255], np.uint8))
    assert [u[i] for i in range(4)] == [0, 1, 254, 255]


def test_from_numpy_checks_shape_and_casts_within_kind(rng):
    x = jr.field(jr.f32, shape=(6,))
    with pytest.raises(ValueError, match="shape"):
        x.from_numpy(np.zeros(7, np.float32))
    v = rng.standard_normal(6)                    # float64 into f32: same kind, allowed
    x.from_numpy(v)
    np.testing.assert_allclose(x.to_numpy(), v, rtol=1e-6)
    assert x.to_numpy().dtype == np.float32
    ints = jr.field(jr.i32, shape=(6,))
    with pytest.raises(TypeError):
        ints.from_numpy(v)                        # float into int would lose data


def test_ndarray_host_access_and_kernel_use(rng):
    a = jr.ndarray(jr.i32, shape=(4, 5))
    assert isinstance(a, jr.Ndarray) and a.shape == (4, 5) and a.dtype == jr.i32
    v = rng.integers(-100, 100, (4, 5)).astype(np.int32)
    a.from_numpy(v)
    a[1, 2] = 99
    v[1, 2] = 99
    assert a[1, 2] == 99

    @jr.kernel
    def negate(m: nd(dtype=jr.i32, ndim=2)):
        for i, j in jr.ndrange(m.shape[0], m.shape[1]):
            m[i, j] = -m[i, j] + j

    negate(a)
    np.testing.assert_array_equal(a.to_numpy(), -v + np.arange(5))


def test_numpy_array_in_place_of_ndarray_writes_through(rng):
    @jr.kernel
    def scale(m: nd(dtype=jr.f64, ndim=2), k: jr.f64):
        for i, j in jr.ndrange(m.shape[0], m.shape[1]):
            m[i, j] *= k

    v = rng.standard_normal((30, 40))
    m = v.copy()
    scale(m, 3.0)
    np.testing.assert_allclose(m, v * 3, rtol=1e-15)
    m2 = v.copy()
    scale(m2, -1.0)                              # a different array on the fast path
    np.testing.assert_allclose(m2, -v, rtol=1e-15)
    np.testing.assert_allclose(m, v * 3, rtol=1e-15)


def test_needs_grad_allocates_a_gradient():
    x = jr.field(jr.f32, shape=(3,), needs_grad=True)
    assert x.grad is not None and x.grad.shape == (3,) and x.grad.dtype == jr.f32
    assert jr.field(jr.f32, shape=(3,)).grad is None
    with pytest.raises(TypeError):
        jr.field(jr.i32, shape=(3,), needs_grad=True)


# ---- generation counters --------------------------------------------------------------------

def test_host_writes_bump_generation():
    for data in (jr.field(jr.f32, shape=(4,)), jr.ndarray(jr.f32, shape=(4,))):
        g = data.gen
        data[1] = 2.0
        assert data.gen == g + 1
        data.from_numpy(np.ones(4, np.float32))
        assert data.gen == g + 2
        data.fill(3.0)
        assert data.gen == g + 3
        _ = data[1], data.to_numpy()              # reads do not bump
        assert data.gen == g + 3


def test_launches_bump_only_what_they_write():
    src = jr.field(jr.f32, shape=(8,))
    dst = jr.field(jr.f32, shape=(8,))
    acc = jr.field(jr.i32, shape=())
    untouched = jr.field(jr.f32, shape=(8,))

    @jr.kernel
    def step(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1)):
        for i in range(8):
            dst[i] = src[i] + a[i]               # writes dst and b, reads src and a
            b[i] = a[i] * 2
            jr.atomic_add(acc[None], 1)          # an atomic is a write

    @jr.kernel
    def read_only(a: nd(dtype=jr.f32, ndim=1)) -> jr.f32:
        return src[0] + dst[1] + a[2]

    a, b = jr.ndarray(jr.f32, shape=(8,)), jr.ndarray(jr.f32, shape=(8,))
    a.fill(1.0)
    src.fill(2.0)
    gens = lambda: [d.gen for d in (src, dst, acc, untouched, a, b)]  # noqa: E731
    g0 = gens()
    step(a, b)
    assert gens() == [g0[0], g0[1] + 1, g0[2] + 1, g0[3], g0[4], g0[5] + 1]
    step(a, b)                                   # the fast path bumps too
    assert gens() == [g0[0], g0[1] + 2, g0[2] + 2, g0[3], g0[4], g0[5] + 2]
    assert dst[3] == 3.0 and b[3] == 2.0 and acc[None] == 16
    g1 = gens()
    assert read_only(a) == 2.0 + 3.0 + 1.0
    assert read_only(a) == 6.0
    assert gens() == g1


def test_launch_with_numpy_array_bumps_written_ndarray_only():
    @jr.kernel
    def copy(src: nd(dtype=jr.i32, ndim=1), dst: nd(dtype=jr.i32, ndim=1)):
        for i in range(src.shape[0]):
            dst[i] = src[i]

    src, dst = jr.ndarray(jr.i32, shape=(5,)), jr.ndarray(jr.i32, shape=(5,))
    src.from_numpy(np.arange(5, dtype=np.int32) + 10)
    gs, gd = src.gen, dst.gen
    copy(src, dst)
    assert (src.gen, dst.gen) == (gs, gd + 1)
    plain = np.zeros(5, np.int32)
    copy(src, plain)                             # a numpy destination: no counter to bump
    assert (src.gen, dst.gen) == (gs, gd + 1)
    assert plain.tolist() == [10, 11, 12, 13, 14]
    copy(plain, dst)
    assert (src.gen, dst.gen) == (gs, gd + 2)


# ---- stats: compiles and launches --------------------------------------------------------------

@jr.kernel
def axpy(a: nd(ndim=1), out: nd(ndim=1), k: jr.f32, twice: jr.template()):
    for i in range(a.shape[0]):
        v = a[i] * k
        if jr.static(twice):
            v = v * 2
        out[i] = v


def test_one_compile_per_specialization(rng):
    a = rng.standard_normal(16).astype(np.float32)
    out = np.zeros_like(a)
    jr.debug.reset_stats()
    axpy(a, out, 2.0, False)
    assert (stats()["compiles"], stats()["launches"]) == (1, 1)
    for k in (0.5, 1.5, 3.0):                    # new scalar values: same specialization
        axpy(a, out, k, False)
    np.testing.assert_allclose(out, a * 3, rtol=1e-6)
    assert (stats()["compiles"], stats()["launches"]) == (1, 4)
    axpy(a, out, 3.0, True)                      # a new template value compiles
    np.testing.assert_allclose(out, a * 6, rtol=1e-6)
    assert (stats()["compiles"], stats()["launches"]) == (2, 5)
    a64, out64 = a.astype(np.float64), np.zeros(16)
    axpy(a64, out64, 3.0, True)                  # a new ndarray dtype compiles
    np.testing.assert_allclose(out64, a64 * 6, rtol=1e-6)
    assert (stats()["compiles"], stats()["launches"]) == (3, 6)
    axpy(a, out, 1.0, False)                     # back to earlier ones: no compile
    axpy(a64, out64, 1.0, True)
    axpy(jr.ndarray(jr.f32, shape=(16,)), jr.ndarray(jr.f32, shape=(16,)), 1.0, False)
    assert (stats()["compiles"], stats()["launches"]) == (3, 9)
    np.testing.assert_allclose(out, a, rtol=1e-6)


def test_reset_stats_and_reinit():
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    axpy(a, out, 1.0, False)
    axpy(a, out, 1.0, False)
    assert stats()["launches"] == 2 and stats()["compiles"] == 1
    jr.debug.reset_stats()
    assert stats()["launches"] == 0 and stats()["compiles"] == 0
    axpy(a, out, 1.0, False)
    assert stats()["launches"] == 1 and stats()["compiles"] == 0
    jr.init(arch=jr.cpu, offline_cache=False)    # a fresh program: fresh counters and handles
    assert stats()["launches"] == 0
    axpy(a, out, 5.0, False)
    assert stats()["compiles"] == 1 and stats()["launches"] == 1
    assert out.tolist() == [5.0] * 4
    assert set(stats()) >= {"compiles", "launches", "offline_cache_hits", "offline_cache_misses",
                            "launch_cache_hits", "launch_cache_misses", "spec_cache_hits",
                            "spec_cache_misses", "max_reducer_dispatches", "h2d_skipped"}


def test_keyword_arguments_on_every_path():
    @jr.kernel
    def k(a1: jr.i32, a0: jr.i32, out: nd(dtype=jr.i32, ndim=1)):
        out[0] = a1 * 10 + a0

    out = np.zeros(1, np.int32)
    k(1, 2, out)
    assert out[0] == 12
    k(a0=3, a1=4, out=out)                      # keywords on the fast path
    assert out[0] == 43
    k(5, out=out, a0=6)
    assert out[0] == 56
    assert stats()["compiles"] == 1 and stats()["launches"] == 3


# ---- bound launches ---------------------------------------------------------------------------

def test_bound_launch_runs_only_when_called(rng):
    total = jr.field(jr.f64, shape=())

    @jr.kernel
    def add(a: nd(dtype=jr.f64, ndim=1), k: jr.f64) -> jr.f64:
        for i in range(a.shape[0]):
            total[None] += a[i] * k
        return total[None]

    a = rng.standard_normal(1000)
    jr.debug.reset_stats()
    launch = add.bind(a, 2.0)
    assert total[None] == 0.0 and stats()["launches"] == 0    # binding compiles, never runs
    assert stats()["compiles"] == 1
    r = launch()
    assert np.isclose(r, 2 * a.sum()) and np.isclose(total[None], 2 * a.sum())
    launch.set_arg("k", -1.0)
    launch()
    assert np.isclose(total[None], a.sum())
    launch.set_arg(1, 0.5)                                    # by index
    launch()
    assert np.isclose(total[None], 1.5 * a.sum())
    assert stats()["launches"] == 3 and stats()["compiles"] == 1
    add(a, 1.0)                                               # same handle: no new compile
    assert stats()["compiles"] == 1 and stats()["launches"] == 4


def test_bound_launch_set_arg_rebinds_arrays_and_rejects_a_new_specialization(rng):
    @jr.kernel
    def double(src: nd(dtype=jr.i32, ndim=1), dst: nd(dtype=jr.i32, ndim=1)):
        for i in range(src.shape[0]):
            dst[i] = src[i] * 2

    src = rng.integers(-50, 50, 10).astype(np.int32)
    d1, d2 = jr.ndarray(jr.i32, shape=(10,)), jr.ndarray(jr.i32, shape=(10,))
    launch = double.bind(src, d1)
    g1, g2 = d1.gen, d2.gen
    launch()
    assert d1.gen == g1 + 1 and d2.gen == g2
    launch.set_arg("dst", d2)
    launch()
    assert d1.gen == g1 + 1 and d2.gen == g2 + 1
    np.testing.assert_array_equal(d2.to_numpy(), src * 2)
    longer = np.arange(20, dtype=np.int32)
    out = np.zeros(20, np.int32)
    launch.set_arg("src", longer)                             # a new shape is fine
    launch.set_arg("dst", out)
    launch()
    np.testing.assert_array_equal(out, longer * 2)
    with pytest.raises(jr.KernelArgError, match="specialization"):
        launch.set_arg("src", np.zeros(20, np.int64))         # a new dtype is not
    with pytest.raises(jr.KernelArgError, match="no parameter 'nope'"):
        launch.set_arg("nope", 1)
    with pytest.raises(jr.KernelArgError, match="'src'"):
        double.bind([1, 2, 3], out)                           # bind validates too
    launch()                                                  # still bound to `out`
    np.testing.assert_array_equal(out, longer * 2)
