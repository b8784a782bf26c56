"""Launch arguments: binding, validation, specialization keys and packing into a context.

Stage: runtime (the first step of a launch). `bind_args` maps positional and keyword arguments
to parameters; `specialize` validates every value (a `KernelArgError` naming kernel, parameter,
expected and got) and derives the concrete parameters, the handle key and the content-stable
kernel name (`ndarray_param`: an ndarray's element from the annotation or the array;
`check_vector`: a vector/matrix value); `launch_value` hands the generated launcher what it
takes; `pack_array` writes an ndarray argument's slots, `pack_vector` a vector's. A launch
that reuses an array it packed earlier re-checks it cheaply (`watch_state`/`changed_expr`).
Nothing here is cached.
"""
from __future__ import annotations

import ctypes
import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes
from ..data import CURRENT_DEVICE, Field, Ndarray, grad_tensor_view, requires_grad
from ..data_struct import StructField
from ..host_matrix import HostMatrix
from ..launch_plan import large_shape
from ..errors import (KernelArgCountError, KernelArgError, KernelArgSyntaxError,
                      KernelArgValueError)
from ..ir import nodes as n

if TYPE_CHECKING:
    from .seams import KernelLike
    from .artifact import CompiledKernel

MISSING = object()
# The integers an integer argument (or vector component) of a type takes: every value that is
# a bit pattern of the type's width, read as signed or unsigned (-128..255 for i8 and u8).
# Past the type's own range it converts as its bits say, two's complement, as Taichi's
# launcher does (an i8 given 255 holds -1, a u32 given -1 holds 4294967295); a value that
# needs more bits is refused (Taichi would keep its low bits silently).
INT_RANGE = {t: (-(1 << (t.bits - 1)), (1 << t.bits) - 1) for t in dtypes.ALL if t.is_int}


# ---- watching a plain numpy array's buffer ------------------------------------------------
# A numpy array is mutable in ways an object identity check cannot see: `resize(...,
# refcheck=False)` moves its buffer, `.shape =`/`.dtype =` reinterpret it, `flags.writeable =
# False` locks it. A launch that reuses what it packed earlier re-checks all of it: shape and
# dtype through attributes, the data pointer and the flags word through ctypes cells over the
# array object's C struct (numpy's PyArrayObject: data at +16, flags at +64; checked against
# the public accessors at import, with a slow but safe fallback).
NPY_C_CONTIGUOUS, NPY_WRITEABLE = 0x1, 0x400


class _SlowCell:
    """The fallback of a ctypes cell: reads the value through numpy's public API."""
    __slots__ = ("arr", "read")

    def __init__(self, arr: np.ndarray, read: Any) -> None:
        self.arr, self.read = arr, read

    @property
    def value(self) -> int:
        return int(self.read(self.arr))


def _probe_struct_offsets() -> bool:
    a = np.zeros(3, np.float32)
    try:
        data = ctypes.c_int64.from_address(id(a) + 16).value
        flags = ctypes.c_int32.from_address(id(a) + 64).value
        a.flags.writeable = False
        locked = ctypes.c_int32.from_address(id(a) + 64).value
    except (ValueError, OSError):   # no C struct to read (another interpreter)
        return False
    return bool(data == a.ctypes.data and flags & NPY_WRITEABLE and flags & NPY_C_CONTIGUOUS
                and not locked & NPY_WRITEABLE)


_FAST_CELLS = _probe_struct_offsets()


def _flags_word(a: np.ndarray) -> int:
    return (NPY_C_CONTIGUOUS if a.flags.c_contiguous else 0) | \
        (NPY_WRITEABLE if a.flags.writeable else 0)


def buffer_cells(a: np.ndarray) -> tuple[Any, Any]:
    """Live cells over `a`'s data pointer and flags word (valid while `a` is referenced)."""
    if _FAST_CELLS:
        return ctypes.c_int64.from_address(id(a) + 16), ctypes.c_int32.from_address(id(a) + 64)
    return _SlowCell(a, lambda x: x.ctypes.data), _SlowCell(a, _flags_word)


