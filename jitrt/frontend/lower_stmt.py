"""AST -> IR for statements (the statement family of the lowering visitor).

Stage: frontend. Assignments to locals (first assignment fixes the type), stores and `+=` on
globals (atomic add/sub), asserts, expression statements, `jr.loop_config`; loops, jumps and
`if` are in `lower_loops.py`.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from .. import dtypes
from ..errors import KernelSyntaxError
from ..ir import nodes as n
from ..errors import KernelCompileError
from ..ir.walk import map_stmt, walk_expr
from . import builtins as bi
from .context import LocalVar, LoweringHost, PyValue
from .lower_expr import BINOPS, Value, is_field, is_number
from .lower_simt import shared_handle
from .vectors import TupleValue, VecValue, VecVar, reads_ref


# augmented assignments to a global element that are atomic (&, |, ^ on integers only)
ATOMIC_AUG = {"+": "add", "-": "sub", "&": "and", "|": "or", "^": "xor"}


class StmtLowering(LoweringHost):
    # ---- blocks -------------------------------------------------------------------------
    def emit(self, stmt: n.Stmt) -> None:
        self.block.append(stmt)

    def lower_block(self, body: list[ast.stmt]) -> n.Body:
        return self.lower_with(lambda: self.stmts(body))

    def lower_with(self, lower: Callable[[], None]) -> n.Body:
        """What `lower()` emits, as a block of its own."""
        saved, self.block = self.block, []
        self.ctx.stop_grads.append([])
        rebound, self.rebound = self.rebound, set()
        try:
            lower()
            return self.gradients_stopped(tuple(self.block), self.ctx.stop_grads[-1])
        finally:
            self.block = saved
            self.ctx.stop_grads.pop()
            if self.scope.assigned is not None:   # a local rebound here ends with the block
                self.scope.assigned -= self.rebound
            self.rebound = rebound | self.rebound

    def stmts(self, body: list[ast.stmt]) -> None:
        """Lower statements in order. In a @jr.func with early returns (`lower_return.py`),
        a return ends the block, and what follows a run-time return runs under `if not
        done`."""
        for k, stmt in enumerate(body):
            self.stmt(stmt)
            if self.static_jump:             # a break/continue of a jr.static loop
                return
            fr = self.func_return
            if fr is None:
                continue
            if fr.stopped:
                return
            if fr.pending and k + 1 < len(body):
                self.guarded(lambda: self.stmts(body[k + 1:]), body[k + 1])
                return

    def gradients_stopped(self, body: n.Body, stopped: list[Any]) -> n.Body:
        """`body` (a whole block: a loop body, a branch, the kernel body) with every float
        read of the data that `jr.stop_grad` named in it wrapped in `stop_grad(...)`, which
        autodiff sends no adjoint or tangent through. As in Taichi the block is the scope:
        reads before the call count, and so do the blocks nested in it (a func's body is part
        of its caller's block); writes still propagate their target's gradient."""
        if not stopped:
            return body
        fields = self.ctx.field_objs

        def is_stopped(ref: n.Ref) -> bool:
            if ref.grad:
                return False
            if isinstance(ref, n.ArrayRef):
                return ref.arg in stopped
            return any(fields[ref.slot] is x for x in stopped)

        def wrap(x: n.Expr) -> n.Expr:
            if isinstance(x, n.Unary) and x.op == n.STOP_GRAD and isinstance(
                    x.x, n.Unary) and x.x.op == n.STOP_GRAD:
                return x.x                   # stopped by an inner block already
            if isinstance(x, n.Load) and x.dtype.is_float and is_stopped(x.ref):
                return n.Unary(n.STOP_GRAD, x, x.dtype, x.loc)
            return x
        return tuple(map_stmt(s, wrap) for s in body)

    def stmt(self, node: ast.stmt) -> None:
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            kind = type(node).__name__
            raise self.err(node, f'Unsupported node "{kind}": {kind} statements are not '
                           "supported in kernels")
        method(node)

    # ---- simple statements --------------------------------------------------------------
    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_FunctionDef(self, node: ast.FunctionDef) -> None:
        where = decorator_text(self.src.tree, "jr.kernel" if self.depth == 0 else "jr.func")
        raise self.err(node, f"Function definition is not allowed in '{where}': define "
                       f"'{node.name}' outside it (a @jr.func to call from a kernel)",
                       KernelSyntaxError)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring or comment string
        if isinstance(node.value, ast.Call) and (self.fill_vector(node.value, node)
                                                 or self.tile_method(node.value)
                                                 or self.is_loop_config(node.value)):
            return
        # a call whose value is discarded: `jr.atomic_add(v[i], d)` on a vector element emits
        # its atomics as statements (differentiable as `+=` is)
        self.statement_call = node.value
        try:
            v = self.expr(node.value)
        finally:
            self.statement_call = None
        if isinstance(v, n.Expr) and has_side_effect(v):
            self.emit(n.Eval(v, self.loc(node)))

    def fill_vector(self, call: ast.Call, node: ast.AST) -> bool:
        """`v.fill(s)` on a vector/matrix local or a whole element `x[i].fill(s)` of a field
        or ndarray of vectors: every component is set to `s` (Taichi's in-kernel
        `Matrix.fill`). False when the receiver is not one of those."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "fill"
                and len(call.args) == 1 and not call.keywords):
            return False
        recv = func.value
        if isinstance(recv, ast.Name):
            var = self.scope.bindings.get(recv.id)
            if not isinstance(var, VecVar):
                return False
            value = self.expr(call.args[0])
            self.assign_local(recv, VecValue(var.shape, (value,) * len(var.components)), node)
            return True
        if isinstance(recv, ast.Attribute):     # `x[i].b.fill(s)`, `s.b.fill(v)`: struct members
            current = self.expr(recv)
            if not isinstance(current, VecValue):
                return False
            value = self.expr(call.args[0])
            self.assign_target(recv, VecValue(current.shape, (value,) * len(current.items)), node)
            return True
        if not isinstance(recv, ast.Subscript):
            return False
        base = self.expr(recv.value)
        if not (is_field(base.obj) if isinstance(base, PyValue) else
                isinstance(base, n.ArrayRef)):
            return False
        ref, indices, element = self.access(recv, base)
        if not element:
            return False
        self.store_element((ref, indices, element), self.expr(call.args[0]), node)
        return True

    def stmt_Assert(self, node: ast.Assert) -> None:
        """Checked when the program runs with jr.init(debug=True) (as in Taichi), else
        skipped: a failure raises KernelRuntimeError with the message at the next sync."""
        if not self.ctx.debug:     # unchecked, but its calls run, as in Taichi (a real
            if any(isinstance(c, ast.Call) for c in ast.walk(node.test)):   # func's effects)
                start = len(self.block)
                try:
                    test = self.expr(node.test)
                except KernelCompileError:     # what it could not compile is not run: kept
                    del self.block[start:]     # as before (asserts off)
                    return
                if isinstance(test, n.Expr) and has_side_effect(test):
                    self.emit(n.Eval(test, self.loc(node)))
            return
        cond = self.truth(self.value(node.test))
        message, args, formats = ast.unparse(node.test), (), ()
        if node.msg is not None:          # a formatted one: lower_format.assert_message
            message, args, formats = self.assert_message(self.expr(node.msg), node.msg)
        self.emit(n.Eval(n.Assertion(cond, message, dtypes.i32, self.loc(node), args, formats),
                         self.loc(node)))

    def is_loop_config(self, call: ast.Call) -> bool:
        """`jr.loop_config(serialize=True)`: the next loop runs serially on one thread;
        `jr.loop_config(block_dim=N)`: on GPUs, its blocks have N threads (1 to 1024; rounded
        up to whole warps of 32 unless the loop uses `jr.simt` block-level code, whose blocks
        are exactly N threads, as Quadrants'; the CPU ignores it; so does Taichi's
        `block_dim_adaptive`);
        Taichi's `parallelize=N`: 1 serializes, more leaves
        the thread count to the pool; Quadrants' `name="..."` names the loop in GPU profiles
        (checked to be a string, and otherwise not used: jitrt's profiler counts kernels)."""
        callee = self.expr(call.func)
        if not (isinstance(callee, PyValue) and callee.obj is bi.loop_config):
            return False
        for kw in call.keywords:
            if kw.arg not in ("serialize", "block_dim", "parallelize", "name",
                              "block_dim_adaptive"):
                raise self.err(kw, f"jr.loop_config() has no option '{kw.arg}' (options: "
                               "serialize, block_dim, parallelize, name, block_dim_adaptive)")
            value = self.expr(kw.value)
            if not isinstance(value, PyValue):
                raise self.err(kw.value, "jr.loop_config() options must be constants")
            if kw.arg == "name":
                if value.obj is not None and not isinstance(value.obj, str):
                    raise self.err(kw.value, "jr.loop_config(name=...) must be a string, got "
                                   f"{value.obj!r}")
                continue
            if kw.arg == "serialize":
                self.serialize_next = bool(value.obj)
                continue
            if kw.arg == "parallelize":
                threads = value.obj
                if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                    raise self.err(kw.value, "jr.loop_config(parallelize=...) must be a "
                                   f"positive int (1 runs the loop serially), got {threads!r}")
                self.serialize_next = threads == 1
                continue
            if kw.arg == "block_dim_adaptive":     # Taichi's CPU block hint: no effect
                continue
            dim = value.obj
            if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 1024:
                raise self.err(kw.value, "jr.loop_config(block_dim=...) must be an int from 1 "
                               f"to 1024, got {dim!r}")
            self.block_dim_next = dim       # (lower_loops.emit_parallel_range rounds it)
        return True

    def stmt_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1:
            self.assign_from(node.targets[0], node.value, node)
            return
        # `a = b = v` (Python's chained assignment): v is evaluated once, then assigned to
        # each target from left to right
        v = self.snapshot(self.expr(node.value), node)
        for target in node.targets:
            self.assign_value(target, v, node)

    def is_static_call(self, expr: ast.AST) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        callee = self.expr(expr.func)
        return isinstance(callee, PyValue) and callee.obj is bi.static

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.err(node, "annotated assignment needs a name and a value")
        ann = self.expr(node.annotation)
        dt = ann.obj if isinstance(ann, PyValue) else None
        if dt is int:
            dt = self.ctx.default_ip
        elif dt is float:
            dt = self.ctx.default_fp
        if not isinstance(dt, dtypes.DataType):
            raise self.err(node.annotation, "annotation must be a jitrt dtype such as jr.f32")
        self.assign_local(node.target, self.expr(node.value), node, dt)

    def snapshot(self, v: Value, node: ast.AST) -> Value:
        """A run-time scalar copied into a fresh local (tuple assignment evaluates every right
        side before assigning)."""
        if isinstance(v, VecValue):
            return VecValue(v.shape, tuple(self.snapshot(x, node) for x in v.items), v.is_list)
        if isinstance(v, TupleValue):
            return TupleValue(tuple(self.snapshot(x, node) for x in v.items), v.is_list)
        if isinstance(v, n.Expr) and not isinstance(v, n.Const):
            return self.fresh_local(v, "tmp", self.loc(node))
        return v

    def fresh_local(self, value: n.Expr, base: str, loc: n.Loc) -> n.Local:
        """`value` assigned once to a new local here; the read of that local."""
        name = self.ctx.fresh_prefix(base) + "v"
        self.ctx.local_types[name] = value.dtype
        self.emit(n.Assign(name, value, loc))
        return n.Local(name, value.dtype, loc)

    def assign_target(self, target: ast.AST, v: Value, node: ast.AST) -> None:
        target = self.struct_target(target)    # type: ignore[attr-defined]
        if isinstance(target, ast.Name):
            self.assign_local(target, v, node)
        elif isinstance(target, ast.Attribute) and (
                self.store_struct_member(target, v, node, None)  # type: ignore[attr-defined]
                or self.assign_vec_swizzle(target, v, node) or self.store_member(target, v, node)):
            return
        elif isinstance(target, ast.Subscript):
            if self.assign_vector_part(target, v, node):
                return
            base = self.expr(target.value)
            if isinstance(base, PyValue) and type(base.obj).__name__ == "StructField":
                self.store_struct_element(base.obj, target, v, node)  # type: ignore[attr-defined]
                return
            handle = shared_handle(base)
            if handle is not None:                     # a block-shared array: lower_simt.py
                self.shared_store(handle, target, v, node)
                return
            ref, indices, element = self.access(target)
            if element:                   # x[i] = v on a field of vectors
                self.store_element((ref, indices, element), v, node)
                return
            if isinstance(v, VecValue):
                raise self.err(node, f"cannot store a vector/matrix of shape {v.shape} into "
                               "one element")
            value = self.typed(v, ref.dtype, target)
            self.emit(n.Store(ref, indices, value, self.loc(node)))
        else:
            raise self.err(target, f"cannot assign to {type(target).__name__}")

    def assign_vector_part(self, target: ast.Subscript, v: Value, node: ast.AST) -> bool:
        """Stores into parts of vectors: `x[i][k] = s` (one component of an element of a
        field/ndarray of vectors), `v[k] = s` (a component of a vector local)."""
        if isinstance(target.value, ast.Name) and isinstance(
                self.scope.bindings.get(target.value.id), VecVar):
            self.assign_vec_component(target, self.scope.bindings[target.value.id], v)
            self.mark_assigned(target.value.id)
            return True
        outer = self.vector_element_of(target)
        if outer is None:
            return False
        self.component_store(outer, target, v, node)
        return True

    def vector_element_of(self, target: ast.Subscript) -> Any:
        """The whole element `x[i]` of a field/ndarray of vectors that `x[i][k]` indexes, or
        the vector member `x[i].v` of a struct field's element that `x[i].v[k]` indexes
        (ref, indices, element shape), else None."""
        if isinstance(target.value, ast.Attribute):
            base = self.expr(target.value.value)
            if type(base).__name__ != "StructElement":
                return None
            sub, member = self.struct_member(base, target.value.attr,  # type: ignore
                                             target.value)
            if type(member.obj).__name__ == "StructField":
                return None
            whole = self.access(sub, member)
            return whole if whole[2] else None
        if not isinstance(target.value, ast.Subscript):
            return None
        return self.whole_element(target.value, self.expr(target.value.value))

    def component_store(self, outer: Any, target: ast.Subscript, v: Value, node: ast.AST,
                        op: str | None = None) -> None:
        """`x[i][k] = v` (or `op=`): component(s) k of the vector element `outer` (a matrix
        row takes a vector)."""
        _, idxs = self.element_part(outer, target.slice)
        if isinstance(v, VecValue) and reads_ref(v, outer[0]):
            v = self.snapshot(v, node)         # `m[i][0] = m[i][0].yx`: reads first
        values = v.items if isinstance(v, VecValue) else (v,) * len(idxs)
        if len(values) != len(idxs):
            raise self.err(node, f"cannot store {len(values)} value(s) into {len(idxs)} "
                           "component(s)")
        for idx, x in zip(idxs, values):
            self.store_element((outer[0], idx, ()), x, node, op)

    def typed(self, v: Value, dt: dtypes.DataType, node: ast.AST,
              what: str = "store") -> n.Expr:
        """`v` converted for a store into (or a return as) `dt`, as Taichi converts: a float
        into an integer truncates toward zero; a compile-time integer must fit `dt`. A stored
        value of a type `dt` cannot hold (the promotion of the two is not `dt`: f32 into i32,
        f64 into f32, i64 into i32; a float literal with a fraction into an integer) gives a
        `jr.CastWarning` (`what` "store"; a declaration and a return convert silently, as
        explicit conversions)."""
        if is_number(v):
            value = v.obj  # type: ignore[union-attr]
            if isinstance(value, float) and not dt.is_float:
                if value != value or value in (float("inf"), float("-inf")):
                    raise self.err(node, f"cannot {what} the float {value!r} as {dt.name}: "
                                   "it has no integer value")
                if what == "store" and not value.is_integer():
                    self.ctx.narrowing.append((self.loc(node), dt, self.ctx.default_fp))
                value = int(value)
            if not isinstance(value, float) and dt.is_int and not dtypes.fits(int(value), dt):
                raise self.err(node, f"the constant {int(value)} does not fit {dt.name} "
                               f"(range {dtypes.int_range(dt)[0]}..{dtypes.int_range(dt)[1]})")
            return self.const(value, node, dt)
        e = self.value(node, v)
        if what == "store" and e.dtype != dt and dtypes.promote(dt, e.dtype) != dt and not (
                dt.is_int and is_truth_value(e)):
            self.ctx.narrowing.append((self.loc(node), dt, e.dtype))
        return self.cast(e, dt)

    def assign_local(self, target: ast.Name, v: Value, node: ast.AST,
                     declared: dtypes.DataType | None = None) -> None:
        name = target.id
        binding = self.scope.bindings.get(name)
        if isinstance(binding, (n.Arg, n.ArrayRef)) or (
                isinstance(binding, PyValue) and name in self.scope.params):
            where = "kernel" if self.depth == 0 else "func"
            raise self.err(target, f'{where.capitalize()} argument "{name}" is immutable in '
                           f"the {where}: cannot assign to parameter '{name}'; copy it into a "
                           "local")
        if type(v).__name__ == "StructElement":     # `s = y[i]` of a struct field
            v = self.struct_element_value(v, node)  # type: ignore[attr-defined]
        if type(v).__name__ == "StructValue":       # frontend/struct_values.py
            if declared is not None:
                raise self.err(target, "a struct local takes no scalar annotation")
            self.assign_struct_local(target, v, node)  # type: ignore[attr-defined]
            return
        if type(binding).__name__ == "StructVar":
            raise self.err(target, f"'{name}' is a struct local; assign it a struct")
        if binding is not None and self.is_new_local(name, binding, v):
            self.scope.bindings.pop(name)
            self.ir_names[name] = self.ctx.fresh_prefix(self.scope.prefix + name) + name
            self.rebound.add(name)
            binding = None
        if isinstance(v, TupleValue):      # a tuple of run-time values: its parts, snapshotted
            self.scope.bindings[name] = self.snapshot(v, node)
            self.mark_assigned(name)
            return
        if isinstance(v, VecValue) or isinstance(binding, VecVar):
            if declared is not None:
                raise self.err(target, "a vector/matrix local takes no scalar annotation")
            self.assign_vec_local(name, v, node)
            self.mark_assigned(name)
            return
        if isinstance(v, (PyValue, n.ArrayRef)) and not is_number(v) and not isinstance(
                binding, LocalVar):
            self.scope.bindings[name] = v  # a compile-time alias (a field, a constant tuple...)
            return
        if isinstance(binding, LocalVar):
            if declared is not None and declared != binding.dtype:
                raise self.err(target, f"'{name}' is already a {binding.dtype.name} local")
            e = self.typed(v, binding.dtype, node)
            self.emit(n.Assign(binding.ir_name, e, self.loc(node)))
            self.mark_assigned(name)
            return
        e = self.typed(v, declared, node, "declare") if declared else self.value(node, v)
        var = LocalVar(self.local_ir_name(name), e.dtype)
        self.ctx.local_types[var.ir_name] = e.dtype
        self.scope.bindings[name] = var
        self.emit(n.Assign(var.ir_name, e, self.loc(node)))
        self.mark_assigned(name)

    def local_ir_name(self, name: str) -> str:
        return self.ir_names.get(name) or self.scope.prefix + name

    def is_new_local(self, name: str, binding: Any, v: Value) -> bool:
        """`corner = vec2` where `corner` was a vec3 local of an earlier block and is not
        assigned on every path to here: in Taichi a name first assigned in a block is local
        to it, so this is a new local of the new shape (its old value cannot be read here).
        The new local ends with its block: it is not readable after it (lower_with)."""
        if isinstance(binding, VecVar) and binding.is_list and (
                not isinstance(v, VecValue) or v.shape != binding.shape):
            return True                  # a list name rebound to another list, as in Python
        if self.scope.assigned is None or name in self.scope.assigned:
            return False
        if isinstance(binding, VecVar):
            return not isinstance(v, VecValue) or v.shape != binding.shape
        return isinstance(binding, LocalVar) and isinstance(v, VecValue)

    # ---- definite assignment (Python's NameError, decided at compile time) --------------
    def mark_assigned(self, name: str) -> None:
        if self.scope.assigned is not None:
            self.scope.assigned.add(name)

    def branch_assigned(self, before: set[str] | None, lower: Any) -> tuple[Any, set[str] | None]:
        """Run `lower()` from the assignment state `before`; its result and the state after."""
        self.scope.assigned = None if before is None else set(before)
        result = lower()
        return result, self.scope.assigned

    @staticmethod
    def merge_assigned(a: set[str] | None, b: set[str] | None) -> set[str] | None:
        """Paths join: assigned on both (an unreachable path does not restrict)."""
        if a is None:
            return b
        if b is None:
            return a
        return a & b

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        target = self.struct_target(node.target)    # type: ignore[attr-defined]
        if target is not node.target:               # `s.member += v` of a struct local
            node = ast.copy_location(ast.AugAssign(target=target, op=node.op,
                                                   value=node.value), node)
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.err(node, f"operator {type(node.op).__name__} is not supported")
        if self.tile_update(node):                     # register tiles: lower_tiles.py
            return
        handle = shared_handle(self.expr(node.target.value)) if isinstance(
            node.target, ast.Subscript) and isinstance(node.target.value, ast.Name) else None
        if handle is not None:                         # a block-shared array: lower_simt.py
            self.shared_update(handle, node, op)
            return
        if isinstance(node.target, ast.Subscript) and self.aug_assign_vector(node, op):
            return
        if isinstance(node.target, ast.Attribute):
            rhs = self.expr(node.value)
            if self.store_struct_member(node.target, rhs, node, op) or (  # type: ignore
                    self.assign_vec_swizzle(node.target, rhs, node, op) or self.store_member(
                        node.target, rhs, node, op)):
                return
        if isinstance(node.target, ast.Subscript):
            ref, indices, element = self.access(node.target)
            rhs = self.expr(node.value)
            if element:                   # x[i] += v on a field of vectors
                self.store_element((ref, indices, element), rhs, node, op)
                return
            atomic_op = ATOMIC_AUG.get(op) if op in ("+", "-") or ref.dtype.is_int else None
            if atomic_op:     # +=, -= and, on integers, &=, |=, ^= are atomic, as in Taichi
                value = self.typed(rhs, ref.dtype, node.value)
                atomic = n.Atomic(atomic_op, ref, indices, value, ref.dtype, self.loc(node))
                self.emit(n.Eval(atomic, self.loc(node)))
                return
            old = n.Load(ref, indices, ref.dtype, self.loc(node.target))
            new = self.binary(op, old, rhs, node)
            self.emit(n.Store(ref, indices, self.typed(new, ref.dtype, node), self.loc(node)))
            return
        if not isinstance(node.target, ast.Name):
            raise self.err(node.target, "augmented assignment needs a name or an element")
        binding = self.scope.bindings.get(node.target.id)
        reduce = {"+": "add", "-": "sub"}.get(op, "")
        if op in ("&", "|", "^") and isinstance(binding, LocalVar) and binding.dtype.is_int:
            reduce = {"&": "and", "|": "or", "^": "xor"}[op]   # atomic on ints, as in Taichi
        if reduce in ("add", "sub") and isinstance(binding, VecVar):
            self.reduce_vec_local(node.target, binding, op, reduce, self.expr(node.value), node)
            return
        current = self.expr(node.target)
        rhs = self.expr(node.value)
        if reduce in ("add", "sub") and isinstance(binding, LocalVar) and binding.dtype.is_int:
            rhs = self.typed(rhs, binding.dtype, node.value)  # Taichi's atomic: v converted first
        start = len(self.block)
        self.assign_local(node.target, self.binary(op, current, rhs, node), node)
        self.mark_reduction(node.target.id, reduce, start)

    def reduce_vec_local(self, target: ast.Name, var: VecVar, op: str, reduce: str, rhs: Value,
                         node: ast.AST) -> None:
        """`v += w` (or -=, jr.atomic_*(v, w)) on a vector local: each component updated
        from itself (`v$k = v$k + w$k`, a reduction a parallel loop may do; `w` is read
        first when it reads `v`)."""
        mine = {c.ir_name for c in var.components}
        if isinstance(rhs, VecValue) and any(
                isinstance(e, n.Local) and e.name in mine for x in rhs.items
                if isinstance(x, n.Expr) for e in walk_expr(x)):
            rhs = self.snapshot(rhs, node)
        new = self.binary(op, self.expr(target), rhs, node)
        if not isinstance(new, VecValue) or new.shape != var.shape:
            self.assign_local(target, new, node)      # raises: the shapes differ
            return
        start = len(self.block)
        for c, x in zip(var.components, new.items):
            self.emit(n.Assign(c.ir_name, self.typed(x, c.dtype, node), self.loc(node)))
        self.mark_assigned(target.id)
        self.mark_reduction(target.id, reduce, start)

    def mark_reduction(self, name: str, reduce: str, start: int) -> None:
        """Tag the assignments of local `name` (its components, for a vector) emitted since
        `start` as the reduction `reduce` (`n.Assign.reduce`): a kernel-scope local may be
        updated in a parallel loop only this way (`passes/local_reductions.py` checks that the
        value is `name <op> v`)."""
        if not reduce:
            return
        binding = self.scope.bindings.get(name)
        names = {binding.ir_name} if isinstance(binding, LocalVar) else \
            {c.ir_name for c in binding.components} if isinstance(binding, VecVar) else set()
        for k in range(start, len(self.block)):
            s = self.block[k]
            if isinstance(s, n.Assign) and s.name in names:
                self.block[k] = n.Assign(s.name, s.value, s.loc, reduce)

    def atomic_local(self, op: str, node: ast.Call) -> Value:
        """`jr.atomic_add(s, v)` (sub/min/max/and/or/xor likewise) on a local `s` (a scalar, or
        a vector component-wise): `s = s <op> v`, tagged as a reduction; the value is the old
        `s`."""
        target = node.args[0]
        assert isinstance(target, ast.Name)
        if not isinstance(self.scope.bindings.get(target.id), (LocalVar, VecVar)):
            raise self.err(target, f"jr.atomic_{op}({target.id}, value): '{target.id}' is not "
                           "a local variable of the kernel; pass a field or ndarray element "
                           "(x[i]) or a local")
        current = self.expr(target)
        statement = getattr(self, "statement_call", None) is node
        old = current if statement else self.snapshot(current, node)
        value = self.expr(node.args[1])
        symbol = {"add": "+", "sub": "-", "and": "&", "or": "|", "xor": "^",
                  "mul": "*"}.get(op, op)
        binding = self.scope.bindings[target.id]
        if isinstance(binding, VecVar):
            self.reduce_vec_local(target, binding, symbol, op, value, node)
            return old
        new = self.binary(symbol, current, value, node)
        start = len(self.block)
        self.assign_local(target, new, node)
        self.mark_reduction(target.id, op, start)
        return old

    def aug_assign_vector(self, node: ast.AugAssign, op: str) -> bool:
        """`v[k] += s` on a vector local's component, `x[i][k] += s` on a component of an
        element of a field of vectors (atomic for + and -)."""
        target = node.target
        assert isinstance(target, ast.Subscript)
        if isinstance(target.value, ast.Name) and isinstance(
                self.scope.bindings.get(target.value.id), VecVar):
            var = self.scope.bindings[target.value.id]
            if self.slice_parts(var.shape, target.slice) is not None:    # m[:2, :] += rows
                current = self.vec_index(self.vec_local_value(var, target), target.slice)
                new = self.binary(op, current, self.expr(node.value), node)
                self.assign_vec_component(target, var, new)
                self.mark_assigned(target.value.id)
                return True
            ks = self.vec_indices(var.shape, target.slice)     # evaluated once
            current = self.vec_part(self.vec_local_value(var, target), ks, target.slice)
            new = self.binary(op, current, self.expr(node.value), node)
            self.assign_vec_component(target, var, new, ks)
            self.mark_assigned(target.value.id)
            return True
        outer = self.vector_element_of(target)
        if outer is None:
            return False
        self.component_store(outer, target, self.expr(node.value), node, op)
        return True

