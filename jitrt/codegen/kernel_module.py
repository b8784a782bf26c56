"""Build the LLVM module of one compiled kernel: an entry function and one function per task.

Stage: codegen. Input: a `TaskedKernel`, a `Target`, the context layout and a symbol prefix.
Output: an llvmlite `ir.Module` plus the table of access sites (for fault messages).
On the CPU, `<prefix>_entry(ctx)` runs serial tasks inline and hands each parallel task to the
runtime's `parallel_for` (reached through the context, so no address is embedded); each
`<prefix>_task<k>(ctx, caps, lo, hi, tid)` runs its body for linear indices lo..hi (and calls
`<prefix>_task<k>_checked`, its fully checked loop left unoptimised, when only a fault can
fail its box test: `emit_fault_only_task`). Loops where LLVM's unrolling buys nothing carry
metadata that turns it off (`loop_hints.py`). On GPU targets every parallel task also gets a
kernel wrapper that maps one thread to one index, and every serial task a one-thread kernel
(`<prefix>_serial<k>_kernel`). The `LaunchableTask` list says, per task, what a device
launches.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from .. import dtypes
from ..ir import nodes as n
from ..ir.facts import TaskFacts
from ..ir.walk import all_exprs, assigned_names, walk_expr
from . import abi, bounds, local_init, loop_hints, real_funcs, reduction_lanes
from .abi import AccessSite, LaunchableTask
from .check_facts import Facts
from .emit_expr import I32, I64, ll_type
from .emit_adstack import AdStackEmitter
from .emit_deferred import DeferredReadEmitter
from .emit_narrow import NarrowAccessEmitter
from .emit_simt import SimtEmitter
from .emit_stmt import StmtEmitter
from .targets import MAX_BLOCK, Target

I8P = ir.IntType(8).as_pointer()
I64P = I64.as_pointer()
TASK_TYPE = ir.FunctionType(ir.VoidType(), [I64P, I64P, I64, I64, I64])
# on GPUs: (ctx, caps, first index, end, thread, step): one call per thread, grid-stride
GPU_TASK_TYPE = ir.FunctionType(ir.VoidType(), [I64P, I64P, I64, I64, I64, I64])
PARALLEL_FOR_TYPE = ir.FunctionType(ir.VoidType(), [I8P, TASK_TYPE.as_pointer(), I64P, I64P, I64,
                                                    I64])


class FunctionEmitter(SimtEmitter, StmtEmitter, AdStackEmitter, DeferredReadEmitter,
                      NarrowAccessEmitter):
    def __init__(self, module: ir.Module, target: Target, layout: abi.ContextLayout,
                 fn: ir.Function, ctx_ptr: ir.Value, sites: list[AccessSite]) -> None:
        self.module, self.target, self.layout, self.fn = module, target, layout, fn
        self.ctx_ptr = ctx_ptr
        self.sites = sites
        self.alloca_block = fn.append_basic_block("allocas")
        self.start_block = fn.append_basic_block("start")
        self.builder = ir.IRBuilder(self.start_block)
        self.locals: dict[str, ir.Value] = {}
        self.no_init: frozenset[str] = frozenset()   # locals needing no zero (local_init.py)
        self.loop_targets: list[tuple[ir.Block, ir.Block]] = []
        self.vectorizable = False      # set for a parallel task's body: math may be vector code
        self._ids = 0
        self.stacks: dict[tuple[int, int, int], tuple[ir.Value, ir.Value, ir.Value, ir.Value]] = {}
        self.unread_stacks: frozenset[int] = frozenset()   # (a parallel task's: see there)
        self.local_stack_ids: set[int] = set()   # stacks in local memory (emit_adstack.py)
        self.task_index = 0
        self.tid: ir.Value = ir.Constant(I64, 0)
        self.reductions: dict = {}   # reduction key -> accumulator alloca (parallel tasks)
        self.reduction_lanes: dict = {}   # CPU float reductions: their sums (reduction_lanes)
        self.reduction_lane: ir.Value | int | None = None   # the current iteration's sum
        self.reduction_scalars: dict = {}   # in an unrolled pass: key -> its LANES sums
        self.interleaved_evals: dict = {}   # in an interleaved pass: `Lanes.evals`
        self.private: frozenset = frozenset()   # fields whose atomics need no atomicity
        self.facts = TaskFacts()        # what the passes say of the task (`ir/facts.py`)
        self.invariants: dict[int, ir.Value] = {}   # context slot -> its load at entry
        self.alias_tags: dict = {}      # GPUs: (field slot, grad) -> its alias metadata
        # accesses the current loop copy runs without checks -> their axes (codegen/bounds.py)
        self.unchecked: dict = {}
        self.interrupt_epoch: ir.Value | None = None     # see codegen/interrupts.py
        self.interrupt_counter: ir.Value | None = None
        self.real_rets: tuple = ()         # in a real function: its result types
        self.shared_arrays: dict[int, tuple[ir.GlobalVariable, int]] = {}  # emit_simt
        self.checked: list[Facts] = []   # GPUs: the checks made, per statement list
        self.conditional = 0            # > 0 inside an expression's conditional part
        self.deferring = False          # a deferred read's check may be pending (emit_deferred)
        self.waiting_reads = 0          # > 0 in a loop whose reads' checks wait (emit_stmt)

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def add_site(self, ref: n.Ref | str, loc: n.Loc, kind: str,
                 values: tuple[tuple[str, str], ...] = ()) -> int:
        """A fault site: an access (named by its ref) or an assertion (named by its message,
        with its run-time values' (dtype, spec))."""
        from ..ir.printer import ref_text
        name = ref if isinstance(ref, str) else ref_text(ref).split(":", 1)[1]
        offset = ref.offset if isinstance(ref, n.FieldRef) else ()
        site = AccessSite(name, loc, kind, offset, values)
        # one index per site, whichever loop copies check it: a module whose tasks have their
        # checked loop alone (`Target.one_copy`) gets the table of the one with both copies
        if site in self.sites:
            return self.sites.index(site)
        self.sites.append(site)
        return len(self.sites) - 1

    def finish(self) -> None:
        if not self.builder.block.is_terminated:
            self.builder.ret_void()
        with self.builder.goto_block(self.alloca_block):
            self.builder.branch(self.start_block)


def task_signature_caps(task: n.Task) -> int:
    return 2 * len(task.vars) + len(task.captures)


def emit_task(module: ir.Module, target: Target, layout: abi.ContextLayout, task: n.Task,
              index: int, name: str, local_types: dict[str, dtypes.DataType],
              sites: list[AccessSite], facts: TaskFacts) -> ir.Function:
    grid = target.traits.grid_launch
    fn = ir.Function(module, GPU_TASK_TYPE if grid else TASK_TYPE, name)
    em, begins, exts = task_emitter(module, target, layout, task, index, fn, sites, facts)
    b = em.builder
    lo, hi = fn.args[2], fn.args[3]
    step = fn.args[5] if grid else ir.Constant(I64, 1)
    counter = em.local_ptr("$index", dtypes.i64)
    exit_bb = fn.append_basic_block("exit")
    proven, gathers, cold = check_free_copy(task, target)
    if proven and not (cold and target.one_copy):
        # two copies of the loop: without their checks when the box is inside
        fast_bb, checked_bb = fn.append_basic_block("unchecked"), fn.append_basic_block("checked")
        inside = bounds.box_inside(b, proven, begins, exts, em.extents,
                                   lambda e: em.to_slot(em.expr(e), e.dtype))
        arrays = facts.private_arrays    # plain in the fast loop while apart from other arrays
        inside = bounds.apart(em, task, sorted(arrays, key=repr), inside)
        if gathers:
            inside = bounds.gathers_inside(em, task, gathers, proven, inside, lo, hi, begins[0])
        b.cbranch(inside, fast_bb, checked_bb)
        if cold:
            b.position_at_end(checked_bb)
            checked = emit_fault_only_task(module, target, layout, task, index,
                                           f"{name}_checked", local_types, sites, facts)
            b.call(checked, fn.args)
            b.ret_void()
        b.position_at_end(fast_bb)
        em.unchecked, fields = {**proven, **gathers}, em.private
        em.private = fields | arrays
        emit_fast_loop(em, task, local_types, counter, lo, hi, step, begins, exts, exit_bb)
        em.unchecked, em.private = {}, fields
        if not cold:
            b.position_at_end(checked_bb)
            emit_task_loop(em, task, local_types, counter, lo, hi, step, begins, exts, exit_bb)
    else:
        emit_task_loop(em, task, local_types, counter, lo, hi, step, begins, exts, exit_bb)
    b.position_at_end(exit_bb)
    reduction_lanes.combine(em, task)
    flush = em.reductions
    em.reductions = {}
    if flush and grid:
        block_sum(em, flush, name)
        # one atomic per block, not per thread: thread 0 holds the block's sums
        tid = target.thread_in_block(module, b)
        with b.if_then(b.icmp_unsigned("==", tid, ir.Constant(I32, 0))):
            flush_partials(em, flush, task)
    else:
        flush_partials(em, flush, task)
    em.finish()
    return fn


def check_free_copy(task: n.Task, target: Target
                    ) -> tuple[dict[Any, Any], dict[Any, Any], bool]:
    """(the accesses proven in bounds inside the box (`bounds.affine_accesses`), the gathers
    a scan bounds (CPU, one variable: `x[idx[i]]`), whether only a fault fails the box test
    (`fault_only_task`))."""
    proven = bounds.affine_accesses(task)
    grid = target.traits.grid_launch
    gathers = bounds.gathered_accesses(task, proven) if len(task.vars) == 1 and \
        not grid else {}
    cold = bool(proven) and not grid and not gathers and bounds.fault_only(task, proven)
    return proven, gathers, cold


def fault_only_task(task: n.Task, target: Target) -> bool:
    """Whether the task's checked loop runs only in launches that fault, so that its
    check-free copy is for speed alone: a quick copy (`Target.one_copy`) leaves that copy out
    and runs the checked loop, with the same fault sites (`FunctionEmitter.add_site`)."""
    return check_free_copy(task, target)[2]


# a parallel body with more calls of jitrt's own math (`vector_math`: each ~40 instructions,
# inlined) than this calls the C library's functions instead, as with fast_math=False: LLVM's
# time grows faster than the body (issue 34; `v = sin(v) * c` chains, LLVM process time on the
# development VM, 2026-11-28: 8 calls 0.16 s, 16 0.33 s, 50 1.05 s, 100 3.2 s, 200 9.0 s,
# against 0.08-0.17 s with libm calls; docs/architecture.md, "Bounded compile times")
MAX_OWN_MATH = 32


def own_math_calls(task: n.Task) -> int:
    """How many calls in the task's body jitrt's own math would serve."""
    from .vector_math import provides
    return sum(1 for e in all_exprs(task.body)
               if isinstance(e, n.Math) and provides(e.fn, ll_type(e.dtype)))


def task_emitter(module: ir.Module, target: Target, layout: abi.ContextLayout, task: n.Task,
                 index: int, fn: ir.Function, sites: list[AccessSite], facts: TaskFacts
                 ) -> tuple[FunctionEmitter, list[ir.Value], list[ir.Value]]:
    """The emitter of a task function `fn` (arguments as `TASK_TYPE`, GPU: and a step): the
    box (begins, extents) and the captures read from `caps`, the `+=` partials set up, the
    passes' facts about the task (`facts`) at hand."""
    ctx, caps, _, _, tid = fn.args[:5]
    em = FunctionEmitter(module, target, layout, fn, ctx, sites)
    em.task_index, em.tid = index, tid
    em.no_init = local_init.assigned_before_read(task.body)
    em.vectorizable = own_math_calls(task) <= MAX_OWN_MATH
    em.unread_stacks = unread_stacks(task)
    b = em.builder
    d = len(task.vars)
    begins = [b.load(b.gep(caps, [ir.Constant(I64, k)])) for k in range(d)]
    exts = [b.load(b.gep(caps, [ir.Constant(I64, d + k)])) for k in range(d)]
    for k, (cname, cdt) in enumerate(task.captures):
        raw = b.load(b.gep(caps, [ir.Constant(I64, 2 * d + k)]))
        b.store(em.from_slot(raw, cdt), em.local_ptr(cname, cdt))
    for k, key in enumerate(task.reductions):
        acc = em.local_ptr(f"$partial{k}", key[0].dtype)
        em.reductions[key] = acc
    reduction_lanes.setup(em, task)
    em.facts = facts
    em.private = facts.private_refs      # atomics no other iteration races with: plain
    return em, begins, exts


def unread_stacks(task: n.Task) -> frozenset[int]:
    """Ids of the task's adstacks whose values it never reads (only their adjoints, which
    live in a local: codegen/emit_adstack.py): they need no memory."""
    read = {e.stack.id for e in all_exprs(task.body) if isinstance(e, n.StackTop)}
    return frozenset(s.id for s in task.stacks) - read


def emit_fault_only_task(module: ir.Module, target: Target, layout: abi.ContextLayout,
                         task: n.Task, index: int, name: str,
                         local_types: dict[str, dtypes.DataType],
                         sites: list[AccessSite], facts: TaskFacts) -> ir.Function:
    """A CPU task's loop with every bounds check, as a function of its own that LLVM does not
    optimise (`optnone`: compiled at about a quarter of the cost of an optimised copy), for a
    task whose box test fails only when the launch faults (`bounds.fault_only`): it then runs
    to report the fault, and its speed does not matter."""
    fn = ir.Function(module, TASK_TYPE, name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("optnone")
    fn.attributes.add("cold")
    em, begins, exts = task_emitter(module, target, layout, task, index, fn, sites, facts)
    counter = em.local_ptr("$index", dtypes.i64)
    exit_bb = fn.append_basic_block("exit")
    emit_task_loop(em, task, local_types, counter, fn.args[2], fn.args[3], ir.Constant(I64, 1),
                   begins, exts, exit_bb)
    em.builder.position_at_end(exit_bb)
    reduction_lanes.combine(em, task)
    flush, em.reductions = em.reductions, {}     # (the flush's atomics are not partials)
    flush_partials(em, flush, task)
    em.finish()
    return fn


def block_sum(em: FunctionEmitter, flush: dict, name: str) -> None:
    """Sum each `+=` partial over the thread block into thread 0's partial: a warp sum, one
    value per warp in shared memory, a barrier, then warp 0 sums those (every thread of the
    block comes here: each calls its task function once)."""
    module, b, target = em.module, em.builder, em.target
    tid = target.thread_in_block(module, b)
    size = target.warp_size(module, b)
    lane = b.and_(tid, b.sub(size, ir.Constant(I32, 1)))
    warp = b.udiv(tid, size)
    block = target.block_size(module, b)
    warps = b.udiv(b.add(block, b.sub(size, ir.Constant(I32, 1))), size)
    # the lanes of this warp that exist (the last warp of a block may be partial: a
    # jr.simt loop's block of 16 threads, a block of 32 on a wavefront of 64)
    rest = b.sub(block, b.mul(warp, size))
    present = b.select(b.icmp_unsigned("<", rest, size), rest, size)
    slots = MAX_BLOCK // min(target.warp_sizes)
    shared = []
    for k, (ref, _) in enumerate(flush):
        ty = ll_type(ref.dtype)
        smem = ir.GlobalVariable(module, ir.ArrayType(ty, slots), f"{name}_sum{k}",
                                 addrspace=3)
        smem.linkage = "internal"
        smem.initializer = ir.Constant(ir.ArrayType(ty, slots), ir.Undefined)
        acc = em.local_ptr(f"$partial{k}", ref.dtype)
        v = warp_sum(em, b.load(acc), ref.dtype, lane, present)
        with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(I32, 0))):
            b.store(v, b.gep(smem, [ir.Constant(I32, 0), warp]))
        shared.append((smem, acc, ref.dtype, ty))
    target.barrier(module, b)
    with b.if_then(b.icmp_unsigned("==", warp, ir.Constant(I32, 0))):
        for smem, acc, dt, ty in shared:
            used = b.icmp_unsigned("<", lane, warps)
            mine = b.load(b.gep(smem, [ir.Constant(I32, 0),
                                       b.select(used, lane, ir.Constant(I32, 0))]))
            zero = ir.Constant(ty, 0.0 if dt.is_float else 0)
            b.store(warp_sum(em, b.select(used, mine, zero), dt, lane, present), acc)


