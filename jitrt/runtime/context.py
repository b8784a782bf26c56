"""The launch context: the slot buffer a launch passes to its kernel, and what reads it back.

Stage: runtime. A `LaunchContext` is what a `LaunchHandle` and every `BoundLaunch` own, one
each: the buffer of 64-bit slots laid out by `codegen/abi.py` (header, field pointers,
parameters, adstack slots), filled once with the device's header slots and the field
pointers, the registry ids of its adstack tasks, its adstack sizing state (capacities written
once when they are constants, else a `LaunchSizing` consulted before each launch), the device
entry point it runs, and the fault and overflow checks read after a launch. It carries the
handle's `LaunchPlan` (`plan`), which the device's launch entry reads.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from ..codegen import abi
from ..faults import raise_fault
from ..launch_plan import LaunchPlan
from .arguments import pack_array
from .devices import check_field_device

if TYPE_CHECKING:
    from .artifact import CompiledKernel
    from .program import Program


class LaunchContext:
    def __init__(self, compiled: "CompiledKernel", program: "Program", plan: LaunchPlan,
                 sizing_infos: tuple[Any, ...] | None = None) -> None:
        self.compiled, self.program, self.plan = compiled, program, plan
        layout = compiled.layout
        self.buf = (ctypes.c_int64 * max(layout.size, abi.HEADER_SLOTS))()
        self.dbuf = (ctypes.c_double * len(self.buf)).from_buffer(self.buf)
        self.addr = ctypes.addressof(self.buf)
        device = program.device
        device.fill_context_header(self.buf)
        for k, fld in enumerate(compiled.field_objs):
            check_field_device(compiled.name, fld, program)
            self.buf[layout.field_slots[k]] = device.data_ptr(fld)
            self.buf[layout.field_grad_slots[k]] = \
                device.data_ptr(fld.grad) if fld.grad is not None else 0
        self.entry = device.launch_entry(self)
        # writes an ndarray argument's slots (a GPU entry also stages it for the device)
        self.pack_array = getattr(self.entry, "pack", pack_array)
        infos = register_tasks(self.buf, program, compiled)
        self.sizing_infos = infos if sizing_infos is None else sizing_infos
        sizing = compiled.sizing
        self.sizing: Any = None
        if sizing is not None and sizing.constant:
            sizing.size_launch(self.buf, self.addr, program)  # capacities known at compile time
        elif sizing is not None:
            from .adstack import LaunchSizing
            self.sizing = LaunchSizing(sizing, program, self.sizing_infos)

    def overflow(self) -> None:
        from .adstack import raise_overflow
        assert self.compiled.sizing is not None     # only kernels with adstacks overflow
        raise_overflow(self.buf, self.addr, self.compiled.sizing, self.sizing_infos,
                       self.program)

    def fault(self) -> None:
        raise_fault(self.buf, self.compiled)


def register_tasks(buf: Any, program: "Program", compiled: "CompiledKernel"
                   ) -> tuple[Any, ...]:
    """Register every task with adstacks (content-stable ids) and write the ids into the
    context; returns the sizing infos (one tuple, never copied per launch)."""
    plan = compiled.sizing
    if plan is None:
        return ()
    from ..ir import sizeexpr as se
    from .adstack import AdStackSizingInfo
    infos = []
    for task, _stride_slot, reg_slot in compiled.layout.task_slots:
        rid = program.registry.register(compiled.name, task)
        buf[reg_slot] = rid
        stacks = [p for p in plan.stacks if p.task == task]
        exprs = tuple(p.capacity if p.capacity is not None else se.Const(plan.forced)
                      for p in stacks)
        specs = tuple(s for s in plan.specs if any(s in se.closed_reductions(e) for e in exprs))
        infos.append(AdStackSizingInfo(rid, compiled.name, task,
                                       tuple(p.stack.name for p in stacks), exprs, specs))
    return tuple(infos)
