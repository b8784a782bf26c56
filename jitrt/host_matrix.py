"""Python-scope vectors and matrices: what `jr.Vector([1, 2])` and `jr.Matrix([[...]])` are
outside kernels (Taichi's `ti.Vector`/`ti.Matrix` objects at Python scope).

Stage: API (values). A `HostMatrix` is a numpy array (a subclass of `np.ndarray`) of one or
two dimensions with Taichi's methods on top: `n`/`m` (a vector's `m` is 1), `to_numpy()`,
`to_list()`, `norm()`, `norm_sqr()`, `norm_inv()`, `normalized()`, `dot()`, `cross()`,
`outer_product()`, `transpose()`, `trace()`, `determinant()`, `inverse()`, `cast()`,
`get_shape()`, and swizzles (`v.x`, `v.zyx`, `v.rgb += 1`; letters of one of xyzw, rgba,
stpq). Being a numpy array, it goes wherever jitrt takes one (a kernel's vector
parameter, `x[i] = v`, `from_numpy`, a global captured by a kernel as a constant), and
arithmetic with numbers, numpy arrays and other vectors is numpy's element-wise arithmetic
(`@` is the matrix product). As in Taichi (`__array_priority__`), an expression with a numpy
array on either side gives a vector or matrix, never a bare numpy array; `to_numpy()` gives
the bare array. Comparing one (`v == [1, 2]`, `v < w`) gives an `ElementComparison`: a numpy
bool array whose truth value is defined (`==`, `<`, ... hold when they hold for every
component, `!=` when any differs), as a field element's comparison does.

Element types follow Taichi: without `dt`, numpy's inference (int64 for Python ints, float64
for floats); with `dt=jr.f32` (or Taichi's `dt=ti.f32`, or jitrt's `dtype=`), that type.
Inputs and outputs: values only; no caches. The classes `jr.Vector`/`jr.Matrix` themselves
(linalg.py) subclass `HostMatrix`, adding the storage constructors (`field`, `ndarray`) and
the in-kernel constructors.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import dtypes
from .errors import KernelRuntimeError, KernelSyntaxError, PlacelessCompileError


def _np_type(dt: Any) -> Any:
    return None if dt is None else dtypes.coerce(dt).np


class ElementComparison(np.ndarray):
    """The element-wise result of comparing a vector/matrix element at Python scope
    (`x[i] == [1, 2]`, `x[i] != y[i]`, `x[i] < 3`): a numpy bool array whose truth value is
    defined, so `assert x[i] == [a, b]` and `if x[i] != v:` test every component. `==`, `<`,
    `<=`, `>`, `>=` are true when they hold for every component; `!=` when any component
    differs (so `a != b` is `not (a == b)`, as for tuples). Numpy operations on it (`~c`,
    `c & d`, `c.all()`, `np.sum(c)`) give plain numpy results, with numpy's rules."""

    _rule: str

    @classmethod
    def of(cls, result: Any, rule: str) -> Any:
        """`result` (a comparison's numpy output) as an ElementComparison; a scalar as is."""
        if not isinstance(result, np.ndarray) or result.ndim == 0:
            return result
        out = result.view(cls)
        out._rule = rule
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self._rule = getattr(obj, "_rule", "all")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        def plain(x: Any) -> Any:
            return x.view(np.ndarray) if isinstance(x, ElementComparison) else x
        if "out" in kwargs:
            kwargs["out"] = tuple(plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*(plain(x) for x in inputs), **kwargs)

    def to_numpy(self) -> np.ndarray:
        """The components' results as a plain numpy bool array (what Taichi's comparison
        Matrix gives through its `to_numpy()`, read as bools)."""
        return np.array(self.view(np.ndarray), dtype=bool)

    def __bool__(self) -> bool:
        values = self.view(np.ndarray)
        return bool(values.all() if self._rule == "all" else values.any())

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


