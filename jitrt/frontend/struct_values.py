"""Struct values in kernels: `s = line3f(linedir=v, length=1.5)`, `s.length`, `s.linedir = w`.

Stage: frontend (a mixin of the lowering visitor). Calling a `jr.types.struct(...)` type (or a
`@jr.dataclass`) in a kernel builds a `StructValue`: one value per member, in the type's order,
converted to the member's type as Taichi converts (`structi(2.5, (2.5, 2.5))` holds 2 and
(2, 2)). Arguments: members by position, then by keyword; a member not given is zero (so
`mystruct(1)` makes its first member of 1, as in Taichi: a nested struct or vector member is
made of it in turn). Members may be structs (nested). Assigned to a
name, a struct is a `StructVar`: each member is an ordinary local (scalar, vector or struct)
bound under the name `s.member` in the scope (no Python name contains a dot), so member
stores, reads and re-assignment reuse the rules of locals. A struct field's element read as a
whole (`y[i]`) is the struct of its members' loads; `x[i] = s` stores each member. Caches
nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..frozen import frozen
from ..ir import nodes as n
from ..linalg import MatrixType, StructType
from .context import LoweringHost, PyValue
from .vectors import VecValue, as_vector


@frozen
class StructValue:
    kind: StructType
    items: tuple[Any, ...]            # one Value per member, in the type's order

    def member(self, name: str) -> Any:
        for (k, _), v in zip(self.kind.members, self.items):
            if k == name:
                return v
        raise KeyError(name)


@frozen
class StructVar:
    """A struct local: its members are bound as `<name>.<member>` in the same scope."""
    kind: StructType
    name: str


def struct_method(method: Any, value: StructValue) -> Any:
    """A `@jr.dataclass` method bound to a struct value (called: inlined, `self` = value)."""
    from .func import BoundFunc, Func, plain_func
    func = method if isinstance(method, Func) else plain_func(method)
    return BoundFunc(func, value)


def member_names(kind: StructType) -> list[str]:
    return [k for k, _ in kind.members]


class StructValueLowering(LoweringHost):
    """The struct-value part of the lowering visitor."""

    def struct_construct(self, kind: StructType, node: ast.Call) -> StructValue:
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        names = member_names(kind)
        if len(args) == 1 and not kwargs and isinstance(args[0], PyValue) and isinstance(
                args[0].obj, dict):
            kwargs = {k: PyValue(v) for k, v in args[0].obj.items()}
            args = []
        if len(args) > len(names):
            raise self.err(node, f"{kind!r} has {len(names)} members, got {len(args)} "
                           "positional arguments")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise self.err(node, f"{kind!r} has no member '{k}' (members: "
                               f"{', '.join(names)})")
            if k in given:
                raise self.err(node, f"member '{k}' of {kind!r} is given twice")
            given[k] = v
        return StructValue(kind, tuple(self.struct_member_value(t, given.get(k, PyValue(0)),
                                                                node)
                                       for k, t in kind.members))

    def struct_fill(self, kind: StructType, v: Any, node: ast.AST) -> StructValue:
        """A struct made of one value, as Taichi's `StructType(v)`: `v` is the first member
        (a vector or struct member is made of it in turn: `line3f(1)` has linedir [1, 1, 1]),
        every other member 0."""
        first = kind.members[0][0]
        return StructValue(kind, tuple(self.struct_member_value(t, v if k == first else
                                                                PyValue(0), node)
                                       for k, t in kind.members))

    def struct_member_value(self, t: Any, v: Any, node: ast.AST) -> Any:
        """`v` converted to member type `t` (a scalar fills a vector or a struct)."""
        if isinstance(t, StructType):
            if isinstance(v, StructValue):
                if v.kind != t:
                    raise self.err(node, f"expected a {t!r}, got a {v.kind!r}")
                return v
            if isinstance(v, PyValue) and isinstance(v.obj, dict):
                return StructValue(t, tuple(self.struct_member_value(
                    mt, PyValue(v.obj.get(k, 0)), node) for k, mt in t.members))
            return self.struct_fill(t, v, node)
        if isinstance(t, MatrixType):
            dt = t.scalar(self.ctx.default_fp, self.ctx.default_ip)
            v = as_vector(v)
            if not isinstance(v, VecValue):
                e = self.cast(self.value(node, v), dt)
                count = 1
                for d in t.shape:
                    count *= d
                return VecValue(t.shape, (e,) * count)
            if v.shape != t.shape:
                raise self.err(node, f"expected a {t!r} (shape {t.shape}), got shape {v.shape}")
            return VecValue(t.shape, tuple(self.cast(self.value(node, x), dt) for x in v.items))
        dt = self.resolve_kind(t)        # type: ignore[attr-defined]
        if isinstance(v, (StructValue, VecValue)):
            raise self.err(node, f"expected a {dt.name} member, got a struct or vector")
        return self.cast(self.value(node, v), dt)

    def struct_local_value(self, var: StructVar, node: ast.AST) -> StructValue:
        return StructValue(var.kind, tuple(
            self.expr(ast.copy_location(ast.Name(id=f"{var.name}.{k}", ctx=ast.Load()), node))
            for k in member_names(var.kind)))

    def assign_struct_local(self, target: ast.Name, v: Any, node: ast.AST) -> None:
        """`s = struct` (a new struct local, or each member of an existing one)."""
        binding = self.scope.bindings.get(target.id)
        if isinstance(binding, StructVar) and binding.kind != v.kind:
            raise self.err(target, f"'{target.id}' is a {binding.kind!r}, got a {v.kind!r}")
        for k, item in zip(member_names(v.kind), v.items):
            member = ast.copy_location(ast.Name(id=f"{target.id}.{k}", ctx=ast.Store()), target)
            self.assign_local(member, item, node)      # type: ignore[attr-defined]
        self.scope.bindings[target.id] = StructVar(v.kind, target.id)
        self.mark_assigned(target.id)                  # type: ignore[attr-defined]

    def struct_target(self, target: Any) -> Any:
        """`target` with every `s.member` path of a struct local (`x.line.length`,
        `x.line.linedir[1]`) made the Name `x.line.length` its member is bound under."""
        if isinstance(target, ast.Attribute):
            inner = self.struct_target(target.value)
            var = self.scope.bindings.get(inner.id) if isinstance(inner, ast.Name) else None
            if isinstance(var, StructVar):
                if target.attr not in member_names(var.kind):
                    raise self.err(target, f"{var.kind!r} has no member '{target.attr}' "
                                   f"(members: {', '.join(member_names(var.kind))})")
                return ast.copy_location(ast.Name(id=f"{var.name}.{target.attr}",
                                                  ctx=target.ctx), target)
            if inner is not target.value:
                return ast.copy_location(ast.Attribute(value=inner, attr=target.attr,
                                                       ctx=target.ctx), target)
        if isinstance(target, ast.Subscript):
            inner = self.struct_target(target.value)
            if inner is not target.value:
                return ast.copy_location(ast.Subscript(value=inner, slice=target.slice,
                                                       ctx=target.ctx), target)
        return target

    def store_struct_member(self, target: ast.Attribute, v: Any, node: ast.AST,
                            op: str | None) -> bool:
        """`s.member = v` (or `op=`) on a struct local; False when `target` is not one."""
        if not isinstance(target.value, ast.Name):
            return False
        var = self.scope.bindings.get(target.value.id)
        if not isinstance(var, StructVar):
            return False
        if target.attr not in member_names(var.kind):
            raise self.err(target, f"{var.kind!r} has no member '{target.attr}'")
        name = ast.copy_location(ast.Name(id=f"{var.name}.{target.attr}", ctx=ast.Load()),
                                 target)
        if op is not None:
            v = self.binary(op, self.expr(name), v, node)   # type: ignore[attr-defined]
        member_type = dict(var.kind.members)[target.attr]
        v = self.struct_member_value(member_type, v, node)
        name.ctx = ast.Store()
        if isinstance(v, StructValue):
            self.assign_struct_local(name, v, node)
        else:
            self.assign_local(name, v, node)               # type: ignore[attr-defined]
        return True

    def struct_element_value(self, element: Any, node: ast.AST) -> StructValue:
        """`y[i]` of a struct field as a whole: the struct of its members' loads."""
        from .structs import StructElement
        items: list[Any] = []
        for k, t in element.field.kind.members:
            sub, member = self.struct_member(element, k, node)  # type: ignore[attr-defined]
            if isinstance(t, StructType):                       # a nested struct's field
                items.append(self.struct_element_value(StructElement(member.obj, sub), node))
                continue
            ref, indices, shape = self.access(sub, member)      # type: ignore[attr-defined]
            items.append(self.load_element((ref, indices, shape), sub) if shape   # type: ignore
                         else n.Load(ref, indices, ref.dtype, self.loc(node)))
        return StructValue(element.field.kind, tuple(items))

    def store_struct_element(self, base: Any, target: ast.Subscript, v: Any,
                             node: ast.AST) -> None:
        """`x[i] = s` on a struct field: each member stored."""
        from .structs import StructElement
        element = StructElement(base, target)
        if isinstance(v, StructElement):
            v = self.struct_element_value(v, node)
        if not isinstance(v, StructValue):
            v = self.struct_fill(base.kind, v, node)
        if v.kind != base.kind:
            raise self.err(node, f"cannot store a {v.kind!r} into a field of {base.kind!r}")
        for (k, t), item in zip(base.kind.members, v.items):
            sub, member = self.struct_member(element, k, node)  # type: ignore[attr-defined]
            if isinstance(t, StructType):                       # a nested struct's field
                self.store_struct_element(member.obj, sub, item, node)
                continue
            self.store_element(self.access(sub, member), item, node)  # type: ignore


