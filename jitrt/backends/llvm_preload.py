"""LLVM's shared library loaded on a helper thread while `import jitrt` runs.

Stage: backend (imported first by `jitrt/__init__.py`, which starts it). The
library llvmlite wraps (`libllvmlite.so`, ~180 MB with LLVM inside) took 9-15 ms of every
cold start to load: `dlopen` maps it, relocates it and runs LLVM's static constructors, and
CPython's `ctypes.CDLL` holds the GIL meanwhile, so nothing overlapped it. Here a daemon thread
calls libc's `dlopen` on the same path through a ctypes function, which releases the GIL, so
the load runs on another core while the main thread imports the package; llvmlite's own
`CDLL` at `jr.init` then finds the library loaded (`dlopen` of a loaded library only counts a
reference). Nothing is imported from llvmlite here, and no LLVM function is called.

glibc's `dlopen` holds one lock for a whole load, so an extension module the main thread
loads meanwhile waits for LLVM's library: `jitrt/__init__.py` imports the ones the package
needs before this module, and `tests/test_startup.py` checks that none loads after it (on a
busy machine, where the thread waits for a core, such a wait was longer than the load). A
fork waits for the thread (`os.register_at_fork`): a child forked during `dlopen` would
inherit the loader's lock held. Where anything fails (no llvmlite, another platform, no
`dlopen` symbol) the thread does nothing and llvmlite loads the library as before.
`JITRT_PRELOAD_LLVM=0` turns it off (docs/performance.md, "Cold start").
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

_thread: list[threading.Thread] = []

LIBRARY_NAMES = {"linux": "libllvmlite.so", "darwin": "libllvmlite.dylib"}


def library_path() -> str | None:
    """Where llvmlite's library is, found without importing llvmlite (None: not found)."""
    name = next((v for k, v in LIBRARY_NAMES.items() if sys.platform.startswith(k)), None)
    if name is None:
        return None
    import importlib.util
    try:
        spec = importlib.util.find_spec("llvmlite")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "binding", name)
        if os.path.isfile(path):
            return path
    return None


def _load(path: str) -> None:
    try:
        dlopen = ctypes.CDLL(None).dlopen
        dlopen.restype = ctypes.c_void_p
        dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
        # llvmlite's flags (ctypes' RTLD_LOCAL, with the RTLD_NOW CPython adds), so that its
        # own load finds this one; the handle is kept, as llvmlite keeps its own
        dlopen(path.encode(), os.RTLD_NOW | os.RTLD_LOCAL)
    except (OSError, AttributeError):
        pass


def start() -> bool:
    """Start loading the library on a helper thread, once per process; whether it started."""
    if _thread or "llvmlite.binding" in sys.modules or \
            os.environ.get("JITRT_PRELOAD_LLVM", "1") == "0" or not hasattr(os, "RTLD_NOW"):
        return False
    path = library_path()
    if path is None:
        return False
    thread = threading.Thread(target=_load, args=(path,), name="jitrt-llvm-preload",
                              daemon=True)
    _thread.append(thread)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=wait)
    thread.start()
    return True


def wait() -> None:
    """Until the helper thread is done (at once when there is none)."""
    for thread in _thread:
        if thread is not threading.current_thread():
            thread.join()


start()       # on import: `jitrt/__init__.py` imports this module first
