"""The native GPU entry: the steady-state launch of one GPU launch context, in LLVM IR.

Stage: native (part of the runtime module, next to `native_launcher.py`; compiled and cached
once per machine). `jitrt_gpu_entry(table)` is what the native launcher calls in place of a
CPU kernel's entry when the kernel runs on a GPU: `table` is a *GPU entry table*, a ctypes
array of 64-bit words that `backends/gpu.py` fills per launch context (layout: the `G_*` word
indices of `launch_table.py`). It does what the context's generated Python entry does when
nothing has to move: every input's device copy is current (no `host_newer` mirror), no host
array is staged, no value comes back. Then it counts one skipped upload, launches each task
with the driver's `cuLaunchKernel`-shaped function (grid from the box's extents, read from the
context slots the launcher just wrote), and marks the written mirrors device-newer. Anything
else (a stale input, a staged or returning launch, another thread's driver context) calls the
Python entry instead, which does the whole launch. A Python call that raises and a failed
driver launch leave `ERROR_RAISED` in the context's error slot, and the native launcher then
returns NULL with the exception set. It runs with the GIL held, as the native launcher does.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..codegen.abi import ERROR_RAISED, SLOT_ERROR
from ..codegen.kernel_module import I64P
from .launch_table import (G_API, G_API_NAMES, G_CONTEXT, G_DEVICE_NEWER, G_ERROR,
                           G_GET_CURRENT, G_GPU_CONTEXT, G_HOST_NEWER, G_INPUTS, G_LAUNCH,
                           G_NINPUTS, G_NOUTPUTS, G_NTASKS, G_ON_ERROR, G_OUTPUTS, G_PARAMS,
                           G_PYTHON_ENTRY, G_SKIPPED, G_SLOW, G_STREAM, G_TASKS, G_THREADS,
                           G_TRUE, TASK_WORDS)

I32, I64 = ir.IntType(32), ir.IntType(64)
VOID = ir.VoidType()


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def emit(module: ir.Module) -> ir.Function:
    """Add `jitrt_gpu_entry(i64 table)` to the runtime module."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I64]), "jitrt_gpu_entry")
    _GpuEntryIR(fn).emit()
    return fn


