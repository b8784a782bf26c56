"""Quadrants' `qd.simt`: GPU block, subgroup, warp and grid primitives, block-shared arrays
and the reductions, scans and register tiles built on them.

Stage: API (kernel builtins and a `@jr.func` library). The primitives (`block.sync()`,
`block.SharedArray`, `subgroup.shuffle(...)`, `grid.mem_fence()`, ...) are kernel builtins
that `frontend/lower_simt.py` lowers to `n.Simt` and `codegen/emit_simt.py` to NVPTX or
AMDGPU code; the higher-level names (`subgroup.reduce_all_add_tiled`, `shuffle_xor`,
`block.reduce_add`, ...) are `@jr.func`s over them (`simt_funcs.py`), and the tiles
(`Tile16x16`, ...) are `simt_tiles.py`. On the CPU each primitive is a `KernelCompileError`
at the call, as Quadrants refuses them there ("qd.block.sync is not supported for arch
x64"): programs reach them only behind a compile-time test of the backend (Genesis:
`if qd.static(...)`), and code behind a false `jr.static(...)` costs nothing. Called outside
a kernel, a primitive is a RuntimeError. docs/gpu.md, "Block-level code (jr.simt)", says
what each does. Caches nothing.
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


block: Any = _Primitives("block", (
    "sync", "sync_all_nonzero", "sync_any_nonzero", "sync_count_nonzero", "mem_fence",
    "thread_idx", "global_thread_idx", "reduce", "reduce_add", "reduce_min", "reduce_max",
    "reduce_all", "radix_rank_match_atomic_or"), SharedArray=SharedArray)
subgroup: Any = _Primitives("subgroup", (
    "sync", "mem_fence", "barrier", "memory_barrier", "elect", "ballot", "ballot_first_n",
    "ballot_full_subgroup", "all_true", "any_true", "all_equal", "all_true_tiled",
    "any_true_tiled", "all_equal_tiled", "broadcast", "broadcast_first", "group_size",
    "log2_group_size", "invocation_id", "shuffle", "shuffle_xor", "shuffle_up", "shuffle_down",
    "lanemask_lt", "lanemask_le", "lanemask_eq", "lanemask_gt", "lanemask_ge",
    "reduce_add_tiled", "reduce_min_tiled", "reduce_max_tiled", "reduce_all_add_tiled",
    "reduce_all_min_tiled", "reduce_all_max_tiled", "inclusive_add_tiled",
    "exclusive_add_tiled", "segmented_reduce_add_tiled", "segmented_reduce_min_tiled"))
grid: Any = _Primitives("grid", ("mem_fence", "memfence"))
warp: Any = _Primitives("warp", (
    "sync", "all_nonzero", "any_nonzero", "unique", "ballot", "shfl_sync_i32", "shfl_sync_f32",
    "shfl_up_i32", "shfl_up_f32", "shfl_down_i32", "shfl_down_f32", "shfl_xor_i32",
    "match_any", "match_all", "active_mask"))

from . import simt_funcs as _funcs  # noqa: E402  (its funcs call the builtins above)

for _name, _func in _funcs.SUBGROUP.items():
    setattr(subgroup, _name, _func)
for _name, _func in _funcs.BLOCK.items():
    setattr(block, _name, _func)
subgroup.group_size = _funcs.group_size                    # type: ignore[attr-defined]
subgroup.log2_group_size = _funcs.log2_group_size          # type: ignore[attr-defined]

from .simt_tiles import TILES, tile_type as TileNxN  # noqa: E402  (register tiles)

Tile16x16, Tile32x32 = TILES[16], TILES[32]

__all__ = ["SharedArray", "Tile16x16", "Tile32x32", "TileNxN", "block", "grid", "subgroup",
           "warp"]
