"""Small functions of Taichi's top-level namespace, written for jitrt: `jr.zero`, `jr.one`,
`jr.assume_in_range`, `jr.hex_to_rgb`, `jr.dataclass`, and the logging switches
`jr.set_logging_level`, `jr.is_logging_effective` with Taichi's level names (`jr.TRACE` ...
`jr.CRITICAL`).

Stage: API (kernel library and Python scope). The kernel functions are `@jr.func`s, so they
work in kernels and at Python scope alike. Caches nothing.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any

from .frontend.func import Func
from . import logger as _log

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = ("trace", "debug", "info", "warn", "error",
                                             "critical")
_LEVELS = {TRACE: _log.DEBUG, DEBUG: _log.DEBUG, INFO: _log.INFO, WARN: _log.WARNING,
           "warning": _log.WARNING, ERROR: _log.ERROR, CRITICAL: _log.CRITICAL}


def _zero(x):
    return x * 0


def _one(x):
    return x * 0 + 1


def _assume_in_range(val, base, low, high):
    return val


# zero(x)/one(x): a value of x's type and shape, all zeros/ones (Taichi: x * 0 and that + 1);
# assume_in_range(val, base, low, high): val (Taichi's hint that base + low <= val <
# base + high; jitrt checks every index anyway)
zero, one, assume_in_range = Func(_zero), Func(_one), Func(_assume_in_range)


def hex_to_rgb(color: int) -> tuple[float, float, float]:
    """0xRRGGBB -> (r, g, b) in [0, 1] (the inverse of `jr.rgb_to_hex`)."""
    return ((color >> 16) & 0xFF) / 255, ((color >> 8) & 0xFF) / 255, (color & 0xFF) / 255


def dataclass(cls: type) -> Any:
    """`@jr.dataclass class C: pos: jr.math.vec3; m: jr.f32` is `jr.types.struct(pos=...,
    m=...)` (Taichi's `@ti.dataclass`). Its methods (`@jr.func` or plain functions) are
    called on struct values in kernels, inlined with `self` a copy of the struct (assigning
    `self.x` changes the copy, as in Taichi), and at Python scope on `jr.Struct` values; a
    member with a default value is refused, as in Taichi; static/class methods and properties
    are not supported."""
    from .linalg import StructType, struct_members
    odd = [k for k, v in vars(cls).items() if not k.startswith("__")
           and isinstance(v, (staticmethod, classmethod, property))]
    if odd:
        raise NotImplementedError(
            f"@jr.dataclass {cls.__name__}: static methods, class methods and properties "
            f"({', '.join(odd)}) are not supported in jitrt; write them as @jr.func functions "
            "that take the struct")
    methods = tuple((k, v) for k, v in vars(cls).items() if not k.startswith("__")
                    and callable(v))
    # string annotations (`from __future__ import annotations`) name what the place of the
    # class sees: the caller's globals and locals (a local `vec3` of a test function too)
    caller = sys._getframe(1)
    try:
        members = inspect.get_annotations(cls, eval_str=True, globals=caller.f_globals,
                                          locals={**caller.f_locals, **vars(cls)})
    except Exception as exc:  # noqa: BLE001 - the user's own annotation text
        raise TypeError(f"@jr.dataclass {cls.__name__}: cannot evaluate its annotations "
                        f"({exc})") from None
    defaults = [k for k in members if k in vars(cls)]
    if defaults:
        from .errors import KernelSyntaxError
        raise KernelSyntaxError(f"@jr.dataclass {cls.__name__}: member(s) {', '.join(defaults)}"
                                ": Default value in @dataclass is not supported. (a struct's "
                                "members start at 0; give the values when calling the type)")
    # (a dataclass of methods only is a struct of no members, as in Taichi)
    return StructType(struct_members(members, f"@jr.dataclass {cls.__name__}"), methods)


def _level(level: str) -> int:
    try:
        return _LEVELS[str(level).strip().lower()]
    except KeyError:
        raise ValueError(f"unknown logging level {level!r}: expected one of "
                         f"{', '.join(_LEVELS)}") from None


def set_logging_level(level: str) -> None:
    """Log jitrt's messages from `level` up to stderr (as `jr.init(log_level=...)`)."""
    _level(level)
    name = {v: k for k, v in _log.LEVELS.items()}[_level(level)]
    _log.configure(name)


def is_logging_effective(level: str) -> bool:
    """Whether jitrt's messages at `level` are logged now."""
    return _log.logger.isEnabledFor(_level(level))