def struct_dtypes(kind: StructType, ctx: Any) -> tuple[dtypes.DataType, ...]:
    """The scalar types of a struct's members, flattened in order (vectors row-major)."""
    out: list[dtypes.DataType] = []
    for _, t in kind.members:
        if isinstance(t, StructType):
            out += struct_dtypes(t, ctx)
        elif isinstance(t, MatrixType):
            count = 1
            for d in t.shape:
                count *= d
            out += [t.scalar(ctx.default_fp, ctx.default_ip)] * count
        else:
            out.append(ctx.default_ip if t is int else ctx.default_fp if t is float
                       else dtypes.coerce(t))
    return tuple(out)


def flatten_struct(v: StructValue) -> list[Any]:
    out: list[Any] = []
    for item in v.items:
        if isinstance(item, StructValue):
            out += flatten_struct(item)
        elif isinstance(item, VecValue):
            out += list(item.items)
        else:
            out.append(item)
    return out


def unflatten_struct(kind: StructType, parts: list[Any]) -> StructValue:
    """The struct of `parts` (scalars in `struct_dtypes` order), consumed from the front."""
    items: list[Any] = []
    for _, t in kind.members:
        if isinstance(t, StructType):
            items.append(unflatten_struct(t, parts))
        elif isinstance(t, MatrixType):
            count = 1
            for d in t.shape:
                count *= d
            items.append(VecValue(t.shape, tuple(parts[:count])))
            del parts[:count]
        else:
            items.append(parts.pop(0))
    return StructValue(kind, tuple(items))
