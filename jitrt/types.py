"""Parameter annotations: `jr.types.ndarray(dtype, ndim)` and `jr.template()`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import dtypes
from .dtypes import DataType


@dataclass(frozen=True)
class NdarrayType:
    dtype: DataType | None = None
    ndim: int | None = None

    def __repr__(self) -> str:
        return f"jr.types.ndarray(dtype={self.dtype!r}, ndim={self.ndim})"


def ndarray(dtype: Any = None, ndim: int | None = None) -> NdarrayType:
    return NdarrayType(None if dtype is None else dtypes.coerce(dtype), ndim)


@dataclass(frozen=True)
class Template:
    def __repr__(self) -> str:
        return "jr.template()"


def template() -> Template:
    return Template()
