"""Adstack operations -> LLVM IR (a family of the function emitter; reversed loops share
`counted_loop` with forward ones).

Stage: codegen. A stack lives in the per-thread adstack heap: its entries are (primal,
adjoint) pairs at `heap + tid * stride + offset`; capacity, offset and stride are context
slots written at launch by the sizing service. The stack pointer is a local (a register after
optimisation), and so is the top entry's adjoint: the forward sweep only pushes (an entry
starts with adjoint 0), the reverse sweep only pops, and adjoints are only read and added at
the top, so an entry's adjoint is 0 whenever it becomes the top and lives in the local while
it is (the pairs' adjoint halves stay unused; the layout is the sizing service's). Where a
task's iterations are interleaved (`passes/interleave.py`), lane k's copy of a stack follows
lane k - 1's (`Target.lanes` times the capacity is reserved). Every push checks the capacity
in every build: an overflowing push is skipped and the task's registry id is stored into the
overflow slot by compare-and-swap from 0, so the first overflow wins and memory stays intact.
Pops never go below the initial entry. On GPUs, a stack whose capacity is known when
compiling and small (`TaskFacts.local_stacks`, `passes.lowered.local_capacity`) is instead an
array of values in the thread's local memory, checked against that constant capacity, with no
heap address computed. A stack whose values the task never reads (all it
carries is the adjoint, e.g. once its partials are taped: `autodiff.tape_partials`) keeps
its stack pointer and capacity check (overflow is reported at the same capacity) but writes
no entry.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import nodes as n
from . import abi
from .emitter_host import EmitterHost
from .emit_expr import I64, ll_type

ONE = ir.Constant(I64, 1)


class AdStackEmitter(EmitterHost):
    def stack_state(self, stack: n.AdStack) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """(entries pointer, capacity, stack-pointer alloca, top-adjoint alloca) of `stack`
        in the current task."""
        key = (self.task_index, stack.id, stack.lane)
        found = self.stacks.get(key)
        if found is not None:
            return found
        local = dict(self.facts.local_stacks).get(stack.id)
        if local is not None:
            found = self.local_stack(stack, local)
            self.stacks[key] = found
            return found
        b = self.builder
        cap_slot, off_slot = self.layout.stack_slot(self.task_index, stack.id)
        stride_slot, _ = self.layout.task_slot(self.task_index)
        pair = ir.ArrayType(ll_type(stack.dtype), 2)
        with b.goto_block(self.alloca_block):
            heap = b.inttoptr(self.load_slot(abi.SLOT_ADSTACK_HEAP), ir.IntType(8).as_pointer())
            if self.target.traits.interleaved_stacks:
                # interleaved: entry k of thread t at region + (k * T + t) * pair size, T the
                # device's resident threads, so a warp's pushes and pops are coalesced
                threads = self.load_slot(abi.SLOT_NUM_THREADS)
                offset = b.add(b.mul(self.load_slot(off_slot), threads),
                               b.mul(self.tid, ir.Constant(I64, 2 * stack.dtype.nbytes)))
            else:
                offset = b.add(b.mul(self.tid, self.load_slot(stride_slot)),
                               self.load_slot(off_slot))
            base = b.bitcast(b.gep(heap, [offset]), pair.as_pointer())
            cap = self.load_slot(cap_slot)
            if stack.lane:
                base = b.gep(base, [b.mul(cap, ir.Constant(I64, stack.lane))])
            sp = self.target.alloca(b, I64, f"sp{stack.id}")
            b.store(ONE, sp)
            adj = self.target.alloca(b, ll_type(stack.dtype), f"adj{stack.id}")
            b.store(self.zero(stack), adj)
        found = (base, cap, sp, adj)
        self.stacks[key] = found
        return found

    def local_stack(self, stack: n.AdStack, capacity: int
                    ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """The state of a stack kept in the thread's local memory (a GPU's, with a capacity
        known when compiling: `passes.lowered.local_capacity`): an array of `capacity`
        values (no adjoint halves: the top's adjoint is a local anyway), the capacity a
        constant (the context's slot holds the same number, for the overflow report)."""
        b = self.builder
        with b.goto_block(self.alloca_block):
            values = self.target.alloca(b, ir.ArrayType(ll_type(stack.dtype), capacity),
                                        f"stack{stack.id}")
            sp = self.target.alloca(b, I64, f"sp{stack.id}")
            b.store(ONE, sp)
            adj = self.target.alloca(b, ll_type(stack.dtype), f"adj{stack.id}")
            b.store(self.zero(stack), adj)
        self.local_stack_ids.add(stack.id)
        return values, ir.Constant(I64, capacity), sp, adj

    def top_adjoint(self, stack: n.AdStack) -> ir.Value:
        """The local holding the top entry's adjoint (see the module docstring)."""
        return self.stack_state(stack)[3]

    def reset_adjoint(self, stack: n.AdStack) -> None:
        """A new top (pushed, or uncovered by a pop) has adjoint 0."""
        self.builder.store(self.zero(stack), self.stack_state(stack)[3])

    def entry_ptr(self, stack: n.AdStack) -> ir.Value:
        _, _, sp, _ = self.stack_state(stack)
        return self.entry_at(stack, self.builder.sub(self.builder.load(sp), ONE))

    def entry_at(self, stack: n.AdStack, index: ir.Value) -> ir.Value:
        """The value of entry `index` of this thread's `stack` (the pair's first half)."""
        base, _, _, _ = self.stack_state(stack)
        if stack.id in self.local_stack_ids:
            return self.builder.gep(base, [ir.Constant(I64, 0), index])
        if self.target.traits.interleaved_stacks:
            index = self.builder.mul(index, self.load_slot(abi.SLOT_NUM_THREADS))
        return self.builder.gep(base, [index, ir.Constant(ir.IntType(32), 0)])

    def stmt_StackInit(self, s: n.StackInit) -> None:
        base, _, sp, _ = self.stack_state(s.stack)
        b = self.builder
        b.store(ONE, sp)
        if s.stack.id not in self.unread_stacks:
            value = self.expr(s.value)
            b.store(value, self.entry_at(s.stack, ir.Constant(I64, 0)))
        self.reset_adjoint(s.stack)

    def zero(self, stack: n.AdStack) -> ir.Constant:
        return ir.Constant(ll_type(stack.dtype), 0.0 if stack.dtype.is_float else 0)

    def stmt_StackPush(self, s: n.StackPush) -> None:
        unread = s.stack.id in self.unread_stacks    # counted (capacity), not written
        value = None if unread else self.expr(s.value)
        base, cap, sp, _ = self.stack_state(s.stack)
        b = self.builder
        count = b.load(sp)
        with b.if_else(b.icmp_signed("<", count, cap), likely=True) as (then, otherwise):
            with then:
                if value is not None:
                    b.store(value, self.entry_at(s.stack, count))
                b.store(b.add(count, ONE), sp)
                self.reset_adjoint(s.stack)
            with otherwise:
                _, reg_slot = self.layout.task_slot(self.task_index)
                first = b.cmpxchg(self.written_slot_ptr(abi.SLOT_OVERFLOW),
                                  ir.Constant(I64, 0), self.load_slot(reg_slot), "monotonic",
                                  "monotonic")
                if self.target.traits.status_block:    # which context overflowed (reported at sync)
                    with b.if_then(b.extract_value(first, 1)):
                        b.store(self.load_slot(abi.SLOT_LAUNCH_ID),
                                self.written_slot_ptr(abi.STATUS_OVERFLOW_LAUNCH))

    def stmt_StackPop(self, s: n.StackPop) -> None:
        _, _, sp, _ = self.stack_state(s.stack)
        b = self.builder
        count = b.load(sp)
        b.store(b.select(b.icmp_signed(">", count, ONE), b.sub(count, ONE), count), sp)
        self.reset_adjoint(s.stack)

    def expr_StackTop(self, e: n.StackTop) -> ir.Value:
        return self.builder.load(self.entry_ptr(e.stack))

    def expr_StackTopAdj(self, e: n.StackTopAdj) -> ir.Value:
        return self.builder.load(self.top_adjoint(e.stack))

    def stmt_StackAccAdj(self, s: n.StackAccAdj) -> None:
        value = self.expr(s.value)
        ptr = self.top_adjoint(s.stack)
        self.builder.store(self.builder.fadd(self.builder.load(ptr), value), ptr)

    def stmt_ReverseFor(self, s: n.ReverseFor) -> None:
        self.counted_loop(s.var, s.begin, s.end, s.body, reverse=True)
