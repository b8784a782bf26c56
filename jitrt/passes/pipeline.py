"""The pass pipeline, in order. Read this file to know what happens between frontend and codegen.

Input: the `KernelIR` the frontend built for one specialization, and the types of its locals.
Output: a `LoweredKernel`: the tasks codegen turns into functions, the kernel's write set and,
for grad kernels, the sizing plan of every adstack. Forward-mode kernels (`duals` given) get
their tangents before offload (`forward_ad.py`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..dtypes import DataType
from ..errors import KernelCompileError
from ..ir import nodes as n
from ..ir.facts import TaskFacts
from ..ir.verify import verify
from .ad_check_rules import check_access_rules
from .adstack_sizing import task_capacities
from .analysis import bound_reads, read_only, write_set
from .ad_markers import without_stop_grad
from .autodiff import AdjointTask, differentiate
from .cost import iteration_cost
from .forward_ad import Duals, forward_mode
from .local_reductions import buffer_grads, reduction_adjoints
from .lowered import LoweredKernel, StackSizing
from .offload import offload
from .reductions import private_arrays, private_refs, reducible_atomics
from .scope_versions import version_scope_locals
from .scope_values import inline_scope_values
from .simplify import simplify


def run_pipeline(kernel: n.KernelIR, local_types: dict[str, DataType], grad: bool = False,
                 has_grad: Callable[[n.Ref], bool] | None = None,
                 ad_stack_size: int = 0, duals: Duals | None = None,
                 tape_partials: bool = False) -> LoweredKernel:
    local_types = dict(local_types)          # passes add locals; the frontend's table stays
    verify(kernel, local_types)              # 1. the frontend's output is well typed
    if kernel.funcs and (grad or duals is not None):
        raise KernelCompileError(f"kernel {kernel.name} calls a jr.real_func "
                                 f"({kernel.funcs[0].name.split('$')[0]}): real functions are "
                                 "not differentiated; make it a @jr.func")
    kernel = simplify(kernel)                # 2. fold constants (bounds become constants)
    kernel = inline_scope_values(kernel, local_types)   # 2a. launch-known ints (folded)
    if duals is not None:                    # 2b. forward mode: tangents beside the values
        kernel = forward_mode(kernel, local_types, duals)
        verify(kernel, local_types)
    tasked = offload(kernel, local_types)    # 3. outermost loops -> parallel tasks (and
                                             #    `s += x[i]` on hidden 0-d fields)
    bounds = bound_reads(tasked)             # 4. data that decides trip counts (Tape check)
    stacks: tuple[StackSizing, ...] = ()
    if grad:                                 # 5. reverse mode: adjoint tasks with adstacks
        primal = version_scope_locals(tasked, local_types)   # (one adjoint slot per definition)
        tasked, adjoints = differentiate(primal, local_types,    # (CPU: partials taped)
                                         buffer_grads(has_grad or (lambda r: False)),
                                         tape_partials)
        tasked = reduction_adjoints(primal, tasked)   # 5b. replay `s += x[i]` reductions
        check_access_rules(primal, tasked)   # 5c. no global it re-reads is overwritten
        stacks = size_stacks(primal, adjoints, ad_stack_size)  # 6. a SizeExpr per adstack
    tasked = without_stop_grad(tasked)       # 6b. jr.stop_grad markers: read by now
    writes = write_set(tasked)               # 7. what a launch may modify (generations)
    tasked = annotate_tasks(tasked)          # 8. per task: private reductions, iteration cost
    return LoweredKernel(tasked, writes, local_types, stacks, bounds)


def annotate_tasks(kernel: n.TaskedKernel) -> n.TaskedKernel:
    """Store on each parallel task what codegen needs: the `+=` it may accumulate privately
    per chunk (`reductions.py`) and the estimated cost of one iteration (`cost.py`)."""
    tasks = tuple(replace(t, reductions=() if n.has_call(t.body) else tuple(
                              reducible_atomics(t.body)),
                          cost=iteration_cost(t.body)) if t.kind == "parallel" else t
                  for t in kernel.tasks)
    return replace(kernel, tasks=tasks)


def codegen_facts(kernel: n.TaskedKernel, lanes: int,
                  reads: bool = False) -> tuple[TaskFacts, ...]:
    """9. What codegen reads about each task, for a codegen target that runs `lanes`
    iterations of a parallel task in one pass (1: no interleaving; GPUs): the fields and
    ndarrays whose atomics no other iteration races with (`reductions.py`), and the
    interleaved body of a task that allows one (`interleave.py`: codegen uses it where every
    access of the body is proven in bounds), and where `reads` (GPUs) the data each task
    only reads (`analysis.read_only`). Run for each module built, never stored."""
    from . import interleave     # (a module attribute: tests replace `interleaved`)
    facts = []
    for task in kernel.tasks:
        only_read = read_only(task) if reads else frozenset()
        if task.kind != "parallel":
            facts.append(TaskFacts(read_only=only_read))
            continue
        found = interleave.interleaved(task, lanes) if lanes > 1 and \
            interleave.candidate(task) else None
        facts.append(TaskFacts(private_refs(task), private_arrays(task), found,
                               read_only=only_read))
    return tuple(facts)


def size_stacks(primal: n.TaskedKernel, adjoints: list[AdjointTask | None],
                ad_stack_size: int) -> tuple[StackSizing, ...]:
    out: list[StackSizing] = []
    for t, adj in enumerate(adjoints):
        if adj is None or not adj.stack_vars:
            continue
        prefix = [task.body for task in primal.tasks[:adj.primal_index] if task.kind == "serial"]
        try:
            caps = task_capacities(adj.task, adj.normalized, adj.stack_vars, prefix)
        except KernelCompileError:
            if ad_stack_size <= 0:
                raise
            caps = {}
        source = dict(adj.partial_of)      # a taped partial's stack: its local's capacity
        for name, stack in adj.stack_vars.items():
            out.append(StackSizing(t, stack, caps.get(source.get(name, name))))
    return tuple(out)
