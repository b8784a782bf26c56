"""Quadrants' `qd.lang.impl` functions that have a meaning in jitrt.

Stage: API. `get_runtime()` gives a `PyQuadrants`: the view of the current jitrt program that
Quadrants code reads (`default_fp`, `default_ip`, `prog.synchronize()`, `prog.config()`).
Its `materialize()` and `clear()` do nothing themselves (jitrt's fields have storage from
creation), but a program may wrap them, as Genesis does to defer its fields' first fills
(`PyQuadrants.materialize = fill_then_materialize`): jitrt then runs the wrapped
`materialize` where Quadrants would, once fields were created since it last ran: before the
next kernel launch (the launch's slow path: a kernel that reads a new field is compiled or
specialised for it first) and before the next Python-scope access to data
(`data.materialize_pending`). Caches nothing.
"""
from __future__ import annotations

from typing import Any

from ...dtypes import DataType


class PyQuadrants:
    """The current program as `qd.lang.impl.get_runtime()` shows it."""

    @property
    def default_fp(self) -> DataType:
        from ...runtime.program import current
        return current().config.default_fp

    @property
    def default_ip(self) -> DataType:
        from ...runtime.program import current
        return current().config.default_ip

    @property
    def prog(self) -> "PyQuadrants":
        return self

    def config(self) -> Any:
        """`get_runtime().prog.config()`: the current program's configuration (`current_cfg()`;
        `.arch` is the arch's name, "cpu", which equals `jr.cpu`)."""
        return current_cfg()

    def synchronize(self) -> None:
        from ...runtime.program import sync
        sync()

    def materialize(self) -> None:
        """Nothing to do in jitrt (module docstring)."""

    def clear(self) -> None:
        """Nothing to do in jitrt (module docstring)."""


_RUNTIME = PyQuadrants()


def get_runtime() -> PyQuadrants:
    return _RUNTIME


def get_max_shared_memory_bytes(*, is_lowerbound_ok: bool) -> int:
    """Shared memory of a GPU block in bytes: 0 on the CPU (no shared memory), as in
    Quadrants; on a GPU program the device's own figure, else 48 KiB (CUDA's guaranteed
    amount) when a lower bound will do."""
    from ...runtime.program import current
    program = current()
    if program.config.arch == "cpu":
        return 0
    limit = getattr(program.device, "max_shared_memory_bytes", None)
    if limit is not None:
        return int(limit)
    if is_lowerbound_ok:
        return 48 * 1024
    raise RuntimeError(f"the shared memory of a block is not known on {program.config.arch}")


def current_cfg() -> Any:
    """Taichi's and Quadrants' `impl.current_cfg()`: the current program's configuration,
    jitrt's `Config` (`arch`, `debug`, `default_fp`, `default_ip`, `offline_cache`, ... under
    the names `jr.init` takes)."""
    from ...runtime.program import current
    return current().config


_PLAIN_MATERIALIZE = PyQuadrants.materialize


def _run_materialize() -> None:
    """`get_runtime().materialize()` if the program replaced `PyQuadrants.materialize` (jitrt's
    own does nothing)."""
    if PyQuadrants.materialize is not _PLAIN_MATERIALIZE:
        get_runtime().materialize()


def _install() -> None:
    from ... import data
    data.MATERIALIZE[0] = _run_materialize


_install()
