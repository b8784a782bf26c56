"""Quadrants' `qd.simt`: GPU block, subgroup, warp and grid primitives, with the meaning
Quadrants 1.3.3 gives them on the CPU.

Stage: API (kernel builtins). Quadrants implements `block.sync()`, `block.SharedArray`,
`subgroup.shuffle(...)`, `grid.mem_fence()`, ... for CUDA, AMDGPU and the SPIR-V backends;
on the CPU each one refuses to compile ("qd.block.sync is not supported for arch x64"), and
programs reach them only behind a compile-time test of the backend (Genesis:
`if qd.static(...)`). jitrt does the same on every arch (its GPU backends have no block-level
code yet): each name here is a kernel builtin whose use in a kernel is a `KernelCompileError`
at the call ("jr.simt.block.sync() is not supported here"), and whose call outside a kernel
is a RuntimeError. Code behind a false `jr.static(...)` is never compiled, so it costs
nothing. Caches nothing.
"""
from __future__ import annotations

from typing import Any

from ..frontend.builtins import Builtin


class _Primitives:
    """A namespace of kernel builtins `simt.<scope>.<name>`."""

    def __init__(self, scope: str, names: tuple[str, ...], **extra: Any) -> None:
        self._scope = scope
        for name in names:
            setattr(self, name, Builtin(f"simt.{scope}.{name}"))
        for name, value in extra.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"<jitrt simt.{self._scope}>"


class SharedArray:
    """`qd.simt.block.SharedArray(shape, dtype)`: block-shared memory, in GPU kernels only
    (`frontend/lower_simt.py` lowers the call; the CPU refuses it)."""
    jitrt_shared_array = True

    def __init__(self, shape: Any, dtype: Any) -> None:
        raise RuntimeError("jr.simt.block.SharedArray(shape, dtype) declares block-shared "
                           "memory inside a GPU kernel or func, not outside one")


block = _Primitives("block", (
    "sync", "sync_all_nonzero", "sync_any_nonzero", "sync_count_nonzero", "mem_fence",
    "thread_idx", "global_thread_idx", "reduce", "reduce_add", "reduce_min", "reduce_max",
    "reduce_all", "radix_rank_match_atomic_or"), SharedArray=SharedArray)
subgroup = _Primitives("subgroup", (
    "sync", "mem_fence", "barrier", "memory_barrier", "elect", "ballot", "ballot_first_n",
    "ballot_full_subgroup", "all_true", "any_true", "all_equal", "all_true_tiled",
    "any_true_tiled", "all_equal_tiled", "broadcast", "broadcast_first", "group_size",
    "log2_group_size", "invocation_id", "shuffle", "shuffle_xor", "shuffle_up", "shuffle_down",
    "lanemask_lt", "lanemask_le", "lanemask_eq", "lanemask_gt", "lanemask_ge",
    "reduce_add_tiled", "reduce_min_tiled", "reduce_max_tiled", "reduce_all_add_tiled",
    "reduce_all_min_tiled", "reduce_all_max_tiled", "inclusive_add_tiled",
    "exclusive_add_tiled", "segmented_reduce_add_tiled", "segmented_reduce_min_tiled"))
grid = _Primitives("grid", ("mem_fence", "memfence"))
warp = _Primitives("warp", (
    "sync", "all_nonzero", "any_nonzero", "unique", "ballot", "shfl_sync_i32", "shfl_sync_f32",
    "shfl_up_i32", "shfl_up_f32", "shfl_down_i32", "shfl_down_f32", "shfl_xor_i32",
    "match_any", "match_all", "active_mask"))
# register tiles of a subgroup (tensor-core style): GPU only as well
Tile16x16 = Builtin("simt.Tile16x16")
Tile32x32 = Builtin("simt.Tile32x32")
TileNxN = Builtin("simt.TileNxN")

__all__ = ["SharedArray", "Tile16x16", "Tile32x32", "TileNxN", "block", "grid", "subgroup",
           "warp"]
