"""AST -> IR for Quadrants' register tiles (`qd.simt.Tile16x16`, ...): the tile syntax turned
into calls of the tile funcs of `quadrants/simt_tiles.py`.

Stage: frontend (a mixin of the lowering visitor; the assignment, augmented-assignment,
expression-statement and call lowerings ask it first). A tile is a vector local of n
components (lane k's row k) that the context remembers as a tile (`CompileContext.tiles`,
by its first component's IR name). Each form is rewritten into a call of a func whose
arguments are the user's own expressions (so errors point at them) and the tile local is
assigned the func's result:
`T = TileCls.zeros(dtype=d)` / `.eye(dtype=d)`; `T[:] = a[r0:r1, c0:c1]` (or
`a[b, r0:r1, c0:c1]`) -> `T = load2d(T, a, r0, r1, c0, c1, n)`; `a[r0:r1, c0:c1] = T` ->
`store2d(...)`; `v = a[r0:r1, c]` -> `v = column2d(a, r0, r1, c, d)`;
`T -= jr.outer(u, v)` -> `T = ger_sub(T, u, v, n)`; `T.cholesky_(eps)` ->
`T = cholesky(T, eps, n, d)`; `L.solve_triangular_(B)` -> `B = trsm(B, L, n, d)`;
`T.eye_()`. Caches nothing.
"""
from __future__ import annotations

import ast
from typing import Any

from .. import dtypes
from ..ir import nodes as n
from .context import LoweringHost, PyValue
from .vectors import VecValue, VecVar


def _at(new: Any, node: ast.AST) -> Any:
    """`new` (and every node in it without a place) at the place of `node`."""
    for sub in ast.walk(new):
        if not hasattr(sub, "lineno"):
            ast.copy_location(sub, node)
    return new


def _full_slice(s: ast.AST) -> bool:
    return isinstance(s, ast.Slice) and s.lower is None and s.upper is None and s.step is None


def _parts(index: ast.AST) -> list[ast.expr]:
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]  # type: ignore


def slice_form(index: ast.AST) -> str:
    """"tile2d" for `[r0:r1, c0:c1]`, "tile3d" for `[b, r0:r1, c0:c1]`, "column2d" for
    `[r0:r1, c]`, "column3d" for `[b, r0:r1, c]`, "" otherwise."""
    kinds = "".join("s" if isinstance(p, ast.Slice) else "e" for p in _parts(index))
    return {"ss": "tile2d", "ess": "tile3d", "se": "column2d", "ese": "column3d"}.get(kinds, "")


