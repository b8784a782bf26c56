"""Floating-point `+=` reductions on the CPU in one fixed order, whatever the optimisation level.

Stage: codegen (used by `kernel_module.emit_task`). A parallel task's `total[None] += v`
accumulates a private partial per chunk (`passes/reductions.py`). Floating-point addition is
not associative, so the order of those additions is part of the result; it used to be left to
LLVM (the partial's adds carried `reassoc`, which the O3 loop vectorizer turned into vector
partial sums of a width and interleave count of its choosing), so a kernel's quickly compiled
copy (tiered compilation, -O0) and its optimised copy summed the same data to different bits.
Here the order is explicit IR, which no pipeline may change (no fast-math flags):

- the partial of a float reduction is `LANES` (8) partial sums per chunk, each starting at
  -0.0 (the exact identity of IEEE addition); the iteration at linear index `i` of a chunk
  starting at `lo` adds its value to sum number `(i - lo) mod LANES`, in the loop's order;
- at the chunk's end the sums are combined pairwise, `((s0 + s1) + (s2 + s3)) + ((s4 + s5) +
  (s6 + s7))`, and the result is added to the target atomically (`flush_partials`), so the
  chunks' totals are added in the order chunks finish (one thread: in index order).

The eight sums are independent chains, so consecutive iterations overlap in the CPU even
though the loop no longer vectorizes. Integer reductions keep one scalar partial (their sum
does not depend on the order); GPUs keep theirs (a thread's partial, then a block sum).
Nothing is cached.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from ..ir import nodes as n
from .emit_expr import I64, ll_type

LANES = 8


def setup(em: Any, task: n.Task) -> None:
    """Give each float reduction of a chunked task its LANES sums (`em.reduction_lanes`;
    on a grid, each thread's sums meet in a block sum instead)."""
    em.reduction_lanes = {}
    if em.target.traits.grid_launch:
        return
    for k, key in enumerate(task.reductions):
        dt = key[0].dtype
        if not dt.is_float:
            continue
        ty = ll_type(dt)
        with em.builder.goto_block(em.alloca_block):
            sums = em.builder.alloca(ir.ArrayType(ty, LANES), name=f"$lanes{k}")
            for lane in range(LANES):
                em.builder.store(ir.Constant(ty, -0.0), lane_ptr(em.builder, sums, lane))
        em.reduction_lanes[key] = sums


def lane_ptr(b: ir.IRBuilder, sums: ir.Value, lane: int | ir.Value) -> ir.Value:
    index = ir.Constant(I64, lane) if isinstance(lane, int) else lane
    return b.gep(sums, [ir.Constant(I64, 0), index])


# a body this small (statements and expressions) is emitted LANES times in the loop copy that
# cannot fault, one copy per sum: the sums are then plain registers and SLP can vectorize them
MAX_UNROLLED_NODES = 40


def unrollable(em: Any, task: n.Task, cannot_fault: bool) -> bool:
    """Whether the chunk's loop runs LANES iterations per pass, each with its own sum."""
    if not em.reduction_lanes or len(task.vars) != 1 or not cannot_fault:
        return False
    from ..ir.walk import all_exprs, walk_stmts
    stmts = list(walk_stmts(task.body))
    if any(isinstance(st, (n.While, n.For, n.Break, n.Continue, n.Return)) for st in stmts):
        return False
    return len(stmts) + sum(1 for _ in all_exprs(task.body)) <= MAX_UNROLLED_NODES


def emit_unrolled(em: Any, lo: ir.Value, hi: ir.Value, counter: ir.Value,
                  run: Any) -> ir.Value:
    """The loop over lo, lo + LANES, ... below the last full group: `run(index)` emits
    iteration `index` with `em.reduction_lane` = k (a constant: sum k is a scalar local).
    Returns where the rest of the chunk starts (lanes still in step: (rest - lo) mod LANES
    is 0); the scalar sums are stored back into their arrays for it."""
    b, fn = em.builder, em.fn
    scalars = {}
    for key, sums in em.reduction_lanes.items():
        ty = sums.type.pointee.element
        with b.goto_block(em.alloca_block):
            cells = [b.alloca(ty, name="$lane") for _ in range(LANES)]
            for cell in cells:
                b.store(ir.Constant(ty, -0.0), cell)
        scalars[key] = cells
    em.reduction_scalars = scalars
    step = ir.Constant(I64, LANES)
    idx, main_end, cond_bb, rest_bb = strided_main_loop(b, fn, lo, hi, counter, step, "sums")
    for k in range(LANES):
        em.reduction_lane = k
        run(b.add(idx, ir.Constant(I64, k)))
    b.store(b.add(b.load(counter), step), counter)
    b.branch(cond_bb)
    b.position_at_end(rest_bb)
    em.reduction_lane = None
    for key, cells in scalars.items():
        for k, cell in enumerate(cells):
            b.store(b.load(cell), lane_ptr(b, em.reduction_lanes[key], k))
    em.reduction_scalars = {}
    return main_end


def strided_main_loop(b: ir.IRBuilder, fn: ir.Function, lo: ir.Value, hi: ir.Value,
                      counter: ir.Value, step: ir.Value, name: str
                      ) -> tuple[ir.Value, ir.Value, ir.Block, ir.Block]:
    """The head of a loop over lo, lo + step, ... below the last full group of `step`
    indices (`main_end`): the counter set to lo, the condition block, and the builder left in
    the body. Returns (the index, main_end, the condition block the body branches back to, the
    block after the loop, where the rest of the chunk runs one index at a time)."""
    main_end = b.sub(hi, b.srem(b.sub(hi, lo), step))
    b.store(lo, counter)
    cond_bb, body_bb, rest_bb = (fn.append_basic_block(f"{name}_{part}")
                                 for part in ("cond", "body", "rest"))
    b.branch(cond_bb)
    b.position_at_end(cond_bb)
    idx = b.load(counter)
    b.cbranch(b.icmp_signed("<", idx, main_end), body_bb, rest_bb)
    b.position_at_end(body_bb)
    return idx, main_end, cond_bb, rest_bb


def set_position(em: Any, position: ir.Value) -> None:
    """The iteration about to run is number `position` (an i64, from 0) of its chunk."""
    if em.reduction_lanes:
        em.reduction_lane = em.builder.and_(position, ir.Constant(I64, LANES - 1))


def accumulator(em: Any, key: Any, stmt: Any = None) -> ir.Value | None:
    """Where the current iteration's `+=` into `key` (the statement `stmt`) goes, if it has
    lanes. In an interleaved body (`passes/interleave.py`) `em.reduction_lane` is the pass's
    first position and `stmt`, lane k's copy, adds to the sum of the position k further."""
    sums = em.reduction_lanes.get(key)
    if sums is None:
        return None
    assert em.reduction_lane is not None, "a float reduction outside the task's loop"
    if isinstance(em.reduction_lane, int):
        return em.reduction_scalars[key][em.reduction_lane]
    position = em.reduction_lane
    copy = em.interleaved_evals.get(id(stmt))
    if copy is not None and copy[1]:
        b = em.builder
        position = b.and_(b.add(position, ir.Constant(I64, copy[1])),
                          ir.Constant(I64, LANES - 1))
    return lane_ptr(em.builder, sums, position)


def combine(em: Any, task: n.Task) -> None:
    """At the chunk's end: each reduction's sums combined pairwise into its `$partial<k>`."""
    b = em.builder
    for k, key in enumerate(task.reductions):
        sums = em.reduction_lanes.get(key)
        if sums is None:
            continue
        values = [b.load(lane_ptr(b, sums, lane)) for lane in range(LANES)]
        while len(values) > 1:
            values = [b.fadd(values[j], values[j + 1]) for j in range(0, len(values), 2)]
        b.store(values[0], em.local_ptr(f"$partial{k}", key[0].dtype))
