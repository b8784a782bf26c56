"""jitrt's logging: the standard `logging` module, logger "jitrt", silent by default.

Stage: base. The logger has a `NullHandler`, so a program that configures logging itself sees
jitrt's records and one that does not sees nothing. `jr.init(log_level="info")` (or
`JITRT_LOG_LEVEL=info`) sets the level and, if the program attached no handler to "jitrt" or
the root logger, adds one that prints `[jitrt] message` to stderr. INFO: one line per program
(arch, threads, cache location) and per compile or offline-cache load (kernel, what
happened, time in ms). DEBUG: cache keys and the passes' time. Nothing is logged on the launch
path.
"""
from __future__ import annotations

import logging

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
