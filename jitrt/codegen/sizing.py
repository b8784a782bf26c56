"""Native code of the adstack sizing service: max-reducers and exact capacities.

Stage: codegen (grad kernels, same module as the kernel). For max-reducer spec k:
- `<prefix>_red<k>_task(ctx, caps, lo, hi, tid)`: the maximum of the spec body over its chunk,
  merged into caps[1] with an atomic max (the parallel part, run by the worker pool);
- `<prefix>_red<k>(ctx) -> i64`: evaluates the spec's bounds and runs the task through the
  runtime's `parallel_for`: a compiled parallel reduction, never a Python loop.
`<prefix>_required(ctx, results, out)` writes the exact capacity of every stack (task order,
then stack order) into `out`, with reduced specs substituted by `results[k]`.
On GPU targets the same come as kernels: `<prefix>_red<k>_kernel(ctx, launched, out)`, a
grid-stride max over the spec's range merged into out[0] by one atomic max per thread, and
`<prefix>_required_kernel(ctx, launched, results, out)`, run by one thread.
Reads outside an array count as 0 (the kernel itself will report the bad index).
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import sizeexpr as se
from . import abi, interrupts, loop_hints
from .emit_expr import I64
from .kernel_module import (I8P, I64P, PARALLEL_FOR_TYPE, TASK_TYPE, global_thread, gpu_context,
                            gpu_kernel)
from .targets import Target

ZERO, ONE = ir.Constant(I64, 0), ir.Constant(I64, 1)


class SizeEmitter:
    """Evaluates SizeExprs into i64 values inside one function."""

    def __init__(self, module: ir.Module, fn: ir.Function, b: ir.IRBuilder, ctx: ir.Value,
                 layout: abi.ContextLayout, params: tuple, fields: tuple,
                 reduced: dict[se.MaxOverRange, ir.Value] | None = None,
                 target: Target | None = None) -> None:
        self.module, self.fn, self.b, self.ctx = module, fn, b, ctx
        self.layout, self.params, self.fields = layout, params, fields
        self.reduced = reduced or {}
        self.target = target

    def alloca(self) -> ir.Value:
        """An i64 variable in the function's entry block (the target's address space)."""
        with self.b.goto_block(self.fn.entry_basic_block):
            if self.fn.entry_basic_block.instructions:
                self.b.position_before(self.fn.entry_basic_block.instructions[0])
            if self.target is not None:
                return self.target.alloca(self.b, I64, "")
            return self.b.alloca(I64)

    def slot(self, k: int) -> ir.Value:
        return self.b.load(self.b.gep(self.ctx, [ir.Constant(I64, k)]))

    def value(self, e: se.SizeExpr, env: dict[str, ir.Value]) -> ir.Value:
        b = self.b
        if e in self.reduced:
            return self.reduced[e]  # type: ignore[index]
        if isinstance(e, se.Const):
            return ir.Constant(I64, e.value)
        if isinstance(e, se.BoundVar):
            return env[e.name]
        if isinstance(e, se.ScalarArg):
            return self.slot(self.layout.param_slots[e.index])
        if isinstance(e, se.NdarrayShape):
            return self.slot(self.layout.param_slots[e.arg] + 2 + e.axis)
        if isinstance(e, (se.FieldLoad, se.NdarrayRead)):
            return self.element(e, env)
        if isinstance(e, se.MaxOverRange):
            return self.serial_max(e, env)
        a, c = self.value(e.a, env), self.value(e.b, env)
        if isinstance(e, se.Add):
            return b.add(a, c)
        if isinstance(e, se.Mul):
            return b.mul(a, c)
        if isinstance(e, se.Sub):
            d = b.sub(a, c)
            return b.select(b.icmp_signed("<", d, ZERO), ZERO, d)
        if isinstance(e, se.Max):
            return b.select(b.icmp_signed(">", a, c), a, c)
        return b.select(b.icmp_signed("<", a, c), a, c)

    def element(self, e: se.FieldLoad | se.NdarrayRead, env: dict[str, ir.Value]) -> ir.Value:
        b = self.b
        idx = [self.value(i, env) for i in e.indices]
        if isinstance(e, se.FieldLoad):
            ref = self.fields[e.slot]
            dt, extents = ref.dtype, [ir.Constant(I64, s) for s in ref.shape]
            ptr_slot = self.layout.field_slots[e.slot]
        else:
            p = self.params[e.arg]
            dt = p.dtype
            extents = [self.slot(self.layout.param_slots[e.arg] + 2 + k) for k in range(p.ndim)]
            ptr_slot = self.layout.param_slots[e.arg]
        ok: ir.Value = ir.Constant(ir.IntType(1), 1)
        offset: ir.Value = ZERO
        for v, ext in zip(idx, extents):
            ok = b.and_(ok, b.icmp_unsigned("<", v, ext))
            offset = b.add(b.mul(offset, ext), v)
        offset = b.select(ok, offset, ZERO)
        ty = ir.IntType(dt.bits)
        ptr = b.gep(b.inttoptr(self.slot(ptr_slot), ty.as_pointer()), [offset])
        has_data = b.icmp_unsigned("!=", self.slot(ptr_slot), ZERO)
        # extents of 0 make every index fail; the load is then guarded by a select on a
        # pointer that stays inside the array, or skipped when the array is empty
        with b.if_else(b.and_(ok, has_data)) as (then, otherwise):
            with then:
                raw = b.load(ptr)
                loaded = raw if dt.bits == 64 else (b.sext(raw, I64) if dt.is_signed
                                                    else b.zext(raw, I64))
                then_bb = b.block
            with otherwise:
                else_bb = b.block
        phi = b.phi(I64)
        phi.add_incoming(loaded, then_bb)
        phi.add_incoming(ZERO, else_bb)
        return phi

    def serial_max(self, e: se.MaxOverRange, env: dict[str, ir.Value]) -> ir.Value:
        b = self.b
        begin, end = self.value(e.begin, env), self.value(e.end, env)
        acc, i = self.alloca(), self.alloca()
        b.store(ZERO, acc)
        b.store(begin, i)
        cond, body, done = (self.fn.append_basic_block(x) for x in ("mcond", "mbody", "mdone"))
        b.branch(cond)
        b.position_at_end(cond)
        iv = b.load(i)
        b.cbranch(b.icmp_signed("<", iv, end), body, done)
        b.position_at_end(body)
        v = self.value(e.body, {**env, e.var: iv})
        cur = b.load(acc)
        b.store(b.select(b.icmp_signed(">", v, cur), v, cur), acc)
        b.store(b.add(iv, ONE), i)
        b.branch(cond)
        b.position_at_end(done)
        return b.load(acc)


def spec_cost(e: se.SizeExpr) -> int:
    """Rough work of one evaluation of a spec body (for the parallel split)."""
    inner = sum(spec_cost(c) for c in se.children(e))
    return (8 if isinstance(e, se.MaxOverRange) else 1) * max(inner, 1)


def max_loop(em: SizeEmitter, spec: se.MaxOverRange, begin: ir.Value, first: ir.Value,
             end: ir.Value, step: ir.Value) -> ir.Value:
    """The maximum (at least 0) of the spec's body over var = begin + i for i = first,
    first + step, ... < end: one thread's or one chunk's share of a max-reducer."""
    b, fn = em.b, em.fn
    acc, i = em.alloca(), em.alloca()
    b.store(ZERO, acc)
    b.store(first, i)
    cond, body, done = (fn.append_basic_block(x) for x in ("cond", "body", "done"))
    b.branch(cond)
    b.position_at_end(cond)
    iv = b.load(i)
    b.cbranch(b.icmp_signed("<", iv, end), body, done)
    b.position_at_end(body)
    v = em.value(spec.body, {spec.var: b.add(iv, begin)})
    cur = b.load(acc)
    b.store(b.select(b.icmp_signed(">", v, cur), v, cur), acc)
    b.store(b.add(iv, step), i)
    back = b.branch(cond)
    if em.target is None:      # the CPU's reducer chunk: a scalar loop (codegen/loop_hints.py)
        loop_hints.mark_loop(em.module, back, loop_hints.SCALAR)
    b.position_at_end(done)
    return b.load(acc)


def emit_reducer(module: ir.Module, prefix: str, k: int, spec: se.MaxOverRange,
                 layout: abi.ContextLayout, params: tuple, fields: tuple) -> None:
    task = ir.Function(module, TASK_TYPE, f"{prefix}_red{k}_task")
    ctx, caps, lo, hi, _ = task.args
    b = ir.IRBuilder(task.append_basic_block("entry"))
    em = SizeEmitter(module, task, b, ctx, layout, params, fields)
    partial = max_loop(em, spec, b.load(caps), lo, hi, ONE)
    b.atomic_rmw("max", b.gep(caps, [ONE]), partial, "monotonic")
    b.ret_void()

    driver = ir.Function(module, ir.FunctionType(I64, [I64P]), f"{prefix}_red{k}")
    b = ir.IRBuilder(driver.append_basic_block("entry"))
    dctx = driver.args[0]
    interrupts.start_launch(b, dctx)   # its parallel chunks compare against this
    em = SizeEmitter(module, driver, b, dctx, layout, params, fields)
    begin, end = em.value(spec.begin, {}), em.value(spec.end, {})
    caps_arr = b.alloca(ir.ArrayType(I64, 2))
    caps_ptr = b.bitcast(caps_arr, I64P)
    b.store(begin, caps_ptr)
    b.store(ZERO, b.gep(caps_ptr, [ONE]))
    count = b.sub(end, begin)
    count = b.select(b.icmp_signed("<", count, ZERO), ZERO, count)
    pf = b.inttoptr(em.slot(abi.SLOT_PARALLEL_FOR), PARALLEL_FOR_TYPE.as_pointer())
    pool = b.inttoptr(em.slot(abi.SLOT_POOL), I8P)
    b.call(pf, [pool, task, dctx, caps_ptr, count, ir.Constant(I64, 4 * spec_cost(spec.body))])
    b.ret(b.load(b.gep(caps_ptr, [ONE])))


def emit_gpu_reducer(module: ir.Module, target: Target, prefix: str, k: int,
                     spec: se.MaxOverRange, layout: abi.ContextLayout, params: tuple,
                     fields: tuple) -> None:
    slots = layout.gpu_slots
    fn = gpu_kernel(module, target, f"{prefix}_red{k}_kernel", slots, pointers=1)
    launched, out = fn.args[slots:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = gpu_context(b, target, fn, slots)
    em = SizeEmitter(module, fn, b, ctx, layout, params, fields, target=target)
    begin, end = em.value(spec.begin, {}), em.value(spec.end, {})
    partial = max_loop(em, spec, begin, global_thread(module, target, b), b.sub(end, begin),
                       launched)
    b.atomic_rmw("max", out, partial, "monotonic")
    b.ret_void()


def emit_max_reducer(module: ir.Module, target: Target | None, prefix: str, k: int,
                     spec: se.MaxOverRange, layout: abi.ContextLayout, params: tuple,
                     fields: tuple) -> None:
    """The max-reducer of spec `k` in the target's form: a GPU kernel, or the CPU's function
    over the pool."""
    if target is not None and target.traits.grid_launch:
        emit_gpu_reducer(module, target, prefix, k, spec, layout, params, fields)
    else:
        emit_reducer(module, prefix, k, spec, layout, params, fields)


def entry_symbols(target: Target, prefix: str, task_symbols: list[str], nspecs: int,
                  sizable: bool) -> list[str]:
    """The symbols a kernel module is loaded for: a GPU's task kernels and sizing kernels, or
    the CPU's fused entry and sizing functions."""
    if target.traits.grid_launch:
        return task_symbols + [f"{prefix}_red{k}_kernel" for k in range(nspecs)] + (
            [f"{prefix}_required_kernel"] if sizable else [])
    return [f"{prefix}_entry"] + [f"{prefix}_red{k}" for k in range(nspecs)] + (
        [f"{prefix}_required"] if sizable else [])


def emit_required(module: ir.Module, prefix: str, capacities: list[se.SizeExpr],
                  specs: list[se.MaxOverRange], layout: abi.ContextLayout, params: tuple,
                  fields: tuple, target: Target | None = None) -> None:
    if target is not None and target.traits.grid_launch:
        slots = layout.gpu_slots
        fn = gpu_kernel(module, target, f"{prefix}_required_kernel", slots, pointers=2)
        _, results, out = fn.args[slots:]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ctx = gpu_context(b, target, fn, slots)
    else:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64P, I64P]),
                         f"{prefix}_required")
        ctx, results, out = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
    reduced = {spec: b.load(b.gep(results, [ir.Constant(I64, k)])) for k, spec in
               enumerate(specs)}
    em = SizeEmitter(module, fn, b, ctx, layout, params, fields, reduced, target)
    for k, cap in enumerate(capacities):
        b.store(em.value(cap, {}), b.gep(out, [ir.Constant(I64, k)]))
    b.ret_void()