def emit_task_loop(em: FunctionEmitter, task: n.Task, local_types: dict[str, dtypes.DataType],
                   counter: ir.Value, lo: ir.Value, hi: ir.Value, step: ir.Value,
                   begins: list[ir.Value], exts: list[ir.Value], exit_bb: ir.Block,
                   first: ir.Value | None = None) -> None:
    """The loop over linear indices lo, lo + step, ... < hi: each index split into the task's
    variables, then the body; it ends by jumping to `exit_bb`. `first`: where the chunk
    began, if before lo (float reductions count iterations from there)."""
    b, fn, d = em.builder, em.fn, len(task.vars)
    if d >= 2 and not em.target.traits.grid_launch:    # a chunk: row by row
        emit_rows_loop(em, task, local_types, counter, lo, hi, begins, exts, exit_bb,
                       lo if first is None else first)
        return
    b.store(lo, counter)
    cond_bb, body_bb = fn.append_basic_block("cond"), fn.append_basic_block("body")
    b.branch(cond_bb)
    b.position_at_end(cond_bb)
    idx = b.load(counter)
    b.cbranch(b.icmp_signed("<", idx, hi), body_bb, exit_bb)
    b.position_at_end(body_bb)
    reduction_lanes.set_position(em, b.sub(idx, lo if first is None else first))
    rest = idx
    for k in reversed(range(d)):
        if d == 1:
            coord = rest
        else:
            coord = b.srem(rest, exts[k])
            rest = b.sdiv(rest, exts[k])
        set_var(em, task, local_types, k, b.add(coord, begins[k]))
    em.body(task.body)
    b.store(b.add(b.load(counter), step), counter)
    back = b.branch(cond_bb)
    if em.target.traits.unroll_hints and loop_hints.unrolling_pointless(task.body, False):
        loop_hints.mark_loop(em.module, back, loop_hints.NO_RUNTIME_UNROLL)


