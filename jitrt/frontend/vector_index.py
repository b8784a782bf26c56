"""Indexing vectors and matrices in kernels: `v[k]`, `m[i, j]`, `m[i]` of values, `x[i][k]` of
fields and ndarrays of vectors, and the stores into them, with compile-time or run-time indices.

Stage: frontend (a mixin of the lowering visitor, beside `vectors.py`). An index known at
compile time picks a component (a negative one is refused, as in Taichi). A run-time
index (Taichi's `dynamic_index=True`, always on here) must be in 0..n-1: into a value, which
lives in registers, a read is a chain of selects over the components it may be and a write
gives each component `select(k == c, s, v_c)`; out of range, a read gives 0, a write changes
nothing, and a fault is recorded (an `Assertion` compiled in every build) that the launch
raises as KernelRuntimeError. Into a field or ndarray element the components are trailing axes
of the data, so `x[i][k]` is one access with one more index, bounds-checked as any index is.
Autodiff needs nothing special: selects and accesses have their adjoint rules. Caches nothing.
"""
from __future__ import annotations

import ast
import itertools
from typing import Any

from .. import dtypes
from ..errors import KernelIndexError, KernelSyntaxError
from ..ir import nodes as n
from ..ir.walk import walk_expr
from .context import LoweringHost, PyValue
from .vectors import (SWIZZLE, TupleValue, VecValue, VecVar, as_vector, size,
                      swizzle_past_end)


NEGATIVE = ("Negative indices are not supported in Taichi kernels: a vector or matrix index "
            "known at compile time counts from 0 (write v[n - 1], not v[-1])")


