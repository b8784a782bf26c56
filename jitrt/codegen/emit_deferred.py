"""Reads whose bounds check waits: GPU gather loops without a branch per check.

Stage: codegen (a mixin of the function emitter; targets with `TargetTraits.deferred_reads`:
CUDA). In a thread's innermost loop of unknown trip count that only computes
(`StmtEmitter.counted_loop` raises `waiting_reads` around its body), a read whose check
depends on data loads from an address selected by the check instead of branching on it: its
element when inside, else its field's first element or the module's zero sink
(`read_sink`). The thread keeps the failure with the lowest site number, its axis and index,
in locals (registers) until `flush_deferred`, after the loop, records it and ends the thread
as a failed check does (the loop wrote nothing). Such reads make no check fact
(`check_facts.py`) for later accesses. Caches nothing; the sink is one internal global per
module.
"""
from __future__ import annotations

import math

from llvmlite import ir

from .. import dtypes
from ..ir import nodes as n
from .emit_expr import I1, I32, I64, Access, end_thread, failing_axis
from .emitter_host import EmitterHost

# a deferred read's failure is kept as DEFERRED_CODES - ((site * DEFERRED_AXES + axis) * 2 +
# wide) (0: none), so that the largest code is the lowest-numbered site (`deferred_check`)
DEFERRED_CODES = (1 << 31) - 1
DEFERRED_AXES = 16       # more than any array's axes


def read_sink(module: ir.Module, b: ir.IRBuilder, ptr_type: ir.Type) -> ir.Value:
    """The module's zero sink (32 bytes of device memory nothing writes) as `ptr_type`: what
    a deferred read outside its array loads instead."""
    try:
        sink = module.get_global("jitrt.read_sink")
    except KeyError:
        kind = ir.ArrayType(I64, 4)
        sink = ir.GlobalVariable(module, kind, "jitrt.read_sink",
                                 addrspace=getattr(ptr_type, "addrspace", 0))
        sink.initializer = ir.Constant(kind, [0] * 4)
        sink.linkage = "internal"
        sink.align = 16
    return b.bitcast(sink, ptr_type)


class DeferredReadEmitter(EmitterHost):
    def defers(self, access: Access) -> bool:
        """Whether this read's check waits for its loop's end: a read checked here (not
        proven, not repeating a check made) in a loop whose reads wait
        (`StmtEmitter.counted_loop`, on targets that defer reads)."""
        return (self.waiting_reads > 0 and not access.known
                and not isinstance(access.ok, ir.Constant))

    def deferred_check(self, access: Access, ref: n.Ref) -> ir.Value:
        """The address a deferred read loads: its element when every index is inside, else
        a field's first element (its offset selected in 32 bits, for fields of fewer than
        2^31 elements) or the module's zero sink. The thread's failure with the lowest site
        number (and axis) is kept, with its index, in locals (registers) until
        `flush_deferred` tests it: a code `DEFERRED_CODES - ((site * AXES + axis) * 2 +
        wide)` (0: none), so that the largest code wins, and the index in 32 bits where the
        read's indices have at most 32 (`wide` 0), else in 64."""
        b = self.builder
        code_ptr = self.local_ptr("$deferred_code", dtypes.u32)
        axis, index = failing_axis(b, access.axes)
        wide = 0 if access.narrow else 1
        mine = b.select(access.ok, ir.Constant(I32, 0), b.sub(
            ir.Constant(I32, DEFERRED_CODES - access.site * DEFERRED_AXES * 2 - wide),
            b.shl(b.trunc(axis, I32), ir.Constant(I32, 1))))
        code = b.load(code_ptr)
        wins = b.icmp_unsigned(">", mine, code)
        b.store(b.select(wins, mine, code), code_ptr)
        if access.narrow:
            index_ptr = self.local_ptr("$deferred_index32", dtypes.i32)
            index = b.trunc(index, I32)
        else:
            index_ptr = self.local_ptr("$deferred_index", dtypes.i64)
        b.store(b.select(wins, index, b.load(index_ptr)), index_ptr)
        self.deferring = True
        ptr = access.ptr
        if (isinstance(ref, n.FieldRef) and 1 <= math.prod(ref.shape) < (1 << 31)
                and isinstance(ptr, ir.GEPInstr) and len(ptr.indices) == 1):
            offset = b.select(access.ok, b.trunc(ptr.indices[0], I32), ir.Constant(I32, 0))
            return b.gep(ptr.pointer, [b.zext(offset, I64)])
        return b.select(access.ok, ptr, read_sink(self.module, b, ptr.type))

    def flush_deferred(self) -> None:
        """At the end of a loop whose reads wait (one that stores waits only where none of
        its accesses can fail, so nothing to flush): a thread whose deferred read failed
        records that failure and ends here."""
        if not self.deferring:
            return
        self.deferring = False
        b = self.builder
        code = b.load(self.local_ptr("$deferred_code", dtypes.u32))
        stop = b.append_basic_block("deferred_out_of_bounds")
        go = b.append_basic_block("deferred_in_bounds")
        b.cbranch(b.icmp_unsigned("==", code, ir.Constant(I32, 0)), go, stop).set_weights(
            [1 << 20, 1])
        b.position_at_end(stop)
        packed = b.zext(b.sub(ir.Constant(I32, DEFERRED_CODES), code), I64)
        wide = b.trunc(packed, I1)
        packed = b.lshr(packed, ir.Constant(I64, 1))
        site1 = b.add(b.udiv(packed, ir.Constant(I64, DEFERRED_AXES)), ir.Constant(I64, 1))
        axis = b.urem(packed, ir.Constant(I64, DEFERRED_AXES))
        index = b.select(wide, b.load(self.local_ptr("$deferred_index", dtypes.i64)),
                         b.sext(b.load(self.local_ptr("$deferred_index32", dtypes.i32)), I64))
        self.call_recorder(site1, axis, index)
        end_thread(b)
        b.position_at_end(go)