def emit_fast_loop(em: FunctionEmitter, task: n.Task, local_types: dict[str, dtypes.DataType],
                   counter: ir.Value, lo: ir.Value, hi: ir.Value, step: ir.Value,
                   begins: list[ir.Value], exts: list[ir.Value], exit_bb: ir.Block) -> None:
    """The loop copy without bounds checks. On the CPU, where every access of the body is
    proven in bounds (so nothing in it can fault) and the body runs an inner loop, one pass
    runs `Target.lanes` consecutive indices (the interleaved body the passes made,
    `TaskFacts.interleaved`) and the chunk's last indices run one at a time."""
    found = None
    if em.target.lanes > 1 and bounds.cannot_fault(task.body, em.unchecked):
        found = interleaved_body(em, task)
    if found is None:
        if not em.target.traits.grid_launch and reduction_lanes.unrollable(
                em, task, bounds.cannot_fault(task.body, em.unchecked)):
            def run(index: ir.Value) -> None:
                set_var(em, task, local_types, 0, em.builder.add(index, begins[0]))
                em.body(task.body)
            rest = reduction_lanes.emit_unrolled(em, lo, hi, counter, run)
            emit_task_loop(em, task, local_types, counter, rest, hi, step, begins, exts,
                           exit_bb, first=lo)
            return
        emit_task_loop(em, task, local_types, counter, lo, hi, step, begins, exts, exit_bb)
        return
    lanes, body = found
    count = ir.Constant(I64, lanes.count)
    em.unchecked = {**em.unchecked, **{
        lanes.key(ref, indices, k): bounds.shifted(axes, k)
        for (ref, indices), axes in em.unchecked.items() for k in range(lanes.count)}}
    b = em.builder
    idx, main_end, cond_bb, rest_bb = reduction_lanes.strided_main_loop(
        b, em.fn, lo, hi, counter, count, "lanes")
    set_var(em, task, local_types, 0, b.add(idx, begins[0]))
    reduction_lanes.set_position(em, b.sub(idx, lo))
    em.interleaved_evals = lanes.evals
    em.body(body)
    em.interleaved_evals = {}
    b.store(b.add(b.load(counter), count), counter)
    back = b.branch(cond_bb)
    loop_hints.mark_loop(em.module, back, loop_hints.NO_RUNTIME_UNROLL)
    b.position_at_end(rest_bb)
    emit_task_loop(em, task, local_types, counter, main_end, hi, step, begins, exts, exit_bb,
                   first=lo)