def watch_state(a: Any) -> list[Any]:
    """What a launch remembers of an array it packed: [array, shape, dtype, data cell, data
    pointer, flags cell]. The reference keeps the array (and its buffer) alive."""
    if isinstance(a, np.ndarray):
        data, flags = buffer_cells(a)
        return [a, a.shape, a.dtype, data, data.value, flags]
    if isinstance(a, Ndarray):
        return [a, a.shape, a.dtype, None, 0, None]
    return [a, None, None, None, 0, None]    # another library's array: repacked every launch


def changed_expr(var: str, last: str, written: bool) -> str:
    """A Python expression, true when `var` is not the array `last` remembers unchanged."""
    mask = NPY_C_CONTIGUOUS | (NPY_WRITEABLE if written else 0)
    return (f"{var} is not {last}[0] or (type({var}) is not Ndarray and ({var}.shape != "
            f"{last}[1] or {var}.dtype is not {last}[2] or {last}[3].value != {last}[4] or "
            f"{last}[5].value & {mask} != {mask}))")


# ---- argument validation ----------------------------------------------------------------

def fail(kernel: "KernelLike", param: n.Param, expected: str, got: str) -> KernelArgError:
    return KernelArgError(f"kernel {kernel.qualname}: argument '{param.name}': expected "
                          f"{expected}, got {got}")


def fail_value(kernel: "KernelLike", p: n.Param, expected: str, got: str, taichi: str
               ) -> KernelArgValueError:
    """An ndarray argument that does not fit its annotation: Taichi's words ("Invalid value
    for argument a - required ...") first, then jitrt's."""
    return KernelArgValueError(f"kernel {kernel.qualname}: Invalid value for argument "
                               f"{p.name} - {taichi}; argument '{p.name}': expected "
                               f"{expected}, got {got}")


def taichi_element(shape: tuple[int, ...], dt: Any) -> str:
    """An element type as Taichi writes it: `i32`, `VectorType[2, i32]`,
    `MatrixType[2,3, i32]`."""
    name = getattr(dt, "name", "?")
    if not shape:
        return name
    kind = "VectorType" if len(shape) == 1 else "MatrixType"
    return f"{kind}[{','.join(map(str, shape))}, {name}]"


def fail_conversion(kernel: "KernelLike", p: n.Param, dt: dtypes.DataType, v: Any,
                    expected: str) -> KernelArgError:
    """A scalar argument of the wrong kind, in Taichi's words too ("Argument (k,) (type=...)
    cannot be converted into required type ..."; k is the argument's position)."""
    k = next((i for i, q in enumerate(kernel.params) if q.name == p.name), 0)
    return KernelArgError(f"kernel {kernel.qualname}: Argument ({k},) (type={type(v)}) cannot "
                          f"be converted into required type {dt.name}; argument '{p.name}': "
                          f"expected {expected}, got {describe(v)}")


def is_large(v: Any) -> bool:
    """Whether an array argument has 2**31 elements or more (`launch_plan.large_shape`)."""
    return large_shape(storage_of(v))


def storage_of(v: Any) -> tuple[int, ...]:
    """The shape of an array argument's memory: a jitrt ndarray's `storage_shape` (its
    element's components included), any other array's `shape`."""
    return tuple(v.storage_shape if isinstance(v, (Ndarray, Field)) else v.shape)


def describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"numpy array dtype={v.dtype} ndim={v.ndim}" + (
            "" if v.flags.c_contiguous else " (not C-contiguous)") + (
            "" if v.flags.writeable else " (read-only)")
    if isinstance(v, (Ndarray, Field)):
        element = f" of {'x'.join(map(str, v.element_shape))} elements" if \
            v.element_shape else ""
        return f"{type(v).__name__} dtype={v.dtype.name} ndim={len(v.shape)}{element}"
    return f"{type(v).__name__} {v!r}"[:120]


def param_text(p: n.Param) -> str:
    """`name : annotation` of a kernel parameter, as Taichi's call errors write it."""
    if p.kind == "scalar" and p.dtype is not None:
        return f"{p.name} : {p.dtype.name}"
    return f"{p.name} : {p.kind}"


