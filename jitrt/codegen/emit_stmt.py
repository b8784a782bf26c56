"""IR statements -> LLVM IR (the statement family of the function emitter).

Stage: codegen. Structured control flow through llvmlite's builder context managers; locals
are allocas (zero-initialised in a dedicated first block, promoted to registers by LLVM).
"""
from __future__ import annotations

from llvmlite import ir

from ..dtypes import DataType
from ..ir import nodes as n
from ..ir.facts import reduction_key
from ..ir.walk import assigned_names, walk_stmts
from . import abi, bounds, check_facts, interrupts, loop_hints, loop_versions
from .emitter_host import EmitterHost
from .emit_expr import I64, ll_type


class StmtEmitter(EmitterHost):
    # ---- locals -------------------------------------------------------------------------
    def local_ptr(self, name: str, dt: DataType, zero: bool = True) -> ir.Value:
        """The stack slot of local `name`, made at its first use and zeroed in the function's
        first block unless `zero` is False (its first use stores) or the function's
        statements assign it before any read (`no_init`, codegen/local_init.py)."""
        ptr = self.locals.get(name)
        if ptr is None:
            with self.builder.goto_block(self.alloca_block):
                ptr = self.target.alloca(self.builder, ll_type(dt), name)
                if zero and name not in self.no_init:
                    self.builder.store(ir.Constant(ll_type(dt), 0.0 if dt.is_float else 0),
                                       ptr)
            self.locals[name] = ptr
        return ptr

    def body(self, stmts: n.Body) -> None:
        if not self.target.traits.status_block:
            for s in stmts:
                getattr(self, "stmt_" + type(s).__name__)(s)
            return
        # GPUs: the bounds checks this list makes, on top of its enclosing lists' (check_facts)
        self.checked.append(dict(self.checked[-1]) if self.checked else {})
        try:
            for s in stmts:
                getattr(self, "stmt_" + type(s).__name__)(s)
                check_facts.forget(self.checked[-1], assigned_names((s,)))
        finally:
            self.checked.pop()

    def forget_checks(self, body: n.Body, *also: str) -> None:
        """Before a loop: the checks of locals its body assigns hold for one iteration only
        (every enclosing list's too: a reversed loop's variable is no `assigned_names`)."""
        if any(self.checked):
            names = assigned_names(body) | set(also)
            for facts in self.checked:
                check_facts.forget(facts, names)

    def dead_block(self) -> None:
        """Continue emitting into an unreachable block after a jump."""
        self.builder.position_at_end(self.fn.append_basic_block("after_jump"))

    # ---- statements ---------------------------------------------------------------------
    def stmt_Assign(self, s: n.Assign) -> None:
        self.builder.store(self.expr(s.value), self.local_ptr(s.name, s.value.dtype))

    def stmt_Eval(self, s: n.Eval) -> None:
        acc = self.reduction_accumulator(s.expr, s)
        if acc is not None and isinstance(s.expr, n.Atomic):  # a private per-chunk partial sum
            value = self.expr(s.expr.value)
            b = self.builder
            old = b.load(acc)
            if s.expr.dtype.is_float:
                # no fast-math flag: the order is the IR's (codegen/reduction_lanes.py), the
                # same in every tier of a kernel
                b.store((b.fadd if s.expr.op == "add" else b.fsub)(old, value), acc)
            else:
                b.store((b.add if s.expr.op == "add" else b.sub)(old, value), acc)
            return
        self.expr(s.expr)

    def reduction_accumulator(self, e: n.Expr, s: n.Eval | None = None) -> ir.Value | None:
        if not isinstance(e, n.Atomic) or not self.reductions:
            return None
        from . import reduction_lanes
        key = reduction_key(e)
        lane = reduction_lanes.accumulator(self, key, s)
        return lane if lane is not None else self.reductions.get(key)

    def stmt_Store(self, s: n.Store) -> None:
        value = self.expr(s.value)
        access = self.element_ptr(s.ref, s.indices, s.loc, "write")
        self.guarded(access, lambda ptr: self.alias_tagged(self.builder.store(value, ptr), s.ref),
                     None)

    def stmt_Return(self, s: n.Return) -> None:
        v = self.to_slot(self.expr(s.value), s.value.dtype)
        self.builder.store(v, self.written_slot_ptr(abi.SLOT_RETURN))

    def stmt_Call(self, s: n.Call) -> None:
        """A real function's call: the context and the arguments in, the results out into
        the caller's locals (codegen/real_funcs.py)."""
        from . import real_funcs
        fn = self.module.get_global(real_funcs.symbol(self.module, s.func))
        result = self.builder.call(fn, [self.ctx_ptr] + [self.expr(a) for a in s.args])
        for k, (name, dt) in enumerate(zip(s.outs, s.out_types)):
            self.builder.store(self.builder.extract_value(result, k), self.local_ptr(name, dt))

    def stmt_FuncRet(self, s: n.FuncRet) -> None:
        from . import real_funcs
        real_funcs.ret_values(self.builder, self.real_rets,
                              [self.expr(v) for v in s.values])
        self.dead_block()

    def stmt_If(self, s: n.If) -> None:
        cond = self.truth(self.expr(s.cond), s.cond.dtype)
        if not s.orelse:
            with self.builder.if_then(cond):
                self.body(s.body)
            return
        with self.builder.if_else(cond) as (then, otherwise):
            with then:
                self.body(s.body)
            with otherwise:
                self.body(s.orelse)

    def stmt_For(self, s: n.For) -> None:
        proven = (loop_versions.proven_accesses(s) if self.target.traits.fault_ends_thread
                  else None)         # (None for a loop around loops: `VERSIONED_STMTS`)
        if not proven:
            self.counted_loop(s.var, s.begin, s.end, s.body, reverse=False)
            return
        # two copies: without the body's checks when every index stays inside over the whole
        # range (codegen/loop_versions.py), with them otherwise
        b = self.builder
        begin, end = self.expr(s.begin), self.expr(s.end)
        wide = (lambda v: b.sext(v, I64)) if s.begin.dtype.is_signed else (
            lambda v: b.zext(v, I64))
        begin64 = begin if begin.type == I64 else wide(begin)
        end64 = end if end.type == I64 else wide(end)
        inside = bounds.box_inside(b, proven, [begin64], [b.sub(end64, begin64)],
                                   self.extents,
                                   lambda e: self.to_slot(self.expr(e), e.dtype))
        fast_bb, checked_bb, done_bb = (self.fn.append_basic_block(f"for_{s.var}_{part}")
                                        for part in ("unchecked", "checked", "done"))
        b.cbranch(inside, fast_bb, checked_bb).set_weights([1 << 20, 1])
        b.position_at_end(fast_bb)
        outer = self.unchecked
        self.unchecked = {**outer, **{key: [() for _ in key[1]] for key in proven}}
        try:
            self.counted_loop(s.var, s.begin, s.end, s.body, reverse=False, evaluated=(begin, end))
        finally:
            self.unchecked = outer
        b.branch(done_bb)
        b.position_at_end(checked_bb)       # (runs only where an index leaves: kept small)
        self.counted_loop(s.var, s.begin, s.end, s.body, reverse=False, evaluated=(begin, end),
                          cold=True)
        b.branch(done_bb)
        b.position_at_end(done_bb)

    def counted_loop(self, var: str, begin_e: n.Expr, end_e: n.Expr, body: n.Body,
                     reverse: bool, evaluated: tuple[ir.Value, ir.Value] | None = None,
                     cold: bool = False) -> None:
        """`for var in range(begin, end)`, or in reversed order (the adjoint of a loop). The
        bounds are evaluated once (or given, evaluated); the counter is hidden, so assigning
        `var` in the body does not change the iteration; `continue` jumps to the step,
        `break` to the exit."""
        b = self.builder
        dt = begin_e.dtype
        one = ir.Constant(ll_type(dt), 1)
        begin, end = evaluated if evaluated is not None else (self.expr(begin_e),
                                                            self.expr(end_e))
        self.forget_checks(body, var)
        hints = self.counted_loop_hints(body, begin, end, reverse, cold)
        waits = hints is loop_hints.UNROLL_BY_4
        counter = self.local_ptr(f"{var}$counter{self.next_id()}", dt, zero=False)
        b.store(end if reverse else begin, counter)
        cond_bb, body_bb, step_bb, exit_bb = (self.fn.append_basic_block(f"for_{var}_{part}")
                                              for part in ("cond", "body", "step", "exit"))
        b.branch(cond_bb)
        b.position_at_end(cond_bb)
        i = b.load(counter)
        cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
        b.cbranch(cmp(">", i, begin) if reverse else cmp("<", i, end), body_bb, exit_bb)
        b.position_at_end(body_bb)
        if reverse:
            i = b.sub(i, one)
            b.store(i, counter)
        b.store(i, self.local_ptr(var, dt))
        self.loop_targets.append((step_bb, exit_bb))
        self.waiting_reads += waits
        try:
            self.body(body)
        finally:
            self.waiting_reads -= waits
        self.loop_targets.pop()
        b.branch(step_bb)
        b.position_at_end(step_bb)
        if contains_loop(body):   # innermost loops stay check-free (and vectorizable)
            self.check_interrupt()
        if not reverse:
            b.store(b.add(b.load(counter), one), counter)
        back = b.branch(cond_bb)
        if hints:
            loop_hints.mark_loop(self.module, back, hints)
        b.position_at_end(exit_bb)
        if waits:
            self.flush_deferred()

    def counted_loop_hints(self, body: n.Body, begin: ir.Value, end: ir.Value, reverse: bool,
                           cold: bool) -> tuple[tuple[object, ...], ...]:
        """The `loop_hints` of a counted loop: none to unroll a versioned loop's checked copy
        (`cold`) or a loop around loops or long math; on GPUs that defer reads, unroll by
        four a thread's loop of unknown trip count that only computes (its reads' checks
        then wait for its end, so there is no exit between its reads, and four iterations'
        reads are in flight together), or that stores and has no check left (the copy
        without checks of a versioned loop: one exit too)."""
        if cold:
            return loop_hints.NO_UNROLL
        if self.target.traits.unroll_hints and loop_hints.unrolling_pointless(body, True):
            return loop_hints.NO_RUNTIME_UNROLL
        if (self.target.traits.deferred_reads and not reverse
                and not (isinstance(begin, ir.Constant) and isinstance(end, ir.Constant))
                and not loop_versions.calls_math(body)
                and (loop_versions.effect_free(body)
                     or loop_versions.stores_only(body)
                     and bounds.cannot_fault(body, self.unchecked))):
            return loop_hints.UNROLL_BY_4
        return ()

    def stmt_While(self, s: n.While) -> None:
        b = self.builder
        self.forget_checks(s.body)
        cond_bb = self.fn.append_basic_block("while_cond")
        body_bb = self.fn.append_basic_block("while_body")
        exit_bb = self.fn.append_basic_block("while_exit")
        b.branch(cond_bb)
        b.position_at_end(cond_bb)
        self.check_interrupt()    # a while loop may never end: Ctrl-C must reach it
        b.cbranch(self.truth(self.expr(s.cond), s.cond.dtype), body_bb, exit_bb)
        b.position_at_end(body_bb)
        self.loop_targets.append((cond_bb, exit_bb))
        self.body(s.body)
        self.loop_targets.pop()
        b.branch(cond_bb)
        b.position_at_end(exit_bb)

    # ---- Ctrl-C ---------------------------------------------------------------------------
    def begin_launch(self) -> None:
        """First thing in a launch entry: note the interrupt counter (targets that poll it)."""
        if self.target.traits.host_interrupts:
            with self.builder.goto_block(self.alloca_block):
                self.interrupt_epoch = interrupts.start_launch(self.builder, self.ctx_ptr)

    def check_interrupt(self) -> None:
        if not self.target.traits.host_interrupts:
            return
        if self.interrupt_counter is None:
            with self.builder.goto_block(self.alloca_block):
                self.interrupt_counter = interrupts.counter_ptr(self.builder, self.ctx_ptr)
        if self.interrupt_epoch is None:   # a task function: its launch's entry noted it
            self.interrupt_epoch = self.load_slot(abi.SLOT_INTERRUPT_EPOCH)
        interrupts.check_interrupt(self.builder, self.fn, self.ctx_ptr, self.interrupt_counter,
                                   self.interrupt_epoch)

    def stmt_Break(self, s: n.Break) -> None:
        self.builder.branch(self.loop_targets[-1][1])
        self.dead_block()

    def stmt_Continue(self, s: n.Continue) -> None:
        self.builder.branch(self.loop_targets[-1][0])
        self.dead_block()


def contains_loop(body: n.Body) -> bool:
    return any(isinstance(s, (n.For, n.While)) for s in walk_stmts(body))


__all__ = ["StmtEmitter", "I64"]
