"""`jr.types.primitive_types`: the scalar dtypes under every spelling and Taichi's lists of
them (`real_types`, `integer_types`, `all_types`; Python's `float` and `int` stand for the
program's `default_fp` and `default_ip`). jitrt has no f16 or u1 (`jr.f16` says so).

Stage: API (names only). Caches nothing.
"""
from __future__ import annotations

from .dtypes import (f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, f32 as float32,  # noqa: F401
                     f64 as float64, i8 as int8, i16 as int16, i32 as int32, i64 as int64,
                     u8 as uint8, u16 as uint16, u32 as uint32, u64 as uint64)

real_types: list = [f32, f64, float]
integer_types: list = [i8, i16, i32, i64, u8, u16, u32, u64, int]
all_types: list = real_types + integer_types