def interleaved_body(em: FunctionEmitter, task: n.Task) -> tuple[Any, n.Body] | None:
    """The interleaved body the passes made of `task` for this target's lanes (`Lanes`, body;
    `ir.facts.TaskFacts.interleaved`), asked for where nothing in the body can fault."""
    found = em.facts.interleaved
    return found if found is not None and found[0].count == em.target.lanes else None


def set_var(em: FunctionEmitter, task: n.Task, local_types: dict[str, dtypes.DataType],
            k: int, value: ir.Value) -> None:
    """Task variable k = `value` (an i64), and its 64-bit copy `$wide<k>`, from which the
    unchecked loop computes proven indices without truncating and widening them again."""
    em.builder.store(value, em.local_ptr(f"$wide{k}", dtypes.i64))
    var_dt = local_types[task.vars[k]]
    if var_dt.bits == 32:
        value = em.builder.trunc(value, I32)
    em.builder.store(value, em.local_ptr(task.vars[k], var_dt))


def emit_rows_loop(em: FunctionEmitter, task: n.Task, local_types: dict[str, dtypes.DataType],
                   counter: ir.Value, lo: ir.Value, hi: ir.Value, begins: list[ir.Value],
                   exts: list[ir.Value], exit_bb: ir.Block, chunk_lo: ir.Value) -> None:
    """A multi-dimensional box's chunk lo..hi on the CPU as rows: the outer coordinates are
    computed once per row, the innermost dimension is a plain counted loop (vectorizable)."""
    b, fn, d = em.builder, em.fn, len(task.vars)
    last = d - 1
    b.store(lo, counter)
    row_cond, row_body = fn.append_basic_block("row_cond"), fn.append_basic_block("row")
    b.branch(row_cond)
    b.position_at_end(row_cond)
    idx = b.load(counter)
    b.cbranch(b.icmp_signed("<", idx, hi), row_body, exit_bb)
    b.position_at_end(row_body)
    col = b.srem(idx, exts[last])
    rest = b.sdiv(idx, exts[last])
    for k in reversed(range(last)):
        set_var(em, task, local_types, k, b.add(b.srem(rest, exts[k]), begins[k]))
        rest = b.sdiv(rest, exts[k])
    left = b.sub(exts[last], col)
    remaining = b.sub(hi, idx)
    count = b.select(b.icmp_signed("<", left, remaining), left, remaining)
    first = b.add(begins[last], col)
    j = em.local_ptr("$col", dtypes.i64)
    b.store(ir.Constant(I64, 0), j)
    col_cond, col_body, row_end = (fn.append_basic_block(x) for x in
                                   ("col_cond", "col", "row_end"))
    b.branch(col_cond)
    b.position_at_end(col_cond)
    jv = b.load(j)
    b.cbranch(b.icmp_signed("<", jv, count), col_body, row_end)
    b.position_at_end(col_body)
    set_var(em, task, local_types, last, b.add(first, jv))
    reduction_lanes.set_position(em, b.sub(b.add(idx, jv), chunk_lo))
    em.body(task.body)
    b.store(b.add(b.load(j), ir.Constant(I64, 1)), j)
    back = b.branch(col_cond)
    if loop_hints.unrolling_pointless(task.body, False):
        loop_hints.mark_loop(em.module, back, loop_hints.NO_RUNTIME_UNROLL)
    b.position_at_end(row_end)
    b.store(b.add(idx, count), counter)
    back = b.branch(row_cond)
    loop_hints.mark_loop(em.module, back, loop_hints.NO_RUNTIME_UNROLL)  # its body is a loop