def bind_args(kernel: "KernelLike", args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> list[Any]:
    params = kernel.params
    if len(args) > len(params):
        raise KernelArgCountError(
            f"kernel {kernel.qualname}: Too many arguments: it takes {len(params)} "
            f"({', '.join(map(param_text, params))}), got {len(args) + len(kwargs)}")
    values = list(args) + [MISSING] * (len(params) - len(args))
    names = [p.name for p in params]
    for key, v in kwargs.items():
        if key not in names:
            raise KernelArgCountError(f"kernel {kernel.qualname}: Unexpected argument '{key}': "
                                      f"it has no parameter '{key}'")
        if values[names.index(key)] is not MISSING:
            raise KernelArgCountError(f"kernel {kernel.qualname}: Multiple values for argument "
                                      f"'{key}' (given by position and by keyword)")
        values[names.index(key)] = v
    for k, (p, v) in enumerate(zip(params, values)):
        if v is MISSING:
            if p.name not in kernel.defaults:
                raise KernelArgCountError(f"kernel {kernel.qualname}: Parameter "
                                          f"`{param_text(p)}` missing (no argument, no default)")
            values[k] = kernel.defaults[p.name]      # checked as a passed value would be
    return values


def check_scalar(kernel: "KernelLike", p: n.Param, dt: dtypes.DataType, v: Any) -> None:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                              np.floating)):
        if not isinstance(v, (bool, np.bool_)):
            raise fail_conversion(kernel, p, dt, v, f"a {dt.name} scalar")
    if dt.is_int:
        if isinstance(v, (float, np.floating)):
            raise fail_conversion(kernel, p, dt, v, f"an integer ({dt.name})")
        lo, hi = INT_RANGE[dt]
        if not lo <= int(v) <= hi:
            raise fail(kernel, p, f"a {dt.name} in [{lo}, {hi}] (a {dt.bits}-bit pattern: "
                       f"past {dtypes.int_range(dt)[1]} or below 0 it converts as its bits "
                       "say)", repr(int(v)))
    else:
        try:
            float(v)
        except OverflowError:
            raise fail(kernel, p, f"a {dt.name} scalar", "an int too large for a float") from None


def as_host_array(v: Any) -> Any:
    """An argument that is neither a jitrt ndarray nor a numpy array but exposes `__dlpack__`
    (CPU) or `__array_interface__` (a torch CPU tensor, another library's array): the numpy
    view of the same memory, through numpy's own `from_dlpack`/`asarray`; a torch CPU tensor
    that requires a gradient: a jitrt ndarray over it and its `.grad` (`grad_tensor_view`).
    Anything else is returned unchanged (and then rejected by `specialize`)."""
    if isinstance(v, (Ndarray, np.ndarray, Field)):   # a field is not an ndarray argument
        return v
    device = CURRENT_DEVICE[0]
    if requires_grad(v):        # a torch tensor with a gradient: both, as one jitrt ndarray
        from ..dlpack import KDL_CPU       # (its ctypes structures load on first use)
        if device is not None and device.dlpack_device_type != KDL_CPU:
            raise KernelArgError("a torch CPU tensor that requires grad is taken (with its "
                                 ".grad) by CPU programs; on a GPU program pass "
                                 "tensor.detach() and its gradient as separate arguments")
        return grad_tensor_view(v)
    if device is not None and hasattr(v, "__cuda_array_interface__"):
        wrapped = device.wrap_foreign(v)    # a torch/CuPy device array: no copy
        return v if wrapped is None else wrapped
    try:
        if hasattr(v, "__dlpack__"):
            arr = np.from_dlpack(v)
            if arr.flags.writeable or not hasattr(v, "__array_interface__"):
                return arr        # (numpy < 2.1 imports DLPack read-only: see below)
        if hasattr(v, "__array_interface__"):
            return np.asarray(v)
    except (BufferError, TypeError, ValueError, RuntimeError):
        return v
    return v


