"""Quadrants' `qd.types.primitive_types`: the lists of scalar types programs test against.

Stage: base. As in Quadrants, `float` and `int` stand in the lists for the program's default
float and integer types. jitrt has no f16 (and its u1 is u8, so u1 is not listed twice).
"""
from __future__ import annotations

from ..dtypes import f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

real_types = [f32, f64, float]
real_type_ids = [id(t) for t in real_types]
integer_types = [i8, i16, i32, i64, u8, u16, u32, u64, int]
integer_type_ids = [id(t) for t in integer_types]
all_types = real_types + integer_types
type_ids = [id(t) for t in all_types]

float32, float64 = f32, f64
int8, int16, int32, int64, uint8, uint16, uint32, uint64 = i8, i16, i32, i64, u8, u16, u32, u64
u1 = u8