def flush_partials(em: FunctionEmitter, flush: dict, task: n.Task) -> None:
    """Add each `+=` partial of a task to its target with one atomic."""
    for k, (ref, idx) in enumerate(flush):
        consts = tuple(n.Const(i, dtypes.i64) for i in idx)
        em.stmt_Eval(n.Eval(n.Atomic("add", ref, consts, n.Local(f"$partial{k}", ref.dtype),
                                     ref.dtype, task.loc), task.loc))


def warp_sum(em: FunctionEmitter, v: ir.Value, dt: dtypes.DataType, lane: ir.Value,
             present: ir.Value | None = None) -> ir.Value:
    """The sum of `v` over the lanes of a (converged) warp, in lane 0. A target whose
    warp size is known only to its backend (AMDGPU: 32 or 64) skips the steps past it;
    `present`: how many lanes of the warp exist (lanes past them add nothing)."""
    module, b, target = em.module, em.builder, em.target
    size = target.warp_size(module, b)
    bits = ir.IntType(dt.bits)

    def shuffle(x: ir.Value, delta: int) -> ir.Value:
        return target.shuffle_down(module, b, x, delta, lane)
    for delta in (32, 16, 8, 4, 2, 1):
        if delta >= max(target.warp_sizes):
            continue
        raw = v if not dt.is_float else b.bitcast(v, bits)
        if dt.bits == 64:
            lo = shuffle(b.trunc(raw, I32), delta)
            hi = shuffle(b.trunc(b.lshr(raw, ir.Constant(I64, 32)), I32), delta)
            other = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        else:
            got = shuffle(raw if dt.bits == 32 else b.zext(raw, I32), delta)
            other = got if dt.bits == 32 else b.trunc(got, bits)
        if delta >= min(target.warp_sizes):     # a step only warps wider than delta take
            other = b.select(b.icmp_unsigned(">", size, ir.Constant(I32, delta)), other,
                             ir.Constant(bits, 0))
        if present is not None:
            source = b.add(lane, ir.Constant(I32, delta))
            other = b.select(b.icmp_unsigned("<", source, present), other,
                             ir.Constant(bits, 0))
        if dt.is_float:
            v = b.fadd(v, b.bitcast(other, v.type))
        else:
            v = b.add(v, other)
    return v