class HostMatrix(np.ndarray):
    """A 1-D (vector) or 2-D (matrix) numpy array with Taichi's Matrix methods."""

    __array_priority__ = 1000
    __hash__ = object.__hash__  # type: ignore[assignment]  # by identity, as Taichi

    def __new__(cls, arr: Any, dt: Any = None, *, dtype: Any = None) -> Any:
        if dt is not None and dtype is not None:
            raise TypeError("give the element type once: dt= (Taichi's name) or dtype=")
        if isinstance(arr, (int, float, np.generic)) or arr is None:
            raise TypeError("a Vector/Matrix is made from a list, tuple or numpy array, got "
                            f"{type(arr).__name__}")
        values = np.array(arr, dtype=_np_type(dt if dt is not None else dtype))
        if values.ndim not in (1, 2):
            raise ValueError("a Vector has one dimension and a Matrix two, got an array of "
                             f"shape {values.shape}")
        if values.dtype.kind not in "biuf":
            raise TypeError(f"a Vector/Matrix holds numbers, got dtype {values.dtype}")
        return values.view(_class_for(values.ndim, cls))

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        if arr.ndim == 0 or return_scalar:
            return arr[()]
        if arr.ndim > 2:
            return arr.view(np.ndarray)
        return arr.view(_class_for(arr.ndim, type(self)))

    # comparisons: a bool array whose truth value is defined (`data_element`) -------------
    def _compare(self, other: Any, op: Any, rule: str) -> Any:
        if isinstance(other, HostMatrix):
            other = other.view(np.ndarray)
        return ElementComparison.of(op(self.view(np.ndarray), other), rule)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, operator.eq, "all")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, operator.ne, "any")

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, operator.lt, "all")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, operator.le, "all")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, operator.gt, "all")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, operator.ge, "all")

    # Taichi's attributes ------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Rows (a vector's component count)."""
        return int(self.shape[0])

    @property
    def m(self) -> int:
        """Columns (1 for a vector)."""
        return 1 if self.ndim == 1 else int(self.shape[1])

    def get_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.shape)

    @property
    def entries(self) -> np.ndarray:
        """Taichi's `v.entries`: the values as a plain numpy array (a view: writes go through),
        of the element type (`jr.types.vector(3, jr.f32)([0, 1, 2]).entries.dtype` is
        float32)."""
        return self.view(np.ndarray)

    def to_numpy(self) -> np.ndarray:
        """A plain numpy copy (shape (n,) for a vector, (n, m) for a matrix)."""
        return np.array(self.view(np.ndarray))

    def to_list(self) -> list:
        return self.view(np.ndarray).tolist()

    def cast(self, dt: Any) -> Any:
        return self.view(np.ndarray).astype(dtypes.coerce(dt).np).view(type(self))

    # vector algebra ------------------------------------------------------------------------
    def norm_sqr(self) -> Any:
        return (self.view(np.ndarray) ** 2).sum()[()]

    def norm(self, eps: float = 0) -> Any:
        return np.sqrt(self.norm_sqr() + eps)

    def norm_inv(self, eps: float = 0) -> Any:
        return 1.0 / self.norm(eps)

    def normalized(self, eps: float = 0) -> Any:
        return self * self.norm_inv(eps)

    def dot(self, other: Any, out: Any = None) -> Any:  # type: ignore[override]
        a, b = self.view(np.ndarray), np.asarray(other)
        if a.ndim != 1 or b.shape != a.shape:
            raise ValueError(f"dot needs two vectors of one size, got shapes {a.shape} and "
                             f"{b.shape}")
        return np.dot(a, b)[()]

    def cross(self, other: Any) -> Any:
        """3-D: a vector; 2-D: the scalar z-component, as in Taichi."""
        a, b = self.view(np.ndarray), np.asarray(other)
        if a.shape not in ((2,), (3,)) or b.shape != a.shape:
            raise ValueError(f"cross needs two 2-D or two 3-D vectors, got shapes {a.shape} "
                             f"and {b.shape}")
        if a.shape == (2,):
            return (a[0] * b[1] - a[1] * b[0])[()]
        return np.cross(a, b).view(_class_for(1, HostMatrix))

    def outer_product(self, other: Any) -> Any:
        return np.outer(self.view(np.ndarray), np.asarray(other)).view(_class_for(2, HostMatrix))

    # matrix algebra ------------------------------------------------------------------------
    def transpose(self, *axes: Any) -> Any:
        if self.ndim == 1:      # Taichi: a vector's transpose is a 1 x n matrix
            return self.view(np.ndarray).reshape(1, -1).view(_class_for(2, HostMatrix))
        return self.view(np.ndarray).T.view(_class_for(2, HostMatrix))

    def _square(self, what: str) -> np.ndarray:
        a = self.view(np.ndarray)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise MatrixShapeError(f"{what}: expected a square matrix, got shape {a.shape}")
        return a

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return np.trace(self._square("trace"))[()]

    def determinant(self) -> Any:
        return np.linalg.det(self._square("determinant"))[()]

    def inverse(self) -> Any:
        return np.linalg.inv(self._square("inverse")).view(_class_for(2, HostMatrix))

    def __iter__(self) -> Any:
        """A vector's components; a matrix's rows as lists (Taichi: `list(m) == [[..], ..]`)."""
        if self.ndim == 1:
            return iter(self.view(np.ndarray))
        return iter(self.view(np.ndarray).tolist())

    # swizzles, as Taichi's Python-scope vectors have them: v.x, v.xy, v.rgb = ... ----------
    def __getattr__(self, name: str) -> Any:
        picks = _swizzle(name, self)
        if picks is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        flat = self.view(np.ndarray)
        if len(picks) == 1:
            return flat[picks[0]][()]
        return flat[list(picks)].view(_class_for(1, type(self)))

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            picks = _swizzle(name, self)
        except AttributeError as exc:    # a letter past the vector: Taichi's syntax error
            raise SwizzleSyntaxError(str(exc)) from None
        if picks is None:
            super().__setattr__(name, value)
            return
        values = np.asarray(value)
        if values.ndim > 1 or values.size not in (1, len(picks)):
            raise SwizzleValueError(f"value len does not match the swizzle pattern={name}: "
                                    f"{len(picks)} component(s), got {values.size} value(s)")
        for k, v in zip(picks, np.broadcast_to(values.ravel(), (len(picks),))):
            self.view(np.ndarray)[k] = v

    # printing as Taichi does: the numbers only -------------------------------------------
    def __repr__(self) -> str:
        return str(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


_SWIZZLE_SETS = ("xyzw", "rgba", "stpq")


def _swizzle(name: str, v: "HostMatrix") -> tuple[int, ...] | None:
    """The component indices a swizzle name picks from vector `v` (`"zyx"` -> (2, 1, 0)),
    or None when `name` is not a swizzle of it (letters of one set, each within `v.n`)."""
    if v.ndim != 1 or not 1 <= len(name) <= 4:
        return None
    for letters in _SWIZZLE_SETS:
        if all(c in letters for c in name):
            picks = tuple(letters.index(c) for c in name)
            if max(picks) >= v.shape[0]:
                n = v.shape[0]
                raise AttributeError(f"vec{n} only has attributes={tuple(letters[:n])!r}, "
                                   f"got={tuple(name)!r}: swizzle {name!r} reaches component "
                                   f"{max(picks)} of a vector of {n}")
            return picks
    return None


class MatrixShapeError(PlacelessCompileError, ValueError):
    """A Python-scope matrix method given a matrix of the wrong shape (`trace()` of a 3x2
    matrix): a `ValueError`, and the `TaichiCompilationError` Taichi raises there."""


class SwizzleSyntaxError(PlacelessCompileError, KernelSyntaxError):  # type: ignore[misc]
    """An assignment to a swizzle that reaches past the vector (`v.z = 3` of a 2-vector):
    Taichi's `TaichiSyntaxError`. Reading one is an `AttributeError` (so `hasattr` works)."""


class SwizzleValueError(KernelRuntimeError, ValueError):
    """A swizzle assignment whose value has another number of components: a `ValueError`
    and Taichi's `TaichiRuntimeError`."""


# the user-facing classes, jr.Vector and jr.Matrix (linalg.py registers them: this module
# imports nothing of jitrt's but dtypes, so that data.py's elements can use it)
_CLASSES: dict[str, type] = {}


def register(vector: type, matrix: type) -> None:
    _CLASSES["vector"], _CLASSES["matrix"] = vector, matrix


def as_host(values: np.ndarray) -> Any:
    """A numpy array of one or two dimensions as a `jr.Vector`/`jr.Matrix` (a view); any
    other array as it is. What a kernel's vector/matrix result is, as Taichi's `Matrix`."""
    if values.ndim not in (1, 2):
        return values
    return values.view(_class_for(values.ndim, HostMatrix))


def _class_for(ndim: int, requested: type) -> type:
    """jr.Vector for one dimension, jr.Matrix for two (a user's subclass where it fits)."""
    vector, matrix = _CLASSES["vector"], _CLASSES["matrix"]
    if ndim == 1:
        return requested if issubclass(requested, vector) else vector
    return requested if issubclass(requested, matrix) and not issubclass(requested, vector) \
        else matrix
