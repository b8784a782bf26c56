"""AST -> IR for loops and jumps (the loop family of the lowering visitor): `for` over
`range` (stepped ones too), `jr.ndrange`, `jr.grouped` and the indices of a field; `while`;
`jr.static(...)` loops unrolled at compile time; `break`/`continue`; `if` (folded when the
condition is known at compile time).

Stage: frontend (a mixin of the lowering visitor beside `lower_stmt.py`). The outermost loops
of a kernel become `ParFor`; a loop's variables are the loop's own. Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..errors import KernelSyntaxError
from ..data_component import ComponentField
from ..ir import nodes as n
from ..ir.walk import all_exprs
from . import builtins as bi
from .context import LocalVar, LoweringHost, PyValue
from .lower_expr import ShapeOf, is_field, is_number
from .lower_return import continues
from .vectors import VecVar

# what a jr.ndrange bound of the wrong type says first (Taichi's words)
NDRANGE = "Every argument of ndrange should be an integer scalar or a tuple/list of (int, int): "
# what an extent of jr.ndrange in a kernel may be (Taichi's words)
EXTENT_RULE = "Every argument of ndrange should be a scalar or a tuple/list like (begin, end)"
_UNBOUND = object()     # a loop variable that had no binding before its loop


class LoopLowering(LoweringHost):
    """The loop and jump part of the lowering visitor."""

    def stmt_Break(self, node: ast.Break) -> None:
        if self.check_in_loop(node, "break"):
            self.emit(n.Break(self.loc(node)))
            self.scope.assigned = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        if self.check_in_loop(node, "continue"):
            self.emit(n.Continue(self.loc(node)))
            self.scope.assigned = None

    def check_in_loop(self, node: ast.AST, word: str) -> bool:
        """Whether `word` jumps at run time; in a jr.static loop it acts while unrolling (the
        rest of this copy of the body is not compiled; `break` ends the unrolling), which
        needs it under compile-time ifs only."""
        if not self.loops or (self.loops[-1] == "static" and not self.static_depths):
            raise self.err(node, f"'{word}' outside a loop")
        if self.loops[-1] == "static":
            if self.depth != self.static_depths[-1]:
                raise self.err(node, f"You are trying to `{word}` a static `for` loop, but the "
                               f"`{word}` statement is inside a non-static `if` (the loop is "
                               "unrolled while compiling): make the condition jr.static(...)",
                               KernelSyntaxError)
            self.static_jump = word
            return False
        if self.loops[-1] == "parallel" or (self.loops[-1] == "parallel+continue"
                                            and word == "break"):
            raise self.err(node, f"Cannot {word} in the outermost loop: its iterations run in "
                           "parallel, in no order; only serial inner loops may break "
                           "(continue ends the iteration)", KernelSyntaxError)
        return True

    # ---- control flow -------------------------------------------------------------------
    def stmt_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        if isinstance(cond, PyValue):
            static = isinstance(node.test, ast.Call) and self.expr(node.test.func) == \
                PyValue(bi.static)
            self.folded_ifs += 0 if static else 1
            try:
                self.stmts(node.body if cond.obj else node.orelse)
            finally:
                self.folded_ifs -= 0 if static else 1
            return
        c = self.truth(self.value(node.test, cond))
        before = self.scope.assigned
        fr = self.func_return
        self.depth += 1
        try:
            body, after_body = self.branch_assigned(before, lambda: self.lower_block(node.body))
            body_returned = fr is not None and fr.take_stop()
            orelse, after_else = self.branch_assigned(before,
                                                      lambda: self.lower_block(node.orelse))
            if fr is not None:          # after the if, paths go on unless both returned
                fr.stopped = fr.take_stop() and body_returned
        finally:
            self.depth -= 1
        self.scope.assigned = self.merge_assigned(after_body, after_else)
        self.emit(n.If(c, body, orelse, self.loc(node)))

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.err(node, "while/else is not supported in kernels")
        saved, self.block = self.block, []
        cond = self.truth(self.value(node.test))
        pre, self.block = tuple(self.block), saved
        self.loops.append("serial")
        self.depth += 1
        before = self.scope.assigned
        try:
            body, _ = self.branch_assigned(before, lambda: self.lower_block(node.body))
        finally:
            self.loops.pop()
            self.depth -= 1
            self.scope.assigned = before   # the body may run zero times
        loc = self.loc(node)
        if pre:  # the condition needed statements: test inside the loop
            stop = n.If(cond, (), (n.Break(loc),), loc)
            self.emit(n.While(n.Const(1, dtypes.i32, loc), pre + (stop,) + body, loc))
        else:
            self.emit(n.While(cond, body, loc))

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.err(node, "for/else is not supported in kernels")
        it = node.iter
        while isinstance(it, ast.IfExp):      # an iterable chosen at compile time
            cond = self.expr(it.test)
            if not isinstance(cond, PyValue):
                raise self.err(it.test, "the condition choosing a loop's iterable must be known "
                               "at compile time (jr.static(...))")
            it = it.body if cond.obj else it.orelse
        if isinstance(it, ast.Call):
            callee = self.expr(it.func)
            if isinstance(callee, PyValue) and callee.obj is bi.static:
                if it.args and isinstance(it.args[0], ast.Call) and self.expr(
                        it.args[0].func) == PyValue(bi.static):
                    raise self.err(it.args[0], f"'{ast.unparse(it.func)}' cannot be nested",
                                   KernelSyntaxError)
                return self.static_for(node, self.static_value(it))
            if isinstance(callee, PyValue) and callee.obj is bi.PY_RANGE:
                if len(it.args) == 3 and not self.is_constant_one(it.args[2]):
                    return self.stepped_range_for(node, it)
                return self.range_for(node, [self.range_bounds(it)])
            if isinstance(callee, PyValue) and callee.obj is bi.ndrange:
                return self.range_for(node, self.ndrange_extents(it.args), it)
            if isinstance(callee, PyValue) and callee.obj is bi.grouped:
                return self.grouped_for(node, it)
        source = self.expr(it)
        if isinstance(source, PyValue) and (is_field(source.obj) or isinstance(
                source.obj, ComponentField) or type(source.obj).__name__ == "StructField"):
            return self.range_for(node, self.field_box(source.obj, it), it)
        if isinstance(source, PyValue) and type(source.obj).__name__ == "Cells":
            return self.range_for(node, self.field_box(source.obj.field, it), it)  # x.parent()
        if isinstance(source, n.ArrayRef) and not source.grad:   # `for i in arr`: its shape
            loc = self.loc(it)
            zero = n.Const(0, dtypes.i32, loc)
            outer = source.ndim - len(self.element_shape(source))
            return self.range_for(node, [(zero, n.Shape(source, k, dtypes.i32, loc))
                                         for k in range(outer)], it)
        raise self.err(it, "a kernel for loop iterates over range(), jr.ndrange(), a field, "
                       "an ndarray or jr.static(...)")

    def field_box(self, fld: Any, node: ast.AST) -> list[tuple[n.Expr, n.Expr]]:
        """The (begin, end) of each index of field `fld` (`for i, j in x`, `jr.grouped(x)`):
        its shape, the element's components left out, from its offset (the user's indices,
        as in Taichi)."""
        loc = self.loc(node)
        offset = tuple(getattr(fld, "offset", ())) or (0,) * len(fld.shape)
        return [(n.Const(o, dtypes.i32, loc), n.Const(o + s, dtypes.i32, loc))
                for o, s in zip(offset, fld.shape)]

    def is_constant_one(self, node: ast.AST) -> bool:
        step = self.expr(node)
        return is_number(step) and step.obj == 1  # type: ignore[union-attr]

    def stepped_range_for(self, node: ast.For, call: ast.Call) -> None:
        """`for i in range(a, b, step)`: a loop over the count of values, i = a + k * step
        assigned first in the body (a constant or run-time step, either sign; a run-time step
        of 0 runs no iteration, where Python raises ValueError)."""
        if call.keywords or not isinstance(node.target, ast.Name):
            raise self.err(call, "range(a, b, step) needs positional arguments and one loop "
                           "variable")
        begin, end = self.index_value(call.args[0]), self.index_value(call.args[1])
        step = self.index_value(call.args[2])
        if isinstance(step, n.Const) and step.value == 0:
            raise self.err(call.args[2], "range() step must not be zero")
        dt = dtypes.i64 if dtypes.i64 in (begin.dtype, end.dtype, step.dtype) else dtypes.i32
        loc = self.loc(call)
        names = []
        for part, value in (("begin", begin), ("step", step)):     # evaluated once, before
            name = self.ctx.fresh_prefix("range") + part
            self.ctx.local_types[name] = dt
            self.emit(n.Assign(name, self.cast(value, dt), loc))
            alias = f"__jr_{name.replace('$', '_')}"
            self.scope.bindings[alias] = LocalVar(name, dt)
            self.mark_assigned(alias)
            names.append(alias)
        b, s = (n.Local(self.scope.bindings[a].ir_name, dt, loc) for a in names)
        e = self.cast(end, dt)

        def c(v: int) -> n.Expr:
            return n.Const(v, dt, loc)

        def binary(op: str, x: n.Expr, y: n.Expr) -> n.Expr:
            return n.Binary(op, x, y, dt, loc)
        up = binary("//", binary("-", binary("+", binary("-", e, b), s), c(1)), s)
        down = binary("//", binary("-", binary("-", binary("-", b, e), s), c(1)),
                      n.Unary("neg", s, dt, loc))
        positive = n.Binary(">", s, c(0), dtypes.i32, loc)
        negative = n.Binary("<", s, c(0), dtypes.i32, loc)
        count = binary("max", n.Select(positive, up, n.Select(negative, down, c(0), dt, loc),
                                       dt, loc), c(0))
        counter = f"__jr_k_{len(self.ctx.local_types)}"
        assign = ast.Assign(targets=[node.target], value=ast.BinOp(
            left=ast.Name(names[0], ast.Load()), op=ast.Add(), right=ast.BinOp(
                left=ast.Name(counter, ast.Load()), op=ast.Mult(),
                right=ast.Name(names[1], ast.Load()))))
        loop = ast.For(target=ast.Name(counter, ast.Store()), iter=call,
                       body=[assign, *node.body], orelse=[])
        for x in ast.walk(assign):
            ast.copy_location(x, node.target)
        ast.copy_location(loop, node)
        self.range_for(loop, [(c(0), count)])

    def grouped_for(self, node: ast.For, call: ast.Call) -> None:
        """`for I in jr.grouped(x)` (a field or an ndarray) / `jr.grouped(jr.ndrange(...))`:
        the box's loop with `I` an integer vector of its indices."""
        if len(call.args) != 1 or not isinstance(node.target, ast.Name):
            raise self.err(call, "jr.grouped() takes a field, an ndarray or a "
                           "jr.ndrange(...), and one loop variable")
        inner = call.args[0]
        extents: list[tuple[n.Expr, n.Expr]]
        if isinstance(inner, ast.Call) and self.expr(inner.func) == PyValue(bi.ndrange):
            extents = self.ndrange_extents(inner.args)
        else:
            source = self.expr(inner)
            if isinstance(source, n.ArrayRef) and not source.grad:    # an ndarray: its shape
                loc = self.loc(inner)
                outer = source.ndim - len(self.element_shape(source))
                extents = [(n.Const(0, dtypes.i32, loc), n.Shape(source, k, dtypes.i32, loc))
                           for k in range(outer)]
            elif not (isinstance(source, PyValue) and (is_field(source.obj) or isinstance(
                    source.obj, ComponentField))):
                raise self.err(inner, "jr.grouped() takes a field, an ndarray or a "
                               "jr.ndrange(...)")
            else:
                extents = self.field_box(source.obj, inner)
        name = node.target.id
        parts = [f"{name}$g{k}" for k in range(len(extents))]
        targets: list[ast.expr] = [ast.Name(p, ast.Store()) for p in parts]
        loop = ast.For(target=ast.Tuple(targets, ast.Store()), iter=call, body=node.body,
                       orelse=[])
        ast.copy_location(loop, node)
        ast.copy_location(loop.target, node.target)
        for el in targets:
            ast.copy_location(el, node.target)
        self.group_names = (name, parts)
        self.range_for(loop, extents)

    def range_bounds(self, call: ast.Call) -> tuple[n.Expr, n.Expr]:
        args = call.args
        if call.keywords or not 1 <= len(args) <= 3:
            raise self.err(call, "range() takes 1 to 3 positional arguments")
        if len(args) == 3:
            step = self.expr(args[2])
            if not (is_number(step) and step.obj == 1):  # type: ignore[union-attr]
                raise self.err(args[2], "range() with a step other than 1 is not supported; "
                               "loop over range(n) and compute the index")
        if len(args) == 1:
            return n.Const(0, dtypes.i32, self.loc(call)), self.index_value(args[0])
        return self.index_value(args[0]), self.index_value(args[1])

    def ndrange_extents(self, args: list[ast.expr]) -> list[tuple[n.Expr, n.Expr]]:
        """The (begin, end) pairs of `jr.ndrange(...)`'s arguments; `*x.shape` of a field (or
        any compile-time tuple of extents) and `*a.shape` of an ndarray give one per axis."""
        out: list[tuple[n.Expr, n.Expr]] = []
        for a in args:
            if not isinstance(a, ast.Starred):
                out.append(self.extent(a))
                continue
            v, loc = self.expr(a.value), self.loc(a)
            zero = n.Const(0, dtypes.i32, loc)
            if isinstance(v, ShapeOf):
                ndim = v.ref.ndim - len(self.element_shape(v.ref))
                out += [(zero, n.Shape(v.ref, k, dtypes.i32, loc)) for k in range(ndim)]
            elif isinstance(v, PyValue) and isinstance(v.obj, (tuple, list)):
                out += [self.constant_extent(x, a) for x in v.obj]
            else:
                raise self.err(a, "*... in jr.ndrange() takes a shape (x.shape, a.shape) or "
                               "a compile-time tuple of extents")
        return out

    def constant_extent(self, x: Any, node: ast.AST) -> tuple[n.Expr, n.Expr]:
        """An extent `n` or a `(begin, end)` pair given as compile-time Python ints."""
        loc = self.loc(node)
        pair = tuple(x) if isinstance(x, (tuple, list)) else (0, x)
        if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                     for v in pair):
            raise self.err(node, f"{EXTENT_RULE}, got {x!r}", KernelSyntaxError)
        return n.Const(pair[0], dtypes.i32, loc), n.Const(pair[1], dtypes.i32, loc)

    def extent(self, node: ast.AST) -> tuple[n.Expr, n.Expr]:
        if isinstance(node, ast.Tuple):
            if len(node.elts) != 2:
                raise self.err(node, f"{EXTENT_RULE}, got {len(node.elts)} values",
                               KernelSyntaxError)
            return self.index_value(node.elts[0], NDRANGE), self.index_value(node.elts[1],
                                                                             NDRANGE)
        return n.Const(0, dtypes.i32, self.loc(node)), self.index_value(node, NDRANGE)

    def index_value(self, node: ast.AST, lead: str = "") -> n.Expr:
        e = self.value(node)
        if not e.dtype.is_int:
            raise self.err(node, f"{lead}loop bound must be an integer, got {e.dtype.name}")
        return self.cast(e, dtypes.i64 if e.dtype.bits == 64 else dtypes.i32)

    def loop_targets(self, node: ast.For, count: int, ndrange: bool = False
                     ) -> list[ast.Name]:
        t = node.target
        names = t.elts if isinstance(t, ast.Tuple) else [t]
        if len(names) != count or not all(isinstance(x, ast.Name) for x in names):
            if ndrange:        # a KernelSyntaxError in Taichi's words
                raise self.err(t, f"this loop needs {count} loop variable name(s): Ndrange for "
                               "loop with number of the loop variables not equal to the "
                               "dimension of the ndrange is not supported (or loop over "
                               "jr.grouped(jr.ndrange(...)) with one variable)",
                               KernelSyntaxError)
            raise self.err(t, f"this loop needs {count} loop variable name(s)")
        return names  # type: ignore[return-value]

    def range_for(self, node: ast.For, extents: list[tuple[n.Expr, n.Expr]],
                  it: ast.AST | None = None) -> None:
        ndrange = isinstance(it, ast.Call) and self.expr(it.func) == PyValue(bi.ndrange)
        names = self.loop_targets(node, len(extents), ndrange)
        group_name = getattr(self, "group_names", (None,))[0]
        # the loop variables are the loop's own, as in Taichi/Quadrants: after the loop the
        # names mean what they meant before it (a later `I = i` makes a new variable)
        saved = {k: self.scope.bindings.get(k, _UNBOUND)
                 for k in [name.id for name in names] + ([group_name] if group_name else [])}
        self.refuse_assigned_loop_names(names, saved)
        vars_ = self.bind_loop_vars(names, extents)
        parallel = self.at_outermost_scope() and not self.serialize_next
        if parallel and self.folded_ifs and continues(node.body, ast.Break):
            parallel = False    # in Taichi a loop inside a non-static `if` is not outermost
        block_dim = self.block_dim_next if parallel else 0
        self.serialize_next, self.block_dim_next = False, 0
        skips = parallel and continues(node.body)
        self.loops.append("parallel+continue" if skips else "parallel" if parallel else "serial")
        self.depth += 1
        group: tuple[str, list[str]] | None = getattr(self, "group_names", None)
        if group is not None:            # jr.grouped: the loop variables as one index vector
            del self.group_names
            self.scope.bindings[group[0]] = VecVar(
                (len(group[1]),), tuple(self.scope.bindings[p] for p in group[1]))
        before = self.scope.assigned
        inside = None if before is None else before | {name.id for name in names} | (
            {group[0]} if group is not None else set())
        counter = f"$rng{len(self.ctx.random_scopes)}_{len(self.ctx.local_types)}"
        if parallel:                     # jr.random(): a call counter per iteration
            self.ctx.random_scopes.append((counter, tuple(vars_)))
        try:
            body, _ = self.branch_assigned(inside, lambda: self.lower_block(node.body))
        finally:
            self.loops.pop()
            self.depth -= 1
            self.scope.assigned = before   # the body may run zero times
            if parallel:
                self.ctx.random_scopes.pop()
            self.restore_bindings(saved)
        loc = self.loc(node)
        if parallel:
            self.emit_parallel_range(vars_, extents, tuple(body), loc, counter, skips, block_dim)
        else:
            self.emit_serial_range(vars_, extents, tuple(body), loc)

    def refuse_assigned_loop_names(self, names: list[ast.Name],
                                   saved: dict[str, object]) -> None:
        """A loop variable may not be a name the enclosing code assigned: Python would leave
        the last index in it, jitrt keeps the old value (refused, so no one relies on it)."""
        assigned = self.scope.assigned or set()
        for name in names:
            # (a name only some paths assigned, e.g. in an earlier loop's body, is Taichi's
            # block-local there and may be reused, as the stepped range's own variable is)
            if saved[name.id] is not _UNBOUND and name.id != "_" and name.id in assigned:
                raise self.err(name, f"Variable '{name.id}' is already declared in the outer "
                               "scope and cannot be used as loop variable: the loop's "
                               "variable is its own (after the loop the name keeps its old "
                               "value); use a new name", KernelSyntaxError)

    def bind_loop_vars(self, names: list[ast.Name],
                       extents: list[tuple[n.Expr, n.Expr]]) -> list[str]:
        """Bind each loop name to a new local of its range's type (i64 if either bound is);
        their IR names, in order."""
        vars_: list[str] = []
        for name, (b, e) in zip(names, extents):
            dt = dtypes.i64 if dtypes.i64 in (b.dtype, e.dtype) else dtypes.i32
            var = LocalVar(self.scope.prefix + name.id, dt)
            old = self.ctx.local_types.get(var.ir_name)
            if old is not None and old != dt:
                var = LocalVar(self.ctx.fresh_prefix(name.id) + name.id, dt)
            self.ctx.local_types[var.ir_name] = dt
            self.scope.bindings[name.id] = var
            vars_.append(var.ir_name)
        return vars_

    def restore_bindings(self, saved: dict[str, object]) -> None:
        """The names a loop bound mean again what they meant before it."""
        for k, v in saved.items():
            if v is _UNBOUND:
                self.scope.bindings.pop(k, None)
            else:
                self.scope.bindings[k] = v

    def emit_parallel_range(self, vars_: list[str], extents: list[tuple[n.Expr, n.Expr]],
                            body: tuple[n.Stmt, ...], loc: n.Loc, counter: str, skips: bool,
                            block_dim: int) -> None:
        """The kernel's top-level loop as one `ParFor` over the box of `extents`."""
        if skips:     # `continue` in the parallel loop ends the iteration: the body runs in a
            trip = f"$trip{len(self.ctx.local_types)}"          # one-trip serial loop
            self.ctx.local_types[trip] = dtypes.i32
            body = (n.For(trip, n.Const(0, dtypes.i32, loc), n.Const(1, dtypes.i32, loc),
                          body, loc),)
        if counter in self.ctx.local_types:     # jr.random() was called: reset per iteration
            body = (n.Assign(counter, n.Const(0, dtypes.u64, loc), loc),) + body
        types = [self.ctx.local_types[v] for v in vars_]
        if not any(isinstance(e, n.Simt) for e in all_exprs(body)):
            block_dim = -(-block_dim // 32) * 32     # whole warps (block sums need them)
        self.emit(n.ParFor(tuple(vars_), tuple(self.cast(b, dt) for (b, _), dt in
                                               zip(extents, types)),
                           tuple(self.cast(e, dt) for (_, e), dt in zip(extents, types)),
                           body, loc, block_dim))

    def emit_serial_range(self, vars_: list[str], extents: list[tuple[n.Expr, n.Expr]],
                          body: tuple[n.Stmt, ...], loc: n.Loc) -> None:
        """A loop inside the kernel's body: one `For` per variable, the first outermost."""
        for name_ir, (b, e) in reversed(list(zip(vars_, extents))):
            dt = self.ctx.local_types[name_ir]
            body = (n.For(name_ir, self.cast(b, dt), self.cast(e, dt), body, loc),)
        for stmt in body:
            self.emit(stmt)

    def static_for(self, node: ast.For, iterable: PyValue) -> None:
        try:
            items = list(iterable.obj)
        except TypeError:
            raise self.err(node.iter, "jr.static() loop needs an iterable known at compile "
                           "time") from None
        except NotImplementedError:       # a field's indices (Taichi refuses them too)
            raise self.err(node.iter, "a jr.static() loop over a field's indices is not "
                           "supported (as in Taichi): loop at run time (`for I in "
                           "jr.grouped(x)`), or unroll jr.static(jr.grouped(jr.ndrange(n, m))) "
                           "with the field's extents") from None
        self.loops.append("static")
        self.static_depths = self.static_depths + [self.depth]
        try:
            self.unroll(node, items)
        finally:
            self.loops.pop()
            self.static_depths = self.static_depths[:-1]
            self.static_jump = None

    def bind_static_item(self, target: ast.AST, item: Any) -> None:
        """A jr.static loop's target: the item itself (a compile-time value), or, for a
        run-time value taken from a tuple (`enumerate((i_x, i_y))`), a new local holding it
        for this iteration."""
        if not isinstance(target, ast.Name):
            raise self.err(target, "unsupported loop target")
        if type(item).__name__ != "RunTimeItem":
            self.scope.bindings[target.id] = PyValue(item)
            return
        self.scope.bindings.pop(target.id, None)
        self.ir_names[target.id] = self.ctx.fresh_prefix(self.scope.prefix + target.id) + \
            target.id
        self.assign_local(target, item.value, target)

    def unroll(self, node: ast.For, items: list[Any]) -> None:
        """The body of a jr.static loop once per item (a func's return ends the unrolling;
        after a run-time one, the remaining iterations run under `if not done`)."""
        t = node.target
        for k, item in enumerate(items):
            if isinstance(t, ast.Tuple):
                if len(t.elts) != len(item):
                    raise self.err(t, "loop targets do not match the items")
                for name, val in zip(t.elts, item):
                    self.bind_static_item(name, val)
            elif isinstance(t, ast.Name):
                self.bind_static_item(t, item)
            else:
                raise self.err(t, "unsupported loop target")
            self.stmts(node.body)
            jump, self.static_jump = self.static_jump, None
            if jump == "break":
                return
            fr = self.func_return
            if fr is not None and fr.stopped:
                return
            if fr is not None and fr.pending and k + 1 < len(items):
                self.guarded(lambda: self.unroll(node, items[k + 1:]), node)
                return