def array_info(v: Any) -> tuple[dtypes.DataType | None, int, bool] | None:
    if isinstance(v, Ndarray):
        return v.dtype, len(v.storage_shape), v.grad is not None
    if isinstance(v, np.ndarray):
        if v.dtype == np.bool_:       # one byte of 0 or 1: read and written as u8 (jr.u1)
            return dtypes.u8, v.ndim, False
        return dtypes.from_numpy(v.dtype), v.ndim, False
    return None


def specialize(kernel: "KernelLike", values: list[Any], cfg: Any
               ) -> tuple[tuple[n.Param, ...], tuple[Any, ...], dict[str, Any], str]:
    """Concrete params, the handle key, template values and the content-stable kernel name."""
    params: list[n.Param] = []
    key: list[Any] = []
    templates: dict[str, Any] = {}
    name_parts: list[str] = []
    for p, v in zip(kernel.params, values):
        if p.kind == "tensor":       # `jr.Tensor`: an ndarray as such, a field as a template
            p = tensor_param(kernel, p, v)
        if p.kind == "scalar":
            dt = p.dtype or _default_scalar(kernel, p, cfg)
            check_scalar(kernel, p, dt, v)
            params.append(n.Param(p.name, "scalar", dt))
            key.append(None)
            name_parts.append(dt.name)
        elif p.kind == "vector":
            dt = p.dtype or _default_vector(kernel, p, cfg)
            check_vector(kernel, p, dt, v)
            params.append(n.Param(p.name, "vector", dt, 0, element_shape=p.element_shape))
            key.append(None)
            name_parts.append(f"{dt.name}x{'x'.join(map(str, p.element_shape))}")
        elif p.kind == "ndarray":
            q = ndarray_param(kernel, p, v)
            params.append(q)
            key.append((q.dtype, q.ndim, q.needs_grad, q.element_shape, q.large))
            assert q.dtype is not None
            name_parts.append(f"nd({q.dtype.name},{q.ndim}" + (
                f",{'x'.join(map(str, q.element_shape))})" if q.element_shape else ")"))
        else:
            tkey, text = template_key(kernel, p, v)
            params.append(n.Param(p.name, "template"))
            templates[p.name] = v
            key.append(tkey)
            name_parts.append(text)
    mode = ".grad" if kernel.adjoint else ".fwd" if kernel.dual_args is not None else \
        ".validate" if kernel.validate else ""
    name = f"{kernel.qualname}{mode}[{','.join(name_parts)}]"
    return tuple(params), tuple(key), templates, name


def tensor_param(kernel: "KernelLike", p: n.Param, v: Any) -> n.Param:
    """The parameter a `jr.Tensor` annotation is for the argument `v`: an untyped ndarray
    parameter for a jitrt ndarray, a template for a field; anything else is refused."""
    if isinstance(v, Ndarray):
        return dataclasses.replace(p, kind="ndarray")
    if isinstance(v, Field):
        return n.Param(p.name, "template")
    raise fail(kernel, p, "a jitrt field or ndarray (jr.Tensor)", describe(v))


