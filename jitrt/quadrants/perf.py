"""`jr.perf_dispatch`: Quadrants' meta-function that times its registered implementations
and keeps calling the fastest.

Stage: API (above kernels). `@jr.perf_dispatch(get_geometry_hash=fn, first_warmup=1,
warmup=0, active=1, repeat_after_count=None, repeat_after_seconds=None)` turns a prototype
(whose body never runs) into a dispatcher; `@proto.register` (optionally
`register(is_compatible=pred)`) adds an implementation with the prototype's parameters. A call
computes the geometry hash of its arguments (the key of a dictionary: hashed once a call).
When one implementation only is compatible with them it is chosen at once, unmeasured, and a
later call with the very same argument objects calls it without computing the hash again, as
Quadrants 1.3.3 does. Otherwise, while the compatible implementations have not each run
`warmup + active` times for that hash (`first_warmup` the first time), the one with the fewest
runs is called: a warm-up run as it is, an active run synchronised before and after and
timed; then the one with the least mean time over its active runs is used for that hash.
Measurements restart after `repeat_after_count` further calls or `repeat_after_seconds`
seconds (both None: every 300 calls, as in Quadrants; a value <= 0 turns that trigger off).
Every implementation must have the same effect. Caches the choice per geometry hash (for the
process) and the arguments of the last single-choice call (identity, not value).
"""
from __future__ import annotations

import inspect
import time
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


class _Geometry:
    """What a dispatcher knows of one geometry hash."""
    __slots__ = ("chosen", "runs", "times", "evaluated", "calls_since", "chosen_at")

    def __init__(self) -> None:
        self.chosen: _Impl | None = None
        self.runs: dict[_Impl, int] = {}              # runs of each since measuring began
        self.times: dict[_Impl, list[float]] = {}     # the timed (active) runs
        self.evaluated = False                        # measured to the end at least once
        self.calls_since = 0
        self.chosen_at = 0.0


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
        self.geometries: dict[Any, _Geometry] = {}
        # the last call whose arguments left one implementation: (args, kwargs, it)
        self.cached: tuple[tuple[Any, ...], dict[str, Any], _Impl] | None = None

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
            self.cached = None
            return impl
        return add(implementation) if implementation is not None else add

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cached = self.cached
        if cached is not None and _same(cached[0], cached[1], args, kwargs):
            return cached[2](*args, **kwargs)
        key = self.get_geometry_hash(*args, **kwargs)
        geo = self.geometries.get(key)
        if geo is None:
            geo = self.geometries[key] = _Geometry()
        if geo.chosen is not None:
            if not self._expired(geo):
                return geo.chosen(*args, **kwargs)
            geo.chosen, geo.runs, geo.times = None, {}, {}   # measure again from scratch
        compatible = [d for d in self.impls
                      if d.is_compatible is None or d.is_compatible(*args, **kwargs)]
        if not compatible:
            raise RuntimeError(f"perf_dispatch '{self.name}': no registered implementation is "
                               "compatible with these arguments")
        if len(compatible) == 1:                       # nothing to compare: no measurement
            self._choose(geo, compatible[0])
            self.cached = (args, kwargs, compatible[0])
            return compatible[0](*args, **kwargs)
        return self._measure(geo, compatible, args, kwargs)

    def _measure(self, geo: _Geometry, compatible: list[_Impl], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        """One run of the compatible implementation with the fewest runs: timed and
        synchronised unless it is a warm-up run; the fastest is chosen after the last."""
        impl = min(compatible, key=lambda d: geo.runs.get(d, 0))
        warmup = self.warmup if geo.evaluated else self.first_warmup
        geo.runs[impl] = geo.runs.get(impl, 0) + 1
        if geo.runs[impl] <= warmup:
            return impl(*args, **kwargs)
        from ..runtime.program import sync
        sync()
        start = time.perf_counter()
        out = impl(*args, **kwargs)
        sync()
        geo.times.setdefault(impl, []).append(time.perf_counter() - start)
        if all(geo.runs.get(d, 0) >= warmup + self.active for d in compatible):
            self._choose(geo, min(compatible, key=lambda d: sum(geo.times[d]) / len(
                geo.times[d])))
            geo.evaluated = True
        return out

    @staticmethod
    def _choose(geo: _Geometry, impl: _Impl) -> None:
        geo.chosen, geo.calls_since, geo.chosen_at = impl, 0, time.monotonic()

    def _expired(self, geo: _Geometry) -> bool:
        geo.calls_since += 1
        count, seconds = self.repeat_after_count, self.repeat_after_seconds
        if count is not None and count > 0 and geo.calls_since >= count:
            return True
        return seconds is not None and seconds > 0 and \
            time.monotonic() - geo.chosen_at >= seconds


def _same(args: tuple[Any, ...], kwargs: dict[str, Any], now: tuple[Any, ...],
          now_kwargs: dict[str, Any]) -> bool:
    """Whether a call passes the very objects of an earlier one (by identity)."""
    if len(args) != len(now) or len(kwargs) != len(now_kwargs):
        return False
    for a, b in zip(args, now):
        if a is not b:
            return False
    for k, v in now_kwargs.items():
        if k not in kwargs or kwargs[k] is not v:
            return False
    return True


def perf_dispatch(*, get_geometry_hash: Callable, first_warmup: int = 1, warmup: int = 0,
                  active: int = 1, repeat_after_count: int | None = None,
                  repeat_after_seconds: float | None = None) -> Callable[[Callable], Any]:
    """Quadrants' `@qd.perf_dispatch(...)` (module docstring)."""
    def make(proto: Callable) -> PerfDispatcher:
        return PerfDispatcher(proto, get_geometry_hash, first_warmup, warmup, active,
                              repeat_after_count, repeat_after_seconds)
    return make
