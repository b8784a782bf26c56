"""The adstack sizing service at launch: evaluate capacities, lay out the heap, diagnose overflow.

Stage: runtime (grad kernels). Input: a compiled grad kernel's `SizingPlan` (sizing infos,
max-reducer specs, native reducer and capacity functions) and its packed launch context.
`size_launch` runs every max-reducer (compiled parallel reductions; each run counts as a
dispatch), computes the exact capacity of every stack, writes capacities, offsets and
per-thread strides into the context, and grows the program's `AdStackHeap` (doubling, never
freed per launch) when needed. `raise_overflow` turns the overflow slot into an
`AdStackOverflowError` naming kernel, task, registry id, capacity and required size.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codegen import abi
from ..errors import AdStackOverflowError
from ..ir import nodes as n
from ..passes import sizeexpr as se

REDUCER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
REQUIRED_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


@dataclass(frozen=True)
class AdStackSizingInfo:
    registry_id: int
    kernel_name: str
    task_id_in_kernel: int
    stack_names: tuple[str, ...]
    size_exprs: tuple[se.SizeExpr, ...]
    max_reducer_specs: tuple[se.MaxOverRange, ...]


class AdStackHeap:
    """Per-program heap for all adstacks: grows by doubling, never shrinks or frees per launch."""

    def __init__(self) -> None:
        self._buf = np.zeros(1 << 16, dtype=np.uint8)
        self.ptr = self._buf.ctypes.data
        self._old: list[np.ndarray] = []

    def ensure(self, nbytes: int) -> int:
        if nbytes > self._buf.nbytes:
            size = self._buf.nbytes
            while size < nbytes:
                size *= 2
            self._old.append(self._buf)  # a launch in flight on another thread may use it
            self._buf = np.zeros(size, dtype=np.uint8)
            self.ptr = self._buf.ctypes.data
        return self.ptr


class SizingPlan:
    """Everything needed to size the stacks of one compiled grad kernel at launch."""

    def __init__(self, stacks: list[Any], specs: list[se.MaxOverRange],
                 layout: abi.ContextLayout, forced: int, addrs: dict[str, int],
                 prefix: str) -> None:
        self.stacks, self.specs, self.layout, self.forced = stacks, specs, layout, forced
        self.reducers = [REDUCER_TYPE(addrs[f"{prefix}_red{k}"]) for k in range(len(specs))]
        sizable = all(s.capacity is not None for s in stacks)
        self.required = REQUIRED_TYPE(addrs[f"{prefix}_required"]) if sizable else None
        self.results = (ctypes.c_int64 * max(len(specs), 1))()
        self.out = (ctypes.c_int64 * max(len(stacks), 1))()
        self.constant = forced > 0 or (not specs and all(
            isinstance(s.capacity, se.Const) for s in stacks))

    def required_sizes(self, ctx_addr: int, program: Any) -> list[int] | None:
        """Exact capacity of every stack for the data now in the context (runs reducers)."""
        if self.required is None:
            return None
        for k, red in enumerate(self.reducers):
            self.results[k] = red(ctx_addr)
        program.count("max_reducer_dispatches", len(self.reducers))
        self.required(ctx_addr, ctypes.addressof(self.results), ctypes.addressof(self.out))
        return [max(self.out[j], 1) for j in range(len(self.stacks))]

    def write_layout(self, buf: Any, caps: list[int], program: Any) -> None:
        strides: dict[int, int] = {}
        offsets: dict[int, int] = {}
        for plan, cap in zip(self.stacks, caps):
            cap_slot, off_slot = self.layout.stack_slot(plan.task, plan.stack.id)
            offset = offsets.get(plan.task, 0)
            buf[cap_slot] = cap
            buf[off_slot] = offset
            offset += cap * 2 * plan.stack.dtype.nbytes
            offsets[plan.task] = (offset + 7) & ~7
        need = 0
        for task, size in offsets.items():
            stride_slot, _ = self.layout.task_slot(task)
            stride = (size + 63) & ~63
            buf[stride_slot] = stride
            strides[task] = stride
            need = max(need, stride * program.pool.num_threads)
        buf[abi.SLOT_ADSTACK_HEAP] = program.heap.ensure(need)

    def size_launch(self, buf: Any, ctx_addr: int, program: Any) -> None:
        if self.forced > 0:
            caps = [self.forced] * len(self.stacks)
        else:
            caps = self.required_sizes(ctx_addr, program)  # type: ignore[assignment]
        self.write_layout(buf, caps, program)


def raise_overflow(buf: Any, ctx_addr: int, plan: SizingPlan, infos: tuple[AdStackSizingInfo, ...],
                   program: Any) -> None:
    rid = buf[abi.SLOT_OVERFLOW]
    buf[abi.SLOT_OVERFLOW] = 0
    entry = program.registry.lookup(rid)
    kernel_name, task = entry if entry else ("<unknown>", -1)
    caps = [buf[plan.layout.stack_slot(p.task, p.stack.id)[0]] for p in plan.stacks]
    required = plan.required_sizes(ctx_addr, program)
    details = []
    for j, p in enumerate(plan.stacks):
        if p.task != task:
            continue
        need = f", required {required[j]}" if required else ""
        details.append(f"stack of '{p.stack.name.split('.')[-1]}': capacity {caps[j]}{need}")
    cap_text = "; ".join(details) or "capacity unknown"
    raise AdStackOverflowError(
        f"adstack overflow in kernel {kernel_name}, task {task} (registry id {rid}): "
        f"{cap_text}. The overflowing pushes were skipped; gradients of this launch are "
        "invalid. Raise jr.init(ad_stack_size=...) or use ad_stack_size=0 for exact sizing.",
        kernel_name=kernel_name, task_id=task, registry_id=rid)