def emit_entry(module: ir.Module, target: Target, layout: abi.ContextLayout,
               kernel: n.TaskedKernel, name: str, task_fns: dict[int, ir.Function],
               sites: list[AccessSite]) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P]), name)
    em = FunctionEmitter(module, target, layout, fn, fn.args[0], sites)
    em.no_init = local_init.assigned_before_read(local_init.entry_body(kernel.tasks))
    em.begin_launch()
    b = em.builder
    for k, task in enumerate(kernel.tasks):
        em.task_index = k
        if task.kind == "serial":
            em.body(task.body)
            continue
        caps, total = box_caps(em, task)
        pf = b.inttoptr(em.load_slot(abi.SLOT_PARALLEL_FOR), PARALLEL_FOR_TYPE.as_pointer())
        pool = b.inttoptr(em.load_slot(abi.SLOT_POOL), I8P)
        b.call(pf, [pool, task_fns[k], em.ctx_ptr, caps, total,
                    ir.Constant(I64, task.cost)])
    em.finish()
    return fn


def gpu_kernel(module: ir.Module, target: Target, name: str, slots: int, pointers: int = 0
               ) -> ir.Function:
    """A kernel `(slot 0, ..., slot <slots - 1>, threads launched, *pointers)`: the launch
    context by value, one 64-bit parameter per slot."""
    ty = ir.FunctionType(ir.VoidType(), [I64] * (slots + 1) + [I64P] * pointers)
    fn = ir.Function(module, ty, name)
    target.mark_kernel(fn)
    return fn