class VectorIndexing(LoweringHost):
    """The indexing part of the lowering visitor."""

    def vec_index(self, v: VecValue, index_node: ast.AST) -> Any:
        """`v[k]`, `m[i, j]`, `m[i]` (a row) of a vector or matrix value; with slices
        (`v[1:3]`, `m[0, :]`, `m[::2, i]`) the vector or matrix of the parts picked."""
        sliced = self.slice_parts(v.shape, index_node)
        if sliced is not None:
            shape, combos = sliced
            return VecValue(shape, tuple(self.vec_part(v, ks, index_node) for ks in combos))
        return self.vec_part(v, self.vec_indices(v.shape, index_node), index_node)

    def slice_parts(self, shape: tuple[int, ...], index_node: ast.AST
                    ) -> tuple[tuple[int, ...], list[list[Any]]] | None:
        """For an index with slices (`v[a:b:c]`, `m[i, :]`): the shape of what it picks and
        the full indices of each component picked, row-major; None without a slice. Slice
        bounds must be known at compile time (the result's shape is); the other indices may
        be run-time integers."""
        items = list(index_node.elts) if isinstance(index_node, ast.Tuple) else [index_node]
        if not any(isinstance(item, ast.Slice) for item in items):
            return None
        if len(items) > len(shape):
            raise self.err(index_node, f"too many indices for shape {shape}")
        axes: list[list[Any]] = []
        out: list[int] = []
        for axis, extent in enumerate(shape):
            item = items[axis] if axis < len(items) else ast.Slice()
            if not isinstance(item, ast.Slice):
                axes.append(self.vec_indices((extent,), item))
                continue
            bounds = [None if x is None else self.expr(x)
                      for x in (item.lower, item.upper, item.step)]
            if not all(b is None or (isinstance(b, PyValue) and isinstance(b.obj, int))
                       for b in bounds):
                raise self.err(item, "a slice of a vector or matrix needs bounds known at "
                               "compile time (Taichi's words: Taichi does not support "
                               "variables in slice now)")
            if any(b is not None and b.obj < 0 for b in bounds[:2]):
                raise self.err(item, NEGATIVE, KernelSyntaxError)
            try:
                picked = list(range(extent)[slice(*(getattr(b, "obj", None) for b in bounds))])
            except ValueError as exc:
                raise self.err(item, f"bad slice: {exc}") from None
            if not picked:
                raise self.err(item, f"the slice picks no component of axis {axis} "
                               f"(extent {extent})")
            axes.append(picked)
            out.append(len(picked))
        return tuple(out), [list(ks) for ks in itertools.product(*axes)]

    def vec_indices(self, shape: tuple[int, ...], index_node: ast.AST) -> list[Any]:
        """The indices of `v[k]` / `m[i, j]` / `m[i]`, one per leading axis: a Python int when
        known at compile time (from 0: a negative one is refused, as in Taichi), else a
        run-time integer expression (i32, or i64 for 64-bit indices), which must lie in
        0..n-1 when the kernel runs (as in Taichi, negative run-time indices are out of
        range). An index that performs an atomic is evaluated once, into a local. An integer
        vector counts as its components (`m[I]` with `I` from `jr.grouped`, as Taichi)."""
        items = list(index_node.elts) if isinstance(index_node, ast.Tuple) else [index_node]
        values: list[tuple[ast.AST, Any]] = []
        for item in items:
            k = as_vector(self.expr(item))
            if isinstance(k, VecValue) and len(k.shape) == 1:
                values += [(item, x) for x in k.items]
            else:
                values.append((item, k))
        if len(values) > len(shape):
            raise self.err(index_node, f"Expected {len(shape)} indices, got {len(values)}: "
                           f"too many indices for shape {shape}", KernelIndexError)
        ks: list[Any] = []
        for (item, k), extent in zip(values, shape):
            if isinstance(k, PyValue) and isinstance(k.obj, int):
                if k.obj < 0:
                    raise self.err(index_node, NEGATIVE, KernelSyntaxError)
                if k.obj >= extent:
                    raise self.err(index_node, f"index {k.obj} out of range for shape {shape}")
                ks.append(k.obj)
            elif isinstance(k, n.Expr) and k.dtype.is_int:
                k = self.cast(k, dtypes.i64 if k.dtype.bits == 64 else dtypes.i32)
                if any(isinstance(x, (n.Atomic, n.Assertion, n.Print, n.Simt))
                       for x in walk_expr(k)):
                    k = self.fresh_local(k, "index", self.loc(item))
                ks.append(k)
            else:
                got = f"a {k.dtype.name} value" if isinstance(k, n.Expr) else (
                    f"a vector of shape {k.shape}" if isinstance(k, VecValue) else
                    repr(getattr(k, "obj", k))[:40])
                raise self.err(item, "a vector or matrix index must be an integer (a "
                               f"constant, a jr.static loop variable or a run-time integer), "
                               f"got {got}")
        return ks

    def vec_part(self, v: VecValue, ks: list[Any], index_node: ast.AST) -> Any:
        """The component (or row) of `v` at the indices `ks` (from `vec_indices`)."""
        if any(isinstance(k, n.Expr) for k in ks):
            return self.dynamic_part(v, ks, index_node)
        if len(v.shape) == 1:
            return v.items[ks[0]]
        if len(ks) == 1:
            return v.row(ks[0])
        return v.at(ks[0], ks[1])

    def dynamic_part(self, v: VecValue, ks: list[Any], index_node: ast.AST) -> Any:
        """`v[k]` with a run-time `k` (`m[i, j]`, `m[i]` likewise): the value lives in
        registers, so each component of the result is a chain of selects over the
        components it may be, `select(k == 0, v0, select(k == 1, v1, ... out))` (only the
        chosen arm runs; autodiff follows it; an axis longer than CHAIN is first halved by
        `k < mid` selects). An index out of range reads no memory: the
        `out` arm gives 0 and records a fault, which the launch raises as KernelRuntimeError
        (in every build, as a bad field index is)."""
        loc = self.loc(index_node)
        dt = self.component_dtype(v)
        fault = n.Assertion(n.Const(0, dtypes.i32, loc), index_message(
            v.shape, index_node, "the read gave 0"), dtypes.i32, loc)
        out = self.cast(fault, dt)
        rest = v.shape[len(ks):]

        def pick(head: tuple[int, ...], tail: tuple[int, ...]) -> n.Expr:
            axis = len(head)
            if axis == len(ks):
                return self.typed(v.items[flat_index(head + tail, v.shape)], dt, index_node)
            k = ks[axis]
            if isinstance(k, int):
                return pick(head + (k,), tail)
            def chain(lo: int, hi: int) -> n.Expr:     # components lo..hi-1, else `out`
                if hi - lo > CHAIN:                      # halve: depth ~log2(n), not n
                    mid = (lo + hi) // 2
                    return n.Select(n.Binary("<", k, n.Const(mid, k.dtype, loc), dtypes.i32,
                                             loc), chain(lo, mid), chain(mid, hi), dt, loc)
                found = out
                for c in reversed(range(lo, hi)):
                    found = n.Select(n.Binary("==", k, n.Const(c, k.dtype, loc), dtypes.i32,
                                              loc), pick(head + (c,), tail), found, dt, loc)
                return found
            return chain(0, v.shape[axis])
        parts = [pick((), tail) for tail in itertools.product(*(range(e) for e in rest))]
        return VecValue(rest, tuple(parts)) if rest else parts[0]

    def component_dtype(self, v: VecValue) -> dtypes.DataType:
        """One type for all components of `v` (a select picks among them): the promotion of
        the typed components' types, widened where a Python number does not fit it."""
        typed = [x.dtype for x in v.items if isinstance(x, n.Expr)]
        numbers = [x.obj for x in v.items if isinstance(x, PyValue)]
        if not typed:
            typed = [self.ctx.default_fp if any(isinstance(x, float) for x in numbers)
                     else self.ctx.default_ip]
        dt = typed[0]
        for other in typed[1:]:
            dt = dtypes.promote(dt, other)
        for x in numbers:
            if isinstance(x, float) and not dt.is_float:
                dt = dtypes.promote(dt, self.ctx.default_fp)
            elif not isinstance(x, float) and dt.is_int and not dtypes.fits(int(x), dt):
                dt = dtypes.promote(dt, self.ctx.default_ip if dtypes.fits(
                    int(x), self.ctx.default_ip) else dtypes.i64)
        return dt

    def element_part(self, outer: tuple, index_node: ast.AST
                     ) -> tuple[tuple[int, ...], list[tuple[n.Expr, ...]]]:
        """(shape, index tuples) of the components that `x[i][k]` (`m[i][r, c]`, `m[i][r]`)
        selects of the element `outer` = (ref, indices, element shape) of a field or
        ndarray of vectors/matrices. The components are trailing axes in memory, so a
        run-time `k` is one more index of the access, bounds-checked as any index is."""
        _, idx, element = outer
        loc = self.loc(index_node)
        sliced = self.slice_parts(element, index_node)   # `x[i][1:]`: the parts picked
        if sliced is not None:
            shape, combos = sliced
            return shape, [idx + tuple(n.Const(k, dtypes.i32, loc) if isinstance(k, int) else k
                                       for k in ks) for ks in combos]
        ks = self.vec_indices(element, index_node)
        ref = outer[0]
        if isinstance(ref, n.ArrayRef) and ref.arg in self.ctx.clamped_arrays and any(
                isinstance(k, n.Expr) for k in ks):
            ks = self.clamped_components(ks, element, loc)
        heads = tuple(n.Const(k, dtypes.i32, loc) if isinstance(k, int) else k for k in ks)
        rest = element[len(ks):]
        return rest, [idx + heads + tuple(n.Const(t, dtypes.i32, loc) for t in tail)
                      for tail in itertools.product(*(range(e) for e in rest))]

    def clamped_components(self, ks: list[Any], element: tuple[int, ...], loc: n.Loc
                           ) -> list[Any]:
        """Run-time component indices into an element of an ndarray(boundary="clamp"), as
        Taichi clamps them: the element's flat position (`r * m + c` of a matrix) into
        0..components-1, then split back into indices (a row `m[i][r]`: r into 0..n-1)."""
        dt = next(k.dtype for k in ks if isinstance(k, n.Expr))
        extents = element[:len(ks)]
        flat: n.Expr = n.Const(0, dt, loc)
        for k, extent in zip(ks, extents):
            k = n.Const(k, dt, loc) if isinstance(k, int) else self.cast(k, dt)
            flat = n.Binary("+", n.Binary("*", flat, n.Const(extent, dt, loc), dt, loc), k,
                            dt, loc)
        flat = self.clamped(flat, n.Const(size(extents), dt, loc))  # type: ignore[attr-defined]
        out: list[Any] = []
        for extent in reversed(extents):
            out.append(n.Binary("%", flat, n.Const(extent, dt, loc), dt, loc))
            flat = n.Binary("//", flat, n.Const(extent, dt, loc), dt, loc)
        return out[::-1]

    def element_component(self, node: ast.Subscript) -> Any:
        """`x[i][k]` (`m[i][r, c]`, `m[i][r]`) where `x` names a field or ndarray of
        vectors/matrices: the component(s) loaded straight from memory (with a run-time `k`
        too), else None, having evaluated nothing but names."""
        inner = node.value
        if not (isinstance(inner, ast.Subscript) and plain_name(inner.value)):
            return None
        base = self.expr(inner.value)
        if not self.element_shape(base):
            return None
        found = self.whole_element(inner, base)
        if found is None:
            raise self.err(node, f"'{ast.unparse(inner)}' is one number: it has no components "
                           "to index")
        shape, idxs = self.element_part(found, node.slice)
        ref, loc = found[0], self.loc(node)
        loads = [n.Load(ref, idx, ref.dtype, loc) for idx in idxs]
        return VecValue(shape, tuple(loads)) if shape else loads[0]

    def assign_vec_component(self, target: ast.Subscript, var: VecVar, v: Any,
                             ks: list[Any] | None = None) -> None:
        """`v[k] = s` / `m[i, j] = s` (and a whole row `m[i] = row`) on a vector local; `ks`
        are the indices when the caller has evaluated them (`v[k] += s`)."""
        v = as_vector(v)
        sliced = self.slice_parts(var.shape, target.slice) if ks is None else None
        if sliced is not None:                  # m[:, 0] = col, v[1:3] = w
            shape, combos = sliced
            if isinstance(v, TupleValue) or isinstance(v, VecValue) and size(
                    v.shape) != len(combos):
                got = v.shape if isinstance(v, VecValue) else "a tuple"
                raise self.err(target, f"cannot assign shape {got} to a slice of shape {shape}")
            parts = v.items if isinstance(v, VecValue) else (v,) * len(combos)
            for full, x in zip(combos, parts):
                self.assign_vec_component(target, var, x, full)
            return
        if ks is None:
            ks = self.vec_indices(var.shape, target.slice)
        rest = var.shape[len(ks):]
        count = size(rest)
        if isinstance(v, TupleValue) or isinstance(v, VecValue) and size(v.shape) != count:
            got = v.shape if isinstance(v, VecValue) else "a tuple"
            raise self.err(target, f"cannot assign shape {got} to {count} component(s)")
        values = v.items if isinstance(v, VecValue) else (v,) * count
        loc = self.loc(target)
        if any(isinstance(k, n.Expr) for k in ks):
            return self.dynamic_assign(target, var, ks, values)
        first = flat_index(tuple(ks) + (0,) * len(rest), var.shape)
        for k, x in enumerate(values):
            c = var.components[first + k]
            self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, target), loc))

    def assign_vec_swizzle(self, target: ast.Attribute, v: Any, node: ast.AST,
                           op: str | None = None) -> bool:
        """`u.y = s`, `u.y -= s`, `u.zx = w` (or `op=`) on a vector local, as Taichi allows:
        the components the letters name (xyzw or rgba), each at most once. False when
        `target` is not a swizzle of a vector local."""
        if not isinstance(target.value, ast.Name):
            return False
        name = target.value.id
        var = self.scope.bindings.get(name)
        letters = target.attr
        if not isinstance(var, VecVar) or len(var.shape) != 1 or any(
                c not in SWIZZLE for c in letters):
            return False
        picks = [SWIZZLE[c] for c in letters]
        if max(picks) >= var.shape[0]:
            raise self.err(target, swizzle_past_end(var.shape[0], letters), KernelSyntaxError)
        if len(set(picks)) != len(picks):
            raise self.err(target, f"cannot assign to '{letters}': a component named twice")
        v = as_vector(v)
        if op is not None:
            current = self.vec_local_value(var, target)
            part = current.items[picks[0]] if len(picks) == 1 else VecValue(
                (len(picks),), tuple(current.items[k] for k in picks))
            v = self.binary(op, part, v, node)
        if len(picks) == 1 and isinstance(v, (VecValue, TupleValue)) or len(picks) > 1 and (
                not isinstance(v, VecValue) or v.shape != (len(picks),)):
            got = v.shape if isinstance(v, VecValue) else ("a tuple" if isinstance(
                v, TupleValue) else "a scalar")
            raise self.err(node, f"cannot assign {got} to '{letters}' ({len(picks)} "
                           "component(s))")
        values = v.items if isinstance(v, VecValue) else (v,)
        if len(values) > 1:             # `u.yx = u.xy` reads every old component first
            values = tuple(self.snapshot(x, node) for x in values)
        loc = self.loc(target)
        for k, x in zip(picks, values):
            c = var.components[k]
            self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, target), loc))
        self.mark_assigned(name)
        return True

    def dynamic_assign(self, target: ast.Subscript, var: VecVar, ks: list[Any],
                       values: tuple[Any, ...]) -> None:
        """`v[k] = s` with a run-time `k`: every component the index may name becomes
        `select(k == c, s, v_c)` (`s` evaluated once, into a local). An index out of range
        changes nothing and records a fault (KernelRuntimeError at the launch)."""
        loc = self.loc(target)
        values = tuple(self.snapshot(x, target) if isinstance(x, n.Expr) and not isinstance(
            x, (n.Const, n.Local, n.Arg)) else x for x in values)
        inside: n.Expr | None = None
        for axis, k in enumerate(ks):
            if isinstance(k, n.Expr):
                u = dtypes.u64 if k.dtype.bits == 64 else dtypes.u32
                ok = n.Binary("<", self.cast(k, u), n.Const(var.shape[axis], u, loc),
                              dtypes.i32, loc)
                inside = ok if inside is None else n.Binary("&", inside, ok, dtypes.i32, loc)
        assert inside is not None
        message = index_message(var.shape, target.slice, "nothing was written")
        self.emit(n.Eval(n.Assertion(inside, message, dtypes.i32, loc), loc))
        rest = var.shape[len(ks):]
        for flat, c in enumerate(var.components):
            position = unflat_index(flat, var.shape)
            head, tail = position[:len(ks)], position[len(ks):]
            if any(isinstance(k, int) and k != h for k, h in zip(ks, head)):
                continue
            cond: n.Expr | None = None
            for k, h in zip(ks, head):
                if isinstance(k, n.Expr):
                    same = n.Binary("==", k, n.Const(h, k.dtype, loc), dtypes.i32, loc)
                    cond = same if cond is None else n.Binary("&", cond, same, dtypes.i32, loc)
            assert cond is not None
            x = self.typed(values[flat_index(tail, rest)], c.dtype, target)
            self.emit(n.Assign(c.ir_name, n.Select(cond, x, n.Local(c.ir_name, c.dtype, loc),
                                                   c.dtype, loc), loc))


# the longest chain of selects a run-time index into a value reads through; a longer axis
# (`jr.types.vector(1024, jr.i32)`) is halved first (`k < mid`), so that the depth of the
# expression, which every pass walks recursively, grows as log2 of the length
CHAIN = 32


def flat_index(position: tuple[int, ...], shape: tuple[int, ...]) -> int:
    """The row-major position of an index tuple in `shape`."""
    flat = 0
    for k, extent in zip(position, shape):
        flat = flat * extent + k
    return flat


def unflat_index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for extent in reversed(shape):
        flat, k = divmod(flat, extent)
        out.append(k)
    return tuple(reversed(out))


def index_message(shape: tuple[int, ...], index_node: ast.AST, what: str) -> str:
    kind = f"{shape[0]}-component vector" if len(shape) == 1 else f"{shape[0]}x{shape[1]} matrix"
    return (f"Out of bound access: index [{ast.unparse(index_node)}] out of range for a {kind} "
            f"(a run-time index must be in 0..n-1 on each axis); {what}")


def plain_name(node: ast.AST) -> bool:
    """A name or a chain of attributes of one (`x`, `self.x`, `x.grad`): evaluating it has no
    effect and emits nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)