def ndarray_param(kernel: "KernelLike", p: n.Param, v: Any) -> n.Param:
    """The concrete parameter of the ndarray argument `v` (validated against the annotation
    `p`): dtype, ndim (every dimension), whether it has a gradient the kernel may use, and the
    element shape: the annotation's, or the array's (`element_from`)."""
    info = array_info(v)
    fixed = p.element_shape
    others = p.ndim - len(fixed) if p.ndim >= 0 and p.element_dim == 0 else p.ndim
    what = f" of {'x'.join(map(str, fixed))} elements" if fixed else \
        {1: " of vectors (element_dim=1)", 2: " of matrices (element_dim=2)"}.get(
            p.element_dim, "")
    want = f"an ndarray{what}{'' if p.dtype is None else ' of ' + p.dtype.name}" + (
        "" if others < 0 else f" with ndim={others}")
    if info is None:      # not an array at all: Taichi's words, then what was expected
        raise KernelArgError(f"kernel {kernel.qualname}: Invalid type for argument {p.name}, "
                             f"got {str(v)[:80]}; argument '{p.name}': expected {want}, got "
                             f"{describe(v)}")
    got, ndim, has_grad = info
    if got is None or (p.dtype is not None and got != p.dtype):
        own = tuple(getattr(v, "element_shape", ()) or ())
        name = got.name if got is not None else str(getattr(v, "dtype", "?"))
        if not isinstance(v, Ndarray):       # Taichi: a ValueError for another library's
            raise fail_value(kernel, p, want, describe(v), "required array has dtype="
                             f"{getattr(p.dtype, 'name', '?')}, array with dtype={name} is "
                             "provided")
        shown = f"[Tensor ({', '.join(map(str, own))}) {name}]" if own else name
        raise fail(kernel, p, want, f"{describe(v)} (Expect element type "
                   f"{getattr(p.dtype, 'name', '?')} for argument {p.name}, but get {shown})")
    if isinstance(v, np.ndarray) and not v.flags.c_contiguous:   # Taichi: a ValueError
        raise KernelArgValueError(str(fail(
            kernel, p, want + " (C-contiguous, or Fortran-ordered such as a.T: Non contiguous "
            "numpy arrays are not supported, please call np.ascontiguousarray(arr) first)",
            describe(v))))
    k = p.element_dim if p.element_dim > 0 else len(fixed)
    if others >= 0 and not isinstance(v, Ndarray) and ndim != others + k:   # Taichi's order
        raise fail_value(kernel, p, want + (f" (trailing dimensions {fixed})" if fixed else ""),
                         describe(v) + f" shape={storage_of(v)}",
                         f"required array has ndim={others}" + (
                             f" element_dim={k}" if k else "") +
                         f", array with {ndim} dimensions is provided")
    element = element_from(kernel, p, v, ndim, want)
    if others >= 0 and ndim - len(element) != others:
        outer = storage_of(v)[:ndim - len(element)]
        raise fail_value(kernel, p, want, describe(v) + f" shape={storage_of(v)}" + (
            f" ({'x'.join(map(str, element))} elements)" if element else ""),
            f"required ndim={others}, but {len(outer)}d ndarray with shape {outer} is "
            "provided")
    if p.grad_annotation and not has_grad:
        raise fail(kernel, p, want + " with needs_grad=True (as annotated)", describe(v))
    if p.grad_annotation is False:      # the adjoint accumulates nothing into its gradient
        has_grad = False
    return n.Param(p.name, "ndarray", got, ndim, has_grad, element, p.element_dim,
                   p.grad_annotation, p.clamp, large=is_large(v))


def element_from(kernel: "KernelLike", p: n.Param, v: Any, ndim: int, want: str
                 ) -> tuple[int, ...]:
    """The element shape of ndarray argument `v` for annotation `p`: the annotation's (the
    array's trailing dimensions must match), the element of a jitrt ndarray of vectors or
    matrices (an untyped annotation; a numpy array has scalars), or the last `element_dim`
    dimensions of the array."""
    own = tuple(getattr(v, "element_shape", ())) if isinstance(v, Ndarray) else ()
    if p.element_dim < 0:
        return own
    k = p.element_dim or len(p.element_shape)
    shape = storage_of(v)
    required = taichi_element(p.element_shape, p.dtype) if p.element_dim == 0 else \
        {1: "a vector", 2: "a matrix"}.get(p.element_dim, "?")
    if p.element_dim > 0 and own and len(own) != k:
        raise fail_value(kernel, p, want, f"a jitrt ndarray of {'x'.join(map(str, own))} "
                         f"elements", f"required element type: {required}, but "
                         f"{taichi_element(own, v.dtype)} is provided")
    if ndim < k or (p.element_dim == 0 and shape[ndim - k:] != p.element_shape):
        taichi = f"required element type: {required}, but {taichi_element(own, v.dtype)} " \
            "is provided" if isinstance(v, Ndarray) else \
            f"required element_shape={p.element_shape}, array with element shape of " \
            f"{shape[max(ndim - k, 0):]} is provided"
        raise fail_value(kernel, p, want + (f" (trailing dimensions {p.element_shape})"
                                            if p.element_dim == 0 else ""),
                         describe(v) + f" shape={shape}", taichi)
    return shape[ndim - k:]


