"""jitrt's logging: the standard `logging` module, logger "jitrt", silent by default.

Stage: base. The logger has a `NullHandler`, so a program that configures logging itself sees
jitrt's records and one that does not sees nothing. `jr.init(log_level="info")` (or
`JITRT_LOG_LEVEL=info`) sets the level and, if the program attached no handler to "jitrt" or
the root logger, adds one that prints `[jitrt] message` to stderr. INFO: one line per program
(arch, threads, cache location) and per compile or offline-cache load (kernel, what
happened, time in ms), and for a compile still running after `SLOW_COMPILE_S` (2 s) one line
then and one when it ends (`slow_compile`: kernel, tier). DEBUG: cache keys and the passes'
time. Nothing is logged on the launch path.
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import threading
import time
from typing import Callable, Iterator

logger = logging.getLogger("jitrt")
logger.addHandler(logging.NullHandler())
_handler: logging.Handler | None = None

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR, "critical": logging.CRITICAL}


def configure(level: str | None) -> None:
    """Apply `jr.init(log_level=...)`: None leaves logging as the program configured it."""
    global _handler
    if level is None:
        return
    logger.setLevel(LEVELS[level])
    has_own = any(not isinstance(h, logging.NullHandler) for h in logger.handlers)
    if _handler is None and not has_own and not logging.getLogger().handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[jitrt] %(message)s"))
        logger.addHandler(_handler)


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
    if not logger.isEnabledFor(logging.INFO):
        yield lambda tier: None
        return
    token = _slow.begin(f"{kernel} ({tier})")
    try:
        yield lambda tier: _slow.rename(token, f"{kernel} ({tier})")
    finally:
        _slow.end(token)
