"""Quadrants' subgroup and block operations built on the `qd.simt` primitives: votes,
lane masks, tiled reductions and scans, segmented reductions, block reductions.

Stage: API (a `@jr.func` library, inlined into the kernels that call it). Each function is
written here over the primitives `frontend/lower_simt.py` lowers (`shuffle`,
`shuffle_up`, `shuffle_down`, `invocation_id`, `ballot`, `SharedArray`, `block.sync`),
with the meanings Quadrants 1.3.3 documents: a `*_tiled(value, log2_size)` operation works
on each group of `2**log2_size` consecutive lanes of a warp (`log2_size` a compile-time
int, at most 5 on CUDA); `reduce_*_tiled` leaves the group's result in the group's first
lane (a tree of `shuffle_down`), `reduce_all_*_tiled` in every lane (a butterfly of xor
shuffles), `inclusive_*_tiled` is a Hillis-Steele scan, `exclusive_add_tiled` that scan
shifted by one lane, and `segmented_reduce_*_tiled(value, head, log2_size)` a scan that
restarts at every lane whose `head` is non-zero (and at each group's first lane). Every
lane of the warp must call them together (uniform control flow, as in Quadrants). On the
CPU they compile to the primitives, which the CPU refuses. Caches nothing.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..frontend.builtins import cast, static, static_assert
from ..frontend.func import Func
from ..types import template
from . import simt_primitives as _simt

_sg: Any = _simt.subgroup
_block: Any = _simt.block
_SharedArray: Any = _simt.SharedArray
i32, u32, u64 = dtypes.i32, dtypes.u32, dtypes.u64


def group_size() -> int:
    """Lanes of a subgroup (warp) on the current program's arch: 64 on AMDGPU (Quadrants
    pins it to wave64; jitrt's code reads the wavefront size, so the gfx target must run
    wave64 for this to hold), 32 elsewhere. A compile-time int in kernels."""
    from ..data import CURRENT_DEVICE          # the current program's device, if any
    device = CURRENT_DEVICE[0]
    widest = max(device.codegen_target.warp_sizes) if device is not None else 1
    return widest if widest > 1 else 32


def log2_group_size() -> int:
    return group_size().bit_length() - 1


def _combine(a, b, op: template()):  # type: ignore
    """`a op b` for the operations the reductions take by name."""
    if static(op == "add"):
        return a + b
    if static(op == "mul"):
        return a * b
    if static(op == "min"):
        return min(a, b)
    if static(op == "max"):
        return max(a, b)
    if static(op == "and"):
        return a & b
    if static(op == "or"):
        return a | b
    return a ^ b


def _shuffle_xor(value, mask):  # type: ignore
    return _sg.shuffle(value, _sg.invocation_id() ^ cast(mask, i32))


def _elect():  # type: ignore
    return cast(_sg.invocation_id() == 0, i32)


def _broadcast_first(value):  # type: ignore
    return _sg.shuffle(value, 0)


def _ballot_first_n(predicate, n: template()):  # type: ignore
    inside = cast(_sg.invocation_id() < static(n), i32)
    return cast(_sg.ballot(cast(predicate != 0, i32) & inside), u32)


def _lanemask_lt(lane_id):  # type: ignore
    return (cast(1, u32) << cast(lane_id, u32)) - cast(1, u32)


def _lanemask_le(lane_id):  # type: ignore
    bit = cast(1, u32) << cast(lane_id, u32)
    return bit | (bit - cast(1, u32))


def _lanemask_eq(lane_id):  # type: ignore
    return cast(1, u32) << cast(lane_id, u32)


def _lanemask_gt(lane_id):  # type: ignore
    bit = cast(1, u32) << cast(lane_id, u32)
    return ~(bit | (bit - cast(1, u32)))


def _lanemask_ge(lane_id):  # type: ignore
    return ~((cast(1, u32) << cast(lane_id, u32)) - cast(1, u32))


def _vote_tiled(predicate, op: template(), log2_size: template()):  # type: ignore
    p = cast(predicate != 0, i32)
    for k in static(range(log2_size)):
        p = combine(p, shuffle_xor(p, static(1 << k)), op)
    return p


def _all_true_tiled(predicate, log2_size: template()):  # type: ignore
    return vote_tiled(predicate, "and", log2_size)


def _any_true_tiled(predicate, log2_size: template()):  # type: ignore
    return vote_tiled(predicate, "or", log2_size)


def _all_equal_tiled(value, log2_size: template()):  # type: ignore
    first = _sg.invocation_id() & static(~((1 << log2_size) - 1))
    return vote_tiled(cast(value == _sg.shuffle(value, first), i32), "and", log2_size)


def _reduce_tiled(value, op: template(), log2_size: template()):  # type: ignore
    for k in static(range(log2_size)):          # halving offsets, as Quadrants' order
        value = combine(value, _sg.shuffle_down(value, static(1 << (log2_size - 1 - k))), op)
    return value


def _reduce_all_tiled(value, op: template(), log2_size: template()  # type: ignore
                      ):
    for k in static(range(log2_size)):
        value = combine(value, shuffle_xor(value, static(1 << k)), op)
    return value


def _inclusive_tiled(value, op: template(), log2_size: template()):  # type: ignore
    lane = _sg.invocation_id() & static((1 << log2_size) - 1)
    for k in static(range(log2_size)):
        partner = _sg.shuffle_up(value, static(1 << k))
        if lane >= static(1 << k):
            value = combine(value, partner, op)
    return value


def _exclusive_add_tiled(value, log2_size: template()):  # type: ignore
    before = _sg.shuffle_up(value, 1)             # the lane below's value, 0 in lane 0
    if _sg.invocation_id() & static((1 << log2_size) - 1) == 0:
        before = 0                                 # (in its type)
    return inclusive_tiled(before, "add", log2_size)


def _segment_distance(head_flag, log2_size: template()):  # type: ignore
    """How many lanes this lane sits past the head of its segment: the latest lane at or
    below it in its group whose flag is set, or the group's first lane (a max scan)."""
    lane = _sg.invocation_id()
    in_group = lane & static((1 << log2_size) - 1)
    head = -1
    if head_flag != 0 or in_group == 0:
        head = lane
    for k in static(range(log2_size)):
        partner = _sg.shuffle_up(head, static(1 << k))
        if in_group >= static(1 << k):
            head = max(head, partner)
    return lane - head


