"""Optimised copies finished after the process that dropped them, in a process of their own.

Stage: offline cache (used by `runtime/compiler.py` at interpreter exit and by `python -m jitrt
cache finish`). Input: the keys of the entries a process stored as quick copies at exit (on the
CPU, a kernel's optimised compile still queued or running when the script ended:
`backends/cpu_tiers.Tiers.at_exit`). Output: one detached process, `python -m jitrt cache finish
--keys ... --background`, started once those entries are written; it compiles their optimised
copies into the cache at a lower priority while the user's next command runs, so a program
of short runs gets them without waiting for any. Nothing is started when no entry was
dropped, or with `JITRT_FINISH_AT_EXIT=0` in the environment (the next processes then resume
the compiles, and the third one compiles a twice-dropped kernel before its first launch:
`runtime/compiler.FOREGROUND_AFTER_DROPS`). Per entry, a lock file `<key>.finishing`
beside it says a finishing process holds it (created exclusively; one older than STALE_S is
taken over), so two finishers never compile the same entry and a process does not compile
in the foreground what a finisher is compiling. Caches nothing itself.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import sys
import time
from collections.abc import Iterator

LOCK_SUFFIX = ".finishing"
STALE_S = 900.0        # a lock this old belongs to a finisher that died: taken over
NICENESS = 10          # the finisher's priority, below the user's next command
ENV = "JITRT_FINISH_AT_EXIT"

# cache directory -> keys of the entries this process stored as quick copies at exit
DROPPED: dict[str, list[str]] = {}


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def lock_path(directory: str | os.PathLike[str], key: str) -> pathlib.Path:
    return pathlib.Path(directory) / f"{key}{LOCK_SUFFIX}"


def busy(directory: str | os.PathLike[str], key: str) -> bool:
    """Whether a finishing process holds the entry `key` now (a fresh lock file)."""
    try:
        return time.time() - lock_path(directory, key).stat().st_mtime < STALE_S
    except OSError:
        return False


@contextlib.contextmanager
def holding(directory: str | os.PathLike[str], key: str) -> Iterator[bool]:
    """Hold the entry's lock while the block runs: True, or False when another finisher
    holds it (the block should then leave the entry alone)."""
    path = lock_path(directory, key)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        if busy(directory, key):
            yield False
            return
        with contextlib.suppress(OSError):          # a dead finisher's: taken over
            os.utime(path)
        fd = -1
    except OSError:             # a read-only cache directory: compile without a lock
        fd = -1
    try:
        yield True
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()


def note_dropped(directory: str | os.PathLike[str], key: str) -> None:
    """The entry `key` was stored as a quick copy with its module text at exit."""
    DROPPED.setdefault(str(directory), []).append(key)


def start_finishers() -> list[int]:
    """At exit, after the dropped entries are stored: one detached `jitrt cache finish`
    process per cache directory for them; their process ids (none when disabled)."""
    import subprocess             # (not on a cold start's path: only an exit that dropped)
    pending = {d: keys for d, keys in DROPPED.items() if keys}
    DROPPED.clear()
    if not pending or not enabled() or \
            not os.path.basename(sys.executable or "").startswith("python"):
        return []               # (an embedding program's executable is not an interpreter)
    root = str(pathlib.Path(__file__).resolve().parents[2])      # the jitrt this process runs
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                else "")
    started = []
    for directory, keys in pending.items():
        cmd = [sys.executable, "-m", "jitrt", "cache", "finish", "--dir", directory,
               "--keys", ",".join(dict.fromkeys(keys)), "--background"]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                    start_new_session=True)
        except OSError:                 # no process can be started: the next run resumes
            continue
        started.append(proc.pid)
    return started
