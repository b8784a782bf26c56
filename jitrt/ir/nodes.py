"""Immutable IR nodes.

Stage: produced by the frontend, rewritten by passes, consumed by codegen. Every node is a frozen
dataclass; every expression carries its `dtype` (types are resolved while the frontend builds the
IR, and `verify` checks them); every node carries a `loc` that does not take part in equality.
Global memory is named by refs: `FieldRef` (a slot in the kernel's field table) and `ArrayRef`
(an ndarray argument); `grad=True` names the gradient buffer of the same data.
"""
from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING

from ..frozen import frozen
from ..dtypes import DataType, i32


@frozen
class Loc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


NOLOC = Loc("<jitrt>", 0, 0)


def _loc() -> Loc:
    return field(default=NOLOC, compare=False, repr=False)  # type: ignore[return-value]


# ---- global memory references -------------------------------------------------------------

RANDOM_STATE = "jr.random state"   # the hidden field jr.random() draws each launch's seed from

@frozen
class FieldRef:
    slot: int
    name: str
    dtype: DataType
    shape: tuple[int, ...]
    grad: bool = False
    # the field's first index on each storage axis when it has an offset (`jr.field(...,
    # offset=)`), else (): indices in the IR are storage indices (the frontend subtracts the
    # offset); this is only for the user's indices in bounds errors
    offset: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def adjoint(self) -> "FieldRef":
        return replace(self, grad=True)


@frozen
class ArrayRef:
    arg: int
    name: str
    dtype: DataType
    ndim: int
    grad: bool = False
    large: bool = False      # its parameter's `Param.large`

    def adjoint(self) -> "ArrayRef":
        return replace(self, grad=True)


Ref = FieldRef | ArrayRef


# ---- expressions --------------------------------------------------------------------------

@frozen
class Expr:
    if TYPE_CHECKING:   # every expression node has these two fields (each subclass declares them)
        @property
        def dtype(self) -> DataType: ...

        @property
        def loc(self) -> Loc: ...


@frozen
class Const(Expr):
    value: int | float
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Arg(Expr):
    """A scalar kernel argument, or one component of a vector/matrix argument (`component`:
    its row-major index, the slot after the parameter's first; -1 for a scalar parameter)."""
    index: int
    name: str
    dtype: DataType
    loc: Loc = _loc()
    component: int = -1


@frozen
class Local(Expr):
    name: str
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Unary(Expr):
    op: str  # neg | not | invert | bitcast (x's bits as `dtype`, of x's width) | STOP_GRAD |
    # TANGENT_ONLY
    x: Expr
    dtype: DataType
    loc: Loc = _loc()


# `stop_grad(x)`: x itself, through which autodiff sends no adjoint or tangent: the frontend
# wraps the reads `jr.stop_grad` names, the AD passes read it, and it is removed before codegen
STOP_GRAD = "stop_grad"
# `tangent_only(x)`: a term whose value is zero and whose derivative is x's (the AD passes
# differentiate through it; after them it becomes -0.0, so `y + tangent_only(x)` is y and the
# code computing x is dead in every kernel): how jitrt/matrix_functions.py states derivatives
TANGENT_ONLY = "tangent_only"


COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")


@frozen
class Binary(Expr):
    """`op` in + - * / // % ** & | ^ << >> min max and or, or a comparison (result i32).
    `overflow`: for an integer + - * << a user wrote under jr.init(debug=True), the message
    printed when the result wraps (the wrapped value is kept, as in Taichi); "" otherwise."""
    op: str
    a: Expr
    b: Expr
    dtype: DataType
    loc: Loc = _loc()
    overflow: str = ""


@frozen
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Cast(Expr):
    x: Expr
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Assertion(Expr):
    """`assert cond, message` (compiled with jr.init(debug=True) only): 0; when `cond` is 0 it
    records a fault the host raises as KernelRuntimeError with the message and location. A
    message with run-time values (`f"x[{i}] = {v}"`, at most 2) has a NUL where each of `args`
    goes, printed with its printf spec in `formats` ("" for the default)."""
    cond: Expr
    message: str
    dtype: DataType
    loc: Loc = _loc()
    args: tuple[Expr, ...] = ()
    formats: tuple[str, ...] = ()


@frozen
class Print(Expr):
    """`print(...)` in a kernel: `pieces` are text and `args` interleaved ("%" marks where each
    argument goes); 0. CPU only (a compile error on GPUs in this version). `formats`, when
    given, holds each argument's printf specifier without `%` or length (`.2f`, `5d`; "" for
    the default)."""
    pieces: tuple[str, ...]
    args: tuple[Expr, ...]
    dtype: DataType
    loc: Loc = _loc()
    formats: tuple[str, ...] = ()


MATH_FUNCS = ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "floor", "ceil", "abs", "pow",
              "asin", "acos", "atan", "atan2", "sinh", "cosh", "round")


