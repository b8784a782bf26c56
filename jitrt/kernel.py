"""`@jr.kernel` and `@jr.func`: the objects users decorate their functions into.

Stage: API (above the runtime). `Kernel` reads its parameters from the annotations once
(scalars, vectors/matrices, `jr.types.ndarray`, `jr.template()`), and launches through a
per-kernel class whose `__call__` is the kernel's fast path (`runtime/launcher.py`: the
launcher of its one specialization, or a router over several); a call that matches none goes
to `dispatch`, which validates the arguments, finds or builds the handle for the
specialization, and installs the fast path. `.grad` is the adjoint kernel, `.bind(...)` a
bound launch; `forward_kernel(...)` is the forward-mode kernel a launch inside
`jr.ad.FwdMode` runs, `validation_kernel()` the checked copy a `jr.ad.Tape(validation=True)`
runs. A struct or argument-pack parameter is read as its leaves (`a.member`, one parameter
each); `@jr.kernel` gives a kernel with one, or with a struct return, a `StructArgKernel` as
its Python entry, which splits struct arguments and assembles struct results
(`kernel_structs.py`). `Func` (`@jr.func`, inlined where called) lives in the frontend
(`frontend/func.py`).

Typing: `Kernel` is generic over the decorated function's parameters and return type
(`Kernel[P, R]`), so a type checker sees `k(a, 0.5)`, `k.grad(a, 0.5)` and
`k.bind(a, 0.5)() -> R` with the function's own signature; `jr.func` keeps the function's
type (docs/usage.md, "Type checking").
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import TYPE_CHECKING, Any, Callable, Generic, ParamSpec, Protocol, TypeVar

from . import dtypes
from .errors import KernelSyntaxError
from .frontend.func import Func, refuse_wrapped, resolve_annotation
from .frontend.source import SourceInfo, capture
from .frontend.struct_args import has_struct, is_compound, leaves
from .ir import nodes as n
from .runtime import bound, launcher
from .types import NdarrayType, Template
from .linalg import MatrixType, StructType
from .quadrants.tensor import Tensor


def parse_params(fn: Callable) -> tuple[n.Param, ...]:
    sig = inspect.signature(fn)
    params: list[n.Param] = []
    for p in sig.parameters.values():
        where = f"parameter '{p.name}' of kernel {fn.__qualname__}"
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise KernelSyntaxError(f"{where}: *args, **kwargs and keyword-only parameters are "
                                    "not supported (a decorator between @jr.kernel and the "
                                    "def must return the function itself, not a wrapper)",
                                    inspect.getsourcefile(fn) or "?",
                                    fn.__code__.co_firstlineno)
        ann = resolve_annotation(fn, p.annotation)
        if ann is inspect.Parameter.empty and p.name == "self" and not params:
            ann = Template()      # a kernel method: the object is a compile-time value
        if ann is inspect.Parameter.empty:
            raise KernelSyntaxError(f"{where} needs an annotation (jr.f32, jr.i32, "
                                    "jr.types.ndarray(...), jr.template())",
                                    inspect.getsourcefile(fn) or "?", fn.__code__.co_firstlineno)
        if isinstance(ann, Template):
            params.append(n.Param(p.name, "template"))
        elif isinstance(ann, type) and dataclasses.is_dataclass(ann):
            # Quadrants' struct arguments (a dataclass of tensors): a compile-time reference,
            # its members reached as `s.member` (runtime/arguments.template_key)
            params.append(n.Param(p.name, "template"))
        elif isinstance(ann, type(Tensor)):      # jr.Tensor (or VectorTensor...)
            # Quadrants' `qd.Tensor`: a field (as a template) or an ndarray (as an untyped
            # ndarray parameter), chosen per argument (runtime/arguments.specialize)
            params.append(n.Param(p.name, "tensor", None, -1, element_dim=-1))
        else:                    # a struct or argument pack: its leaves (struct_args.py)
            for name, t in leaves(ann, p.name) if is_compound(ann) else [(p.name, ann)]:
                param = value_param(name, t)
                if param is None:
                    raise KernelSyntaxError(f"{where}: unsupported annotation {t!r}" + (
                        f" (member '{name}' of {ann!r})" if t is not ann else ""),
                        inspect.getsourcefile(fn) or "?", fn.__code__.co_firstlineno)
                params.append(param)
    return tuple(params)


def value_param(name: str, ann: Any) -> n.Param | None:
    """The parameter of a value annotation: a scalar dtype (or int/float/bool), a vector/matrix
    type or `jr.types.ndarray(...)` (also a leaf of a struct or argument pack parameter)."""
    if isinstance(ann, NdarrayType):
        return n.Param(name, "ndarray", ann.dtype, ann.ndim if ann.ndim is not None else -1,
                       element_shape=ann.element_shape, element_dim=ann.element_dim,
                       grad_annotation=ann.needs_grad, clamp=ann.boundary == "clamp")
    if isinstance(ann, MatrixType):      # a vector/matrix value (jr.math.vec3...)
        return n.Param(name, "vector", ann.dtype, 0, element_shape=ann.shape)
    if ann is bool:                       # a flag (Quadrants takes it): an i32 0 or 1
        return n.Param(name, "scalar", dtypes.i32, 0)
    if ann is int or ann is float or isinstance(ann, dtypes.DataType):
        return n.Param(name, "scalar", ann if isinstance(ann, dtypes.DataType) else None, 0)
    return None


def _no_gradient(*args: Any, **kwargs: Any) -> None:
    """The `.grad` of a `@jr.ad.no_grad` kernel: nothing to do."""


# a kernel's `__call__` until its first launch installs the fast path
_FIRST_CALL = launcher.FIRST_CALL

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Launch(Protocol[R_co]):
    """What `k.bind(...)` returns, as a type checker sees it (`runtime/bound.py`)."""

    def __call__(self) -> R_co: ...

    def set_arg(self, key: int | str, value: Any) -> None: ...


class Kernel(Generic[P, R]):
    """A compiled-on-first-use kernel. Calling it launches; `.grad(...)` launches its adjoint.

    Generic over the decorated function's parameters `P` and return type `R`, for type
    checkers only: the launch itself is the per-kernel `__call__` installed at run time."""

    is_jitrt_kernel = True   # how the frontend recognises a kernel called from a kernel

    if TYPE_CHECKING:
        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __new__(cls, fn: Callable[P, R], adjoint: bool = False,
                dual_args: tuple[int, ...] | None = None,
                validate: bool = False) -> "Kernel[P, R]":
        # One class per kernel, so that the fast launcher can be installed as `__call__`.
        sub = type(f"Kernel[{fn.__qualname__}]", (cls,), {"__call__": _FIRST_CALL})
        return super().__new__(sub)

    def __init__(self, fn: Callable[P, R], adjoint: bool = False,
                 dual_args: tuple[int, ...] | None = None, validate: bool = False) -> None:
        refuse_wrapped(fn, "@jr.kernel")
        self.fn = fn
        self.adjoint = adjoint
        self.dual_args = dual_args
        self.validate = validate       # the checked copy a Tape(validation=True) launches
        self.name = fn.__name__
        self.qualname = f"{fn.__module__}.{fn.__qualname__}"
        self.params = parse_params(fn)
        # the defaults of the parameters that have one, used for arguments not passed
        self.defaults = {p.name: p.default for p in inspect.signature(fn).parameters.values()
                         if p.default is not p.empty}
        ret = resolve_annotation(fn, fn.__annotations__.get("return"))
        if typing.get_origin(ret) is tuple:
            ret = typing.get_args(ret)         # -> tuple[jr.f32, jr.math.vec3]
        elements = ret if isinstance(ret, tuple) else (ret,)
        # `int` and `float` stay as they are: the program's default_ip/default_fp at compile;
        # `bool` is 0 or 1, an i32 (Quadrants')
        elements = tuple(dtypes.i32 if t is bool else t for t in elements)
        if any(type(t).__name__ == "ArgPackType" for t in elements):
            raise KernelSyntaxError(f"kernel {fn.__qualname__}: an argument pack cannot be "
                                    f"returned (it is only a parameter), got -> {ret!r}")
        if ret is not None and (not elements or not all(
                isinstance(t, (dtypes.DataType, MatrixType, StructType)) or t is int or
                t is float for t in elements)):
            raise KernelSyntaxError(f"kernel {fn.__qualname__}: return annotation must be a "
                                    "jitrt dtype, a vector/matrix type, a struct type or a "
                                    f"tuple of them, got {ret!r}")
        # a DataType (or int/float), a vector/matrix or struct type, a tuple of those, or None
        self.ret: Any = elements if isinstance(ret, tuple) else \
            (elements[0] if ret is not None else None)
        self._source: SourceInfo | None = None
        self.handles: dict[Any, Any] = {}
        self._grad_kernel: Kernel[P, Any] | None = None
        self._forward_kernels: dict[tuple[int, ...], Kernel[P, R]] = {}
        self._validation_kernel: Kernel[P, R] | None = None
        self.grad_disabled = False     # @jr.ad.no_grad: never recorded, .grad does nothing
        self.fastcache = self.graph = False    # Quadrants' options (see `kernel`)
        self.graph_call: Any = None    # graph=True: runtime.graph.graph_call
        if dual_args is not None:      # the duals of these ndarrays come as hidden parameters
            self.params += tuple(dataclasses.replace(self.params[i], name=f"{self.params[i].name}"
                                                     ".dual", grad_annotation=None)
                                 for i in dual_args)

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = capture(self.fn)
        return self._source

    def bind(self, *args: P.args, **kwargs: P.kwargs) -> Launch[R]:
        """A launch with its arguments packed once: call it with no arguments to run."""
        return _BIND(self, args, kwargs)  # type: ignore[no-any-return]

    @property
    def grad(self) -> "Kernel[P, Any]":
        """The reverse-mode adjoint: `k.grad(*args)` takes `k`'s arguments."""
        if self.adjoint:
            raise AttributeError("the adjoint kernel has no .grad")
        if self.grad_disabled:
            return typing.cast("Kernel[P, Any]", _no_gradient)
        if self._grad_kernel is None:
            self._grad_kernel = Kernel(self.fn, adjoint=True)
            self._grad_kernel._source = self._source
        return self._grad_kernel

    def forward_kernel(self, dual_args: tuple[int, ...]) -> "Kernel[P, R]":
        """The forward-mode kernel (primal values and tangents) for launches whose ndarray
        arguments at `dual_args` have a dual (passed after the others); made on first use."""
        fwd = self._forward_kernels.get(dual_args)
        if fwd is None:
            fwd = self._forward_kernels[dual_args] = Kernel(self.fn, dual_args=dual_args)
            fwd._source = self._source
        return fwd

    @property
    def autodiff_mode(self) -> Any:
        """A `jr.ad.AutodiffMode`: what this kernel object computes."""
        from .ad import AutodiffMode
        return AutodiffMode.REVERSE if self.adjoint else AutodiffMode.FORWARD \
            if self.dual_args is not None else AutodiffMode.VALIDATION if self.validate \
            else AutodiffMode.NONE

    def validation_kernel(self) -> "Kernel[P, R]":
        """The kernel with Taichi's global data access rule checked (`frontend/gdar.py`),
        what a launch inside `jr.ad.Tape(validation=True)` runs; made on first use."""
        if self._validation_kernel is None:
            self._validation_kernel = Kernel(self.fn, validate=True)
            self._validation_kernel._source = self._source
        return self._validation_kernel

    def __repr__(self) -> str:
        mode = " (grad)" if self.adjoint else " (forward mode)" if self.dual_args is not None \
            else " (validation)" if self.validate else ""
        return f"<jitrt kernel {self.qualname}{mode}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """`obj.k` for a kernel defined in a class: the kernel with `self` bound to obj."""
        return self if obj is None else BoundKernel(self, obj)


class BoundKernel:
    """A kernel method reached through its object (`a.step(dt)` launches `A.step(a, dt)`):
    the object is the kernel's first, compile-time argument; `.grad` and `.bind` bind it too."""

    __slots__ = ("kernel", "obj")
    is_jitrt_kernel = True

    def __init__(self, kernel: Kernel[Any, Any], obj: Any) -> None:
        self.kernel, self.obj = kernel, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel(self.obj, *args, **kwargs)  # type: ignore[operator]

    @property
    def grad(self) -> Any:
        grad = self.kernel.grad
        return grad if grad is _no_gradient else BoundKernel(grad, self.obj)

    @property
    def name(self) -> str:
        return self.kernel.name

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel.bind(self.obj, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<jitrt kernel {self.kernel.qualname} bound to {type(self.obj).__name__}>"


_BIND = launcher.user_facing(bound.bind, "bind")


class StructLaunch:
    """A bound launch of a kernel returning a struct: the struct assembled from its leaves."""

    def __init__(self, launch: Any, ret: Any) -> None:
        self.launch, self.ret = launch, ret

    def __call__(self) -> Any:
        from .kernel_structs import assemble
        return assemble(self.ret, self.launch())

    def set_arg(self, key: int | str, value: Any) -> None:
        self.launch.set_arg(key, value)


class StructArgKernel:
    """The Python entry of a kernel with struct or argument-pack parameters or a struct return
    (kernel_structs.py): `inner` is the `Kernel` of the leaves; a call splits each struct
    argument into them and assembles a returned struct. `.grad` and `.bind` take the same
    arguments; every other attribute is the inner kernel's."""

    is_jitrt_kernel = True

    def __init__(self, inner: Kernel[Any, Any], compound: dict[str, Any]) -> None:
        self.__dict__.update(inner=inner, compound=compound,
                             signature=inspect.signature(inner.fn),
                             struct_ret=inner.ret if has_struct(inner.ret) else None)

    def leaves(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        from .errors import KernelArgCountError
        from .kernel_structs import leaf_values
        try:
            call = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KernelArgCountError(f"kernel {self.inner.qualname}: {exc}") from None
        call.apply_defaults()
        out: list[Any] = []
        for name, v in call.arguments.items():
            kind = self.compound.get(name)
            out += [v] if kind is None else leaf_values(self.inner.qualname, name, kind, v)
        return out

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = self.inner(*self.leaves(args, kwargs))
        if self.struct_ret is None:
            return result
        from .kernel_structs import assemble
        return assemble(self.struct_ret, result)

    # (jitrt's errors reach the user without jitrt's frames, as from other kernels)
    __call__ = launcher.user_facing(call, "__call__", packed=True)

    @property
    def grad(self) -> Any:
        grad = self.inner.grad
        return grad if grad is _no_gradient else \
            (lambda *args, **kwargs: grad(*self.leaves(args, kwargs)))

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        """A bound launch of the leaves (its `set_arg` names them `a.member`); calling it
        returns what calling the kernel returns."""
        launch = self.inner.bind(*self.leaves(args, kwargs))
        return launch if self.struct_ret is None else StructLaunch(launch, self.struct_ret)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)       # grad_disabled, fastcache, graph...

    def __repr__(self) -> str:
        return repr(self.inner)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else BoundKernel(self, obj)  # type: ignore[arg-type]


@typing.overload
def kernel(fn: Callable[P, R]) -> Kernel[P, R]: ...


@typing.overload
def kernel(fn: None = None, *, fastcache: bool = False,
           graph: bool = False) -> Callable[[Callable[P, R]], Kernel[P, R]]: ...


def kernel(fn: Callable[P, R] | None = None, *, fastcache: bool = False,
           graph: bool = False) -> Any:
    """Decorate a function as a kernel, compiled on first call for each specialization.

    `@jr.kernel(fastcache=True, graph=True)` takes Quadrants' two options. `fastcache`:
    Quadrants caches such a kernel on disk keyed by its source; jitrt's offline cache does so
    for every kernel whenever `jr.init(offline_cache=True)` (the default), so the flag changes
    nothing. `graph`: on a GPU the kernel's launches are recorded as one graph and replayed
    at later calls with the same arguments (`runtime/graph.py`, `KernelGraph`); on the CPU
    it launches as usual, as in Quadrants. Both are kept as attributes of the kernel.

    Parameters are annotated `jr.f32`/`jr.i32`/... (scalars), `jr.math.vec3`,
    `jr.types.vector(3, jr.f32)`, `jr.types.matrix(2, 2, jr.f64)` (vectors/matrices passed by
    value), `jr.types.ndarray(dtype=..., ndim=...)` (arrays passed at launch) or
    `jr.template()` (fields and Python constants, compiled in), a struct type or
    `jr.types.argpack(...)` (passed as their members); `-> jr.f32` lets it return
    one scalar (`int`/`float` annotations mean the program's `default_ip`/`default_fp`),
    `-> S` a struct (a `jr.Struct`);
    parameters may have defaults (`s: jr.f32 = 2.0`). The outermost loops run in parallel.
    Calling the kernel launches it; `k.grad(...)` launches its reverse-mode adjoint;
    `k.bind(...)` packs the arguments once for repeated launches.

    Raises (at the first call): `jr.KernelCompileError` (unsupported Python, type errors; the
    message points at the line), `jr.KernelArgError` (wrong arguments).

    Example::

        @jr.kernel
        def scale(a: jr.types.ndarray(dtype=jr.f32, ndim=1), k: jr.f32):
            for i in range(a.shape[0]):
                a[i] = a[i] * k
    """
    for name, flag in (("fastcache", fastcache), ("graph", graph)):
        if not isinstance(flag, bool):
            raise TypeError(f"@jr.kernel({name}=...) takes True or False, got {flag!r}")
    if fn is None:
        return functools.partial(kernel, fastcache=fastcache, graph=graph)
    if not callable(fn):
        raise TypeError(f"@jr.kernel decorates a function, got {type(fn).__name__}")
    if graph:
        from .quadrants import graph_loop
        if graph_loop.has_do_while(fn):
            return graph_loop.GraphLoopKernel(fn, _loop_part, fastcache)
    return _entry(Kernel(fn), fastcache, graph)


def _entry(k: Kernel[Any, Any], fastcache: bool, graph: bool) -> Any:
    """What the decorator returns for the kernel `k`: itself, or its struct-argument entry."""
    k.fastcache, k.graph = fastcache, graph
    if graph and k.ret is None:       # on GPUs its launches replay as a graph
        from .runtime.graph import graph_call
        k.graph_call = graph_call
    from .frontend.struct_args import compound_params
    compound = compound_params(k.fn)
    return StructArgKernel(k, compound) if compound or has_struct(k.ret) else k


def _loop_part(fn: Callable, src: SourceInfo, part: int) -> Any:
    """One part of a kernel with `jr.graph.do_while` loops (quadrants/graph_loop.py): the
    function `fn` compiled from `src` (its body cut to the part)."""
    k: Kernel[Any, Any] = Kernel(fn)
    k._source = src
    k.name = f"{k.name}_part{part}"
    k.qualname = f"{k.qualname}.do_while_part{part}"
    return _entry(k, True, False)


def data_oriented(cls: type) -> type:
    """`@jr.data_oriented` on a class whose methods are kernels (Taichi's): its instances may
    be passed as `jr.template()` arguments, `self` included. The attributes a kernel reads
    (fields, numbers) are compiled in at the first launch for each object, as Taichi does;
    rebinding them later does not change the compiled kernel."""
    if not isinstance(cls, type):
        raise TypeError(f"@jr.data_oriented goes on a class, got {type(cls).__name__}")
    cls._jitrt_data_oriented = True      # type: ignore[attr-defined]
    return cls


def clear_compiled_kernels() -> None:
    """Every kernel compiles again at its next launch in this program (Taichi's
    `clear_compiled_functions`, which `SNodeTree.destroy()` calls): what a kernel read at
    compile time (a data-oriented object's fields, globals) is read afresh. Bound launches
    and graphs made earlier keep their compiled code."""
    from .runtime import program as program_mod
    program = program_mod._current
    if program is None:
        return
    for h in program.handles:
        k = h.kernel
        for key in [key for key, v in k.handles.items() if v is h]:
            del k.handles[key]
        setattr(type(k), "__call__", _FIRST_CALL)


def func(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a function to be inlined into the kernels that call it.

    Parameters annotated `jr.template()` are passed by reference (fields, ndarrays, locals the
    func may assign, vector locals included); the others by value, converted to their
    annotation (`x: jr.i32` given 1.5 holds 1). A func may return in several places (inside
    `if`s and `jr.static` loops; not inside run-time loops), and `-> jr.i32` converts what it
    returns (docs/usage.md, "Funcs"). Called outside a kernel it is the plain Python function.
    Returns a `Func`, typed as the function it wraps.
    """
    return typing.cast("Callable[P, R]", Func(fn))


def real_func(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a function compiled as a function of its own in each kernel that calls it
    (Taichi's `ti.real_func`): not inlined, so it may recurse and `return` anywhere (inside
    loops too). Every parameter is annotated: a dtype or vector/matrix type (by value,
    converted), `jr.ref(dt)` (the caller's local gets the final value), or a field, ndarray
    or constant (`jr.template()`, `jr.types.ndarray(...)`: compiled in). A returned value
    needs a return annotation (a dtype, a vector/matrix type or a tuple of them). Kernels
    calling one are not differentiated (docs/usage.md, "Real functions")."""
    from .frontend.real_func import RealFuncDef
    return typing.cast("Callable[P, R]", RealFuncDef(fn))