class _GpuEntryIR:
    """The builder state of `jitrt_gpu_entry`; each method emits one phase."""

    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.b = b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.words = b.inttoptr(fn.args[0], I64P)
        self.python = fn.append_basic_block("python_entry")
        self.raised = fn.append_basic_block("raised")

    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def word(self, index: ir.Value | int) -> ir.Value:
        idx = c64(index) if isinstance(index, int) else index
        return self.b.load(self.b.gep(self.words, [idx]))

    def fn_word(self, index: int, ret: ir.Type, args: list[ir.Type]) -> ir.Value:
        return self.b.inttoptr(self.word(index), ir.FunctionType(ret, args).as_pointer())

    def api(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Value:
        return self.fn_word(G_API + G_API_NAMES.index(name), ret, args)

    def slot(self, obj: ir.Value, offset: ir.Value) -> ir.Value:
        """A pointer to the object slot at `obj + offset` bytes."""
        return self.b.inttoptr(self.b.add(obj, offset), I64P)

    def loop(self, count: ir.Value, name: str, body: Callable[[ir.Value], None]) -> None:
        """for k in range(count): body(k); the body ends in the block it is left in."""
        b = self.b
        start, head, body_bb, done = b.block, self.block(name), self.block(f"{name}_body"), \
            self.block(f"{name}_done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(c64(0), start)
        b.cbranch(b.icmp_signed("<", k, count), body_bb, done)
        b.position_at_end(body_bb)
        body(k)
        k.add_incoming(b.add(k, c64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def emit(self) -> None:
        self.steady_state_checks()
        skipped = self.b.inttoptr(self.word(G_SKIPPED), I64P)
        self.b.store(self.b.add(self.b.load(skipped), c64(1)), skipped)
        self.loop(self.word(G_NTASKS), "task", self.launch_task)
        self.loop(self.word(G_NOUTPUTS), "output", self.mark_written)
        self.b.ret_void()
        self.python_entry()

    def steady_state_checks(self) -> None:
        """Not slow, the driver context current on this thread, no input newer on the host."""
        b = self.b
        current_ok, inputs = self.block("check_context"), self.block("check_inputs")
        b.cbranch(b.icmp_unsigned("==", self.word(G_SLOW), c64(0)), current_ok, self.python)
        b.position_at_end(current_ok)
        current = b.alloca(I64)
        b.store(c64(0), current)
        b.call(self.fn_word(G_GET_CURRENT, I32, [I64P]), [current])
        b.cbranch(b.icmp_unsigned("==", b.load(current), self.word(G_GPU_CONTEXT)), inputs,
                  self.python)
        b.position_at_end(inputs)
        first, true, offset = self.word(G_INPUTS), self.word(G_TRUE), self.word(G_HOST_NEWER)

        def check(k: ir.Value) -> None:
            mirror = self.word(b.add(first, k))
            stale = b.icmp_unsigned("==", b.load(self.slot(mirror, offset)), true)
            current_bb = self.block("input_current")
            b.cbranch(stale, self.python, current_bb)
            b.position_at_end(current_bb)
        self.loop(self.word(G_NINPUTS), "input", check)

    def launch_task(self, k: ir.Value) -> None:
        """One task record: its grid and threads-launched value, then the driver launch."""
        b = self.b
        rec = b.add(self.word(G_TASKS), b.mul(k, c64(TASK_WORDS)))
        function, block = self.word(rec), self.word(b.add(rec, c64(1)))
        cap, extents = self.word(b.add(rec, c64(2))), self.word(b.add(rec, c64(3)))
        serial, not_serial, box, fixed, go = (self.block(n) for n in (
            "serial", "not_serial", "box", "fixed", "go"))
        b.cbranch(b.icmp_signed("<", extents, c64(0)), serial, not_serial)
        b.position_at_end(not_serial)
        b.cbranch(b.icmp_signed("==", extents, c64(0)), fixed, box)
        b.position_at_end(box)
        size = self.box_size(rec, extents)
        blocks = b.udiv(b.add(size, b.sub(block, c64(1))), block)
        blocks = b.select(b.icmp_signed("<", blocks, c64(1)), c64(1), blocks)
        blocks = b.select(b.icmp_signed(">", blocks, cap), cap, blocks)
        box_end = b.block
        b.branch(go)
        b.position_at_end(fixed)
        b.branch(go)
        b.position_at_end(serial)
        b.branch(go)
        b.position_at_end(go)
        grid, threads_per_block = b.phi(I64), b.phi(I64)
        for value, size_of_block, at in ((blocks, block, box_end), (cap, block, fixed),
                                         (c64(1), c64(1), serial)):
            grid.add_incoming(value, at)
            threads_per_block.add_incoming(size_of_block, at)
        b.store(b.mul(grid, threads_per_block), b.inttoptr(self.word(G_THREADS), I64P))
        launch = self.fn_word(G_LAUNCH, I32, [I64] + [I32] * 7 + [I64, I64, I64])
        one = ir.Constant(I32, 1)
        err = b.call(launch, [function, b.trunc(grid, I32), one, one,
                              b.trunc(threads_per_block, I32), one, one, ir.Constant(I32, 0),
                              self.word(G_STREAM), self.word(G_PARAMS), c64(0)])
        failed, launched = self.block("launch_failed"), self.block("launched")
        b.cbranch(b.icmp_unsigned("==", err, ir.Constant(I32, 0)), launched, failed)
        b.position_at_end(failed)
        b.store(b.zext(err, I64), b.gep(self.words, [c64(G_ERROR)]))
        self.call_python(G_ON_ERROR, self.raised)     # raises: never comes back with a value
        b.branch(self.raised)
        b.position_at_end(launched)

    def box_size(self, rec: ir.Value, extents: ir.Value) -> ir.Value:
        """The product of max(0, end - begin) over the record's extents; a bound is a
        constant or a slot of the host launch context."""
        b = self.b
        context = b.inttoptr(self.word(G_CONTEXT), I64P)
        product = b.alloca(I64)
        b.store(c64(1), product)

        def bound(at: ir.Value) -> ir.Value:
            is_slot, value = self.word(at), self.word(b.add(at, c64(1)))
            from_slot = b.load(b.gep(context, [b.select(b.icmp_unsigned("!=", is_slot, c64(0)),
                                                        value, c64(0))]))
            return b.select(b.icmp_unsigned("!=", is_slot, c64(0)), from_slot, value)

        def extent(e: ir.Value) -> None:
            at = b.add(rec, b.add(c64(4), b.mul(e, c64(4))))
            span = b.sub(bound(b.add(at, c64(2))), bound(at))
            span = b.select(b.icmp_signed("<", span, c64(0)), c64(0), span)
            b.store(b.mul(b.load(product), span), product)
        self.loop(extents, "extent", extent)
        return b.load(product)

    def mark_written(self, k: ir.Value) -> None:
        """`device_newer = True` on the k-th written mirror (the slot's old object released)."""
        b = self.b
        mirror = self.word(b.add(self.word(G_OUTPUTS), k))
        slot = self.slot(mirror, self.word(G_DEVICE_NEWER))
        old, true = b.load(slot), self.word(G_TRUE)
        b.call(self.api("Py_IncRef", VOID, [I64]), [true])
        b.store(true, slot)
        b.call(self.api("Py_DecRef", VOID, [I64]), [old])

    def call_python(self, word: int, on_null: ir.Block) -> None:
        """Call the table's callable at `word` with no arguments; NULL (it raised) branches
        to `on_null`, a result is released and the code goes on in a new block."""
        b = self.b
        result = b.call(self.api("PyObject_CallNoArgs", I64, [I64]), [self.word(word)])
        ok = self.block("called")
        b.cbranch(b.icmp_unsigned("==", result, c64(0)), on_null, ok)
        b.position_at_end(ok)
        b.call(self.api("Py_DecRef", VOID, [I64]), [result])

    def python_entry(self) -> None:
        """The whole launch in Python; a raise (or a failed driver launch) marks the context."""
        b = self.b
        b.position_at_end(self.python)
        self.call_python(G_PYTHON_ENTRY, self.raised)
        b.ret_void()
        b.position_at_end(self.raised)
        error_slot = b.gep(b.inttoptr(self.word(G_CONTEXT), I64P), [c64(SLOT_ERROR)])
        b.store(c64(ERROR_RAISED), error_slot)
        b.ret_void()
