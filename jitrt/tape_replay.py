"""A Tape's reverse pass on a GPU, replayed as one device graph when it repeats
(`jr.init(tape_graph=True)`; off by default).

Stage: runtime (helper of `ad.Tape.grad`). A training loop records the same launches at every
step: the same kernels in the same order with the same arguments (fields and ndarrays by
identity, numbers by value). On a GPU, the reverse pass of such a step is then a `jr.graph`
(`runtime/graph.py`) of the grad launches: recorded when a Tape's launches are those of the
Tape before it (the first such step runs its grads in recording mode), replayed after that
(one driver call for the whole reverse pass instead of one launch per recorded kernel; a
replay re-checks the adstack sizing of grad launches and uploads host data that changed, as
any graph replay). A step whose launches differ from the previous one's runs its grads one
by one and becomes the new reference. Only plain recordings take part: every argument a
number, a field or a jitrt ndarray, no `grad_replaced` step, no validation or gradient check,
no kernel profiler (which times each launch); the CPU launches as before. Off by default:
building the graph records a bound launch per grad launch (generated code for each: 2 ms a
launch on a loaded 2-core machine, 4.3 s for billiards' 2,048 grads), while a replay saves
about one microsecond per launch on the device, so it pays off only after hundreds of steps.
Caches: per program (`Program.grad_replay`), the last reverse pass (its launches, holding
their arguments, and its graph).
"""
from __future__ import annotations

from typing import Any

from .data import Field, Ndarray
from .runtime import program as program_mod
from .runtime.graph import Graph

NUMBERS = (int, float, bool)


class GradReplay:
    """The last reverse pass of one program: its kernels (with their argument counts) and
    arguments, in reverse order, and its graph once the same pass came twice in a row."""

    def __init__(self) -> None:
        self.kernels: tuple[Any, ...] = ()
        self.values: tuple[Any, ...] = ()
        self.graph: Graph | None = None

    def run(self, entries: list[tuple[Any, tuple[Any, ...]]]) -> None:
        kernels = tuple((k, len(v)) for k, v in reversed(entries))
        values = tuple(a for _, v in reversed(entries) for a in v)
        if kernels != self.kernels or not same(values, self.values):
            self.kernels, self.values = kernels, values
            self.release()
            launch_grads(kernels, values)
            return
        graph = self.graph
        if graph is not None and graph.launches and graph._current():
            graph.replay()
            return
        self.graph = graph = Graph(lambda *args: launch_grads(kernels, args))
        graph(*values)

    def release(self) -> None:
        if self.graph is not None:
            self.graph.release()
        self.graph = None


def launch_grads(kernels: tuple[tuple[Any, int], ...], values: tuple[Any, ...]) -> None:
    """`kernel.grad(*args)` for each (kernel, argument count), the arguments in order."""
    at = 0
    for kernel, n in kernels:
        kernel.grad(*values[at:at + n])
        at += n


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """The same arguments: data by identity, numbers of the same type by value."""
    return len(a) == len(b) and all(
        x is y or (x.__class__ in NUMBERS and x.__class__ is y.__class__ and x == y)
        for x, y in zip(a, b))


def eligible(tape: Any, program: Any) -> bool:
    """Whether this Tape's reverse pass may go through `GradReplay` (module docstring)."""
    if not program.config.tape_graph or program.profile is not None or \
            getattr(program.device, "driver", None) is None:
        return False
    if tape.checker is not None or tape.validation or program.tape is not None:
        return False
    if any(h is None for h in tape.handles):
        return False
    return all(v.__class__ in NUMBERS or isinstance(v, (Field, Ndarray))
               for _, values in tape.entries for v in values)


def reverse_pass(tape: Any) -> None:
    """The grad launches of `tape`'s entries in reverse order: through the program's
    `GradReplay` where eligible, else one by one."""
    program = program_mod.current()
    if not eligible(tape, program):
        for kernel, values in reversed(tape.entries):
            kernel.grad(*values)
        return
    if program.grad_replay is None:
        program.grad_replay = GradReplay()
    program.grad_replay.run(tape.entries)
