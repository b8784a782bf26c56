"""The adstack sizing service at launch: cached capacities, heap layout, overflow diagnosis.

Stage: runtime (grad kernels). Input: a compiled grad kernel's `SizingPlan` (sizing infos,
max-reducer specs, their dependencies, native reducer and capacity functions) and the packed
launch context. Two caches, both validated by observations, never by re-reading data:
- the launch cache of a handle (`LaunchSizing`): the generated launcher builds one snapshot
  tuple of every distinct dependency of every spec and capacity (field write generations,
  ndarray allocation ids and data generations, shapes, scalar arguments, content fingerprints
  of plain numpy arrays) and compares it with the cached one: a hit costs O(distinct
  dependencies) and does nothing else (the capacities in the context are still valid);
- on a miss, the per-spec cache (program-wide, keyed by (registry id, spec, allocation ids of
  the fields the spec reads)): each spec whose own observations are unchanged reuses its
  result; the others run their compiled max-reducer (counted as a dispatch). The capacities
  are recomputed natively, laid out in the context and the program's `AdStackHeap` grows if
  needed (doubling, never freed per launch).
The results map is an immutable mapping made once per miss and shared by the cache entry and
the program's `current_results`. `raise_overflow` turns the overflow slot into an
`AdStackOverflowError` naming kernel, task, registry id, capacity and required size.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import xxhash

from ..frozen import frozen
from .. import logger as log
from ..codegen import abi
from ..errors import AdStackOverflowError
from ..ir import sizeexpr as se
from ..passes.lowered import local_capacity

if TYPE_CHECKING:
    from .seams import ProgramLike



@frozen
class AdStackSizingInfo:
    registry_id: int
    kernel_name: str
    task_id_in_kernel: int
    stack_names: tuple[str, ...]
    size_exprs: tuple[se.SizeExpr, ...]
    max_reducer_specs: tuple[se.MaxOverRange, ...]


@frozen
class Dep:
    """One thing a capacity reads: a field, an ndarray argument, a shape, a scalar argument."""
    kind: str        # field | array | shape | scalar
    index: int       # field slot or parameter index
    axis: int = 0


def expr_deps(e: se.SizeExpr) -> list[Dep]:
    out: list[Dep] = []
    if isinstance(e, se.FieldLoad):
        out.append(Dep("field", e.slot))
    elif isinstance(e, se.NdarrayRead):
        out.append(Dep("array", e.arg))
    elif isinstance(e, se.NdarrayShape):
        out.append(Dep("shape", e.arg, e.axis))
    elif isinstance(e, se.ScalarArg):
        out.append(Dep("scalar", e.index))
    for c in se.children(e):
        out += expr_deps(c)
    return out


def fingerprint(arr: Any) -> tuple[Any, ...]:
    """A plain numpy array has no generation counter: observe its content. Another library's
    device array cannot be observed cheaply: a fresh token (the sizing reruns)."""
    if not isinstance(arr, np.ndarray):
        return ("foreign", object())
    return ("numpy", arr.ctypes.data, arr.shape, xxhash.xxh3_64_intdigest(arr.data))


# threads' slices of the heap start on their own pairs of cache lines (x86's adjacent-line
# prefetcher couples two 64-byte lines): a slice is a multiple of this, the heap aligned to it
SLICE_ALIGN = 128


class AdStackHeap:
    """Per-program heap for all adstacks: grows by doubling, never shrinks or frees per launch.
    Its start is aligned to SLICE_ALIGN, so threads' slices share no cache line."""

    def __init__(self) -> None:
        self._buf = np.zeros((1 << 16) + SLICE_ALIGN, dtype=np.uint8)
        self.ptr = aligned(self._buf)
        self._old: list[np.ndarray] = []

    def ensure(self, nbytes: int, who: str = "") -> int:
        if nbytes > self._buf.nbytes - SLICE_ALIGN:
            size = self._buf.nbytes - SLICE_ALIGN
            while size < nbytes:
                size *= 2
            try:
                new = np.zeros(size + SLICE_ALIGN, dtype=np.uint8)
            except MemoryError:
                raise MemoryError(
                    f"jitrt: the adstacks of {who or 'a grad kernel'} need {nbytes / 2**30:.1f} "
                    "GiB for this launch (capacities follow the data-dependent trip counts, per "
                    "thread); reduce the trip counts, the thread count, or force a capacity with "
                    "jr.init(ad_stack_size=N)") from None
            self._old.append(self._buf)  # a launch in flight on another thread may use it
            self._buf = new
            self.ptr = aligned(self._buf)
        return self.ptr


