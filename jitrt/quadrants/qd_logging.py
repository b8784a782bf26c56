"""Quadrants' logging entry points (`qd._logging`, `qd.WARN`...) on jitrt's logger.

Stage: base. Quadrants names six levels by strings: 'trace', 'debug', 'info', 'warn',
'error', 'critical' (`jr.TRACE`... `jr.CRITICAL`, also accepted by `jr.init(log_level=...)`),
and logs with `qd._logging.warn(msg, *args, **kwargs)` (the message `str.format`ted with the
arguments, prefixed with `[file:function@line]` of the caller). jitrt sends those records to
its standard-library logger "jitrt" (logger.py): trace and debug at DEBUG, info at INFO,
warn at WARNING, error at ERROR, critical at CRITICAL. A program may replace the six
functions (Genesis routes them into its own logger with `setattr(qd._logging, name, fn)`).
Caches nothing.
"""
from __future__ import annotations

import inspect
import logging
import os
from typing import Any, Callable

from ..logger import configure, logger

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
supported_log_levels = [DEBUG, TRACE, INFO, WARN, ERROR, CRITICAL]
# Quadrants' level names -> the standard library's levels
LEVELS = {TRACE: logging.DEBUG, DEBUG: logging.DEBUG, INFO: logging.INFO,
          WARN: logging.WARNING, ERROR: logging.ERROR, CRITICAL: logging.CRITICAL}
# and -> jitrt's `log_level` option
CONFIG_NAMES = {TRACE: "debug", DEBUG: "debug", INFO: "info", WARN: "warning",
                ERROR: "error", CRITICAL: "critical"}


def _level(name: str) -> int:
    if name not in LEVELS:
        raise ValueError(f"unknown logging level {name!r}; expected one of "
                         f"{', '.join(supported_log_levels)}")
    return LEVELS[name]


def _get_logging(name: str) -> Callable[..., None]:
    """The logging function of level `name`: `fn(msg, *args, **kwargs)`."""
    level = _level(name)

    def log(msg: Any, *args: Any, **kwargs: Any) -> None:
        if not logger.isEnabledFor(level):
            return
        text = str(msg).format(*args, **kwargs)
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None:
            where = os.path.basename(caller.f_code.co_filename)
            text = f"[{where}:{caller.f_code.co_name}@{caller.f_lineno}] {text}"
        logger.log(level, text)

    log.__name__ = name
    return log


def set_logging_level(level: str) -> None:
    """Log this level and the ones above it (to stderr unless the program set up logging)."""
    _level(level)
    configure(CONFIG_NAMES[level])


def is_logging_effective(level: str) -> bool:
    """Whether a record of this level would be logged now."""
    return logger.isEnabledFor(_level(level))


trace, debug, info = _get_logging(TRACE), _get_logging(DEBUG), _get_logging(INFO)
warn, error, critical = _get_logging(WARN), _get_logging(ERROR), _get_logging(CRITICAL)
