"""`os.fork` at any moment: the child gets a usable jitrt.

Stage: runtime. A fork copies only the forking thread; a lock another thread held at that
moment stays held in the child forever, so a child forked while a user thread compiled a
kernel (holding the program's launch lock and the LLVM lock) used to hang at its first
launch or compile. The hooks registered here make the fork wait, in this order (the order
every other path takes them, so no deadlock), for: a `jr.init` in progress (`_init_lock`),
a launch in progress (the current program's launch lock, held through a first launch's
compile), the background optimiser's job in progress (`Tiers.pause`: the job ends, no other
starts), and any use of LLVM (`llvm_setup.hold_for_fork`). The fork then happens with every
one of them held by the forking thread; both processes release them at once. The child
drops the optimiser's queue (its quick copies stay in use) and starts its own thread when it
compiles. A fork therefore waits at most for one launch or one compile to end. Nothing is
cached.
"""
from __future__ import annotations

import os
import sys
from typing import Any

_held: list[Any] = []      # what `_before` acquired, in order (released in reverse)
_llvm: list[Any] = []      # `llvm_setup`, when `_before` held its locks


def _loaded(name: str) -> Any:
    """The module `jitrt.backends.<name>` if something imported it (a hook imports nothing:
    `import jitrt` loads no LLVM, and a process that never compiled has none in use)."""
    return sys.modules.get(f"{__package__.rsplit('.', 1)[0]}.backends.{name}")


def _tiers() -> Any:
    cpu = _loaded("cpu")
    return None if cpu is None else cpu._tiers


def _before() -> None:
    program = sys.modules[f"{__package__}.program"]   # it installed these hooks (no import)
    program._init_lock.acquire()
    _held.append(program._init_lock)
    current = program._current
    others = [p for p in program.OPEN.values() if p is not current]
    for each in ([current] if current is not None else []) + others:   # every device's
        each.launch_lock.lock.acquire()
        _held.append(each.launch_lock.lock)
    tiers = _tiers()
    if tiers is not None:
        tiers.pause()
    llvm_setup = _loaded("llvm_setup")
    if llvm_setup is not None:
        llvm_setup.hold_for_fork()
        _llvm.append(llvm_setup)


def _release() -> None:
    while _llvm:
        _llvm.pop().release_after_fork()
    while _held:
        _held.pop().release()


def _after_in_parent() -> None:
    _release()
    tiers = _tiers()
    if tiers is not None:
        tiers.resume()


def _after_in_child() -> None:
    _release()
    tiers = _tiers()
    if tiers is not None:
        tiers.after_fork_in_child()


def register() -> None:
    """Install the hooks (once, when the runtime is imported)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                            after_in_child=_after_in_child)