def check_vector(kernel: "KernelLike", p: n.Param, dt: dtypes.DataType, v: Any) -> None:
    """A KernelArgError unless the vector/matrix argument `v` is a list, tuple (nested for a
    matrix), numpy array or `jr.Vector` of the parameter's shape, of numbers: integers in
    range for an integer vector."""
    shape = p.element_shape
    kind = "vector" if len(shape) == 1 else "matrix"
    want = (f"a {kind} of {'x'.join(map(str, shape))} {dt.name} components (a list, tuple, "
            f"numpy array or jr.{kind.capitalize()})")
    try:
        arr = np.asarray(v)
    except (ValueError, TypeError):    # ragged nesting
        raise fail(kernel, p, want, describe(v)) from None
    if arr.dtype.kind not in "biuf":
        raise fail(kernel, p, want, describe(v))
    if arr.shape != shape:
        raise fail(kernel, p, want, f"{describe(v)} (shape {arr.shape})")
    if dt.is_int:
        if arr.dtype.kind == "f":
            raise fail(kernel, p, want.replace(" components", " (integer) components"),
                       describe(v))
        lo, hi = INT_RANGE[dt]
        if int(arr.min()) < lo or int(arr.max()) > hi:
            raise fail(kernel, p, f"components in [{lo}, {hi}] ({dt.name})", describe(v))


def launch_value(p: n.Param, v: Any) -> Any:
    """An argument the slow path has validated, as the generated launcher takes it: a vector
    as nested tuples of Python numbers, a numpy scalar as a Python number. (The launcher's
    ctypes stores refuse a numpy bool for an int, and it cannot unpack every array-like: a
    value the slow path accepted but the launcher did not would go round between them.)"""
    if p.kind == "vector":
        items = np.asarray(v).tolist()
        return tuple(items) if len(p.element_shape) == 1 else tuple(map(tuple, items))
    if p.kind == "scalar" and isinstance(v, np.generic):
        return v.item()
    return v


def pack_vector(buf: Any, dbuf: Any, slot: int, dt: dtypes.DataType, v: Any) -> None:
    """Write a validated vector/matrix argument's components to its slots (row-major)."""
    for k, x in enumerate(np.asarray(v).reshape(-1).tolist()):
        if dt.is_float:
            dbuf[slot + k] = float(x)
        else:
            buf[slot + k] = int(x)


def _default_scalar(kernel: "KernelLike", p: n.Param, cfg: Any) -> dtypes.DataType:
    ann = kernel.fn.__annotations__.get(p.name)
    dt: dtypes.DataType = cfg.default_ip if ann is int or ann == "int" else cfg.default_fp
    return dt


def _default_vector(kernel: "KernelLike", p: n.Param, cfg: Any) -> dtypes.DataType:
    """The component type of a vector parameter whose type names none (`jr.math.vec3`,
    `jr.math.ivec2`): the program's default for that kind."""
    from ..frontend.func import resolve_annotation
    ann = resolve_annotation(kernel.fn, kernel.fn.__annotations__.get(p.name))
    dt: dtypes.DataType = ann.scalar(cfg.default_fp, cfg.default_ip) \
        if hasattr(ann, "scalar") else cfg.default_fp
    return dt


