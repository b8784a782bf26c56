"""The launch-context layout shared by codegen and the launcher.

Stage: codegen/runtime seam. A launch passes one pointer, `ctx`, to an array of 64-bit slots:
a fixed header (error record, thread-pool and runtime pointers, return value), then a data
pointer per field (and its gradient), then per kernel parameter its slots (a scalar: one slot,
floats stored as double, ints sign/zero-extended; a vector/matrix: one such slot per
component; an ndarray: data pointer, gradient pointer and
one slot per axis for the shape). Compiled code reads every address from here, never embeds one.
Also the records a compiled kernel hands its launches (`AccessSite`: what a fault in the
error slot names; `LaunchableTask`: what a device launches), kept here, away from the LLVM
lowering, because the offline cache stores them and a warm start unpickles them.
"""
from __future__ import annotations

from math import prod

from ..frozen import frozen
from ..ir import nodes as n
from ..ir.walk import all_exprs, assigned_names, walk_expr

SLOT_ERROR = 0          # 0, 1 + the id of the access site that failed (first one wins), or
                        # ERROR_INTERRUPTED
SLOT_ERROR_AXIS = 1
SLOT_ERROR_INDEX = 2
SLOT_POOL = 3           # thread pool state
SLOT_PARALLEL_FOR = 4   # address of the runtime's parallel_for
SLOT_RUNTIME = 5        # GPUs: the device's status block (see STATUS_* below)
SLOT_RETURN = 6
SLOT_NUM_THREADS = 7
SLOT_OVERFLOW = 8       # 0, or the registry id of the first task whose adstack overflowed
SLOT_ADSTACK_HEAP = 9   # base address of the per-thread adstack heap
SLOT_INTERRUPT_EPOCH = 10   # the interrupt counter when this launch started (set by the entry)
SLOT_LAUNCH_ID = 11     # GPUs: which launch context this is (named in a fault report)
ERROR_INTERRUPTED = -1  # in SLOT_ERROR: a Ctrl-C arrived during the launch, which stopped early
ERROR_RAISED = -2       # in SLOT_ERROR: a native GPU entry's Python call raised (exception set)
HEADER_SLOTS = 12
# The CPU pool's state (native/threadpool.py), i64 slots, one cache line per group
POOL_TICKET, POOL_DONE = 0, 8
POOL_FN, POOL_CTX, POOL_CAPS, POOL_N, POOL_CHUNK, POOL_NCHUNKS = 16, 17, 18, 19, 20, 21
POOL_SHUTDOWN, POOL_NWORKERS, POOL_GRAIN, POOL_BUSY, POOL_SPIN = 24, 25, 26, 27, 28
POOL_INTERRUPTS = 29    # in the CPU pool state: the address of the process's interrupt counter
POOL_SLOTS = 32

# On GPUs the context is uploaded to device memory before a launch, so what kernels write
# (the error record, the overflow id and the return value) goes to a device-wide status block
# instead, at the same slot numbers, and is read back at the next synchronisation. The block
# is reached through SLOT_RUNTIME; a fault also stores the context's SLOT_LAUNCH_ID there.
STATUS_SLOTS = 16
# GPU kernels get the context by value, one 64-bit kernel parameter per slot (the driver's
# launch copies them: no upload, no device buffer; `Target.max_param_slots` at most);
# kernel-scope locals that outlive a task live in a small device buffer of the context
# instead, reached through this slot
SLOT_GPU_LOCALS = SLOT_PARALLEL_FOR
STATUS_OVERFLOW_LAUNCH = 12   # the launch id of the context whose adstack overflowed
DEVICE_WRITTEN = (SLOT_ERROR, SLOT_ERROR_AXIS, SLOT_ERROR_INDEX, SLOT_RETURN, SLOT_OVERFLOW)


