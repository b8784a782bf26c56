"""What the function-emitter mixins share (`emit_expr`, `emit_stmt`, `emit_adstack`,
`emit_deferred`, `emit_narrow`).

Stage: codegen. `FunctionEmitter` (`kernel_module.py`) provides this state and these methods;
the declarations exist for the type checker only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from llvmlite import ir

    from ..ir.facts import TaskFacts
    from .abi import ContextLayout
    from .targets import Target


class EmitterHost:
    if TYPE_CHECKING:
        module: ir.Module
        target: Target
        layout: ContextLayout
        fn: ir.Function
        ctx_ptr: ir.Value
        builder: ir.IRBuilder
        alloca_block: ir.Block
        locals: dict[str, ir.Value]
        no_init: frozenset[str]
        loop_targets: list[tuple[ir.Block, ir.Block]]
        vectorizable: bool               # a parallel task's body (codegen/targets.py, math)
        stacks: dict[tuple[int, int, int], tuple[ir.Value, ir.Value, ir.Value, ir.Value]]
        unread_stacks: frozenset[int]    # stacks whose values are never read: no memory
        local_stack_ids: set[int]        # stacks in the thread's local memory (GPUs)
        task_index: int
        tid: ir.Value
        reductions: dict[Any, ir.Value]
        reduction_lanes: dict[Any, ir.Value]   # float reductions' sums (reduction_lanes.py)
        reduction_lane: ir.Value | int | None
        reduction_scalars: dict[Any, list[ir.Value]]
        interleaved_evals: dict[int, Any]
        private: frozenset[Any]      # fields whose atomics need no atomicity (passes/reductions)
        facts: TaskFacts                 # what the passes say of the task (`ir/facts.py`)
        invariants: dict[int, ir.Value]
        alias_tags: dict[Any, Any]       # GPUs: (field slot, grad) -> its alias metadata
        alias_tagged: Callable[..., Any]
        unchecked: dict[Any, Any]    # accesses proven in bounds -> axes (codegen/bounds.py)
        interrupt_epoch: ir.Value | None
        interrupt_counter: ir.Value | None
        real_rets: tuple[Any, ...]       # in a real function: its result types
        checked: list[dict[Any, frozenset[str]]]   # GPUs: checks made (check_facts.py)
        conditional: int                 # > 0 inside an expression's conditional part
        deferring: bool                  # a deferred read's check may be pending
        waiting_reads: int               # > 0 in a loop whose reads' checks wait
        defers: Callable[..., bool]
        deferred_check: Callable[..., ir.Value]
        flush_deferred: Callable[[], None]
        narrow_access: Callable[..., bool]
        narrow_element_ptr: Callable[..., Any]
        narrow_proven_ptr: Callable[..., Any]
        data_ptr: Callable[..., ir.Value]
        check_made: Callable[..., bool]
        call_recorder: Callable[..., None]
        extents: Callable[..., list[ir.Value]]
        next_id: Callable[[], int]
        add_site: Callable[..., int]
        expr: Callable[..., ir.Value]
        to_slot: Callable[..., ir.Value]
        truth: Callable[..., ir.Value]
        slot_ptr: Callable[..., ir.Value]
        written_slot_ptr: Callable[[int], ir.Value]
        load_slot: Callable[[int], ir.Value]
        element_ptr: Callable[..., Any]
        guarded: Callable[..., Any]
        local_ptr: Callable[..., ir.Value]
        counted_loop: Callable[..., None]
