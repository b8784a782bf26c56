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
from ..struct_host import HostStruct
from .context import LoweringHost, PyValue
from .vectors import VecValue, as_vector, constant_array


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


def struct_method(method: Any, value: Any) -> Any:
    """A `@jr.dataclass` method bound to a struct value or a struct field's element (called:
    inlined, `self` = value)."""
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

    def untyped_struct(self, node: ast.Call) -> StructValue:
        """`jr.Struct(a=v, b=w)` or `jr.Struct({"a": v})` in a kernel: a struct of the members'
        own types (ints default_ip, floats default_fp, vectors as they are)."""
        if node.args and (len(node.args) != 1 or node.keywords):
            raise self.err(node, "jr.Struct takes a dict of its members or keyword arguments "
                           "(jr.Struct(a=1, b=v))")
        if node.args:
            given = self.expr(node.args[0])
            if not (isinstance(given, PyValue) and isinstance(given.obj, dict)):
                raise self.err(node, f"jr.Struct(...) takes a dict, got {given!r}")
            values = {k: PyValue(v) for k, v in given.obj.items()}
        else:
            values = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        if not values:
            raise self.err(node, "jr.Struct() needs at least one member")
        return self.inferred_struct(values, node)

    def inferred_struct(self, values: dict[str, Any], node: ast.AST) -> StructValue:
        """A struct of `values` (lowered values, or PyValues of numbers, lists, dicts and
        Python-scope structs), each member of the type its value has."""
        from ..linalg import matrix, vector
        kinds: list[tuple[str, Any]] = []
        items: list[Any] = []
        for k, v in values.items():
            if isinstance(v, PyValue) and isinstance(v.obj, HostStruct):
                v = self.host_struct(v.obj, node)
            elif isinstance(v, PyValue) and isinstance(v.obj, dict):
                v = self.inferred_struct({a: PyValue(b) for a, b in v.obj.items()}, node)
            elif isinstance(v, PyValue) and constant_array(v.obj) is not None:
                v = constant_array(v.obj)
            v = as_vector(v)
            if isinstance(v, StructValue):
                kinds.append((k, v.kind))
            elif isinstance(v, VecValue):
                parts = [self.value(node, x) for x in v.items]
                dt = parts[0].dtype
                for x in parts[1:]:
                    dt = dtypes.promote(dt, x.dtype)
                kinds.append((k, vector(v.shape[0], dt) if len(v.shape) == 1 else
                              matrix(v.shape[0], v.shape[1], dt)))
                v = VecValue(v.shape, tuple(parts))
            elif isinstance(v, PyValue) and isinstance(v.obj, (bool, int, float)):
                kinds.append((k, float if isinstance(v.obj, float) else int))
            else:
                kinds.append((k, self.value(node, v).dtype))
            items.append(v)
        kind = StructType(tuple(kinds))
        return StructValue(kind, tuple(self.struct_member_value(t, v, node)
                                       for (_, t), v in zip(kinds, items)))

    def host_struct(self, obj: Any, node: ast.AST) -> StructValue:
        """A Python-scope `jr.Struct` read in a kernel (a global, a closure value): its members
        as constants, of its type (made by `jr.Struct(...)`: of its members' own types)."""
        if obj.kind is None:
            return self.inferred_struct({k: PyValue(v) for k, v in obj.entries.items()}, node)
        items = []
        for k, t in obj.kind.members:
            v = obj.entries[k]
            item = self.host_struct(v, node) if isinstance(v, HostStruct) else \
                constant_array(v) or PyValue(v)
            items.append(self.struct_member_value(t, item, node))
        return StructValue(obj.kind, tuple(items))

    def converted_struct(self, t: StructType, v: StructValue, node: ast.AST) -> StructValue:
        """`v` as a struct of type `t`: itself, or (as Taichi assigns structs) each member
        converted when both have the same member names."""
        if v.kind == t:
            return v
        if member_names(v.kind) != member_names(t):
            raise self.err(node, f"expected a {t!r}, got a {v.kind!r}")
        return StructValue(t, tuple(self.struct_member_value(mt, item, node)
                                    for (_, mt), item in zip(t.members, v.items)))

    def pinned_element(self, element: Any, bindings: dict[str, Any]) -> Any:
        """A struct field's element `x[i]` handed to a func's template parameter (by
        reference): the field and the indices (evaluated once here, into locals) bound in the
        func's scope (`bindings`) under names no Python code can spell, so that the func reads
        and writes that same element."""
        from .structs import StructElement
        sub = element.node
        values = self.index_values(sub.slice)      # type: ignore[attr-defined]
        prefix = self.ctx.fresh_prefix("$element")
        bindings[f"{prefix}field"] = PyValue(element.field)
        names: list[ast.expr] = []
        for k, (item, v) in enumerate(values):
            name = f"{prefix}{k}"
            bindings[name] = self.fresh_local(self.value(item, v), name,  # type: ignore
                                              self.loc(item))
            names.append(ast.copy_location(ast.Name(id=name, ctx=ast.Load()), item))
        sl: ast.expr = ast.copy_location(ast.Constant(None), sub.slice) if not names else \
            names[0] if len(names) == 1 else ast.copy_location(
                ast.Tuple(elts=names, ctx=ast.Load()), sub.slice)
        field = ast.copy_location(ast.Name(id=f"{prefix}field", ctx=ast.Load()), sub.value)
        return StructElement(element.field, ast.copy_location(
            ast.Subscript(value=field, slice=sl, ctx=sub.ctx), sub))

    def share_struct_local(self, var: StructVar, name: str, bindings: dict[str, Any]) -> None:
        """Struct local `var` handed to a func's template parameter `name` (by reference, as
        Taichi passes it): the func's scope (`bindings`) binds `name.member` to the caller's
        member locals themselves, so member stores in the func reach the caller."""
        for k, t in var.kind.members:
            member = self.scope.bindings[f"{var.name}.{k}"]
            if isinstance(member, StructVar):
                self.share_struct_local(member, f"{name}.{k}", bindings)
            else:
                bindings[f"{name}.{k}"] = member
        bindings[name] = StructVar(var.kind, name)

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
        if isinstance(v, PyValue) and isinstance(v.obj, HostStruct):
            v = self.host_struct(v.obj, node)
        if isinstance(t, StructType):
            if isinstance(v, StructValue):
                return self.converted_struct(t, v, node)
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
            if member_names(binding.kind) != member_names(v.kind):
                raise self.err(target, f"'{target.id}' is a {binding.kind!r}, got a "
                               f"{v.kind!r}")
            v = self.converted_struct(binding.kind, v, node)
        for k, item in zip(member_names(v.kind), v.items):
            member = ast.copy_location(ast.Name(id=f"{target.id}.{k}", ctx=ast.Store()), target)
            self.assign_local(member, item, node)      # type: ignore[attr-defined]
        self.scope.bindings[target.id] = StructVar(v.kind, target.id)
        self.mark_assigned(target.id)                  # type: ignore[attr-defined]

    def struct_target(self, target: Any) -> Any:
        """`target` with every `s.member` path of a struct local (`x.line.length`,
        `x.line.linedir[1]`) made the Name `x.line.length` its member is bound under, and a
        name bound to a struct field's element (a template parameter) made that element's
        subscript (`s.p[0]` -> `x[i].p[0]`)."""
        from .structs import StructElement
        if isinstance(target, ast.Name):
            found = self.scope.bindings.get(target.id)
            if isinstance(found, StructElement):
                return found.node
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
        if isinstance(v, PyValue) and isinstance(v.obj, HostStruct):
            v = self.host_struct(v.obj, node)
        if not isinstance(v, StructValue):
            v = self.struct_fill(base.kind, v, node)
        if v.kind != base.kind:
            if member_names(v.kind) != member_names(base.kind):
                raise self.err(node, f"cannot store a {v.kind!r} into a field of "
                               f"{base.kind!r}")
            v = self.converted_struct(base.kind, v, node)
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
