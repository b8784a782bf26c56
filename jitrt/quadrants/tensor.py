"""Quadrants' unified tensor API: `qd.Tensor`, `qd.tensor(...)`, `qd.Backend`, `qd.Layout`.

Stage: API (data allocation). In Quadrants 1.3.3 `qd.Tensor` is one type for "a field or an
ndarray": the class of what `qd.tensor(dtype, shape, backend=qd.Backend.FIELD | NDARRAY)`
returns (a thin wrapper there) and a kernel parameter annotation that takes either. jitrt has
no wrapper: `jr.tensor(...)` returns the `jr.Field` or `jr.Ndarray` itself, and `jr.Tensor`
is an abstract class whose `isinstance` holds for every jitrt field and ndarray
(`jr.VectorTensor` for those of vectors, `jr.MatrixTensor` for matrices); `jr.Tensor(x)`
checks and returns x, and `x._unwrap()` is x. A kernel parameter annotated `jr.Tensor` is
specialized per argument: a field as `jr.template()` does, an ndarray as an untyped
`jr.types.ndarray()` does (kernel.py, runtime/arguments.py).

`layout=` is Quadrants' physical axis order (a permutation of the axes, outermost first);
jitrt validates it as Quadrants does and keeps it in `x.layout`, and stores every tensor in
row-major order of its canonical shape: indices, values, `to_numpy()` and `shape` are the
same as in Quadrants, only the memory order (a GPU coalescing choice) differs. Likewise
`qd.Layout.SOA`/`AOS` for struct fields: jitrt stores structs member by member (SOA) either
way. Caches nothing.
"""
from __future__ import annotations

import enum
from typing import Any

from ..data import Field, Ndarray
from ..data_declare import field, ndarray


class Backend(enum.IntEnum):
    """Where `jr.tensor(...)` allocates: FIELD (a `jr.Field`, reached by kernels as a
    compile-time reference) or NDARRAY (a `jr.Ndarray`, a launch argument; the default)."""

    FIELD = 0
    NDARRAY = 1


class _TensorMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        if not isinstance(obj, (Field, Ndarray)):
            return False
        want = getattr(cls, "rank", None)
        return want is None or len(obj.element_shape) == want

    def __subclasscheck__(cls, sub: Any) -> bool:
        if type.__subclasscheck__(cls, sub):
            return True
        return getattr(cls, "rank", None) is None and isinstance(sub, type) and \
            issubclass(sub, (Field, Ndarray))


class Tensor(metaclass=_TensorMeta):
    """A jitrt field or ndarray (Quadrants' `qd.Tensor`): an `isinstance` test and a kernel
    parameter annotation. `Tensor(x)` returns x after checking that it is one."""

    rank: int | None = None      # element rank: None any, 1 vectors, 2 matrices

    def __new__(cls, impl: Any) -> Any:  # type: ignore[misc]
        if not isinstance(impl, cls):
            raise TypeError(f"{cls.__name__}(impl) requires a jitrt "
                            f"{_WANT[cls.rank]}; got {type(impl).__name__}")
        return impl


class VectorTensor(Tensor):
    """A field or ndarray of vectors (`jr.Vector.tensor(...)`)."""

    rank = 1


class MatrixTensor(Tensor):
    """A field or ndarray of matrices (`jr.Matrix.tensor(...)`)."""

    rank = 2


_WANT = {None: "field or ndarray", 1: "field or ndarray of vectors",
         2: "field or ndarray of matrices"}


def _backend(value: Any) -> Backend:
    try:
        return Backend(value)
    except (ValueError, TypeError):
        valid = ", ".join(f"jr.Backend.{m.name}" for m in Backend)
        raise ValueError(f"backend={value!r} is not a valid jr.Backend; expected one of "
                         f"{valid}") from None


def _check_kwargs(kwargs: dict[str, Any], factory: str, accepted: frozenset[str]) -> None:
    if "order" in kwargs:
        raise TypeError(f"{factory}(...) does not accept order=" + (
            "; pass layout=(...) instead" if "layout" in accepted else
            " (or layout=); use jr.Vector.field / jr.Matrix.field"))
    extra = set(kwargs) - accepted
    if extra:
        raise TypeError(f"{factory}() got unexpected keyword argument(s) {sorted(extra)!r}; "
                        f"accepted: {', '.join(sorted(accepted | {'dtype', 'shape'}))}")


def check_layout(layout: Any, ndim: int) -> tuple[int, ...] | None:
    """`layout` as a tuple (None for None or the identity), after Quadrants' checks: one
    entry per axis, a permutation of range(ndim)."""
    if layout is None:
        return None
    perm = tuple(layout)
    if len(perm) != ndim:
        raise ValueError(f"layout has {len(perm)} entries but shape has {ndim} dimensions; "
                         "they must match")
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"layout={perm!r} is not a permutation of range({ndim})")
    return None if perm == tuple(range(ndim)) else perm


def tensor(dtype: Any, shape: Any, *, backend: Any = Backend.NDARRAY, layout: Any = None,
           needs_grad: bool = False) -> Any:
    """A field (`backend=jr.Backend.FIELD`) or an ndarray (NDARRAY, the default) of `dtype`
    and `shape`, as Quadrants' `qd.tensor`. `layout=` is checked and recorded (module
    docstring). A vector/matrix dtype (`jr.math.vec3`) gives a tensor of vectors/matrices;
    `layout=` is refused with one, as in Quadrants."""
    if isinstance(dtype, (Field, Ndarray)):
        raise TypeError(f"jr.tensor() allocates a new tensor; got a {type(dtype).__name__} "
                        "where a dtype belongs")
    if layout is not None and hasattr(dtype, "element_field"):
        raise TypeError("layout= is not supported with compound dtypes (vector/matrix); use "
                        "jr.Vector.tensor(...) or jr.Matrix.tensor(...) without layout=")
    chosen = _backend(backend)
    ndim = 1 if isinstance(shape, int) else len(tuple(shape))
    perm = check_layout(layout, ndim)
    make = field if chosen is Backend.FIELD else ndarray
    out = make(dtype, shape, needs_grad=needs_grad)
    out.layout = perm
    return out


def element_tensor(who: str, make_field: Any, make_ndarray: Any, args: tuple, *,
                   backend: Any = Backend.NDARRAY, **kwargs: Any) -> Any:
    """`jr.Vector.tensor(n, dtype, shape, backend=...)` / `jr.Matrix.tensor(n, m, ...)`: a
    field or ndarray of vectors or matrices, made by the class's own `field`/`ndarray`
    (passed in: this module does not import linalg)."""
    _check_kwargs(kwargs, who, frozenset({"backend", "needs_grad"}))
    make = make_field if _backend(backend) is Backend.FIELD else make_ndarray
    return make(*args, **kwargs)