def template_key(kernel: "KernelLike", p: n.Param, v: Any) -> tuple[Any, str]:
    if isinstance(v, Field):
        return ("field", id(v)), f"field({v.dtype.name},{v.storage_shape})"
    if isinstance(v, (bool, int, float, str, dtypes.DataType)) or v is None:
        return (type(v), v), repr(v)
    if isinstance(v, tuple) and all(isinstance(x, (bool, int, float)) for x in v):
        return (tuple, v), repr(v)
    if isinstance(v, StructField):   # its member fields are compiled in, as a field is
        return ("struct field", id(v)), f"structfield({','.join(v.keys())})"
    if isinstance(v, HostMatrix):   # a Python-scope vector/matrix: compiled in by value
        import hashlib
        digest = hashlib.sha1(v.tobytes()).hexdigest()[:12]
        return ("matrix", v.dtype.str, v.shape, v.tobytes()), \
            f"{type(v).__name__}{list(v.shape)}#{digest}"
    if getattr(type(v), "_jitrt_data_oriented", False) or dataclasses.is_dataclass(v):
        # by identity: the handle holds v weakly and retires when v dies (weak_templates.py)
        return ("object", id(v)), type(v).__qualname__
    cls: Any = type(v)
    if cls.__hash__ not in (None, object.__hash__) and cls.__eq__ is not object.__eq__:
        # an immutable configuration object (Quadrants keys templates by equality); its name
        # part is a digest of its repr, or of its members where its repr is object's (an
        # address: the offline cache's key would change in every process)
        import hashlib
        digest = hashlib.sha1(stable_repr(v).encode()).hexdigest()[:12]
        return ("value", type(v), v), f"{type(v).__qualname__}#{digest}"
    if isinstance(v, Ndarray):       # Taichi's words first: the annotation is what to change
        raise KernelArgError(f"kernel {kernel.qualname}: argument '{p.name}': Ndarray shouldn't "
                             "be passed in via `jr.template()`; annotate the parameter with "
                             f"jr.types.ndarray(...) instead (got {describe(v)})")
    if kernel.fn.__qualname__.startswith(type(v).__qualname__ + "."):   # `self`, undecorated
        raise KernelArgSyntaxError(f"kernel {kernel.qualname}: argument '{p.name}': Please "
                                   f"decorate class {type(v).__name__} with @jr.data_oriented "
                                   "(an object whose kernel methods are launched)")
    raise fail(kernel, p, "a field, a Python constant, a dataclass, a hashable object or a "
               "@jr.data_oriented object (jr.template())", describe(v))


def stable_repr(v: Any, depth: int = 0) -> str:
    """repr(v), or where that is object's own (it shows the address) v's class and the
    stable reprs of its members (four levels deep, then the class alone)."""
    if getattr(type(v), "__repr__", None) is not object.__repr__:
        return repr(v)
    members = getattr(v, "__dict__", None)
    if depth > 3 or not isinstance(members, dict):
        return type(v).__qualname__
    return type(v).__qualname__ + "(" + ", ".join(
        f"{k}={stable_repr(m, depth + 1)}" for k, m in sorted(members.items())) + ")"


def written_params(compiled: "CompiledKernel") -> frozenset[int]:
    """Ndarray parameters whose data (not gradient) the kernel may write."""
    return frozenset(arg for arg, grad in compiled.lowered.writes.arrays if not grad)


def pack_array(buf: Any, slot: int, v: Any, dt: dtypes.DataType, ndim: int,
               need_grad: bool, written: bool = True, small: bool = False) -> bool:
    """Write an ndarray argument's slots; False if `v` does not fit the specialization (the
    caller then takes the slow path, which names the problem or specializes again).
    `small`: the specialization is for arrays of fewer than 2**31 elements. Every refusal
    comes before a slot is written (the caller's record of the last array packed and the
    native launcher's must stay true)."""
    if type(v) is Ndarray:
        shape = v.storage_shape
        if v.dtype is not dt or len(shape) != ndim or (need_grad and v.grad is None) or (
                small and large_shape(shape)):
            return False
        buf[slot] = v.ptr
        buf[slot + 1] = v.grad.ptr if v.grad is not None else 0
    elif isinstance(v, np.ndarray) and not need_grad:   # numpy subclasses (memmap) too
        if (v.dtype != dt.np and not (dt is dtypes.u8 and v.dtype == np.bool_)) or \
                v.ndim != ndim or not v.flags.c_contiguous or (
                written and not v.flags.writeable) or (small and large_shape(v.shape)):
            return False
        buf[slot] = v.ctypes.data
        buf[slot + 1] = 0
        shape = v.shape
    else:
        return False
    for k in range(ndim):
        buf[slot + 2 + k] = shape[k]
    return True
