"""Struct fields in kernels (`s[i].pos`) and member-like stores (`x[i].y = s`).

Stage: frontend (a mixin of the lowering visitor). `s[i]` of a struct field
(`linalg.StructField`: one field per member) is a `StructElement` until `.member` picks the
member field, which is then read, written or `+=`-updated like any field element (a vector
member as a whole vector). `x[i].y = s` on a field of vectors stores one component.
Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from ..frozen import frozen
from .. import dtypes
from ..ir import nodes as n
from .context import LoweringHost, PyValue
from .vectors import SWIZZLE


@frozen
class StructElement:
    """`s[i]` of a struct field, waiting for `.member`."""
    field: Any                        # linalg.StructField
    node: ast.Subscript



class StructLowering(LoweringHost):
    """The struct part of the lowering visitor."""

    def struct_member(self, element: StructElement, attr: str, node: ast.AST
                      ) -> tuple[ast.Subscript, Any]:
        """(the subscript, the member field) of `s[i].attr`."""
        member = element.field.members.get(attr)
        if member is None:
            raise self.err(node, f"the struct has no member '{attr}' (members: "
                           f"{', '.join(element.field.members)})")
        return element.node, PyValue(member)

    def load_member(self, element: StructElement, node: ast.Attribute) -> Any:
        sub, member = self.struct_member(element, node.attr, node)
        if type(member.obj).__name__ == "StructField":     # `s[i].inner` of a nested struct
            return StructElement(member.obj, sub)
        ref, indices, shape = self.access(sub, member)
        if shape:
            return self.load_element((ref, indices, shape), sub)
        return n.Load(ref, indices, ref.dtype, self.loc(node))

    def store_member(self, target: ast.Attribute, v: Any, node: ast.AST,
                     op: str | None = None) -> bool:
        """`s[i].attr = v` (or `op=` v) on a struct member, `x[i].y = s` on a component of a
        vector element; False when `target` is neither."""
        if isinstance(target.value, ast.Attribute):     # `s[i].inner.attr` (nested structs)
            inner = self.expr(target.value)
            if not isinstance(inner, StructElement):
                return False
            sub, member = self.struct_member(inner, target.attr, target)
            if type(member.obj).__name__ == "StructField" and op is None:
                self.store_struct_element(member.obj, sub, v, node)  # type: ignore[attr-defined]
            else:
                self.store_element(self.access(sub, member), v, node, op)
            return True
        if not isinstance(target.value, ast.Subscript):
            return False
        base = self.expr(target.value.value)
        if isinstance(base, PyValue) and type(base.obj).__name__ == "StructField":
            sub, member = self.struct_member(StructElement(base.obj, target.value),
                                             target.attr, target)
            if type(member.obj).__name__ == "StructField" and op is None:   # nested struct
                self.store_struct_element(member.obj, sub, v, node)  # type: ignore[attr-defined]
                return True
            self.store_element(self.access(sub, member), v, node, op)
            return True
        if not self.element_shape(base) or target.attr not in SWIZZLE:
            return False
        ref, outer, shape = self.access(target.value, base)
        k = SWIZZLE[target.attr]
        if len(shape) != 1 or k >= shape[0]:
            raise self.err(target, f"a vector of shape {shape} has no component "
                           f"'{target.attr}'")
        loc = self.loc(target)
        self.store_element((ref, outer + (n.Const(k, dtypes.i32, loc),), ()), v, node, op)
        return True
