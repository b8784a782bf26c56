"""jitrt's logging: the standard `logging` module, logger "jitrt", silent by default.

Stage: base. The logger has a `NullHandler`, so a program that configures logging itself sees
jitrt's records and one that does not sees nothing. `jr.init(log_level="info")` (or
`JITRT_LOG_LEVEL=info`) sets the level and, if the program attached no handler to "jitrt" or
the root logger, adds one that prints `[jitrt] message` to stderr. INFO: one line per program
(arch, threads, cache location) and per compile or offline-cache load (kernel, what
happened, time in ms), and for a compile still running after `SLOW_COMPILE_S` (2 s) one line
then and one when it ends (`slow_compile`: kernel, tier). DEBUG: cache keys and the passes'
time. Nothing is logged on the launch path.

`logger` stands in for `logging.getLogger("jitrt")` until the `logging` module is loaded by
anyone (the program, a library, a `log_level`): its import, ~3 ms with `traceback`, was part of
every `import jitrt` (docs/performance.md, "Cold start"). Before that nothing can have
attached a handler for a record, so a record is dropped unseen, as the `NullHandler` would
drop it; after it, every call goes to the real logger.
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    import logging

# the `logging` module's levels (fixed numbers in its documentation)
DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50
LEVELS = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR,
          "critical": CRITICAL}


class _JitrtLogger:
    """`logging.getLogger("jitrt")` (with its `NullHandler`), made when `logging` is loaded."""

    def __init__(self) -> None:
        self._real: logging.Logger | None = None

    def real(self, load: bool = True) -> logging.Logger | None:
        """The real logger; None while `logging` is not loaded and `load` is False."""
        if self._real is None:
            if not load and "logging" not in sys.modules:
                return None
            import logging
            real = logging.getLogger("jitrt")
            real.addHandler(logging.NullHandler())
            self._real = real
        return self._real

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 (logging.Logger's name)
        real = self.real(load=False)
        return real is not None and real.isEnabledFor(level)

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        real = self.real(load=False)
        if real is not None:
            kwargs.setdefault("stacklevel", 2)      # the caller's file and line in the record
            real.log(level, msg, *args, **kwargs)

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(DEBUG, msg, *args, stacklevel=3, **kwargs)

    def info(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(INFO, msg, *args, stacklevel=3, **kwargs)

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.log(WARNING, msg, *args, stacklevel=3, **kwargs)

    def __getattr__(self, name: str) -> Any:
        """Anything else (`level`, `handlers`, `setLevel`...): the real logger's."""
        return getattr(self.real(), name)


logger = _JitrtLogger()
_handler: logging.Handler | None = None


def configure(level: str | None) -> None:
    """Apply `jr.init(log_level=...)`: None leaves logging as the program configured it."""
    global _handler
    if level is None:
        return
    import logging
    real = logger.real()
    assert real is not None
    real.setLevel(LEVELS[level])
    has_own = any(not isinstance(h, logging.NullHandler) for h in real.handlers)
    if _handler is None and not has_own and not logging.getLogger().handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[jitrt] %(message)s"))
        real.addHandler(_handler)


SLOW_COMPILE_S = 2.0


class _SlowCompiles:
    """Compiles in progress, watched by one daemon thread (started on first use) that logs
    each one still running `SLOW_COMPILE_S` after it began; `end` logs its end then."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int]] = []          # (when to log, token), a heap
        self._running: dict[int, tuple[str, float]] = {}  # token -> (what, start)
        self._logged: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def begin(self, what: str) -> int:
        start = time.monotonic()
        with self._cond:
            token = next(self._tokens)
            self._running[token] = (what, start)
            heapq.heappush(self._due, (start + SLOW_COMPILE_S, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="jitrt-slow-compiles",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
        return token

    def rename(self, token: int, what: str) -> None:
        with self._cond:
            if token in self._running:
                self._running[token] = (what, self._running[token][1])

    def end(self, token: int) -> None:
        with self._cond:
            what, start = self._running.pop(token)
            logged = token in self._logged
            self._logged.discard(token)
        if logged:
            logger.info("%s: compiled in %.1f s", what, time.monotonic() - start)

    def _watch(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cond.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, token = heapq.heappop(self._due)
                if token not in self._running:
                    continue
                self._logged.add(token)
                what, start = self._running[token]
            logger.info("%s: compiling (started %.1f s ago; a line follows when it ends)",
                        what, time.monotonic() - start)


_slow = _SlowCompiles()


def _after_fork_in_child() -> None:
    global _slow
    _slow = _SlowCompiles()      # the watching thread is not in the child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def slow_compile(kernel: str, tier: str) -> Iterator[Callable[[str], None]]:
    """Around a compile: if it runs for more than `SLOW_COMPILE_S`, an INFO line says so then
    (`<kernel> (<tier>): compiling ...`) and another when it ends. Gives a function that
    names the tier once the caller knows it. Costs nothing while INFO is off."""
    if not logger.isEnabledFor(INFO):
        yield lambda tier: None
        return
    token = _slow.begin(f"{kernel} ({tier})")
    try:
        yield lambda tier: _slow.rename(token, f"{kernel} ({tier})")
    finally:
        _slow.end(token)
