# mypy: disable-error-code="valid-type"
"""`qd.algorithms.sort` and `sort_scratch_slots`: Quadrants 1.3.3's radix sort contract
(Taichi's `parallel_sort` lives in merge_sort.py and is re-exported here).

Stage: API (a `@jr.func` library). `sort(keys, tmp_keys, values, tmp_values, scratch, n,
key_dtype, has_values, end_bit, log256_max_n)` is called at the top level of the caller's
kernel; it sorts the first `n[()]` keys (a 0-d i32 ndarray) in ascending order, stably, moving
`values` with them when `has_values`, with 8-bit least-significant-digit passes over the low
`end_bit` bits (a multiple of 16, so that the result lands back in `keys`/`values`), using
the caller's u32 `scratch` of at least `sort_scratch_slots(n, log256_max_n)` slots. Signed keys
are ordered as numbers (their sign bit flipped for the digits). Quadrants runs each pass as
device-wide histogram, scan and scatter launches; jitrt runs the passes on one thread of one
task (the same result; the GPU form is future work). Float keys (f32/f64) need a bit cast of
the key, which jitrt's kernels do not have: a compile error says so. `sort_scratch_slots` is
Quadrants' formula, so buffers sized for Quadrants fit. Caches nothing.
"""
from __future__ import annotations

from typing import Any

from .. import dtypes
from ..frontend.builtins import cast, static, static_assert
from ..frontend.func import Func
from ..types import template
from .merge_sort import parallel_sort  # noqa: F401  (Taichi's ti.algorithms.parallel_sort)

BLOCK_DIM = 256          # Quadrants' block of the device sort: what the scratch formula uses
RADIX_DIGITS = 256
_MAX_LOG256 = 4          # 256**4 = 2**32 keys: past any i32-indexed tensor
_INTS = {dtypes.u32: 32, dtypes.i32: 32, dtypes.u64: 64, dtypes.i64: 64}


def _check_depth(log256_max_n: Any) -> int:
    if isinstance(log256_max_n, bool) or not isinstance(log256_max_n, int) or \
            not 1 <= log256_max_n <= _MAX_LOG256:
        raise ValueError(f"log256_max_n must be an int from 1 to {_MAX_LOG256}, got "
                         f"{log256_max_n!r}")
    return log256_max_n


def sort_scratch_slots(n: int, log256_max_n: int | None = None) -> int:
    """The u32 slots `sort` needs for `n` keys with scan depth `log256_max_n` (default: the
    least depth with 256**depth >= n): Quadrants' tile histograms plus scan partials, at least
    1."""
    if log256_max_n is None:
        log256_max_n, cap = 1, RADIX_DIGITS
        while cap < n:
            cap, log256_max_n = cap * RADIX_DIGITS, log256_max_n + 1
    depth = _check_depth(log256_max_n)
    blocks = (n + BLOCK_DIM - 1) // BLOCK_DIM
    cursor = level = blocks * RADIX_DIGITS
    for _ in range(depth - 1):
        level = (level + BLOCK_DIM - 1) // BLOCK_DIM
        cursor += level
    return max(cursor, 1)


def _check_sort(key_dtype: Any, end_bit: Any, log256_max_n: Any) -> bool:
    """Compile-time checks of sort's template arguments (raised as compile errors)."""
    _check_depth(log256_max_n)
    if key_dtype in (dtypes.f32, dtypes.f64):
        raise TypeError(f"sorting {key_dtype.name} keys needs a bit cast of the key, which "
                        "jitrt kernels do not have; sort integer keys")
    if key_dtype not in _INTS:
        raise TypeError(f"key_dtype must be one of u32, i32, u64, i64, got {key_dtype!r}")
    width = _INTS[key_dtype]
    if isinstance(end_bit, bool) or not isinstance(end_bit, int) or end_bit <= 0 or \
            end_bit % 16 or end_bit > width:
        raise ValueError(f"end_bit must be a positive multiple of 16 up to {width}, got "
                         f"{end_bit!r}")
    return True


def _digit(key, shift: template(), key_dtype: template()):  # type: ignore[no-untyped-def]
    """The 8-bit digit of `key` at `shift`, signed keys with their sign bit flipped."""
    bits = cast(key, static(_bits(key_dtype)))
    if static(key_dtype.is_signed):
        bits = bits ^ cast(static(_sign_bit(key_dtype)), static(_bits(key_dtype)))
    return cast((bits >> shift) & 255, dtypes.i32)


def _bits(key_dtype: Any) -> Any:
    return dtypes.u64 if _INTS[key_dtype] == 64 else dtypes.u32


def _sign_bit(key_dtype: Any) -> int:
    return 1 << (_INTS[key_dtype] - 1)


def _pass(src, dst, vsrc, vdst, scratch, count, shift: template(),  # type: ignore
          key_dtype: template(), has_values: template()):
    """One stable counting-sort pass of the digit at `shift` from src to dst."""
    for d in range(RADIX_DIGITS):
        scratch[d] = cast(0, dtypes.u32)
    for i in range(count):
        scratch[digit(src[i], shift, key_dtype)] += cast(1, dtypes.u32)
    running = cast(0, dtypes.u32)
    for d in range(RADIX_DIGITS):
        c = scratch[d]
        scratch[d] = running
        running += c
    for i in range(count):
        d = digit(src[i], shift, key_dtype)
        pos = cast(scratch[d], dtypes.i32)
        scratch[d] = scratch[d] + cast(1, dtypes.u32)
        dst[pos] = src[i]
        if static(has_values):
            vdst[pos] = vsrc[i]


def _sort(keys: template(), tmp_keys: template(), values: template(),  # type: ignore
          tmp_values: template(), scratch: template(), n: template(), key_dtype: template(),
          has_values: template(), end_bit: template(), log256_max_n: template()):
    static_assert(static(_check_sort(key_dtype, end_bit, log256_max_n)))
    for _ in range(1):       # one task: the passes run in order on one thread
        count = n[()]
        for p in static(range(end_bit // 8)):
            if static(p % 2 == 0):
                one_pass(keys, tmp_keys, values, tmp_values, scratch, count, p * 8, key_dtype,
                         has_values)
            else:
                one_pass(tmp_keys, keys, tmp_values, values, scratch, count, p * 8, key_dtype,
                         has_values)


digit, one_pass, sort = Func(_digit), Func(_pass), Func(_sort)

__all__ = ["parallel_sort", "sort", "sort_scratch_slots"]