def gpu_context(b: ir.IRBuilder, target: Target, fn: ir.Function, slots: int) -> ir.Value:
    """The context parameters of a GPU kernel as an `i64*` the emitters index as on the CPU
    (a local array; its constant-index loads become the parameters themselves). Call with the
    builder in the function's first block."""
    arr = target.alloca(b, ir.ArrayType(I64, max(slots, 1)), "ctx")
    ctx = b.bitcast(arr, I64P)
    for k in range(slots):
        b.store(fn.args[k], b.gep(ctx, [ir.Constant(I64, k)]))
    return ctx


def gpu_emitter(module: ir.Module, target: Target, layout: abi.ContextLayout, name: str,
                sites: list[AccessSite]) -> FunctionEmitter:
    """A FunctionEmitter for a new GPU kernel taking the context by value."""
    fn = gpu_kernel(module, target, name, layout.gpu_slots)
    em = FunctionEmitter(module, target, layout, fn, ir.Constant(I64P, None), sites)
    with em.builder.goto_block(em.alloca_block):
        em.ctx_ptr = gpu_context(em.builder, target, fn, layout.gpu_slots)
    return em


def locals_slot_ptr(em: FunctionEmitter, slot: int) -> ir.Value:
    """Where a kernel-scope local of context slot `slot` lives on a GPU (the locals buffer)."""
    base = em.builder.inttoptr(em.load_slot(abi.SLOT_GPU_LOCALS), I64P)
    return em.builder.gep(base, [ir.Constant(I64, slot - em.layout.gpu_slots)])


def global_thread(module: ir.Module, target: Target, b: ir.IRBuilder) -> ir.Value:
    """This thread's index in the whole grid (block index * block size + thread index)."""
    block = b.zext(target.block_index(module, b), I64)
    size = b.zext(target.block_size(module, b), I64)
    return b.add(b.mul(block, size), b.zext(target.thread_in_block(module, b), I64))


def load_kernel_locals(em: FunctionEmitter, names: set[str],
                       local_types: dict[str, dtypes.DataType]) -> None:
    """Bring kernel-scope locals an earlier task stored (GPU context slots) into registers."""
    for name, slot in em.layout.local_slots:
        if name in names:
            dt = local_types[name]
            raw = em.builder.load(locals_slot_ptr(em, slot))
            em.builder.store(em.from_slot(raw, dt), em.local_ptr(name, dt))


def emit_gpu_parallel(module: ir.Module, target: Target, layout: abi.ContextLayout,
                      task: n.Task, index: int, task_fn: ir.Function, name: str,
                      local_types: dict[str, dtypes.DataType],
                      sites: list[AccessSite]) -> ir.Function:
    """A grid-stride GPU kernel over a parallel task's box: it evaluates the bounds and the
    captures itself (from the context), then every thread calls `task_fn` once, which runs
    index = thread, thread + threads launched, ... below the box's size (any grid size is
    correct) and adds its `+=` partials once (a warp sum first: all lanes take part)."""
    em = gpu_emitter(module, target, layout, name, sites)
    fn, ctx, launched = em.fn, em.ctx_ptr, em.fn.args[layout.gpu_slots]
    em.task_index = index
    b = em.builder
    used = {e.name for ex in task.begins + task.ends for e in walk_expr(ex)
            if isinstance(e, n.Local)} | {c for c, _ in task.captures}
    load_kernel_locals(em, used, local_types)
    caps, total = box_caps(em, task)
    thread = global_thread(module, target, b)
    b.call(task_fn, [ctx, caps, thread, total, thread, launched])
    em.finish()
    return fn


def box_caps(em: FunctionEmitter, task: n.Task) -> tuple[ir.Value, ir.Value]:
    """The caps array of a parallel task (begins, extents, captures) and its box's size."""
    b = em.builder
    d = len(task.vars)
    with b.goto_block(em.alloca_block):
        caps_arr = em.target.alloca(b, ir.ArrayType(I64, max(task_signature_caps(task), 1)),
                                    "caps")
    caps = b.bitcast(caps_arr, I64P)
    total: ir.Value = ir.Constant(I64, 1)
    for axis, (be, ee) in enumerate(zip(task.begins, task.ends)):
        begin = em.to_slot(em.expr(be), be.dtype)
        end = em.to_slot(em.expr(ee), ee.dtype)
        ext = b.sub(end, begin)
        ext = b.select(b.icmp_signed("<", ext, ir.Constant(I64, 0)), ir.Constant(I64, 0), ext)
        b.store(begin, b.gep(caps, [ir.Constant(I64, axis)]))
        b.store(ext, b.gep(caps, [ir.Constant(I64, d + axis)]))
        total = b.mul(total, ext)
    for c, (cname, cdt) in enumerate(task.captures):
        v = b.load(em.local_ptr(cname, cdt))
        b.store(em.to_slot(v, cdt), b.gep(caps, [ir.Constant(I64, 2 * d + c)]))
    return caps, total