def _segmented_tiled(value, head_flag, op: template(), log2_size: template()  # type: ignore
                     ):
    distance = segment_distance(head_flag, log2_size)
    for k in static(range(log2_size)):
        partner = _sg.shuffle_up(value, static(1 << k))
        if distance >= static(1 << k):
            value = combine(value, partner, op)
    return value


def _block_reduce(value, block_dim: template(), op: template(), dtype: template()  # type: ignore
                  ):
    """The block's `op`-reduction of `value`, in thread 0 (others: their warp's partial)."""
    static_assert(block_dim % static(group_size()) == 0 and block_dim >= static(group_size()),
                  "block.reduce_*: block_dim must be a positive multiple of the subgroup size")
    log2_warp = static(log2_group_size())
    warps = static(block_dim // group_size())
    partial = reduce_tiled(value, op, log2_warp)
    out = partial
    if static(warps > 1):
        tid = _block.thread_idx()
        staged = _SharedArray((warps,), dtype)
        if tid & static(group_size() - 1) == 0:
            staged[tid >> log2_warp] = partial
        _block.sync()
        if tid == 0:
            for w in static(range(1, warps)):
                out = combine(out, staged[w], op)
    return out


def _block_reduce_all(value, block_dim: template(), op: template(), dtype: template()  # type: ignore
                      ):
    """The block's `op`-reduction of `value`, in every thread."""
    total = block_reduce(value, block_dim, op, dtype)
    shared = _SharedArray((1,), dtype)
    if _block.thread_idx() == 0:
        shared[0] = total
    _block.sync()
    out = shared[0]
    _block.sync()           # (the slot may be written again by the block's next call)
    return out



# ---- the public names: Quadrants' signatures, one line each over the generic forms ---------
def _reduce_add_tiled(value, log2_size: template()):  # type: ignore
    return reduce_tiled(value, "add", log2_size)


def _reduce_all_add_tiled(value, log2_size: template()):  # type: ignore
    return reduce_all_tiled(value, "add", log2_size)


def _segmented_reduce_add_tiled(value, head_flag, log2_size: template()):  # type: ignore
    return segmented_tiled(value, head_flag, "add", log2_size)


def _reduce_add(value):  # type: ignore
    return reduce_tiled(value, "add", static(log2_group_size()))


def _reduce_all_add(value):  # type: ignore
    return reduce_all_tiled(value, "add", static(log2_group_size()))


def _block_reduce_add(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce(value, block_dim, "add", dtype)


def _block_reduce_all_add(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce_all(value, block_dim, "add", dtype)


def _reduce_min_tiled(value, log2_size: template()):  # type: ignore
    return reduce_tiled(value, "min", log2_size)


def _reduce_all_min_tiled(value, log2_size: template()):  # type: ignore
    return reduce_all_tiled(value, "min", log2_size)


def _segmented_reduce_min_tiled(value, head_flag, log2_size: template()):  # type: ignore
    return segmented_tiled(value, head_flag, "min", log2_size)


def _reduce_min(value):  # type: ignore
    return reduce_tiled(value, "min", static(log2_group_size()))


def _reduce_all_min(value):  # type: ignore
    return reduce_all_tiled(value, "min", static(log2_group_size()))


def _block_reduce_min(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce(value, block_dim, "min", dtype)


def _block_reduce_all_min(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce_all(value, block_dim, "min", dtype)


def _reduce_max_tiled(value, log2_size: template()):  # type: ignore
    return reduce_tiled(value, "max", log2_size)


def _reduce_all_max_tiled(value, log2_size: template()):  # type: ignore
    return reduce_all_tiled(value, "max", log2_size)


def _segmented_reduce_max_tiled(value, head_flag, log2_size: template()):  # type: ignore
    return segmented_tiled(value, head_flag, "max", log2_size)


def _reduce_max(value):  # type: ignore
    return reduce_tiled(value, "max", static(log2_group_size()))


def _reduce_all_max(value):  # type: ignore
    return reduce_all_tiled(value, "max", static(log2_group_size()))


def _block_reduce_max(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce(value, block_dim, "max", dtype)


def _block_reduce_all_max(value, block_dim: template(), dtype: template()):  # type: ignore
    return block_reduce_all(value, block_dim, "max", dtype)


def _inclusive_add_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "add", log2_size)


def _inclusive_mul_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "mul", log2_size)


def _inclusive_min_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "min", log2_size)


def _inclusive_max_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "max", log2_size)


def _inclusive_and_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "and", log2_size)


def _inclusive_or_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "or", log2_size)


