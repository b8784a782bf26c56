# mypy: disable-error-code="valid-type, operator"
"""`jr.algorithms.parallel_sort(keys, values=None)`: Taichi's in-place sort of a 1-D field.

Stage: API (host code over one kernel). Sorts the scalar keys of a 1-D field or ndarray in
ascending order in place and, when `values` is given (a 1-D field or ndarray of the same
length, any element type), applies the same permutation to it. The method is Batcher's
odd-even merge sort, as in Taichi: log2(N) * (log2(N) + 1) / 2 launches of one
compare-exchange stage each, every stage a parallel loop over the elements (each pair is
swapped by its lower element), so the data stay
on the device. Not stable (equal keys may swap their values), as in Taichi. Keys and values are both
fields or both ndarrays; the stage kernel is compiled once per pair of fields (template
parameters) or of ndarray types. Caches nothing else.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..data import Field, Ndarray
from ..frontend.builtins import static
from ..kernel import kernel
from ..frontend.func import Func
from ..types import ndarray, template


def _exchange(keys: template(), values: template(), has_values: template(),  # type: ignore
              base, n, p, k, a):  # type: ignore[no-untyped-def]
    """Compare-exchange (a, a + k) when a is the lower element of a pair of this stage: in
    the first half of a 2k run starting at k % p, and in the same block of 2p elements."""
    first = k % p
    c = a + k
    if a >= first and (a - first) % (2 * k) < k and a // (p * 2) == c // (p * 2):
        ka, kc = keys[base + a], keys[base + c]
        if kc < ka:
            keys[base + a], keys[base + c] = kc, ka
            if static(has_values):
                va, vc = values[base + a], values[base + c]
                values[base + a], values[base + c] = vc, va


def _field_stage(keys: template(), values: template(), has_values: template(),  # type: ignore
                 base: dtypes.i32, n: dtypes.i32, p: dtypes.i32, k: dtypes.i32) -> None:
    """One merge stage over fields (indices from `base`, the keys' offset)."""
    for a in range(n - k):
        exchange(keys, values, has_values, base, n, p, k, a)


def _ndarray_stage(keys: ndarray(), values: ndarray(), has_values: template(),  # type: ignore
                   base: dtypes.i32, n: dtypes.i32, p: dtypes.i32, k: dtypes.i32) -> None:
    """One merge stage over ndarrays."""
    for a in range(n - k):
        exchange(keys, values, has_values, base, n, p, k, a)


exchange = Func(_exchange)
_stages = {Field: kernel(_field_stage), Ndarray: kernel(_ndarray_stage)}


def _check(keys: Any, values: Any) -> int:
    if not isinstance(keys, (Field, Ndarray)) or len(keys.shape) != 1 or keys.element_shape:
        raise TypeError(f"parallel_sort: keys must be a 1-D field or ndarray of scalars, got "
                        f"{keys!r}")
    if values is not None:
        kind = Field if isinstance(keys, Field) else Ndarray
        if not isinstance(values, kind) or values.shape != keys.shape:
            raise TypeError(f"parallel_sort: values must be a 1-D {kind.__name__.lower()} "
                            f"(as the keys) of shape {keys.shape}, got {values!r}")
        if tuple(values.offset) != tuple(keys.offset):
            raise ValueError(f"parallel_sort: keys start at index {keys.offset[0]}, values at "
                             f"{values.offset[0]}: give both the same offset")
    return int(keys.offset[0]) if isinstance(keys, Field) else 0


def parallel_sort(keys: Any, values: Any = None) -> None:
    """Sort `keys` ascending in place; permute `values` (if given) alike."""
    base = _check(keys, values)
    stage = _stages[Field if isinstance(keys, Field) else Ndarray]
    n = keys.shape[0]
    p = 1
    while p < n:
        k = p
        while k >= 1:
            stage(keys, keys if values is None else values, values is not None, base, n, p, k)
            k //= 2
        p *= 2
