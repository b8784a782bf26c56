"""Compile context and name scopes for AST -> IR lowering.

Stage: frontend. A `CompileContext` is created per kernel specialization and passed explicitly
(no ambient globals): it owns the field table (fields get slots in order of first use), the
kernel parameters, the dtype defaults and a counter for renaming the locals of inlined funcs.
A `Scope` maps Python names of one function body to what they denote.
"""
from __future__ import annotations

import builtins
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable

from ..frozen import frozen, record
from .. import dtypes
from ..dtypes import DataType
from ..ir import nodes as n


# the hidden field a kernel annotated `-> jr.math.vec3` returns through (lower.py writes it,
# the runtime's launchers return a copy of it)
RETURN_FIELD = "jr.return"


@frozen
class PyValue:
    """A compile-time Python object: a constant, a module, a field, a builtin, a func..."""
    obj: Any


class NoValue:
    """What a call of a @jr.func without a return value gives: using it is an error."""

    def __init__(self, func_name: str) -> None:
        self.func_name = func_name

    def __repr__(self) -> str:
        return f"the result of @jr.func '{self.func_name}', which returns no value"


@frozen
class LocalVar:
    ir_name: str
    dtype: DataType


@record
class CompileContext:
    kernel_name: str
    default_fp: DataType
    default_ip: DataType
    params: tuple[n.Param, ...] = ()
    field_objs: list[Any] = field(default_factory=list)
    field_refs: dict[int, n.FieldRef] = field(default_factory=dict)
    local_types: dict[str, DataType] = field(default_factory=dict)
    captured: dict[str, str] = field(default_factory=dict)     # name -> repr of a constant
    used_funcs: dict[str, str] = field(default_factory=dict)   # qualname -> source of a func
    # where each source came from: qualname ("" for the kernel) -> (file, first line, lines,
    # indent); a kernel loaded from the offline cache rebinds its error locations with it
    origins: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    inline_counter: int = 0
    shared_count: int = 0     # block-shared arrays declared (lower_simt.py)
    # register tiles (lower_tiles.py): first component's IR name -> (size, dtype)
    tiles: dict[str, tuple[int, DataType]] = field(default_factory=dict)
    inline_depth: int = 0
    debug: bool = False       # jr.init(debug=True): asserts are compiled in
    validate: bool = False    # a Tape(validation=True) launch: the access rule is checked
    random_used: bool = False   # jr.random() was called: the launch value is read first
    # stores that narrow (loc, target type, value type): their CastWarnings, issued when the
    # kernel compiles, not when an offline-cache hit lowered it only to find its key
    narrowing: list[tuple[n.Loc, DataType, DataType]] = field(default_factory=list)
    # jr.random(): per enclosing parallel loop, (call counter local, its loop variables)
    random_scopes: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    # ndarray parameter index -> the component dimensions of its vector/matrix elements
    array_elements: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # ndarray parameter indices annotated `boundary="clamp"` (lower_expr.access)
    clamped_arrays: set[int] = field(default_factory=set)
    # jr.stop_grad(x): per open block (the kernel body first), the data whose reads in it
    # carry no gradient (Field objects, ndarray parameter indices); lower_stmt applies them
    stop_grads: list[list[Any]] = field(default_factory=lambda: [[]])
    # jr.real_func instances: key (function, compile-time arguments, value types) -> the
    # instance's signature (frontend/real_func.py); their IR in order of first call
    real_sigs: dict[Any, Any] = field(default_factory=dict)
    real_funcs: list[n.RealFunc] = field(default_factory=list)

    def field_ref(self, fld: Any, name: str) -> n.FieldRef:
        from ..data_declare import PendingField
        if isinstance(fld, PendingField):
            from ..errors import KernelCompileError
            raise KernelCompileError(f"field '{name}' has no shape yet: place it first "
                                     f"(jr.root.dense(jr.i, n).place({name}))")
        ref = self.field_refs.get(id(fld))
        if ref is None:
            offset = tuple(getattr(fld, "offset", ()))
            # an offset field's accesses subtract the offset in the frontend; the ref keeps
            # it (storage axes, zeros on the element's) for the messages of bounds errors
            ref = n.FieldRef(len(self.field_objs), name, fld.dtype, fld.storage_shape,
                             offset=offset + (0,) * len(fld.element_shape) if any(offset)
                             else ())
            self.field_objs.append(fld)
            self.field_refs[id(fld)] = ref
        return ref

    def fresh_prefix(self, func_name: str) -> str:
        self.inline_counter += 1
        return f"{func_name}${self.inline_counter}."


