"""Shapes, offsets and host indices of fields and ndarrays.

Stage: data (beside `data.py`). `shape_of` and `offset_of` check what `jr.field(...,
shape=, offset=)` is given; `host_index` turns a Python-scope index (`x[i, j]`, user indices:
an offset field's run from its offset) into the storage index of the numpy buffer. Caches
nothing.
"""
from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np

from .errors import (IndexCountError, IndexTypeError, InvalidShapeError, KernelBoundsError,
                     KernelSyntaxError, source_line)

MAX_ELEMENTS = 1 << 40   # far past any memory: a shape beyond is a typo, not a request
MAX_EXTENT = (1 << 31) - 1   # an axis's indices are i32 in kernels
AXES = "ijklmnop"        # Taichi's axis letters (`order="ji"`)


class FieldDeclarationError(KernelSyntaxError, ValueError):  # type: ignore[misc]
    """A shape, offset or order of a field declaration that do not fit together: a
    `ValueError`, and Taichi's `TaichiSyntaxError` (a `TaichiCompilationError`). It points
    at the user's line that declared the field (the first caller outside jitrt)."""

    def __init__(self, message: str) -> None:
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
            frame = frame.f_back
        loc = SimpleNamespace(file=frame.f_code.co_filename, line=frame.f_lineno)
        super().__init__(message, loc.file, loc.line, 0, source_line(loc).strip())


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def shape_of(shape: Any, kind: str = "field") -> tuple[int, ...]:
    """A shape as a tuple of Python ints from 0 to 2**31 - 1 (what a kernel's i32 index
    reaches); anything else is a `jr.InvalidShapeError` naming it, in Taichi's words ("... is
    not a valid shape for ndarray")."""
    items = (shape,) if isinstance(shape, (int, np.integer)) else shape
    bad = f"{shape!r} is not a valid shape for {kind}"
    try:
        items = tuple(items)
    except TypeError:
        raise InvalidShapeError(f"{bad}: a shape is an int or a tuple of ints") from None
    for s in items:
        if not _is_int(s):
            raise InvalidShapeError(f"{bad}: extent {s!r} is not an integer")
        if s < 0:
            raise InvalidShapeError(f"{bad}: it has a negative extent")
        if s > MAX_EXTENT:
            raise InvalidShapeError(f"{bad}: extent {s} is larger than 2**31 - 1, the largest "
                                    "a kernel's (i32) index reaches")
    out = tuple(int(s) for s in items)
    if int(np.prod(out, dtype=object)) > MAX_ELEMENTS:
        raise InvalidShapeError(f"{bad}: it has more than 2**40 elements")
    return out


def offset_of(offset: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A field's offset (`offset=-8`, `offset=(-4, 0)`, None for none) as one int per axis of
    `shape`, in Taichi's words when its length differs."""
    if offset is None:
        return (0,) * len(shape)
    items = (offset,) if _is_int(offset) else offset
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"offset must be an int or a tuple of ints, got {offset!r}") from None
    if len(items) != len(shape):
        raise FieldDeclarationError(
            f"The dimensionality of shape and offset must be the same: shape "
                         f"{shape} has {len(shape)} dimension(s), offset {offset!r} "
                         f"{len(items)}")
    for o in items:
        if not _is_int(o):
            raise TypeError(f"offset {offset!r}: {o!r} is not an integer")
    return tuple(int(o) for o in items)


