"""`jr.debug`: introspection with stable names (tests rely on them)."""
from __future__ import annotations

from .runtime import program as _program


def stats() -> dict[str, int]:
    """Counters since the last reset: compiles, launches, cache hits and misses, ..."""
    return _program.current().stats()


def reset_stats() -> None:
    _program.current().reset_stats()
