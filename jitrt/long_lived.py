"""Objects that live as long as the process, made without passes of the garbage collector.

Stage: shared (imported first by `jitrt/__init__.py`). Python's cyclic collector runs a pass
over its youngest generation every ~700 new container objects and over the middle one every
tenth pass. Importing a module makes thousands of them (functions, classes, their
dictionaries and tuples) which live as long as the process, so a cold start's imports (the
package, the CPU backend at `jr.init`, the compile pipeline at the first compile) set off ~30
passes that walked the same new objects again and again and found almost nothing to free
(9-25 objects each time): 8% of a cold start's instructions (docs/performance.md, "Cold
start").

`settled()` pauses the collector around such a block and then moves what is in the young
generations into the oldest one without a pass (`gc.freeze()` then `gc.unfreeze()`), where
the collector's full passes, which are rare, still examine it: no object escapes collection,
it is only not walked by the young passes it would have survived. That includes the young
objects the program made before the block (they are examined at the next full pass instead).
A program whose collector is disabled keeps it disabled and nothing moves; one that froze
objects itself (`gc.freeze()`, e.g. before forking workers) keeps them frozen: then the block
only pauses the collector.

`paused()` pauses the collector while a kernel's launch handle is built (a compile, or a load
from the offline cache): their allocations crossed the thresholds and set off passes over
every object of the process, gen 2 included. A `settled()` block inside it (the compile
pipeline's imports at the first compile) still ages what it made. After the build,
`age_young()` runs the young pass at once (the few cycles a compile leaves are collected) and
ages what survives it (the handle, the kernel's IR: they live as long as the kernel) without
the middle generation's passes: a build of many kernels (Genesis's: about 220k such objects
left young) otherwise left them to one pass of the middle generation at some later launch,
which took 0.2-0.8 s on the development VM in the middle of a simulation's steps.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_PAUSES = [0]        # how many `paused()` blocks are open (the collector is off in them)


@contextlib.contextmanager
def settled() -> Iterator[None]:
    """Run the block with the collector paused, then age what it made (module docstring)."""
    if not gc.isenabled() and not _PAUSES[0]:
        yield       # the program's choice: nothing moves
        return
    with paused():
        try:
            yield
        finally:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Run the block with the collector paused; the previous state is restored (a program
    that disabled the collector keeps it disabled)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _PAUSES[0] += 1
    try:
        yield
    finally:
        _PAUSES[0] -= 1
        gc.enable()


def age_young() -> None:
    """One young pass now, then what is young moves to the oldest generation without a pass
    (module docstring); nothing inside a `paused()` or `settled()` block, in a program whose
    collector is disabled or which froze objects itself."""
    if _PAUSES[0] or not gc.isenabled() or gc.get_freeze_count():
        return
    gc.collect(0)
    gc.freeze()
    gc.unfreeze()