def order_of(order: Any, shape: Any) -> tuple[int, ...] | None:
    """Taichi's `order="ji"` (the axes from outermost to innermost in memory) as a
    permutation of the axes, None for none; checked as Taichi checks it."""
    if order is None:
        return None
    if shape is None:
        raise FieldDeclarationError(f"shape cannot be None when order is set (order={order!r})")
    ndim = len(shape_of(shape))
    if not isinstance(order, str) or len(order) != ndim:
        raise FieldDeclarationError(f"The dimensionality of shape and order must be the same: "
                                    f"shape {shape!r} has {ndim} axes, order is {order!r}")
    if len(set(order)) != ndim:
        raise FieldDeclarationError(f"The axes in order must be different: {order!r}")
    bad = [c for c in order if c not in AXES[:ndim]]
    if bad:
        raise FieldDeclarationError(f"Invalid axis {bad[0]!r} in order {order!r}: a field of "
                                    f"{ndim} axes takes {AXES[:ndim]!r}")
    return tuple(AXES.index(c) for c in order)


_NEGATIVE = (" (with debug=True a field's Python-scope index does not count from the end, as "
             "in Taichi's debug build; without it x[-1] is the last element)")


# whether the current program was made with `debug=True` (set by the runtime when a program
# becomes current: data sits below it)
DEBUG_BUILD = [False]


def host_index(key: Any, shape: tuple[int, ...], name: str,
               element_shape: tuple[int, ...] = (),
               offset: tuple[int, ...] = (), ndarray: bool = False) -> tuple[int, ...]:
    """The storage index of a host-side index: `x[i]`, `x[i, j]`, `x[None]` for a 0-d field.
    With vector/matrix elements, either one index per outer dimension (the whole element) or
    one per storage dimension (one component). Without an offset an index may count from the
    end, as in numpy (a field's only without `debug=True`, where Taichi's debug build reports
    it out of bounds); a field with an offset takes its own indices, from the offset to the
    offset plus the extent (exclusive), as in Taichi. An index out of bounds is a
    `jr.KernelBoundsError`, an `IndexError` and the `AssertionError` Taichi's debug build
    raises for it, as in kernels. Another number of indices is an `IndexCountError`, an index
    that is not an integer (a slice) an `IndexTypeError`, with Taichi's words for a field
    (`ndarray` False) or an ndarray."""
    if key is None:
        key = ()
    index = key if isinstance(key, tuple) else (key,)
    outer = len(shape) - len(element_shape)
    if len(index) != len(shape) and not (element_shape and len(index) == outer):
        if element_shape:
            raise IndexError(
                f"{name} is a field of {element_shape} elements with shape {shape[:outer]} "
                f"(storage {shape}): give {outer} index(es) for an element or {len(shape)} "
                f"for one component, not {len(index)}: {key!r}"
                + (" (use x[None] for the element of a 0-d field)" if not outer else ""))
        hint = " (use x[None] for a 0-d field or ndarray)" if not shape else ""
        taichi = f"{len(shape)}d ndarray indexed with {len(index)}d indices" if \
            ndarray else "Slicing is not supported on ti.field"
        raise IndexCountError(f"{name} has {len(shape)} dimension(s) (shape {shape}) but "
                              f"{len(index)} index(es) were given: {key!r}{hint} ({taichi})")
    shifted = any(offset)
    out = []
    for k, (i, n) in enumerate(zip(index, shape)):
        if not _is_int(i):
            raise IndexTypeError(f"{name}[{key!r}]: index {i!r} on axis {k} is not an integer "
                                 f"(Detected illegal element of type: {type(i).__name__}. "
                                 "Please be aware that slicing a ti.field is not supported so "
                                 "far.)")
        lo = offset[k] if shifted and k < outer else 0
        if shifted and k < outer:
            if not lo <= i < lo + n:
                raise KernelBoundsError(f"{name}[{key!r}]: index {i} is out of bounds for axis "
                                        f"{k} with indices {lo}..{lo + n - 1} (offset {lo})")
        elif not -n <= i < n or (i < 0 and k < outer and not ndarray
                                       and DEBUG_BUILD[0]):
            raise KernelBoundsError(f"{name}[{key!r}]: index {i} is out of bounds for axis {k} "
                                    f"with extent {n}" + (_NEGATIVE if -n <= i < 0 else ""))
        out.append(int(i) - lo)
    return tuple(out)
