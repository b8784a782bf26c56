"""`jr.block_local(*fields)` (Taichi's hint to cache fields in GPU shared memory): accepted in
kernels so ported programs run unchanged; it checks its arguments are fields and emits no
code. The kernel is Taichi's test_ad_for_fwd.py::test_triple_for_loops_bls."""
import numpy as np
import pytest

import jitrt as jr

N, M = 8, 3


def test_a_kernel_with_the_hint_computes_what_it_computes_without():
    a = jr.field(jr.f32, shape=N, needs_dual=True)
    b = jr.field(jr.f32, shape=2 * N, needs_dual=True)
    f = jr.field(jr.f32, shape=(N - M, N), needs_dual=True)
    pair = jr.Struct.field({"p": jr.f32, "q": jr.math.vec2}, shape=2)

    @jr.kernel
    def triple_for():
        jr.block_local(a)
        jr.block_local(b, pair, a.dual)
        for i in range(N - M):
            for k in range(N):
                weight = 1.0
                for j in range(M):
                    weight *= a[i + j]
                s = 0.0
                for j in range(2 * M):
                    s += weight + b[2 * i + j]
                f[i, k] = s
    a.fill(2)
    b.from_numpy(np.arange(2 * N, dtype=np.float32))
    triple_for()
    i = np.arange(N - M)[:, None]
    want = 2 * M * 2 ** M + (4 * i + 2 * M - 1) * M
    np.testing.assert_array_equal(f.to_numpy(), np.broadcast_to(want, (N - M, N)))


def test_its_arguments_must_be_fields():
    x = jr.field(jr.f32, shape=4)

    @jr.kernel
    def an_ndarray(arr: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        jr.block_local(x, arr)
        for i in range(4):
            arr[i] = x[i]

    @jr.kernel
    def as_a_value():
        for i in range(4):
            x[i] = jr.block_local(x)
    with pytest.raises(jr.KernelCompileError, match=r"jr.block_local\(\) takes fields, got "
                       "ndarray 'arr'") as info:
        an_ndarray(np.zeros(4, np.float32))
    assert info.value.line == an_ndarray.fn.__code__.co_firstlineno + 2
    with pytest.raises(jr.KernelCompileError, match=r"jr.block_local\(\) is a statement"):
        as_a_value()
    with pytest.raises(RuntimeError, match="only be used inside a jitrt kernel"):
        jr.block_local(x)