def _inclusive_xor_tiled(value, log2_size: template()):  # type: ignore
    return inclusive_tiled(value, "xor", log2_size)


def _all_true(predicate):  # type: ignore
    return vote_tiled(predicate, "and", static(log2_group_size()))


def _any_true(predicate):  # type: ignore
    return vote_tiled(predicate, "or", static(log2_group_size()))


def _all_equal(value):  # type: ignore
    return all_equal_tiled(value, static(log2_group_size()))


# the generic forms the bodies above call (names resolved when a kernel compiles)
combine, shuffle_xor, vote_tiled = Func(_combine), Func(_shuffle_xor), Func(_vote_tiled)
reduce_tiled, reduce_all_tiled = Func(_reduce_tiled), Func(_reduce_all_tiled)
inclusive_tiled, segment_distance = Func(_inclusive_tiled), Func(_segment_distance)
segmented_tiled, all_equal_tiled = Func(_segmented_tiled), Func(_all_equal_tiled)
block_reduce, block_reduce_all = Func(_block_reduce), Func(_block_reduce_all)

# subgroup.<name> and block.<name> -> Func
SUBGROUP = {"shuffle_xor": shuffle_xor, "all_equal_tiled": all_equal_tiled,
            **{name: Func(globals()["_" + name]) for name in (
                "elect", "broadcast_first", "ballot_first_n", "lanemask_lt", "lanemask_le",
                "lanemask_eq", "lanemask_gt", "lanemask_ge", "all_true_tiled",
                "any_true_tiled", "exclusive_add_tiled", "all_true", "any_true", "all_equal",
                *(f"{kind}_{op}{tiled}" for kind in ("reduce", "reduce_all")
                  for op in ("add", "min", "max") for tiled in ("_tiled", "")),
                *(f"segmented_reduce_{op}_tiled" for op in ("add", "min", "max")),
                *(f"inclusive_{op}_tiled" for op in ("add", "mul", "min", "max", "and",
                                                       "or", "xor")))}}
BLOCK = {f"reduce{kind}_{op}": Func(globals()[f"_block_reduce{kind}_{op}"])
         for kind in ("", "_all") for op in ("add", "min", "max")}