class TileLowering(LoweringHost):
    def tile_of(self, node: ast.AST) -> tuple[int, dtypes.DataType] | None:
        """(size, dtype) when `node` names a tile local."""
        if not isinstance(node, ast.Name):
            return None
        binding = self.scope.bindings.get(node.id)
        if not isinstance(binding, VecVar) or not binding.components:
            return None
        return self.ctx.tiles.get(binding.components[0].ir_name)

    def call_tile_func(self, fn: Any, args: list[Any], node: ast.AST) -> Any:
        """The value of `fn(*args)`: each arg an AST node (the user's) or a compile-time
        value (bound to a hidden name for the call)."""
        names: list[str] = []
        nodes: list[Any] = []
        for k, a in enumerate([fn, *args]):
            if isinstance(a, ast.AST):
                nodes.append(a)
                continue
            name = f"__jitrt_tile_arg{k}"
            self.scope.bindings[name] = PyValue(a)
            names.append(name)
            nodes.append(_at(ast.Name(id=name, ctx=ast.Load()), node))
        try:
            return self.expr(_at(ast.Call(func=nodes[0], args=nodes[1:], keywords=[]), node))
        finally:
            for name in names:
                self.scope.bindings.pop(name, None)

    def set_tile(self, name: str, v: Any, node: ast.AST) -> None:
        self.assign_target(_at(ast.Name(id=name, ctx=ast.Store()), node), v, node)

    def tile_make(self, maker: Any, node: ast.Call) -> tuple[VecValue, dtypes.DataType]:
        """`TileCls.zeros(dtype=d)` / `TileCls.eye(dtype=d)`: a tile value (d: the default
        float type when not given)."""
        given = {k.arg: k for k in node.keywords}
        if node.args or set(given) - {"dtype"}:
            raise self.err(node, f"Tile{maker.size}x{maker.size}.{maker.kind}() takes only "
                           "dtype=")
        dt = self.ctx.default_fp
        if "dtype" in given:
            v = self.expr(given["dtype"].value)
            dt = dtypes.coerce(v.obj) if isinstance(v, PyValue) else None  # type: ignore
            if dt is None or not dt.is_float:
                raise self.err(node, "a tile's dtype must be a float type (jr.f32, jr.f64)")
        loc = self.loc(node)
        one, zero = n.Const(1.0, dt, loc), n.Const(0.0, dt, loc)
        if maker.kind == "zeros":
            items: tuple[Any, ...] = (zero,) * maker.size
        else:
            lane = n.Simt("subgroup.invocation_id", (), dtypes.i32, loc)
            items = tuple(n.Select(n.Binary("==", lane, n.Const(j, dtypes.i32, loc),
                                            dtypes.i32, loc), one, zero, dt, loc)
                          for j in range(maker.size))
        return VecValue((maker.size,), items), dt

    def tile_assign(self, target: ast.expr, value: ast.expr, node: ast.stmt) -> bool:
        """The tile forms of `target = value` (module docstring); False for others."""
        if isinstance(target, ast.Name) and isinstance(value, ast.Call) and isinstance(
                value.func, ast.Attribute) and value.func.attr in ("zeros", "eye"):
            callee = self.expr(value.func)
            if isinstance(callee, PyValue) and getattr(callee.obj, "jitrt_tile_maker", False):
                tile, dt = self.tile_make(callee.obj, value)
                self.set_tile(target.id, tile, node)
                binding = self.scope.bindings[target.id]
                assert isinstance(binding, VecVar)
                self.ctx.tiles[binding.components[0].ir_name] = (callee.obj.size, dt)
                return True
        if not self.ctx.tiles:      # the forms below read or write a tile made before
            return False
        from ..quadrants import simt, simt_tiles as st  # noqa: F401  (simt first: it loads st)
        if isinstance(target, ast.Subscript) and _full_slice(target.slice):
            found = self.tile_of(target.value)
            form = slice_form(value.slice) if isinstance(value, ast.Subscript) else ""
            if found is None:
                return False
            if form not in ("tile2d", "tile3d"):
                raise self.err(node, "tile[:] = ... takes an array slice a[r0:r1, c0:c1] or "
                               "a[b, r0:r1, c0:c1]")
            assert isinstance(value, ast.Subscript) and isinstance(target.value, ast.Name)
            bounds = self.slice_bounds(value.slice, node)
            fn = st.load2d if form == "tile2d" else st.load3d
            self.set_tile(target.value.id, self.call_tile_func(
                fn, [target.value, value.value, *bounds, found[0]], node), node)
            return True
        if isinstance(target, ast.Subscript) and self.tile_of(value) is not None:
            form = slice_form(target.slice)
            if form not in ("tile2d", "tile3d"):
                raise self.err(node, "a tile is stored into an array slice a[r0:r1, c0:c1] or "
                               "a[b, r0:r1, c0:c1]")
            size = self.tile_of(value)[0]  # type: ignore[index]
            fn = st.store2d if form == "tile2d" else st.store3d
            self.call_tile_func(fn, [value, target.value,
                                     *self.slice_bounds(target.slice, node), size], node)
            return True
        if isinstance(target, ast.Name) and isinstance(value, ast.Subscript) and \
                slice_form(value.slice).startswith("column") and self.ctx.tiles:
            fn = st.column2d if slice_form(value.slice) == "column2d" else st.column3d
            dt = self.element_dtype(value.value, node)
            v = self.call_tile_func(fn, [value.value, *self.slice_bounds(value.slice, node),
                                         dt], node)
            self.assign_target(target, v, node)
            return True
        return False

    def slice_bounds(self, index: ast.AST, node: ast.AST) -> list[ast.expr]:
        """The index expressions of a tile slice, in order (each slice as start, stop)."""
        out: list[ast.expr] = []
        for p in _parts(index):
            if isinstance(p, ast.Slice):
                if p.lower is None or p.upper is None or p.step is not None:
                    raise self.err(node, "a tile slice needs a start and a stop (r0:r1), and "
                                   "no step")
                out += [p.lower, p.upper]
            else:
                out.append(p)
        return out

    def element_dtype(self, array: ast.expr, node: ast.AST) -> dtypes.DataType:
        v = self.expr(array)
        obj = v.obj if isinstance(v, PyValue) else v
        dt = getattr(obj, "dtype", None) or getattr(getattr(obj, "decl", None), "dtype", None)
        if not isinstance(dt, dtypes.DataType):
            raise self.err(node, "a column slice a[r0:r1, c] needs a field, ndarray or "
                           "shared array of numbers")
        return dt

    def tile_update(self, node: ast.AugAssign) -> bool:
        """`T -= jr.outer(u, v)` on a tile local."""
        found = self.tile_of(node.target)
        if found is None:
            return False
        from . import builtins as bi
        call = node.value
        if not (isinstance(node.op, ast.Sub) and isinstance(call, ast.Call)
                and len(call.args) == 2 and not call.keywords):
            raise self.err(node, "a tile is updated only by tile -= jr.outer(u, v)")
        callee = self.expr(call.func)
        if not (isinstance(callee, PyValue) and callee.obj is bi.outer):
            raise self.err(node, "a tile is updated only by tile -= jr.outer(u, v)")
        from ..quadrants import simt, simt_tiles as st  # noqa: F401  (simt first: it loads st)
        assert isinstance(node.target, ast.Name)
        self.set_tile(node.target.id, self.call_tile_func(
            st.ger_sub, [node.target, call.args[0], call.args[1], found[0]], node), node)
        return True

    def tile_method(self, call: ast.expr) -> bool:
        """`T.cholesky_(eps)`, `L.solve_triangular_(B)`, `T.eye_()` as statements."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            return False
        found = self.tile_of(call.func.value)
        if found is None:
            return False
        from ..quadrants import simt, simt_tiles as st  # noqa: F401  (simt first: it loads st)
        tile, method, size, dt = call.func.value, call.func.attr, found[0], found[1]
        assert isinstance(tile, ast.Name)
        if method == "cholesky_" and len(call.args) == 1:
            self.set_tile(tile.id, self.call_tile_func(st.cholesky, [tile, call.args[0], size,
                                                                     dt], call), call)
        elif method == "solve_triangular_" and len(call.args) == 1 and isinstance(
                call.args[0], ast.Name) and self.tile_of(call.args[0]) is not None and all(
                    k.arg == "lower" for k in call.keywords):
            other = call.args[0]
            self.set_tile(other.id, self.call_tile_func(st.trsm, [other, tile, size, dt],
                                                        call), call)
        elif method == "eye_" and not call.args:
            maker = st.TILES[size].eye
            fake = _at(ast.Call(func=call.func, args=[], keywords=[]), call)
            self.set_tile(tile.id, self.tile_make(maker, fake)[0], call)
        else:
            raise self.err(call, f"a tile has no method {method}() with these arguments "
                           "(cholesky_(eps), solve_triangular_(B), eye_())")
        return True
