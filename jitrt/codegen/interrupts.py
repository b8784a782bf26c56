"""Ctrl-C in native code: where a launch notes the interrupt counter and where it looks again.

Stage: codegen (CPU targets). The runtime module keeps a process-wide interrupt counter that its
SIGINT handler bumps (`native/threadpool.py`). `start_launch` is emitted first in every launch
entry (kernels and max-reducers): it records the counter in the context's
`SLOT_INTERRUPT_EPOCH` and clears an interrupt mark a previous launch left behind.
`check_interrupt` is emitted on loop back edges: one load and a compare; when the counter has
moved, the launch marks `SLOT_ERROR` with `ERROR_INTERRUPTED` and the function returns, so the
launch ends early and the launcher raises KeyboardInterrupt. No state outlives the launch.
"""
from __future__ import annotations

from llvmlite import ir

from . import abi

I64 = ir.IntType(64)
I64P = I64.as_pointer()


def counter_ptr(b: ir.IRBuilder, ctx: ir.Value) -> ir.Value:
    pool = b.inttoptr(b.load(b.gep(ctx, [ir.Constant(I64, abi.SLOT_POOL)])), I64P)
    return b.inttoptr(b.load(b.gep(pool, [ir.Constant(I64, abi.POOL_INTERRUPTS)])), I64P)


def start_launch(b: ir.IRBuilder, ctx: ir.Value) -> ir.Value:
    """Record the counter for this launch; returns it."""
    epoch = b.load_atomic(counter_ptr(b, ctx), "monotonic", 8)
    b.store(epoch, b.gep(ctx, [ir.Constant(I64, abi.SLOT_INTERRUPT_EPOCH)]))
    b.cmpxchg(b.gep(ctx, [ir.Constant(I64, abi.SLOT_ERROR)]),
              ir.Constant(I64, abi.ERROR_INTERRUPTED), ir.Constant(I64, 0), "monotonic",
              "monotonic")
    return epoch


def check_interrupt(b: ir.IRBuilder, fn: ir.Function, ctx: ir.Value, counter: ir.Value,
                    epoch: ir.Value) -> None:
    """If a Ctrl-C arrived since the launch started: mark the context and return from `fn`."""
    now = b.load_atomic(counter, "monotonic", 8)
    stop_bb = fn.append_basic_block("interrupted")
    go_bb = fn.append_basic_block("not_interrupted")
    b.cbranch(b.icmp_unsigned("!=", now, epoch), stop_bb, go_bb)
    b.position_at_end(stop_bb)
    b.cmpxchg(b.gep(ctx, [ir.Constant(I64, abi.SLOT_ERROR)]), ir.Constant(I64, 0),
              ir.Constant(I64, abi.ERROR_INTERRUPTED), "monotonic", "monotonic")
    if isinstance(fn.function_type.return_type, ir.VoidType):
        b.ret_void()
    else:
        ty = fn.function_type.return_type        # (a real function's result: a struct)
        b.ret(ir.Constant(ty, None if isinstance(ty, ir.LiteralStructType) else 0))
    b.position_at_end(go_bb)
