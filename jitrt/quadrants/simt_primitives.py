"""The primitives of `jr.simt` (Quadrants' `qd.simt`): kernel builtins in the namespaces
`block`, `subgroup`, `grid` and `warp`, and `block.SharedArray`.

Stage: API (kernel builtins). `frontend/lower_simt.py` lowers each call to `n.Simt`;
`simt.py` adds the `@jr.func` library (`simt_funcs.py`) and the tiles (`simt_tiles.py`) to
these namespaces; `simt_funcs.py` calls the builtins defined here (a module of its own, so
that neither imports the other in a cycle). Caches nothing.
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