def aligned(buf: np.ndarray) -> int:
    """The first address in `buf` aligned to SLICE_ALIGN."""
    return int(buf.ctypes.data + (-buf.ctypes.data) % SLICE_ALIGN)


class SizingPlan:
    """Everything needed to size the stacks of one compiled grad kernel at launch."""

    def __init__(self, stacks: list[Any], specs: list[se.MaxOverRange],
                 layout: abi.ContextLayout, forced: int, addrs: dict[str, Any],
                 prefix: str, kernel_name: str, device: Any) -> None:
        self.stacks, self.specs, self.layout, self.forced = stacks, specs, layout, forced
        self.kernel_name = kernel_name
        # stacks a GPU keeps in local memory (`passes.lowered.local_capacity`): no heap space
        local_ok = device.codegen_target.traits.local_stacks
        self.local = [local_ok and local_capacity(s, forced) is not None for s in stacks]
        sizable = all(s.capacity is not None for s in stacks)
        # reducers: ctx address -> max; required: (ctx, results, out) addresses
        self.reducers, self.required = device.sizing_calls(addrs, prefix, len(specs),
                                                           len(stacks), sizable)
        self.results = (ctypes.c_int64 * max(len(specs), 1))()
        self.out = (ctypes.c_int64 * max(len(stacks), 1))()
        self.constant = forced > 0 or (not specs and all(
            isinstance(s.capacity, se.Const) for s in stacks))
        deps: list[Dep] = []
        for s in stacks:
            for d in expr_deps(s.capacity) if s.capacity is not None else []:
                if d not in deps:
                    deps.append(d)
        self.deps = tuple(deps)
        self.spec_dep_index = tuple(tuple(sorted({deps.index(d) for d in expr_deps(spec)}))
                                    for spec in specs)
        self.spec_texts = tuple(se.text(spec) for spec in specs)

    def snapshot_expr(self) -> str:
        """Python source of the launcher's snapshot tuple (names: F<slot> fields, a<i> args)."""
        parts = []
        for d in self.deps:
            if d.kind == "field":     # an escaped field (a shared writable view): re-observe
                parts.append(f"(F{d.index}.gen if not F{d.index}.escaped else object())")
            elif d.kind == "array":
                parts.append(f"((a{d.index}.alloc_id, a{d.index}.gen) if type(a{d.index}) is "
                             f"Ndarray and not a{d.index}.escaped else fingerprint(a{d.index}))")
            elif d.kind == "shape":
                parts.append(f"a{d.index}.shape[{d.axis}]")
            else:
                parts.append(f"a{d.index}")
        return "(" + "".join(p + ", " for p in parts) + ")"

    def required_sizes(self, ctx_addr: int, program: "ProgramLike") -> list[int] | None:
        """Exact capacity of every stack for the data now in the context (runs reducers)."""
        if self.required is None:
            return None
        for k, red in enumerate(self.reducers):
            self.results[k] = red(ctx_addr)
        program.count("max_reducer_dispatches", len(self.reducers))
        self.required(ctx_addr, ctypes.addressof(self.results), ctypes.addressof(self.out))
        return [max(self.out[j], 1) for j in range(len(self.stacks))]

    def write_layout(self, buf: Any, caps: list[int], program: "ProgramLike") -> None:
        strides: dict[int, int] = {}
        offsets: dict[int, int] = {}
        lanes = program.device.codegen_target.lanes    # copies per stack (interleaved tasks)
        for plan, cap, local in zip(self.stacks, caps, self.local):
            cap_slot, off_slot = self.layout.stack_slot(plan.task, plan.stack.id)
            offset = offsets.get(plan.task, 0)
            buf[cap_slot] = cap
            buf[off_slot] = offset
            if not local:
                offset += lanes * cap * 2 * plan.stack.dtype.nbytes
            offsets[plan.task] = (offset + 7) & ~7
        need = 0
        for task, size in offsets.items():
            stride_slot, _ = self.layout.task_slot(task)
            stride = -(-size // SLICE_ALIGN) * SLICE_ALIGN
            buf[stride_slot] = stride
            strides[task] = stride
            need = max(need, stride * program.device.max_resident_threads)
        buf[abi.SLOT_ADSTACK_HEAP] = program.heap.ensure(need, f"kernel {self.kernel_name}")

    def size_launch(self, buf: Any, ctx_addr: int, program: "ProgramLike") -> None:
        if self.forced > 0:
            caps = [self.forced] * len(self.stacks)
        else:
            caps = self.required_sizes(ctx_addr, program)  # type: ignore[assignment]
        self.write_layout(buf, caps, program)


class LaunchSizing:
    """The sizing state of one LaunchHandle: its launch cache and its spec keys."""

    def __init__(self, plan: SizingPlan, program: "ProgramLike",
                 infos: tuple[AdStackSizingInfo, ...]) -> None:
        self.plan, self.program = plan, program
        owner: dict[Any, Any] = {}
        for info in infos:
            for spec in info.max_reducer_specs:
                owner.setdefault(spec, info.registry_id)
        self.spec_keys = tuple((owner.get(spec, 0), text)
                               for spec, text in zip(plan.specs, plan.spec_texts))
        # per-spec cache keys: see `bind_fields`
        self.cache_keys: tuple[tuple[Any, ...], ...] = self.spec_keys
        self.last: list[Any] = [None]   # the cached snapshot
        self.hits = [0]
        self.results: Any = MappingProxyType({})
        program.sizing_states.add(self)   # for the launch_cache_hits counter

    def bind_fields(self, fields: Sequence[Any]) -> None:
        """Key the per-spec cache also by the allocation ids of the fields each spec reads.

        A field observation is only its write generation (the fields of a handle never change,
        so the launch cache needs no more), but the per-spec cache is program-wide and its
        (registry id, text) keys can meet other fields: two instantiations of a kernel with
        template fields of one dtype and shape share a registry id, and fields of one name
        print the same text. Generations are small counters that such fields share often."""
        plan = self.plan
        self.cache_keys = tuple(
            key + tuple(fields[plan.deps[j].index].alloc_id for j in plan.spec_dep_index[k]
                        if plan.deps[j].kind == "field")
            for k, key in enumerate(self.spec_keys))

    def miss(self, buf: Any, addr: int, snap: tuple[Any, ...]) -> None:
        plan, program = self.plan, self.program
        program.count("launch_cache_misses")
        cache = program.spec_cache
        dispatched = 0
        for k, key in enumerate(self.cache_keys):
            obs = tuple(snap[j] for j in plan.spec_dep_index[k])
            entry = cache.get(key)
            if entry is not None and entry[0] == obs:
                plan.results[k] = entry[1]
                program.count("spec_cache_hits")
                continue
            result = plan.reducers[k](addr)
            plan.results[k] = result
            cache[key] = (obs, result)
            dispatched += 1
            program.count("spec_cache_misses")
        program.count("max_reducer_dispatches", dispatched)
        assert plan.required is not None     # a plan with reducers has a capacity function
        plan.required(addr, ctypes.addressof(plan.results), ctypes.addressof(plan.out))
        caps = [max(plan.out[j], 1) for j in range(len(plan.stacks))]
        plan.write_layout(buf, caps, program)
        if log.logger.isEnabledFor(log.DEBUG):   # a sizing miss, never the steady state
            log.logger.debug("%s: adstack capacities %s", plan.kernel_name,
                             dict(zip((s.stack.name for s in plan.stacks), caps)))
        self.results = MappingProxyType({key: plan.results[k]
                                         for k, key in enumerate(self.spec_keys)})
        program.current_results = self.results   # shared by reference, never copied
        self.last[0] = snap


def raise_overflow(buf: Any, ctx_addr: int, plan: SizingPlan, infos: tuple[AdStackSizingInfo, ...],
                   program: "ProgramLike") -> None:
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