@frozen
class Math(Expr):
    fn: str
    args: tuple[Expr, ...]
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Load(Expr):
    ref: Ref
    indices: tuple[Expr, ...]
    dtype: DataType
    loc: Loc = _loc()


@frozen
class Shape(Expr):
    """`a.shape[axis]` of an ndarray argument (field shapes fold to constants in the frontend)."""
    ref: ArrayRef
    axis: int
    dtype: DataType = i32
    loc: Loc = _loc()


ATOMIC_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "xchg",  # and/or/xor: integers
              "mul")                                    # mul: a compare-and-swap loop


@frozen
class Atomic(Expr):
    """Atomic read-modify-write of global memory; its value is the old content."""
    op: str
    ref: Ref
    indices: tuple[Expr, ...]
    value: Expr
    dtype: DataType
    loc: Loc = _loc()


@frozen
class SharedDecl:
    """A block-shared array (`simt.block.SharedArray(shape, dtype)`): `id` numbers the
    declarations of one kernel; GPUs give each task its own static copy per thread block."""
    id: int
    name: str
    dtype: DataType
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count


# `Simt.op`: what the GPU primitive does (`codegen/emit_simt.py` lowers each; the CPU refuses
# them all). Shared-array ops take the flat element index first (`shared` names the array).
SIMT_OPS = ("block.sync", "block.mem_fence", "block.thread_idx", "block.global_thread_idx",
            "grid.mem_fence", "warp.sync", "subgroup.sync", "subgroup.mem_fence",
            "subgroup.invocation_id", "subgroup.shuffle", "subgroup.shuffle_up",
            "subgroup.shuffle_down", "subgroup.ballot", "warp.ballot", "warp.active_mask",
            "warp.all_nonzero", "warp.any_nonzero", "shared.load", "shared.store",
            "shared.atomic_add", "shared.atomic_sub", "shared.atomic_min", "shared.atomic_max",
            "shared.atomic_and", "shared.atomic_or", "shared.atomic_xor", "shared.atomic_xchg")


@frozen
class Simt(Expr):
    """A GPU block, warp or subgroup primitive, or an access of a block-shared array. It has
    an effect (a barrier, a shuffle among lanes, shared memory): never moved, merged, dropped
    or evaluated twice."""
    op: str
    args: tuple[Expr, ...]
    dtype: DataType
    loc: Loc = _loc()
    shared: SharedDecl | None = None


# ---- statements ---------------------------------------------------------------------------

@frozen
class Stmt:
    if TYPE_CHECKING:   # every statement node has a location (each subclass declares it)
        @property
        def loc(self) -> Loc: ...


Body = tuple[Stmt, ...]


@frozen
class Assign(Stmt):
    """`name = value`. `reduce` names the reduction when the source wrote `name += v`,
    `name -= v` or `jr.atomic_add/sub/min/max(name, v)` (value: `name <op> v`): "add", "sub",
    "min" or "max"; on integers also "and", "or", "xor" (`&=`, `jr.atomic_and`...); ""
    otherwise. Only these may update a kernel-scope local inside a parallel
    loop (`passes/local_reductions.py`)."""
    name: str
    value: Expr
    loc: Loc = _loc()
    reduce: str = ""


@frozen
class Store(Stmt):
    ref: Ref
    indices: tuple[Expr, ...]
    value: Expr
    loc: Loc = _loc()


@frozen
class Eval(Stmt):
    expr: Expr
    loc: Loc = _loc()


@frozen
class If(Stmt):
    cond: Expr
    body: Body
    orelse: Body
    loc: Loc = _loc()


@frozen
class For(Stmt):
    """A serial `for var in range(begin, end)` (step 1)."""
    var: str
    begin: Expr
    end: Expr
    body: Body
    loc: Loc = _loc()


@frozen
class While(Stmt):
    cond: Expr
    body: Body
    loc: Loc = _loc()


@frozen
class Break(Stmt):
    loc: Loc = _loc()


@frozen
class Continue(Stmt):
    loc: Loc = _loc()


@frozen
class Return(Stmt):
    value: Expr
    loc: Loc = _loc()


@frozen
class ParFor(Stmt):
    """An outermost loop: `vars` range over the box `begins[k] <= vars[k] < ends[k]`."""
    vars: tuple[str, ...]
    begins: tuple[Expr, ...]
    ends: tuple[Expr, ...]
    body: Body
    loc: Loc = _loc()
    block_dim: int = 0       # GPU threads per block (`jr.loop_config(block_dim=...)`; 0: default)


@frozen
class Call(Stmt):
    """A call of a real function (`jr.real_func`, a function of its own in the LLVM module):
    `outs` are the caller's locals that receive its results, one per scalar returned."""
    func: str
    args: tuple[Expr, ...]
    outs: tuple[str, ...]
    out_types: tuple[DataType, ...]
    loc: Loc = _loc()


@frozen
class FuncRet(Stmt):
    """`return` inside a real function: one value per scalar of its return type."""
    values: tuple[Expr, ...]
    loc: Loc = _loc()


