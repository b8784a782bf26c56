"""`jr.perf_dispatch`: Quadrants' meta-function that times its registered implementations
and keeps calling the fastest.

Stage: API (above kernels). `@jr.perf_dispatch(get_geometry_hash=fn, first_warmup=1,
warmup=0, active=1, repeat_after_count=None, repeat_after_seconds=None)` turns a prototype
(whose body never runs) into a dispatcher; `@proto.register` (optionally
`register(is_compatible=pred)`) adds an implementation with the prototype's parameters. A call
computes the geometry hash of its arguments; while the implementations compatible with them
have not each run `warmup + active` times for that hash (`first_warmup` the first time), the
one with the fewest runs is called, synchronised before and after and timed; then the one with
the least mean time over its last `active` runs is used for that hash. Measurements restart
after `repeat_after_count` further calls or `repeat_after_seconds` seconds (both None: every
300 calls, as in Quadrants). Every implementation must have the same effect. Caches the choice
per geometry hash (for the process).
"""
from __future__ import annotations

import inspect
import time
from collections import defaultdict
from typing import Any, Callable

REPEAT_AFTER_COUNT = 300


def _params(fn: Any) -> list[str]:
    target = getattr(fn, "fn", fn)                     # a jitrt Kernel or Func: its function
    return list(inspect.signature(target).parameters)


class _Impl:
    def __init__(self, fn: Callable, is_compatible: Callable | None) -> None:
        self.fn, self.is_compatible = fn, is_compatible
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class PerfDispatcher:
    """A `@jr.perf_dispatch` meta-function (module docstring)."""

    def __init__(self, proto: Callable, get_geometry_hash: Callable, first_warmup: int,
                 warmup: int, active: int, repeat_after_count: int | None,
                 repeat_after_seconds: float | None) -> None:
        if active < 1:
            raise ValueError(f"perf_dispatch(active=...) must be at least 1, got {active}")
        self.name = proto.__name__
        self.params = _params(proto)
        self.get_geometry_hash = get_geometry_hash
        self.first_warmup, self.warmup, self.active = first_warmup, warmup, active
        if repeat_after_count is None and repeat_after_seconds is None:
            repeat_after_count = REPEAT_AFTER_COUNT
        self.repeat_after_count, self.repeat_after_seconds = repeat_after_count, \
            repeat_after_seconds
        self.impls: list[_Impl] = []
        self.chosen: dict[Any, _Impl] = {}
        self.times: dict[Any, dict[_Impl, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.evaluated: set[Any] = set()             # hashes measured at least once
        self.calls_since: dict[Any, int] = defaultdict(int)
        self.chosen_at: dict[Any, float] = {}

    def register(self, implementation: Callable | None = None, *,
                 is_compatible: Callable | None = None) -> Any:
        def add(fn: Callable) -> _Impl:
            names = _params(fn)
            if names != self.params:
                raise TypeError(f"perf_dispatch '{self.name}': the parameters of "
                                f"'{getattr(fn, '__name__', fn)}' {names} differ from the "
                                f"prototype's {self.params}")
            impl = _Impl(fn, is_compatible)
            self.impls.append(impl)
            return impl
        return add(implementation) if implementation is not None else add

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self.get_geometry_hash(*args, **kwargs)
        best = self.chosen.get(key)
        if best is not None and not self._expired(key):
            return best(*args, **kwargs)
        if best is not None:                           # measure again from scratch
            del self.chosen[key]
            self.times.pop(key, None)
        compatible = [d for d in self.impls
                      if d.is_compatible is None or d.is_compatible(*args, **kwargs)]
        if not compatible:
            raise RuntimeError(f"perf_dispatch '{self.name}': no registered implementation is "
                               "compatible with these arguments")
        runs = self.times[key]
        impl = min(compatible, key=lambda d: len(runs[d]))
        from ..runtime.program import sync
        sync()
        start = time.perf_counter()
        out = impl(*args, **kwargs)
        sync()
        runs[impl].append(time.perf_counter() - start)
        need = (self.warmup if key in self.evaluated else self.first_warmup) + self.active
        if all(len(runs[d]) >= need for d in compatible):
            self.chosen[key] = min(compatible, key=lambda d: sum(runs[d][-self.active:]))
            self.evaluated.add(key)
            self.calls_since[key], self.chosen_at[key] = 0, time.monotonic()
        return out

    def _expired(self, key: Any) -> bool:
        self.calls_since[key] += 1
        count, seconds = self.repeat_after_count, self.repeat_after_seconds
        if count is not None and count > 0 and self.calls_since[key] >= count:
            return True
        return seconds is not None and seconds > 0 and \
            time.monotonic() - self.chosen_at[key] >= seconds


def perf_dispatch(*, get_geometry_hash: Callable, first_warmup: int = 1, warmup: int = 0,
                  active: int = 1, repeat_after_count: int | None = None,
                  repeat_after_seconds: float | None = None) -> Callable[[Callable], Any]:
    """Quadrants' `@qd.perf_dispatch(...)` (module docstring)."""
    def make(proto: Callable) -> PerfDispatcher:
        return PerfDispatcher(proto, get_geometry_hash, first_warmup, warmup, active,
                              repeat_after_count, repeat_after_seconds)
    return make