_WARNED: dict[Any, Any] = {}       # the `warnings` registry of CastWarnings: once per site


def warn_narrowings(sites: list[tuple[n.Loc, dtypes.DataType, dtypes.DataType]]) -> None:
    """The CastWarnings of a kernel's narrowing stores (`CompileContext.narrowing`), issued
    when it compiles (runtime/compiler.py): a warm start that finds the kernel in the offline
    cache says nothing, as one that skips the frontend, and as Taichi and Quadrants."""
    for loc, target, value in sites:
        warn_narrowing(loc, target, value)


def warn_narrowing(loc: n.Loc, target: dtypes.DataType, value: dtypes.DataType) -> None:
    """Taichi's "may lose precision" warning, at the user's source line, once per site."""
    import warnings
    from ..errors import CastWarning
    warnings.warn_explicit(
        f"{loc}: assignment may lose precision: {target.name} <- {value.name}; convert "
        f"explicitly (jr.{target.name}(...)) if that is meant, else give the target a wider "
        f"type (a local's type is fixed by its first assignment: `s = 0.0` makes a default_fp "
        f"one; declare it, e.g. `s: jr.{value.name} = 0`)", CastWarning, loc.file, loc.line,
        module="jitrt.kernel", registry=_WARNED)


def is_truth_value(e: n.Expr) -> bool:
    """Whether `e` is 0 or 1 by construction (a comparison, `not`, `and`/`or` of such, a
    choice between such): storing it into any integer type loses nothing (Quadrants' `u1`
    fields are u8 here), so it gives no CastWarning."""
    if isinstance(e, n.Binary):
        return e.op in n.COMPARE_OPS or (
            e.op in ("and", "or") and is_truth_value(e.a) and is_truth_value(e.b))
    if isinstance(e, n.Unary):
        return e.op == "not"
    if isinstance(e, n.Select):
        return is_truth_value(e.a) and is_truth_value(e.b)
    if isinstance(e, n.Cast):
        return is_truth_value(e.x)
    return isinstance(e, n.Const) and e.value in (0, 1)


def has_side_effect(e: Any) -> bool:
    if isinstance(e, (n.Atomic, n.Assertion, n.Print, n.Simt)):
        return True
    for value in vars(e).values():
        if isinstance(value, n.Expr) and has_side_effect(value):
            return True
        if isinstance(value, tuple) and any(isinstance(x, n.Expr) and has_side_effect(x)
                                            for x in value):
            return True
    return False


def decorator_text(tree: ast.FunctionDef, default: str) -> str:
    """How the source names the kernel or func decorator of `tree` (`ti.kernel` where jitrt
    is imported as ti, `jr.func`, ...), for messages in the user's own words; `default`
    where no decorator says kernel or func."""
    for deco in tree.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("kernel", "func", "pyfunc", "real_func"):
            return ast.unparse(target)
    return default
