"""A block of 32 lanes per environment partitioning trees into islands: the shape of the
cooperative constraint kernels of Genesis-like simulators (block-strided loops fenced by
barriers, a `while True` round loop left by `break` on a flag in memory, subgroup scans whose
totals carry over chunks, atomics, and each lane filling a list after the earlier lanes).

Value tests (`gpu_only`: `JITRT_TEST_ARCHS=cuda` on a GPU) against a serial numpy reference;
the CPU refuses the subgroup primitives these kernels use.
"""
import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import nvptx

nd = jr.types.ndarray
simt = jr.simt
sg = jr.simt.subgroup
K = 32
needs_ptxas = pytest.mark.skipif(nvptx.ptxas_path() is None, reason="ptxas not installed")


@jr.func
def block_scan(value):
    """Inclusive sum over the 32 lanes of the block, and the block's total (lane 31's)."""
    incl = sg.inclusive_add_tiled(value, 5)
    return incl, sg.shuffle(incl, jr.u32(sg.invocation_id() | 31))


@jr.func
def root_of(i_t, i_b, parent):
    root = i_t
    while parent[root, i_b] != root:
        root = parent[root, i_b]
    return root


@jr.func
def build(i_b, tid, edges, n_edges, tree_dofs,
          tree_dof_start, parent, flag,
          island, count, start,
          curr, dof_id, local_pos,
          n_islands_out):
    n_trees = tree_dofs.shape[0]
    i_t = tid
    while i_t < n_trees:
        parent[i_t, i_b] = i_t
        count[i_t, i_b] = 0
        i_t = i_t + K
    simt.block.sync()
    while True:                          # hooking rounds until no edge joins two components
        if tid == 0:
            flag[i_b] = 0
        simt.block.sync()
        i_e = tid
        while i_e < n_edges:
            ra = root_of(edges[i_e, 0], i_b, parent)
            rb = root_of(edges[i_e, 1], i_b, parent)
            if ra != rb:
                jr.atomic_min(parent[max(ra, rb), i_b], min(ra, rb))
                flag[i_b] = 1
            i_e = i_e + K
        simt.block.sync()
        changed = flag[i_b]
        simt.block.sync()
        if changed == 0:
            break
        i_t = tid
        while i_t < n_trees:
            parent[i_t, i_b] = root_of(i_t, i_b, parent)
            i_t = i_t + K
        simt.block.sync()
    n_islands = 0                        # roots with dofs, ranked by a scan per chunk
    for i_chunk in range((n_trees + K - 1) // K):
        i_t = i_chunk * K + tid
        is_root = 0
        if i_t < n_trees:
            if parent[i_t, i_b] == i_t and tree_dofs[i_t] > 0:
                is_root = 1
        incl, total = block_scan(is_root)
        if is_root == 1:
            island[i_t, i_b] = n_islands + incl - 1
        n_islands = n_islands + total
    simt.block.sync()
    i_t = tid
    while i_t < n_trees:
        island[i_t, i_b] = island[parent[i_t, i_b], i_b]
        i_t = i_t + K
    if tid == 0:
        n_islands_out[i_b] = n_islands
    simt.block.sync()
    i_t = tid
    while i_t < n_trees:
        if island[i_t, i_b] >= 0:
            jr.atomic_add(count[island[i_t, i_b], i_b], tree_dofs[i_t])
        i_t = i_t + K
    simt.block.sync()
    carry = 0                            # each island's list starts after the earlier ones
    for i_chunk in range((n_islands + K - 1) // K):
        i_isl = i_chunk * K + tid
        n_dofs = 0
        if i_isl < n_islands:
            n_dofs = count[i_isl, i_b]
        incl, total = block_scan(n_dofs)
        if i_isl < n_islands:
            start[i_isl, i_b] = carry + incl - n_dofs
            curr[i_isl, i_b] = carry + incl - n_dofs
        carry = carry + total
    simt.block.sync()
    for i_chunk in range((n_trees + K - 1) // K):    # each tree after its island's earlier ones
        i_t = i_chunk * K + tid
        i_isl = -1
        if i_t < n_trees:
            i_isl = island[i_t, i_b]
            pos = 0
            if i_isl >= 0:
                pos = curr[i_isl, i_b]
                for j_t in range(i_chunk * K, i_t):
                    if island[j_t, i_b] == i_isl:
                        pos = pos + tree_dofs[j_t]
                first = start[i_isl, i_b]
                for i_d in range(tree_dof_start[i_t], tree_dof_start[i_t] + tree_dofs[i_t]):
                    dof_id[pos, i_b] = i_d
                    local_pos[i_d, i_b] = pos - first
                    pos = pos + 1
        simt.block.sync()
        if i_isl >= 0:
            jr.atomic_add(curr[i_isl, i_b], tree_dofs[i_t])
        simt.block.sync()


@jr.kernel
def islands(edges: nd(dtype=jr.i32, ndim=2), n_edges: nd(dtype=jr.i32, ndim=1),
            tree_dofs: nd(dtype=jr.i32, ndim=1), tree_dof_start: nd(dtype=jr.i32, ndim=1),
            parent: nd(dtype=jr.i32, ndim=2), flag: nd(dtype=jr.i32, ndim=1),
            island: nd(dtype=jr.i32, ndim=2), count: nd(dtype=jr.i32, ndim=2),
            start: nd(dtype=jr.i32, ndim=2), curr: nd(dtype=jr.i32, ndim=2),
            dof_id: nd(dtype=jr.i32, ndim=2), local_pos: nd(dtype=jr.i32, ndim=2),
            n_islands: nd(dtype=jr.i32, ndim=1)):
    n_envs = dof_id.shape[1]                 # a kernel-scope local handed to the task
    jr.loop_config(block_dim=K)
    for i_flat in range(n_envs * K):
        tid = i_flat % K
        i_b = i_flat // K
        build(i_b, tid, edges, n_edges[i_b], tree_dofs, tree_dof_start, parent, flag, island,
              count, start, curr, dof_id, local_pos, n_islands)


@jr.func
def all_envs(edges, n_edges, tree_dofs, tree_dof_start, parent, flag, island, count, start,
             curr, dof_id, local_pos, n_islands):
    """The cooperative loop inside a func the kernel calls, as Genesis writes it: a loop in
    the kernel's outermost scope all the same (a block per env, not one thread)."""
    n_envs = dof_id.shape[1]
    jr.loop_config(block_dim=K)
    for i_flat in range(n_envs * K):
        build(i_flat // K, i_flat % K, edges, n_edges[i_flat // K], tree_dofs, tree_dof_start,
              parent, flag, island, count, start, curr, dof_id, local_pos, n_islands)


@jr.kernel
def islands_in_func(edges: nd(dtype=jr.i32, ndim=2), n_edges: nd(dtype=jr.i32, ndim=1),
                    tree_dofs: nd(dtype=jr.i32, ndim=1),
                    tree_dof_start: nd(dtype=jr.i32, ndim=1),
                    parent: nd(dtype=jr.i32, ndim=2), flag: nd(dtype=jr.i32, ndim=1),
                    island: nd(dtype=jr.i32, ndim=2), count: nd(dtype=jr.i32, ndim=2),
                    start: nd(dtype=jr.i32, ndim=2), curr: nd(dtype=jr.i32, ndim=2),
                    dof_id: nd(dtype=jr.i32, ndim=2), local_pos: nd(dtype=jr.i32, ndim=2),
                    n_islands: nd(dtype=jr.i32, ndim=1)):
    all_envs(edges, n_edges, tree_dofs, tree_dof_start, parent, flag, island, count, start,
             curr, dof_id, local_pos, n_islands)


def reference(edges, n_edges, tree_dofs, n_envs):
    """The partition built serially: islands ranked by their smallest tree, dofs listed
    island by island, tree by tree."""
    n_trees = len(tree_dofs)
    dof_start = np.concatenate([[0], np.cumsum(tree_dofs)[:-1]])
    out = []
    for b in range(n_envs):
        parent = list(range(n_trees))

        def root(t):
            while parent[t] != t:
                t = parent[t]
            return t
        for a, c in edges[:n_edges[b]]:
            ra, rc = root(a), root(c)
            parent[max(ra, rc)] = min(ra, rc)
        roots = [t for t in range(n_trees) if root(t) == t and tree_dofs[t] > 0]
        isl = [roots.index(root(t)) if root(t) in roots else -1 for t in range(n_trees)]
        dofs = [d for i in range(len(roots)) for t in range(n_trees) if isl[t] == i
                for d in range(dof_start[t], dof_start[t] + tree_dofs[t])]
        out.append((isl, dofs, len(roots)))
    return out


@pytest.mark.gpu_only
@pytest.mark.parametrize("layout", ["plane_box", "box_plane", "forty_trees"])
@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("in_func", [False, True])
def test_islands_match_serial_build(layout, n_envs, in_func):
    args, a, expected = problem(layout, n_envs)
    (islands_in_func if in_func else islands)(*args)
    for b, (isl, dofs, n) in enumerate(expected):
        assert a["n_islands"].to_numpy()[b] == n
        np.testing.assert_array_equal(a["island"].to_numpy()[:, b], isl)
        listed = a["dof_id"].to_numpy()[:, b]    # dofs of trees without an island: unlisted
        np.testing.assert_array_equal(listed, dofs + [-1] * (len(listed) - len(dofs)))


@pytest.mark.cpu_only
@needs_ptxas
def test_islands_assemble():
    args, _, _ = problem("forty_trees", 3)
    ptx = jr.debug.gpu_asm(islands, *args, arch="cuda", sm=80)
    assert nvptx.assemble(ptx, 80)[:4] == b"\x7fELF"
    assert "bar.sync" in ptx and "shfl.sync" in ptx
    ptx = jr.debug.gpu_asm(islands_in_func, *args, arch="cuda", sm=80)
    assert "bar.sync" in ptx and "shfl.sync" in ptx


def problem(layout, n_envs):
    if layout == "plane_box":
        tree_dofs, pairs = [0, 6], []
    elif layout == "box_plane":
        tree_dofs, pairs = [6, 0], []
    else:                                 # two chunks of trees, chains joined across them
        tree_dofs = [(t % 3) + (t % 5 == 0) for t in range(40)]
        pairs = [(t, t + 7) for t in range(0, 33, 4)] + [(39, 2), (35, 36)]
    n_trees, n_dofs = len(tree_dofs), sum(tree_dofs)
    edges = np.array(pairs or [(0, 0)], np.int32)
    n_edges = np.array([len(pairs) if b != 1 else 0 for b in range(n_envs)], np.int32)
    td = np.array(tree_dofs, np.int32)
    dof_start = np.concatenate([[0], np.cumsum(td)[:-1]]).astype(np.int32)
    arrays = {name: jr.ndarray(jr.i32, shape=shape) for name, shape in [
        ("parent", (n_trees, n_envs)), ("flag", (n_envs,)), ("island", (n_trees, n_envs)),
        ("count", (n_trees, n_envs)), ("start", (n_trees, n_envs)),
        ("curr", (n_trees, n_envs)), ("dof_id", (n_dofs, n_envs)),
        ("local_pos", (n_dofs, n_envs)), ("n_islands", (n_envs,))]}
    arrays["island"].fill(-1)
    arrays["dof_id"].fill(-1)
    a = arrays
    args = (edges, n_edges, td, dof_start, a["parent"], a["flag"], a["island"], a["count"],
            a["start"], a["curr"], a["dof_id"], a["local_pos"], a["n_islands"])
    return args, a, reference(edges, n_edges, tree_dofs, n_envs)
