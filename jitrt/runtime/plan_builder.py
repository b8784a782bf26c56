"""Build the `LaunchPlan` of one launch handle (`jitrt/launch_plan.py`), once.

Stage: runtime. Input: the kernel, its `CompiledKernel`, the device it runs on and the
template values of the specialization. Output: the frozen plan every launcher of the handle
reads (Python, bound, native, a GPU's task loop). This is the one place that turns compiled
facts (the context layout, the write set, the tasks, the sizing plan, the return field) and the
device's launch shape (whether it launches task by task, whether faults are in the context)
into launch facts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontend.context import RETURN_FIELD
from ..ir import nodes as n
from ..launch_plan import LaunchPlan, ParamPlan, ReturnPlan, TaskPlan
from .arguments import INT_RANGE, launch_value

if TYPE_CHECKING:
    from ..backends.base import Device
    from .artifact import CompiledKernel
    from .seams import KernelLike


def build_plan(kernel: "KernelLike", compiled: "CompiledKernel", device: "Device",
               template_values: dict[int, Any]) -> LaunchPlan:
    """The launch plan of `compiled` (a specialization of `kernel`) on `device`."""
    writes = compiled.lowered.writes
    sizing = compiled.sizing
    per_launch = sizing is not None and not sizing.constant
    return LaunchPlan(
        name=compiled.name, nargs=len(kernel.params),
        params=param_plans(kernel, compiled, template_values),
        field_bumps=tuple(writes.fields), array_bumps=tuple(writes.arrays),
        tasks=task_plans(compiled, device.codegen_target.traits.grid_launch),
        returns=return_plan(compiled.lowered.tasked.ret, compiled.field_objs),
        faults_in_context=bool(device.faults_in_context), adstacks=sizing is not None,
        sizing_snapshot=sizing.snapshot_expr() if per_launch and sizing is not None else None,
        sizing_fields=tuple(d.index for d in sizing.deps if d.kind == "field")
        if per_launch and sizing is not None else ())


def param_plans(kernel: "KernelLike", compiled: "CompiledKernel",
                template_values: dict[int, Any]) -> tuple[ParamPlan, ...]:
    written = frozenset(arg for arg, grad in compiled.lowered.writes.arrays if not grad)
    defaults: dict[str, Any] = getattr(kernel, "defaults", {})
    plans = []
    for i, p in enumerate(compiled.params):
        has_default = i < len(kernel.params) and p.name in defaults
        int_range = INT_RANGE.get(p.dtype) if p.dtype is not None and p.kind in (
            "scalar", "vector") else None
        plans.append(ParamPlan(
            index=i, name=p.name, kind=p.kind, dtype=p.dtype,
            slot=compiled.layout.param_slots[i], ndim=p.ndim, element_shape=p.element_shape,
            element_dim=p.element_dim, uses_grad=i in compiled.grad_params,
            packs_grad=i in compiled.grad_params or bool(p.grad_annotation),
            written=p.kind == "ndarray" and i in written,
            small=p.kind == "ndarray" and not p.large, int_range=int_range,
            template=template_values.get(i), has_default=has_default,
            default=launch_value(p, defaults[p.name]) if has_default else None))
    return tuple(plans)


def task_plans(compiled: "CompiledKernel", by_task: bool) -> tuple[TaskPlan, ...]:
    """The tasks; their boxes only where the device launches task by task (`by_task`): a
    fused CPU entry never reads them, and reading them unpickles a stored kernel's IR."""
    ir_tasks = compiled.lowered.tasked.tasks if by_task else ()
    return tuple(TaskPlan(t.index, t.kind, t.symbol, t.ndim, t.cost, t.stacks, t.block_dim,
                          box_of(ir_tasks[t.index]) if by_task else ())
                 for t in compiled.tasks)


def box_of(task: n.Task) -> tuple[tuple[n.Expr, n.Expr], ...]:
    return tuple(zip(task.begins, task.ends))


def return_plan(ret: Any, field_objs: tuple[Any, ...]) -> ReturnPlan:
    """A scalar from the context's return slot, or a vector/matrix (tuple) return copied from
    the kernel's hidden return field(s)."""
    if ret is not None:
        kind = "float" if ret.is_float else "signed" if ret.is_signed else "unsigned"
        return ReturnPlan(kind, ret.bits)
    for k, f in enumerate(field_objs):
        if f.name == RETURN_FIELD:
            return ReturnPlan("field", 0, ((0, k, False),))
    parts = sorted((int(f.name.rsplit(".", 1)[1]), k, f.shape == ())
                   for k, f in enumerate(field_objs) if f.name.startswith(RETURN_FIELD + "."))
    return ReturnPlan("tuple", 0, tuple(parts)) if parts else ReturnPlan()
