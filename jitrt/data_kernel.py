"""Field methods called inside kernels: `x.fill(v)` in a kernel (Taichi's), as a func.

Stage: API (a `@jr.func` library the frontend inlines for `<field>.fill(value)` in kernel
code, `frontend/lower_call.py`). Inlined at the top of a kernel its loop over every index of
the field is a parallel task; inside a loop it runs serially. A vector or matrix field takes
a number (every component) or a value of its element's shape. Caches nothing.
"""
from __future__ import annotations

from typing import Any

from .frontend.builtins import grouped
from .frontend.func import Func


def _fill(x, value):  # type: ignore[no-untyped-def]
    """Every element of field `x` becomes `value`."""
    for idx in grouped(x):
        x[idx] = value


fill = Func(_fill)

# the methods of fields that kernels call through these funcs
KERNEL_METHODS: dict[str, Any] = {"fill": fill}
# methods of fields that move data between the host and the field: a compile error in kernels
HOST_ONLY_METHODS = frozenset(("to_numpy", "from_numpy", "copy_from", "to_torch", "from_torch",
                               "to_paddle", "from_paddle"))
# methods of fields whose result a kernel takes at compile time (`x.parent()`: a loop's range)
COMPILE_TIME_METHODS = frozenset(("parent",))