@frozen
class RealFunc:
    """A real function of the kernel: its parameters (locals set from the call's arguments),
    its result types and its body (serial code; loops never become tasks)."""
    name: str
    params: tuple[tuple[str, DataType], ...]
    rets: tuple[DataType, ...]
    body: Body
    loc: Loc = _loc()


def has_call(body: Body) -> bool:
    """Whether `body` calls a real function (whose accesses it cannot see)."""
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, Call):
            return True
        for name in ("body", "orelse"):
            inner = getattr(s, name, None)
            if isinstance(inner, tuple):
                stack.extend(inner)
    return False


# ---- kernels and tasks --------------------------------------------------------------------

@frozen
class Param:
    name: str
    kind: str  # scalar | vector (a vector/matrix value: element_shape) | ndarray | template
    # | tensor (a declared `jr.Tensor` parameter: ndarray or template per argument)
    dtype: DataType | None = None
    ndim: int = 0
    needs_grad: bool = False
    element_shape: tuple[int, ...] = ()   # ndarray of vectors/matrices: trailing dimensions
    # a declared ndarray parameter: where its element comes from. 0: `element_shape` (() for
    # scalars; `ndim` counts every dimension); -1: the array passed (an untyped annotation: a
    # jitrt vector/matrix ndarray's element, else scalars); 1 or 2: the array's last 1 or 2
    # dimensions (`element_dim=`). For -1, 1 and 2, `ndim` (if >= 0) counts the others only.
    # A concrete (specialized) parameter keeps it, with the element found and `ndim` counting
    # every dimension: the launcher re-checks an element taken from the array
    element_dim: int = 0
    grad_annotation: bool | None = None   # the annotation's needs_grad (None: not given)
    clamp: bool = False      # ndarray(boundary="clamp"): indices clamp into the array
    # a concrete ndarray parameter: specialized for an array of 2**31 elements or more (its
    # accesses in 64 bits everywhere; else a GPU addresses it in 32: `narrow_offsets`)
    large: bool = False


@frozen
class KernelIR:
    name: str
    params: tuple[Param, ...]
    fields: tuple[FieldRef, ...]
    body: Body
    ret: DataType | None
    funcs: tuple[RealFunc, ...] = ()


@frozen
class Task:
    """A unit of execution: `serial` runs `body` once; `parallel` runs it for every point of the
    box given by `begins`/`ends` (evaluated in the enclosing serial code). `captures` are the
    kernel-scope locals the body reads, passed by value."""
    kind: str
    body: Body
    vars: tuple[str, ...] = ()
    begins: tuple[Expr, ...] = ()
    ends: tuple[Expr, ...] = ()
    captures: tuple[tuple[str, DataType], ...] = ()
    loc: Loc = _loc()
    stacks: tuple["AdStack", ...] = ()
    # filled by the pipeline's last passes (passes/pipeline.py), read by codegen:
    reductions: tuple[tuple["Ref", tuple[int, ...]], ...] = ()  # `+=` kept per chunk
    cost: int = 1                  # estimated work of one iteration (the pool's split decision)
    block_dim: int = 0             # GPU threads per block (0: the device's default)


@frozen
class TaskedKernel:
    name: str
    params: tuple[Param, ...]
    fields: tuple[FieldRef, ...]
    tasks: tuple[Task, ...]
    ret: DataType | None
    funcs: tuple[RealFunc, ...] = ()


# ---- autodiff: adstacks -------------------------------------------------------------------

@frozen
class AdStack:
    """A per-thread stack of (primal, adjoint) pairs for one loop-carried local of one task.
    `lane`: which copy, where codegen interleaves iterations (`passes/interleave.py`); every
    lane's copy has the stack's capacity."""
    id: int
    name: str
    dtype: DataType
    lane: int = 0


@frozen
class StackInit(Stmt):
    """Empty the stack and push one (value, 0) pair: the local's value before the task body,
    so a read before any push sees what the primal kernel would see."""
    stack: AdStack
    value: Expr
    loc: Loc = _loc()


@frozen
class StackPush(Stmt):
    stack: AdStack
    value: Expr
    loc: Loc = _loc()


@frozen
class StackPop(Stmt):
    stack: AdStack
    loc: Loc = _loc()


@frozen
class StackAccAdj(Stmt):
    """Add `value` to the adjoint of the top entry."""
    stack: AdStack
    value: Expr
    loc: Loc = _loc()


@frozen
class StackTop(Expr):
    stack: AdStack
    dtype: DataType
    loc: Loc = _loc()


@frozen
class StackTopAdj(Expr):
    stack: AdStack
    dtype: DataType
    loc: Loc = _loc()


@frozen
class ReverseFor(Stmt):
    """`for var in reversed(range(begin, end))`: the adjoint of a serial `For`."""
    var: str
    begin: Expr
    end: Expr
    body: Body
    loc: Loc = _loc()
