"""Quadrants' `qd.simt` in jitrt (`jr.simt`): block-shared arrays, barriers, fences, warp and
subgroup primitives, and the reductions and tiles built on them.

Compile-level tests (no GPU): the PTX and AMDGCN code each kernel becomes (shared memory,
barriers, shuffles), assembled by ptxas and linked into AMDGPU code objects; the CPU's
refusal and the shared-memory limit. Value tests (`gpu_only`: run with
`JITRT_TEST_ARCHS=cuda` on a GPU) check the results against numpy.
"""
import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import amdgcn, nvptx
from test_amdgpu import build as amdgpu_build

nd = jr.types.ndarray
simt = jr.simt
gpu_only = pytest.mark.gpu_only
needs_ptxas = pytest.mark.skipif(nvptx.ptxas_path() is None, reason="ptxas not installed")
needs_linker = pytest.mark.skipif(amdgcn.linker() is None, reason="no ld.lld")
B = 64


@jr.kernel
def block_tree_sum(x: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.f32, ndim=1)):
    jr.loop_config(block_dim=B)
    for i in range(x.shape[0]):
        tid = i % B
        sh = simt.block.SharedArray((B,), jr.f32)
        sh[tid] = x[i]
        simt.block.sync()
        s = B // 2
        while s > 0:
            if tid < s:
                sh[tid] = sh[tid] + sh[tid + s]
            simt.block.sync()
            s //= 2
        if tid == 0:
            out[i // B] = sh[0]


@jr.kernel
def block_of_16(ids: nd(dtype=jr.i32, ndim=2), out: nd(dtype=jr.i32, ndim=1)):
    jr.loop_config(block_dim=16)
    for i in range(ids.shape[0]):
        tid = i % 16
        grid = simt.block.SharedArray((4, 4), jr.i32)     # a 2-D array, read transposed
        count = simt.block.SharedArray((1,), jr.i32)
        if tid == 0:
            count[0] = 0
        grid[tid // 4, tid % 4] = i
        simt.block.sync()
        jr.atomic_add(count[0], 1)
        count[0] += 1
        simt.block.sync()
        ids[i, 0] = simt.block.thread_idx()
        ids[i, 1] = simt.block.global_thread_idx()
        ids[i, 2] = grid[tid % 4, tid // 4]
        ids[i, 3] = count[0]
        simt.grid.mem_fence()
        simt.block.mem_fence()
        simt.warp.sync(0xFFFF)
        out[i] = ids[i, 2]


@pytest.mark.cpu_only
def test_shared_arrays_and_barriers_in_ptx():
    ptx = jr.debug.gpu_asm(block_tree_sum, np.ones(128, np.float32), np.zeros(2, np.float32),
                           arch="cuda")
    assert ".shared .align 16 .b8 jk_task0_shared1[256]" in ptx       # 64 f32 per block
    assert "bar.sync" in ptx and "st.shared.f32" in ptx or "st.shared.b32" in ptx
    ptx = jr.debug.gpu_asm(block_of_16, np.zeros((32, 4), np.int32), np.zeros(32, np.int32),
                           arch="cuda")
    assert "atom.shared.add.u32" in ptx or "atom.shared.add.s32" in ptx
    assert "membar.gl" in ptx and "membar.cta" in ptx and "bar.warp.sync" in ptx
    assert "%tid.x" in ptx and "%ntid.x" in ptx


@pytest.mark.cpu_only
@needs_ptxas
@pytest.mark.parametrize("sm", [80, 90])
def test_block_level_ptx_assembles(sm):
    for kernel, args in ((block_tree_sum, (np.ones(64, np.float32), np.zeros(1, np.float32))),
                         (block_of_16, (np.zeros((16, 4), np.int32), np.zeros(16, np.int32)))):
        ptx = jr.debug.gpu_asm(kernel, *args, arch="cuda", sm=sm)
        assert nvptx.assemble(ptx, sm)[:4] == b"\x7fELF"


@pytest.mark.cpu_only
@needs_linker
def test_block_level_amdgpu_code_objects():
    asm = jr.debug.gpu_asm(block_tree_sum, np.ones(64, np.float32), np.zeros(1, np.float32),
                           arch="amdgpu")
    assert "s_barrier" in asm and "ds_write" in asm or "ds_store" in asm
    _, objects = amdgpu_build(block_of_16, np.zeros((16, 4), np.int32), np.zeros(16, np.int32))
    for gfx, code in objects.items():
        (desc,) = amdgcn.kernel_descriptors(code).values()
        assert desc.group_segment_size >= 4 * 17          # the two shared arrays (LDS)


@pytest.mark.cpu_only
@needs_linker
def test_subgroup_code_objects_for_wave64_and_wave32():
    for kernel, args in (
            (shuffles, (np.arange(64.0), np.zeros((64, 6)), np.zeros((64, 3), np.int32))),
            (tiled, (np.ones(64, np.float32), np.zeros(64, np.int32),
                     np.zeros((64, 12), np.float32)))):
        _, objects = amdgpu_build(kernel, *args)     # gfx942, gfx90a (wave64), gfx1100 (wave32)
        assert sorted(objects) == ["gfx1100", "gfx90a", "gfx942"]
        assert all(code[:4] == b"\x7fELF" for code in objects.values())


@pytest.mark.cpu_only
def test_the_cpu_refuses_block_level_code_at_the_call():
    with pytest.raises(jr.KernelCompileError) as e:
        block_tree_sum(np.ones(64, np.float32), np.zeros(1, np.float32))
    text = str(e.value)
    assert "sh[tid] = x[i]" in text and "block-shared arrays are GPU block-level code" in text
    assert "not supported on cpu" in text

    @jr.kernel
    def sync_only():
        for i in range(4):
            simt.block.sync()
    with pytest.raises(jr.KernelCompileError, match=r"jr.simt.block.sync\(\) is GPU block-level"):
        sync_only()


@pytest.mark.cpu_only
def test_shared_memory_past_48_kib_is_a_clear_error():
    @jr.kernel
    def too_big(out: nd(dtype=jr.f32, ndim=1)):
        jr.loop_config(block_dim=32)
        for i in range(out.shape[0]):
            a = simt.block.SharedArray((64, 128), jr.f32)       # 32 KiB
            b = simt.block.SharedArray((8192,), jr.f32)         # 32 KiB more
            a[i % 64, 0] = 1.0
            b[i] = a[0, 0]
            out[i] = b[0]
    with pytest.raises(jr.KernelCompileError, match=r"shared memory to 65536 bytes: a thread "
                       r"block may declare at most 49152"):
        jr.debug.gpu_asm(too_big, np.zeros(32, np.float32), arch="cuda")


@jr.kernel
def bad_shared(out: nd(dtype=jr.f32, ndim=1), case: jr.template()):
    for i in range(4):
        if jr.static(case == 0):
            simt.block.SharedArray((4, 0), jr.f32)
        if jr.static(case == 1):
            b = simt.block.SharedArray((4, 4), jr.f32)
            out[i] = b[i]
        if jr.static(case == 2):
            c = simt.block.SharedArray(4, jr.f32)
            out[i] = c[4]
        if jr.static(case == 3):
            d = simt.block.SharedArray(4, jr.f32)
            out[i] = d[0.5]


@pytest.mark.cpu_only
@pytest.mark.parametrize("case, message", [
    (0, r"the shape must be a positive int or a tuple of positive ints .* got \(4, 0\)"),
    (1, r"has 2 dimension\(s\) \[4, 4\], indexed with 1"),
    (2, r"index 4 out of range for shared array"),
    (3, r"a shared array index must be an integer, got f32")])
def test_bad_shared_array_declarations_and_indices(case, message):
    with pytest.raises(jr.KernelCompileError, match=message):
        jr.debug.gpu_asm(bad_shared, np.zeros(4, np.float32), case, arch="cuda")


@pytest.mark.cpu_only
def test_shared_array_outside_a_kernel_is_refused():
    with pytest.raises(RuntimeError, match="inside a GPU kernel or func"):
        simt.block.SharedArray((4,), jr.f32)


@gpu_only
def test_block_tree_sum_against_numpy():
    x = np.random.default_rng(1).random(B * 300).astype(np.float32)
    out = np.zeros(300, np.float32)
    block_tree_sum(x, out)
    np.testing.assert_allclose(out, x.reshape(300, B).sum(axis=1), rtol=1e-5)


@gpu_only
def test_a_block_of_16_threads_is_exactly_16():
    n = 16 * 50
    ids, out = np.zeros((n, 4), np.int32), np.zeros(n, np.int32)
    block_of_16(ids, out)
    i = np.arange(n)
    np.testing.assert_array_equal(ids[:, 0], i % 16)        # thread i % 16 of block i // 16
    np.testing.assert_array_equal(ids[:, 1] % 16, i % 16)
    tid = i % 16
    np.testing.assert_array_equal(ids[:, 2], i - tid + (tid % 4) * 4 + tid // 4)
    np.testing.assert_array_equal(ids[:, 3], 32)             # 16 atomic adds and 16 `+=`
    handle = next(iter(block_of_16.handles.values()))
    assert [t.block_dim for t in handle.compiled.tasks] == [16]     # not rounded to a warp


# ---- subgroup (warp) primitives ----------------------------------------------------------

sg = simt.subgroup


@jr.kernel
def shuffles(x: nd(ndim=1), out: nd(ndim=2), lanes: nd(dtype=jr.i32, ndim=2)):
    jr.loop_config(block_dim=32)
    for i in range(x.shape[0]):
        v = x[i]
        lane = sg.invocation_id()
        out[i, 0] = sg.shuffle(v, lane ^ 1)
        out[i, 1] = sg.shuffle_up(v, 1)
        out[i, 2] = sg.shuffle_down(v, 2)
        out[i, 3] = sg.broadcast(v, 3)
        out[i, 4] = sg.shuffle_xor(v, 5)
        out[i, 5] = sg.broadcast_first(v)
        lanes[i, 0] = lane
        lanes[i, 1] = sg.elect()
        lanes[i, 2] = jr.cast(sg.ballot(v > x[i - lane]) & 0xFFFFFFFF, jr.i32)
        sg.sync()


def shuffled_reference(x):
    w = x.reshape(-1, 32)
    lane = np.arange(32)
    up = np.where(lane >= 1, np.roll(w, 1, axis=1), w)         # past the ends: its own value
    down = np.where(lane < 30, np.roll(w, -2, axis=1), w)
    return np.stack([w[:, lane ^ 1], up, down, np.repeat(w[:, 3:4], 32, 1), w[:, lane ^ 5],
                     np.repeat(w[:, :1], 32, 1)], axis=-1).reshape(len(x), 6)


@pytest.mark.cpu_only
@needs_ptxas
def test_shuffle_ptx_moves_64_bit_values_as_two_words():
    x = np.arange(64, dtype=np.float64)
    ptx = jr.debug.gpu_asm(shuffles, x, np.zeros((64, 6)), np.zeros((64, 3), np.int32),
                           arch="cuda", sm=90)
    assert ptx.count("shfl.sync.idx.b32") >= 2 * 4 and "shfl.sync.up.b32" in ptx
    assert "shfl.sync.down.b32" in ptx and "vote.sync.ballot.b32" in ptx
    assert "%laneid" in ptx and "bar.warp.sync" in ptx
    assert nvptx.assemble(ptx, 90)[:4] == b"\x7fELF"
    asm = jr.debug.gpu_asm(shuffles, x, np.zeros((64, 6)), np.zeros((64, 3), np.int32),
                           arch="amdgpu")
    assert "ds_bpermute_b32" in asm and "v_mbcnt_lo_u32_b32" in asm


@gpu_only
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32, np.float64, np.int64])
def test_shuffles_against_numpy(dtype):
    n = 32 * 8
    rng = np.random.default_rng(2)
    x = (rng.random(n) * 1e6).astype(dtype)
    if dtype in (np.float64, np.int64):       # both 32-bit halves differ from lane to lane
        x = x * dtype(2**33) + dtype(7) if dtype is np.int64 else x * 1e10 + 0.25
    out, lanes = np.zeros((n, 6), dtype), np.zeros((n, 3), np.int32)
    shuffles(x, out, lanes)
    np.testing.assert_array_equal(out, shuffled_reference(x))
    lane = np.arange(n) % 32
    np.testing.assert_array_equal(lanes[:, 0], lane)
    np.testing.assert_array_equal(lanes[:, 1], lane == 0)
    w = x.reshape(-1, 32)
    bits = ((w > w[:, :1]) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)
    np.testing.assert_array_equal(lanes[:, 2].astype(np.uint32), np.repeat(bits, 32))


# ---- tiled reductions and scans (simt_funcs.py) ------------------------------------------

@jr.kernel
def tiled(x: nd(dtype=jr.f32, ndim=1), head: nd(dtype=jr.i32, ndim=1),
          out: nd(dtype=jr.f32, ndim=2)):
    jr.loop_config(block_dim=64)
    for i in range(x.shape[0]):
        v = x[i]
        out[i, 0] = sg.reduce_all_add_tiled(v, 4)
        out[i, 1] = sg.reduce_add_tiled(v, 5)
        out[i, 2] = sg.inclusive_add_tiled(v, 5)
        out[i, 3] = sg.exclusive_add_tiled(v, 3)
        out[i, 4] = sg.segmented_reduce_add_tiled(v, head[i], 5)
        out[i, 5] = sg.segmented_reduce_min_tiled(v, head[i], 4)
        out[i, 6] = sg.reduce_all_min_tiled(v, 3)
        out[i, 7] = sg.reduce_all_max_tiled(v, 5)
        out[i, 8] = sg.any_true_tiled(v > 6, 3)
        out[i, 9] = sg.all_true_tiled(v > 0, 2)
        out[i, 10] = simt.block.reduce_all_add(v, 64, jr.f32)
        out[i, 11] = sg.inclusive_max_tiled(v, 4)


def groups(x, log2):
    return x.reshape(-1, 1 << log2)


def segmented(x, head, log2, op):
    """A scan by `op` restarting at each head and at each group's first lane."""
    out = []
    for g, h in zip(groups(x, log2), groups(head, log2)):
        acc = g[0]
        for k in range(len(g)):
            acc = g[k] if k == 0 or h[k] else op(acc, g[k])
            out.append(acc)
    return np.array(out)


def tiled_reference(x, head):
    def each(values, log2):           # a per-group value repeated over the group's lanes
        return np.repeat(values, 1 << log2)
    ref = {0: each(groups(x, 4).sum(1), 4),
           2: np.cumsum(groups(x, 5), axis=1).ravel(),
           3: (np.cumsum(groups(x, 3), axis=1) - groups(x, 3)).ravel(),
           4: segmented(x, head, 5, np.add),
           5: segmented(x, head, 4, min),
           6: each(groups(x, 3).min(1), 3), 7: each(groups(x, 5).max(1), 5),
           8: each(groups(x, 3).max(1) > 6, 3), 9: each(groups(x, 2).min(1) > 0, 2),
           10: each(groups(x, 6).sum(1), 6),
           11: np.maximum.accumulate(groups(x, 4), axis=1).ravel()}
    return ref


@pytest.mark.cpu_only
@needs_ptxas
def test_tiled_reductions_assemble():
    args = (np.ones(64, np.float32), np.zeros(64, np.int32), np.zeros((64, 12), np.float32))
    ptx = jr.debug.gpu_asm(tiled, *args, arch="cuda", sm=80)
    assert nvptx.assemble(ptx, 80)[:4] == b"\x7fELF"
    assert "bar.sync" in ptx and ".shared" in ptx       # block.reduce_all_add stages in smem
    assert "s_barrier" in jr.debug.gpu_asm(tiled, *args, arch="amdgpu")


@gpu_only
def test_tiled_reductions_against_numpy():
    n = 64 * 40
    rng = np.random.default_rng(3)
    x = rng.integers(0, 8, n).astype(np.float32)       # small integers: exact in any order
    head = (rng.random(n) < 0.2).astype(np.int32)
    out = np.zeros((n, 12), np.float32)
    tiled(x, head, out)
    for col, expected in tiled_reference(x, head).items():
        np.testing.assert_array_equal(out[:, col], expected, err_msg=f"column {col}")
    np.testing.assert_array_equal(out[::32, 1], groups(x, 5).sum(1))   # lane 0 of each warp


# ---- register tiles (simt_tiles.py) --------------------------------------------------------

@jr.func
def tile_factor(b, m: jr.template(), sh: jr.template(), rhs: jr.template(),
                L_out: jr.template(), X_out: jr.template(), Tile: jr.template(),
                n: jr.template()):
    L = Tile.eye(dtype=jr.f64)                    # rows past n stay the identity's
    L[:] = m[b, 0:n, 0:n]
    v = sh[0:n, 0]                                # lane k: sh[k, 0] (0 past n)
    L -= jr.outer(v, v)
    L.cholesky_(1e-12)
    X = Tile.zeros(dtype=jr.f64)
    X[:] = rhs[b, 0:n, 0:n]
    L.solve_triangular_(X)
    L_out[b, 0:n, 0:n] = L
    X_out[b, 0:n, 0:n] = X


@jr.kernel
def tile_cholesky(m: nd(dtype=jr.f64, ndim=3), col: nd(dtype=jr.f64, ndim=2),
                  rhs: nd(dtype=jr.f64, ndim=3), L_out: nd(dtype=jr.f64, ndim=3),
                  X_out: nd(dtype=jr.f64, ndim=3), size: jr.template(), n: jr.template()):
    jr.loop_config(block_dim=size)
    for i in range(m.shape[0] * size):
        b, tid = i // size, i % size
        sh = simt.block.SharedArray((size, 1), jr.f64)
        sh[tid, 0] = 0.0
        if tid < n:
            sh[tid, 0] = col[b, tid]
        simt.block.sync()
        tile_factor(b, m, sh, rhs, L_out, X_out, simt.TileNxN(size), n)


def tile_problem(batch, n):
    rng = np.random.default_rng(n)
    r = rng.random((batch, n, n))
    a = r @ r.transpose(0, 2, 1) + n * np.eye(n)         # symmetric positive definite
    col = rng.random((batch, n))
    m = a + col[:, :, None] * col[:, None, :]            # the tile subtracts outer(col, col)
    return a, col, m, rng.random((batch, n, n))


@pytest.mark.cpu_only
@needs_ptxas
def test_tile_cholesky_compiles_for_both_gpus():
    a, col, m, rhs = tile_problem(2, 12)
    args = (m, col, rhs, np.zeros_like(m), np.zeros_like(m), 16, 12)
    ptx = jr.debug.gpu_asm(tile_cholesky, *args, arch="cuda", sm=90)
    assert nvptx.assemble(ptx, 90)[:4] == b"\x7fELF"
    assert "sqrt.rn.f64" in ptx and "shfl.sync.idx.b32" in ptx
    asm = jr.debug.gpu_asm(tile_cholesky, *args, arch="amdgpu")
    assert "v_readlane_b32" in asm or "ds_bpermute_b32" in asm     # (a uniform lane: read)


@pytest.mark.cpu_only
def test_tile_code_grows_linearly_with_the_tile():
    # the Cholesky and the triangular solve loop over the tile's columns at run time: their
    # code (and so the PTX's shuffles) grows as n, not as n*n, so a 32x32 tile compiles in
    # about twice a 16x16 one's time (fully unrolled, a 32x32 f64 tile took ~40 s to build)
    counts = {}
    for size, n in ((16, 12), (32, 20)):
        a, col, m, rhs = tile_problem(1, n)
        ptx = jr.debug.gpu_asm(tile_cholesky, m, col, rhs, m, m, size, n, arch="cuda", sm=90)
        counts[size] = ptx.count("shfl.sync")
    assert counts[32] < 3 * counts[16], counts          # unrolled: 2176 vs 576


@pytest.mark.cpu_only
def test_tile_misuse_is_a_clear_error():
    @jr.kernel
    def bad(m: nd(dtype=jr.f64, ndim=2)):
        for i in range(16):
            t = simt.Tile16x16.zeros(dtype=jr.f64)
            t[:] = m[0, 0:4]
    with pytest.raises(jr.KernelCompileError, match=r"tile\[:\] = \.\.\. takes an array slice"):
        jr.debug.gpu_asm(bad, np.zeros((4, 4)), arch="cuda")
    with pytest.raises(ValueError, match="16 x 16 or 32 x 32"):
        simt.TileNxN(8)
    with pytest.raises(RuntimeError, match="inside a GPU kernel or func"):
        simt.Tile32x32.zeros()


@gpu_only
@pytest.mark.parametrize("size, n", [(16, 12), (32, 20)])
def test_tile_cholesky_and_solve_against_numpy(size, n):
    a, col, m, rhs = tile_problem(5, n)
    L_out, X_out = np.zeros_like(m), np.zeros_like(m)
    tile_cholesky(m, col, rhs, L_out, X_out, size, n)
    L = np.linalg.cholesky(a)
    np.testing.assert_allclose(np.tril(L_out), L, rtol=1e-10, atol=1e-12)
    # the strict upper triangle keeps the updated tile's values, as in Quadrants
    np.testing.assert_allclose(np.triu(L_out, 1), np.triu(a, 1), rtol=1e-12)
    np.testing.assert_allclose(X_out @ L.transpose(0, 2, 1), rhs, rtol=1e-9, atol=1e-12)


@jr.kernel
def narrow_broadcast(x: nd(dtype=jr.f32, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
    for i in range(x.shape[0]):
        flag = jr.cast(x[i] > 0, jr.u8)
        out[i] = jr.cast(sg.broadcast(flag, jr.u32(0)), jr.i32)


@pytest.mark.cpu_only
def test_narrow_integers_shuffle_widened_and_other_types_are_refused():
    ptx = jr.debug.gpu_asm(narrow_broadcast, np.ones(32, np.float32), np.zeros(32, np.int32),
                           arch="cuda")
    assert "shfl.sync.idx.b32" in ptx

    @jr.kernel
    def vector_shuffle(x: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = sg.shuffle(jr.Vector([x[i], 1.0]), 0)[0]
    with pytest.raises(jr.KernelCompileError, match="expected a number, got a vector"):
        jr.debug.gpu_asm(vector_shuffle, np.ones(32, np.float32), arch="cuda")


@pytest.mark.cpu_only
def test_block_level_float_values_are_not_differentiated():
    x = jr.field(jr.f32, shape=(32,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def spread():
        jr.loop_config(block_dim=32)
        for i in range(32):
            loss[None] += sg.shuffle(x[i], 0) * x[i]
    with pytest.raises(jr.NotDifferentiableError, match=r"jr.simt block-level code "
                       r"\(subgroup.shuffle\) is not differentiated"):
        spread.grad()


@pytest.mark.cpu_only
def test_a_block_level_loop_launches_blocks_of_exactly_block_dim(fakegpu_program):
    """On the fake GPU vendor (tests/fakegpu_backend.py: the shared launch path, nothing
    run): a jr.simt loop of block_dim=16 launches 16-thread blocks covering its range; the
    same loop without block-level code gets whole warps."""
    fake, _ = fakegpu_program

    @jr.kernel
    def plain(out: nd(dtype=jr.i32, ndim=1)):
        jr.loop_config(block_dim=16)
        for i in range(out.shape[0]):
            out[i] = i % 16
    out = jr.ndarray(jr.i32, 16 * 40)
    block_of_16(jr.ndarray(jr.i32, (16 * 40, 4)), out)
    plain(out)
    launches = [call[2:] for call in fake.calls if call[0] == "launch"]
    assert launches == [(40, 16), (20, 32)]


@pytest.mark.cpu_only
def test_block_reduce_needs_whole_warps():
    @jr.kernel
    def half_warp(x: nd(dtype=jr.f32, ndim=1)):
        jr.loop_config(block_dim=16)
        for i in range(x.shape[0]):
            x[i] = simt.block.reduce_add(x[i], 16, jr.f32)
    with pytest.raises(jr.KernelCompileError, match="block_dim must be a positive multiple of "
                       "the subgroup size"):
        jr.debug.gpu_asm(half_warp, np.ones(16, np.float32), arch="cuda")