def module_alias(names: dict) -> str:
    """The name the user's module gives jitrt (`ti` where it is imported as taichi was),
    for advice in the user's own words; "jr" when no global names it."""
    return next((k for k, v in names.items() if getattr(v, "__name__", None) == "jitrt"),
                "jr")                  # (by name: the frontend does not import the API package)


@record
class Scope:
    """Names visible in one function body: its own bindings, then its globals and closure."""
    bindings: dict[str, Any]      # LocalVar | PyValue | n.ArrayRef | n.Arg | VecVar
    globals: dict[str, Any]
    prefix: str = ""
    params: frozenset[str] = frozenset()
    # locals assigned on every path to the current point (Python would raise NameError on a
    # read of any other local); None: this point is unreachable (after break/continue)
    assigned: set[str] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.assigned is None:
            self.assigned = {k for k, v in self.bindings.items()
                             if isinstance(v, LocalVar) or type(v).__name__ == "VecVar"}

    def lookup(self, name: str) -> LocalVar | PyValue | n.ArrayRef | n.Arg | None:
        if name in self.bindings:
            return self.bindings[name]
        if name in self.globals:
            return PyValue(self.globals[name])
        if hasattr(builtins, name):
            return PyValue(getattr(builtins, name))
        return None


def function_globals(fn: Any) -> dict[str, Any]:
    """The globals of `fn` overlaid with its closure cells (closure wins, as in Python)."""
    names = dict(fn.__globals__)
    if fn.__closure__:
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                names[var] = cell.cell_contents
            except ValueError:  # an empty cell: the variable is not bound yet
                pass
    return names


def literal_dtype(value: Any, ctx: CompileContext) -> DataType | None:
    if isinstance(value, bool):
        return dtypes.i32
    if isinstance(value, int):
        return ctx.default_ip
    if isinstance(value, float):
        return ctx.default_fp
    return None