def emit_gpu_serial(module: ir.Module, target: Target, layout: abi.ContextLayout,
                    task: n.Task, index: int, name: str,
                    local_types: dict[str, dtypes.DataType],
                    sites: list[AccessSite], facts: TaskFacts) -> ir.Function:
    """A GPU kernel running a serial task's body once (launched as one thread): kernel-scope
    locals come in from the context slots earlier tasks stored, and the ones it assigns go
    back there for later tasks."""
    em = gpu_emitter(module, target, layout, name, sites)
    em.task_index, em.facts = index, facts
    em.no_init = local_init.assigned_before_read(task.body)
    load_kernel_locals(em, {name for name, _ in layout.local_slots}, local_types)
    em.body(task.body)
    if not em.builder.block.is_terminated:
        mine = assigned_names(task.body)
        for lname, slot in layout.local_slots:
            if lname in mine:
                dt = local_types[lname]
                v = em.builder.load(em.local_ptr(lname, dt))
                em.builder.store(em.to_slot(v, dt), locals_slot_ptr(em, slot))
    em.finish()
    return em.fn


def build_module(kernel: n.TaskedKernel, target: Target, layout: abi.ContextLayout,
                 prefix: str, local_types: dict[str, dtypes.DataType],
                 facts: tuple[TaskFacts, ...]
                 ) -> tuple[ir.Module, list[AccessSite], tuple[LaunchableTask, ...]]:
    """The module of one kernel: per parallel task a chunk function (and a GPU kernel around
    it), per serial task a GPU kernel on GPU targets, and on the CPU the fused entry. `facts`:
    per task, what the passes computed for this target (`passes.pipeline.codegen_facts`)."""
    module = ir.Module(name=prefix)
    module.triple = target.triple
    module.data_layout = target.data_layout
    sites: list[AccessSite] = []
    task_fns: dict[int, ir.Function] = {}
    tasks = []
    real_funcs.declare(module, kernel.funcs)
    emit_real_funcs(module, target, layout, kernel.funcs, sites)
    for k, task in enumerate(kernel.tasks):
        symbol = ""
        if task.kind == "parallel":
            task_fns[k] = emit_task(module, target, layout, task, k, f"{prefix}_task{k}",
                                    local_types, sites, facts[k])
            symbol = f"{prefix}_task{k}"
            if target.traits.grid_launch:
                task_fns[k].linkage = "internal"
                task_fns[k].attributes.add("alwaysinline")   # the context must not escape
                symbol = f"{prefix}_task{k}_kernel"
                emit_gpu_parallel(module, target, layout, task, k, task_fns[k], symbol,
                                  local_types, sites)
        elif target.traits.grid_launch:
            symbol = f"{prefix}_serial{k}_kernel"
            emit_gpu_serial(module, target, layout, task, k, symbol, local_types, sites,
                            facts[k])
        tasks.append(LaunchableTask(k, task.kind, symbol, len(task.vars), task.cost,
                                    len(task.reductions), len(task.stacks), task.block_dim))
    if not target.traits.grid_launch:
        emit_entry(module, target, layout, kernel, f"{prefix}_entry", task_fns, sites)
    return module, sites, tuple(tasks)


def emit_real_funcs(module: ir.Module, target: Target, layout: abi.ContextLayout,
                    funcs: tuple[n.RealFunc, ...], sites: list[AccessSite]) -> None:
    """Each real function's body (declared first by real_funcs.declare)."""
    for f in funcs:
        fn = module.get_global(real_funcs.symbol(module, f.name))
        em = FunctionEmitter(module, target, layout, fn, fn.args[0], sites)
        em.real_rets = f.rets
        for (name, dt), arg in zip(f.params, fn.args[1:]):
            em.builder.store(arg, em.local_ptr(name, dt))
        em.body(f.body)
        if not em.builder.block.is_terminated:
            zeros = [ir.Constant(ll_type(dt), 0.0 if dt.is_float else 0) for dt in f.rets]
            real_funcs.ret_values(em.builder, f.rets, zeros)
        with em.builder.goto_block(em.alloca_block):
            em.builder.branch(em.start_block)