@frozen
class ContextLayout:
    field_slots: tuple[int, ...]        # per field table entry: data pointer slot
    field_grad_slots: tuple[int, ...]   # per field: gradient pointer slot
    param_slots: tuple[int, ...]        # per parameter: first slot (-1 for templates)
    size: int
    task_slots: tuple[tuple[int, int, int], ...] = ()   # (task index, stride slot, registry slot)
    stack_slots: tuple[tuple[int, int, int, int], ...] = ()  # (task, stack id, cap, offset slot)
    # GPUs: kernel-scope locals that outlive a task (a serial task stores them, later tasks
    # load them); (name, slot), after every other slot
    local_slots: tuple[tuple[str, int], ...] = ()

    @property
    def gpu_slots(self) -> int:
        """Slots a GPU kernel takes as parameters: all but the kernel-scope locals."""
        return self.size - len(self.local_slots)

    def task_slot(self, task: int) -> tuple[int, int]:
        for t, stride, reg in self.task_slots:
            if t == task:
                return stride, reg
        raise KeyError(task)

    def stack_slot(self, task: int, stack: int) -> tuple[int, int]:
        for t, s, cap, off in self.stack_slots:
            if t == task and s == stack:
                return cap, off
        raise KeyError((task, stack))

    def field_slot(self, ref: n.FieldRef) -> int:
        return (self.field_grad_slots if ref.grad else self.field_slots)[ref.slot]

    def arg_slot(self, e: n.Arg) -> int:
        """The slot of a scalar argument, or of one component of a vector argument."""
        return self.param_slots[e.index] + max(e.component, 0)

    def array_ptr_slot(self, ref: n.ArrayRef) -> int:
        return self.param_slots[ref.arg] + (1 if ref.grad else 0)

    def array_shape_slot(self, ref: n.ArrayRef, axis: int) -> int:
        return self.param_slots[ref.arg] + 2 + axis


def read_names(task: n.Task) -> set[str]:
    """The locals `task` reads (for a parallel task: in its box's bounds, its captures and its
    body, less its own loop variables)."""
    body = {e.name for e in all_exprs(task.body) if isinstance(e, n.Local)} - set(task.vars)
    bounds = {e.name for b in task.begins + task.ends for e in walk_expr(b)
              if isinstance(e, n.Local)}
    return body | bounds | {c for c, _ in task.captures}


def handed_locals(tasks: tuple[n.Task, ...]) -> list[str]:
    """The kernel-scope locals a serial task assigns and another task reads: on GPUs those go
    from task to task through context slots (a serial task stores them at its end, a task
    loads them at its start). A local that never leaves its task stays in registers: one big
    serial task of Genesis stored ~1000 (its inlined funcs' locals), which kept each value
    alive to the kernel's end (its PTX 11.5k lines -> 7.0k without them, ptxas 3.5x faster)."""
    assigned = [assigned_names(t.body) if t.kind == "serial" else set() for t in tasks]
    read = [read_names(t) for t in tasks]
    return sorted({name for j, mine in enumerate(assigned) for name in mine
                   if any(name in r for k, r in enumerate(read) if k != j)})


def layout_for(params: tuple[n.Param, ...], fields: tuple[n.FieldRef, ...],
               tasks: tuple[n.Task, ...] = ()) -> ContextLayout:
    slot = HEADER_SLOTS
    field_slots, grad_slots = [], []
    for _ in fields:
        field_slots.append(slot)
        grad_slots.append(slot + 1)
        slot += 2
    param_slots = []
    for p in params:
        if p.kind == "scalar":
            param_slots.append(slot)
            slot += 1
        elif p.kind == "vector":        # one slot per component, row-major
            param_slots.append(slot)
            slot += max(1, prod(p.element_shape))
        elif p.kind == "ndarray":
            param_slots.append(slot)
            slot += 2 + p.ndim
        else:
            param_slots.append(-1)
    task_slots, stack_slots = [], []
    for t, task in enumerate(tasks):
        if not task.stacks:
            continue
        task_slots.append((t, slot, slot + 1))
        slot += 2
        for stack in task.stacks:
            stack_slots.append((t, stack.id, slot, slot + 1))
            slot += 2
    kernel_locals = handed_locals(tasks)
    local_slots = tuple((name, slot + k) for k, name in enumerate(kernel_locals))
    return ContextLayout(tuple(field_slots), tuple(grad_slots), tuple(param_slots),
                         slot + len(local_slots), tuple(task_slots), tuple(stack_slots),
                         local_slots)


# ---- what a compiled kernel tells its launches (stored in the offline cache) ----------------

@frozen
class AccessSite:
    """A checked field or ndarray access: a fault in `SLOT_ERROR` is 1 + its index."""
    name: str
    loc: n.Loc
    kind: str
    offset: tuple[int, ...] = ()     # an offset field's first index per axis (its FieldRef's)
    values: tuple[tuple[str, str], ...] = ()   # an assertion's run-time values: (dtype, spec)


@frozen
class LaunchableTask:
    """One task as a launch sees it. The CPU fuses every task into `<prefix>_entry`; a GPU
    launches `symbol` once per task, in order (a serial task as a one-thread grid)."""
    index: int
    kind: str              # "parallel" | "serial"
    symbol: str            # the function a device launches for this task ("" if fused only)
    ndim: int              # parallel: dimensions of the box (grid size = product of extents)
    cost: int              # estimated work of one iteration
    reductions: int        # `+=` accumulated per chunk (or per block) before one atomic
    stacks: int            # adstacks (their capacities come from the sizing plan)
    block_dim: int = 0     # GPU threads per block from jr.loop_config (0: the device's default)
