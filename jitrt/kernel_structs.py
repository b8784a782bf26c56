"""Struct and argument-pack arguments, struct returns: their conversion at a kernel's Python entry.

Stage: API (beside kernel.py). A kernel with a parameter annotated by a struct type
(`a: S`, a `@jr.dataclass` too) or an argument pack, or annotated `-> S`, compiles and launches
as a `Kernel` whose parameters are the struct parameters' leaves (frontend/struct_args.py) and
whose struct return is the tuple of its leaves. `@jr.kernel` gives such a kernel a
`StructArgKernel` (kernel.py) as its Python entry, which uses these functions: `leaf_values`
checks a struct argument against the parameter's type (a struct of another type is refused,
as Taichi refuses it; an untyped `jr.Struct(...)` of the same members is converted) and splits
it into the leaves' values (an integer member wraps to its width, as Taichi's struct arguments
do); `assemble` makes the `jr.Struct` of a returned tuple of leaves. Caches nothing.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from .data_struct import StructElement
from .errors import KernelArgError
from .frontend.struct_args import is_compound
from .host_matrix import HostMatrix
from .linalg import MatrixType, Struct, StructType
from .struct_host import HostStruct, make_struct, scalar_member


def leaf_values(qualname: str, name: str, kind: Any, v: Any) -> list[Any]:
    """The values of the leaves of argument `v` of struct (or argument pack) parameter `name`,
    in `struct_args.leaves` order."""
    what = "an argument pack" if type(kind).__name__ == "ArgPackType" else "a struct"
    if isinstance(v, StructElement) and v._field.kind == kind:   # `x[i]` of a struct field:
        v = make_struct(Struct, kind, (), v.to_dict())           # its values now
    if not isinstance(v, HostStruct):
        raise KernelArgError(f"kernel {qualname}: argument '{name}': expected {what} of type "
                             f"{kind!r} (made by calling the type), got {type(v).__name__} "
                             f"{v!r}")
    names = [k for k, _ in kind.members]
    if v.kind is None and v.keys == names:          # jr.Struct(...): converted
        v = make_struct(Struct, kind, (), dict(v.entries))
    elif v.kind != kind:
        got = repr(v.kind) if v.kind is not None else f"a jr.Struct of members {v.keys}"
        raise KernelArgError(f"kernel {qualname}: argument '{name}': Argument {type(v)} cannot "
                             f"be converted into required type {kind!r}: got {got}")
    out: list[Any] = []
    for k, t in kind.members:
        x = v.entries[k]
        if is_compound(t):
            out += leaf_values(qualname, f"{name}.{k}", t, x)
        elif isinstance(t, dtypes.DataType) and t.is_int and isinstance(x, (int, np.integer)):
            out.append(wrapped(int(x), t))
        else:
            out.append(x)
    return out


def wrapped(x: int, dt: dtypes.DataType) -> int:
    """`x` wrapped to integer type `dt` (two's complement), as a C cast does."""
    x &= (1 << dt.bits) - 1
    return x - (1 << dt.bits) if dt.is_signed and x >> (dt.bits - 1) else x


def assemble(ret: Any, values: list[Any]) -> Any:
    """What a kernel annotated `ret` (a struct type, or a tuple with struct types) returns,
    from the tuple of leaves it returned."""
    kinds = ret if isinstance(ret, tuple) else (ret,)
    parts = list(values)
    out = tuple(_assemble(t, parts, False) for t in kinds)
    return out if isinstance(ret, tuple) else out[0]


def _assemble(t: Any, parts: list[Any], member: bool) -> Any:
    if isinstance(t, StructType):
        return Struct.typed(t, {k: _assemble(mt, parts, True) for k, mt in t.members})
    v = parts.pop(0)
    if isinstance(t, MatrixType):
        return HostMatrix(v)
    return scalar_member(t, v) if member else v