class LoweringHost:
    """What the lowering mixins (`lower_expr`, `lower_call`, `lower_stmt`) share: the state and
    methods `FunctionLowerer` (`lower.py`) provides. Declared for the type checker only."""

    if TYPE_CHECKING:
        src: Any                      # SourceInfo
        ctx: CompileContext
        scope: Scope
        block: list[n.Stmt]
        depth: int
        loops: list[str]
        top_block: list[n.Stmt] | None   # the kernel's outermost statement list
        static_depth: int             # > 0 while the argument of a jr.static(...) lowers
        serialize_next: bool
        block_dim_next: int
        statement_call: Any           # the call an expression statement is lowering, or None
        static_jump: str | None       # "break"/"continue" met in a jr.static loop's body
        static_depths: list[int]      # the depth at each enclosing jr.static loop
        folded_ifs: int               # > 0 inside a non-static `if` of a constant condition
        # expressions (lower_expr)
        expr: Callable[..., Any]
        value: Callable[..., n.Expr]
        const: Callable[..., n.Const]
        real_operand: Callable[..., n.Expr]   # vectors.py: a math operand as a float
        cast: Callable[..., n.Expr]
        truth: Callable[..., n.Expr]
        binary: Callable[..., Any]
        operands: Callable[..., Any]
        power: Callable[..., Any]
        global_access: Callable[..., Any]
        access: Callable[..., Any]
        err: Callable[..., Exception]
        loc: Callable[..., n.Loc]
        # calls (lower_call) and statements (lower_stmt)
        static_value: Callable[..., Any]
        quadrants_call: Callable[..., Any]
        simt_call: Callable[..., Any]         # lower_simt.py
        tile_assign: Callable[..., bool]      # lower_tiles.py
        tile_update: Callable[..., bool]
        tile_method: Callable[..., bool]
        shared_array: Callable[..., Any]
        shared_load: Callable[..., Any]
        shared_store: Callable[..., None]
        shared_update: Callable[..., None]
        shared_atomic: Callable[..., Any]
        python_call: Callable[..., Any]
        compile_time: Callable[..., Any]
        dict_item: Callable[..., Any]
        repeated_display: Callable[..., Any]
        str_format: Callable[..., Any]
        percent_format: Callable[..., Any]
        print_parts: Callable[..., None]
        assert_message: Callable[..., Any]
        emit: Callable[[n.Stmt], None]
        gradients_stopped: Callable[..., n.Body]
        typed: Callable[..., n.Expr]
        sub_lowerer: Callable[..., Any]
        at_outermost: Callable[[], bool]
        assign_target: Callable[..., None]
        assign_from: Callable[..., None]
        assign_value: Callable[..., None]
        is_static_call: Callable[..., bool]
        atomic_local: Callable[..., Any]
        mark_assigned: Callable[[str], None]
        # statements and loops (lower_stmt.py, lower_loops.py)
        assign_local: Callable[..., None]
        branch_assigned: Callable[..., Any]
        merge_assigned: Callable[..., Any]
        lower_block: Callable[..., n.Body]
        stmts: Callable[..., None]
        lower_with: Callable[..., n.Body]
        # a @jr.func's returns (lower_return.py)
        func_return: Any               # FuncReturn of the func being inlined, or None
        rebound: set[str]
        ir_names: dict[str, str]
        local_ir_name: Callable[[str], str]
        guarded: Callable[..., None]
        returned: Callable[..., Any]
        resolve_kind: Callable[..., Any]
        start_returns: Callable[..., Any]
        finish_returns: Callable[..., Any]
        # vectors and matrices (vectors.py)
        vec_literal: Callable[..., Any]
        vec_attribute: Callable[..., Any]
        vec_index: Callable[..., Any]
        vec_indices: Callable[..., list[Any]]
        slice_parts: Callable[..., Any]
        vec_part: Callable[..., Any]
        dynamic_part: Callable[..., Any]
        element_part: Callable[..., Any]
        element_component: Callable[..., Any]
        vec_binary: Callable[..., Any]
        vec_map: Callable[..., Any]
        vec_function: Callable[..., Any]
        vec_local_value: Callable[..., Any]
        call_vec_method: Callable[..., Any]
        construct: Callable[..., Any]
        matmul: Callable[..., Any]
        math: Callable[..., Any]
        pairwise: Callable[..., Any]
        class_call: Callable[..., Any]
        atomic_element: Callable[..., Any]
        element_refs: Callable[..., Any]
        vector_element_of: Callable[..., Any]
        element_shape: Callable[..., tuple[int, ...]]
        whole_element: Callable[..., Any]
        load_element: Callable[..., Any]
        fill_vector: Callable[..., bool]
        store_element: Callable[..., None]
        assign_vec_local: Callable[..., None]
        assign_vec_component: Callable[..., None]
        load_member: Callable[..., Any]
        tuple_index: Callable[..., Any]
        filled: Callable[..., Any]
        vec_cast: Callable[..., Any]
        new_vec_var: Callable[..., Any]
        fresh_local: Callable[..., n.Local]
        fold_chain: Callable[..., Any]
        snapshot: Callable[..., Any]
        list_binary: Callable[..., Any]       # lists.py
        dict_method: Callable[..., Any]       # lower_comprehension.py
        store_member: Callable[..., bool]
        assign_vec_swizzle: Callable[..., bool]
