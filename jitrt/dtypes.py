"""Scalar data types of jitrt kernels.

Stage: shared by every stage. A `DataType` is a frozen value naming a scalar type; it knows its
numpy dtype, its size and whether it is a float, signed or unsigned integer. The LLVM type of a
`DataType` lives in `codegen/llvm_types.py` so that this module needs no llvmlite.
"""
from __future__ import annotations

import numpy as np

from .frozen import frozen


@frozen
class DataType:
    name: str
    bits: int
    kind: str  # "int", "uint" or "float"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind != "uint"

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    @property
    def np(self) -> np.dtype:
        prefix = {"int": "int", "uint": "uint", "float": "float"}[self.kind]
        return np.dtype(f"{prefix}{self.bits}")

    @property
    def print_spec(self) -> str:
        """The printf specifier an in-kernel `print` gives a value of this type that has no
        spec of its own, Taichi's on every backend: `%f` for an f32 (`1.000000`, `233.300003`:
        widened to double, six decimals), `%.12f` for an f64, `%lld`/`%llu` for integers
        (widened to 64 bits first)."""
        if self.is_float:
            return "%.12f" if self.bits == 64 else "%f"
        return "%lld" if self.is_signed else "%llu"

    def __repr__(self) -> str:
        return f"jr.{self.name}"

    def to_string(self) -> str:
        """Taichi's `dt.to_string()`: the same text as `str(dt)`."""
        return str(self)

    def __reduce__(self) -> tuple:
        # unpickle to the module's singleton: code compares dtypes by identity
        return (_by_name, (self.name,))


def _by_name(name: str) -> "DataType":
    return BY_NAME[name]


i8 = DataType("i8", 8, "int")
i16 = DataType("i16", 16, "int")
i32 = DataType("i32", 32, "int")
i64 = DataType("i64", 64, "int")
u8 = DataType("u8", 8, "uint")
u16 = DataType("u16", 16, "uint")
u32 = DataType("u32", 32, "uint")
u64 = DataType("u64", 64, "uint")
f32 = DataType("f32", 32, "float")
f64 = DataType("f64", 64, "float")

ALL = (i8, i16, i32, i64, u8, u16, u32, u64, f32, f64)
BY_NAME = {t.name: t for t in ALL}
_BY_NP = {t.np: t for t in ALL}


def from_numpy(dtype: np.dtype) -> DataType | None:
    """The jitrt type of a numpy dtype, or None when jitrt has none (bool, complex, ...)."""
    return _BY_NP.get(np.dtype(dtype))


def from_dlpack(code: int, bits: int) -> DataType | None:
    """The jitrt type of DLPack's (type code, bits): 0 int, 1 uint, 2 float; else None."""
    kind = {0: "i", 1: "u", 2: "f"}.get(code)
    return None if kind is None else from_numpy(np.dtype(f"{kind}{bits // 8}")) \
        if bits in (8, 16, 32, 64) else None


# the current program's default float and integer types (set by jr.init): what `float` and
# `int` mean as dtypes (jr.field(float, ...)), and the component type of jr.math.vec3
DEFAULT_FP = [f32]
DEFAULT_IP = [i32]


def coerce(value: object) -> DataType:
    """Accept a DataType, a dtype name, a numpy dtype or the Python types int/float (the
    program's default integer and float types, as in Taichi)."""
    if isinstance(value, DataType):
        return value
    if value is int:
        return DEFAULT_IP[0]
    if value is float:
        return DEFAULT_FP[0]
    if isinstance(value, str) and value in BY_NAME:
        return BY_NAME[value]
    try:
        found = from_numpy(np.dtype(value))  # type: ignore[call-overload]
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"not a jitrt dtype: {value!r}; use one of {', '.join(BY_NAME)}")
    return found


def promote(a: DataType, b: DataType) -> DataType:
    """Binary-operation result type, Taichi's rule: a float beats an int, the wider type
    beats the narrower one, and between integers of one width the unsigned one wins (`i32`
    with `u32` gives `u32`, `i64` with `u64` gives `u64`, `u8` with `i32` gives `i32`).
    Comparisons compare in this type too."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return b if a.is_signed else a


def int_range(dt: DataType) -> tuple[int, int]:
    """The values an integer dtype holds, inclusive."""
    if dt.is_signed:
        return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
    return 0, (1 << dt.bits) - 1


def fits(value: int, dt: DataType) -> bool:
    lo, hi = int_range(dt)
    return lo <= value <= hi
