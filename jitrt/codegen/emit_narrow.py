"""Element addresses in 32 bits: GPUs' field and ndarray accesses without 64-bit arithmetic.

Stage: codegen (a mixin of the function emitter; targets with `TargetTraits.narrow_offsets`:
CUDA, AMD GPUs). `ExprEmitter.element_ptr` hands an access here when `narrow_access` holds: a
field of fewer than 2**31 elements, or an ndarray in a specialization for such arrays
(`ir.nodes.Param.large` false: packing refuses a larger array there and the launch
specializes again), indexed by values of at most 32 bits. Each index is then tested unsigned
against its extent in 32 bits (a negative one is outside, as in 64), and the offset is
combined in 32 bits and sign-extended once for the address (what Taichi's and Quadrants'
CUDA code does: `mul.wide.s32`); it cannot wrap, since the offset of indices inside every
extent is below the array's size and an index outside is never used for an address. The
failure record widens the failing index (`failing_axis`). Caches nothing.
"""
from __future__ import annotations

import math

from llvmlite import ir

from ..ir import nodes as n
from .emit_expr import I1, I32, I64, Access, bounds_test, ok_is_true, sext_constant
from .emitter_host import EmitterHost


class NarrowAccessEmitter(EmitterHost):
    def narrow_access(self, ref: n.Ref, indices: tuple[n.Expr, ...]) -> bool:
        """Whether this access's check and offset may be 32-bit (module docstring)."""
        small = math.prod(ref.shape) < 2 ** 31 if isinstance(ref, n.FieldRef) else not ref.large
        return (self.target.traits.narrow_offsets and small
                and all(i.dtype.bits <= 32 for i in indices))

    def narrow_index(self, index: n.Expr) -> ir.Value:
        """An index as an i32: a constant's signed value, 8 and 16 bits sign-extended (as the
        64-bit path's `wide` does)."""
        v = self.expr(index)
        if isinstance(v, ir.Constant):
            return ir.Constant(I32, int(sext_constant(v).constant))
        return v if v.type == I32 else self.builder.sext(v, I32)

    def narrow_offset(self, ref: n.Ref, extents: list[ir.Value],
                      values: list[ir.Value]) -> ir.Value:
        """The element's address from 32-bit indices and extents, widened once."""
        b = self.builder
        offset: ir.Value = ir.Constant(I32, 0)
        for v, ext in zip(values, extents):
            offset = b.add(b.mul(offset, ext), v)
        wide = sext_constant(offset) if isinstance(offset, ir.Constant) else b.sext(offset, I64)
        return b.gep(self.data_ptr(ref), [wide])

    def narrow_extents(self, ref: n.Ref, extents: list[ir.Value]) -> list[ir.Value]:
        """`extents` as i32 (an ndarray's each below 2**31 where `narrow_access` holds)."""
        if isinstance(ref, n.FieldRef):
            return [ir.Constant(I32, s) for s in ref.shape]
        return [self.builder.trunc(e, I32) for e in extents]

    def narrow_element_ptr(self, ref: n.Ref, indices: tuple[n.Expr, ...], loc: n.Loc,
                           kind: str) -> Access:
        """`element_ptr`'s checked access in 32 bits."""
        extents = self.extents(ref)
        narrow = self.narrow_extents(ref, extents)
        values = [self.narrow_index(i) for i in indices]
        ok, axes = bounds_test(self.builder, values, narrow)
        ptr = self.narrow_offset(ref, narrow, values)
        site = -1 if ok_is_true(ok) else self.add_site(ref, loc, kind)
        deferred = kind == "read" and self.waiting_reads > 0
        return Access(ok, ptr, site, axes,
                      site >= 0 and self.check_made(ref, extents, indices, note=not deferred))

    def narrow_proven_ptr(self, ref: n.Ref, indices: tuple[n.Expr, ...]) -> Access:
        """An access the box test proved inside (`unchecked`), in 32 bits: each index's own
        value is its true one (proven without wrap; the 64-bit path starts from each loop
        variable's 64-bit copy, which the CPU's vectorizer prefers)."""
        narrow = self.narrow_extents(ref, self.extents(ref))
        ptr = self.narrow_offset(ref, narrow, [self.narrow_index(i) for i in indices])
        return Access(ir.Constant(I1, 1), ptr, -1, [])
