"""`jr.graph`: record the launches of one step once, replay them as a whole.

Stage: runtime (the API's launch-sequence layer). Recording runs the step for real while the
program's launchers report every launch (the same hook a `jr.ad.Tape` uses); each launch
becomes a `BoundLaunch` of its own (its own context, so a kernel launched twice in a step with
other arguments keeps both). The device then builds a graph of them (`Device.graph`: a CUDA
graph on GPUs; None on the CPU, where a replay calls the bound launches in order).

`g = jr.graph(step)`: `g(*args)` records on its first call; a later call with the same
argument objects (arrays by identity, scalars by value) replays; with other arguments the step
runs again in recording mode and, when it launches the same kernels in the same order, the
bound launches are rebound (`set_arg`) and the device graph updated in place, never
re-instantiated unless the driver refuses the update. `with jr.graph() as g:` records the
launches of the block; `g()` replays them. A replay of grad launches with adstacks re-checks
their sizing launch caches first (a capacity that changed updates the device graph: GPU
kernels hold their arguments by value).
`@jr.kernel(graph=True)` kernels replay their own launches through one of these on GPUs
(`KernelGraph`).
Caches: the bound launches and the device graph, per Graph object.
"""
from __future__ import annotations

import dataclasses
import types
import weakref
from typing import Any, Callable, cast

from ..errors import JitrtError
from ..frontend.builtins import graph_do_while
from . import program as program_mod
from .arguments import as_host_array
from .bound import BoundLaunch
from .launcher import user_facing


class _Recorder:
    """Stands in for `program.tape` while a graph records: collects (kernel, values, handle)."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, list[Any], Any]] = []

    def record(self, kernel: Any, values: Any, handle: Any) -> None:
        self.launches.append((kernel, list(values), handle))


class Graph:
    """A recorded sequence of launches (see the module docstring). `stats()` counts replays,
    updates and instantiations (also in `jr.debug.stats()` on GPUs)."""

    def __init__(self, step: Callable[..., Any] | None = None) -> None:
        self.step = step
        self.launches: list[BoundLaunch] = []
        self.kernels: list[Any] = []
        self.device_graph: Any = None
        self.program: Any = None
        self.args: tuple[Any, ...] = ()
        self.kwargs: dict[str, Any] = {}
        self.bumps: list[Any] = []
        self.counts: list[Any] = []
        self.sized: list[BoundLaunch] = []
        self._recorder: _Recorder | None = None
        # the launches' order with device-side loops (`GraphLoop`s of a do_while kernel,
        # `quadrants/graph_loop.py`); None: in order
        self.layout: Any = None
        self._built_layout: Any = None

    # ---- recording ----------------------------------------------------------------------
    def __enter__(self) -> "Graph":
        if self.step is not None:
            raise TypeError("use either jr.graph(step) or `with jr.graph() as g:`")
        self._begin()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        records = self._end()
        if exc_type is None:
            self._build(records)

    def _begin(self) -> None:
        program = program_mod.current()
        if program.tape is not None:
            raise JitrtError("jr.graph cannot record inside a jr.ad.Tape (or another graph); "
                             "launch kernel.grad(...) explicitly in the step instead")
        self._recorder = _Recorder()
        program.start_recording(self._recorder)    # this thread's launches only
        self.program = program

    def _end(self) -> list[tuple[Any, list[Any], Any]]:
        program, recorder = self.program, self._recorder
        program.stop_recording()
        self._recorder = None
        assert recorder is not None
        return recorder.launches

    def _build(self, records: list[tuple[Any, list[Any], Any]]) -> None:
        program = self.program
        kernels = [(k, h) for k, _, h in records]
        if self.launches and kernels == self.kernels and self.layout == self._built_layout:
            # same launches: rebind
            for bound, (_, values, _) in zip(self.launches, records):
                for i, v in enumerate(values):
                    if v is not bound.values[i] and not (
                            type(v) in (int, float) and type(v) is type(bound.values[i])
                            and v == bound.values[i]):
                        bound.set_arg(i, as_host_array(v) if
                                      bound.compiled.params[i].kind == "ndarray" else v)
            if self.device_graph is not None:
                self.device_graph.update([b.entry for b in self.launches])
        else:
            self.release()
            self.launches = [BoundLaunch(h, [as_host_array(v) if p.kind == "ndarray" else v
                                             for p, v in zip(h.compiled.params, values)])
                             for _, values, h in records]
            self.kernels = kernels
            self.device_graph = program.device.graph([b.entry for b in self.launches],
                                                     self.layout)
            self._built_layout = self.layout
        self.bumps = [obj for b in self.launches for obj in b.generation_bumps()]
        self.counts = [b.handle.launch_count for b in self.launches]
        self.sized = [b for b in self.launches if b.size_check is not None]

    # ---- replay -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.step is None:
            if args or kwargs:
                raise TypeError("a graph recorded with `with jr.graph()` replays without "
                                "arguments")
            return self.replay()
        if self.launches and self._current() and self._same(args, kwargs):
            return self.replay()
        self.record(*args, **kwargs)

    def record(self, *args: Any, **kwargs: Any) -> None:
        """Run the step in recording mode and rebuild (or update) the graph from its
        launches, whatever the arguments."""
        assert self.step is not None
        self._begin()
        try:
            self.step(*args, **kwargs)
        finally:
            records = self._end()
        self._build(records)
        self.args, self.kwargs = args, kwargs

    def _same(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if len(args) != len(self.args) or kwargs.keys() != self.kwargs.keys():
            return False
        pairs = list(zip(args, self.args)) + [(kwargs[k], self.kwargs[k]) for k in kwargs]
        return all(a is b or (type(a) in (int, float, bool) and type(a) is type(b) and a == b)
                   for a, b in pairs)

    def _current(self) -> bool:
        """Whether replays may run: its program is the current one and this thread records
        nothing (another thread's Tape does not matter)."""
        program = self.program
        return program is not None and program.tape is None and program_mod.ACTIVE[0] in (
            program, program.tape_token, program.validate_token)

    def replay(self) -> None:
        """Run the recorded launches again, with the arguments they were recorded with."""
        if not self._current():
            raise JitrtError("jr.graph: the program it was recorded in was replaced "
                             "(jr.init/jr.reset), or this thread records a Tape; record it "
                             "again, or replay it outside the Tape")
        self._replay()

    def _replay(self) -> None:
        """`replay` once `_current()` holds."""
        if self.device_graph is None:
            for bound in self.launches:
                cast(Any, bound)()     # a bound launch's generated __call__
            return
        with self.program.launch_lock:
            for bound in self.sized:
                bound.size_check()
            if self.sized:
                self.device_graph.recapture_if_changed([b.entry for b in self.sized])
            for obj in self.bumps:
                obj.gen += 1
            for count in self.counts:
                count[0] += 1
            self.device_graph.replay()

    def release(self) -> None:
        if self.device_graph is not None:
            self.device_graph.release()
        self.device_graph = None

    def __len__(self) -> int:
        return len(self.launches)


class KernelGraph:
    """`@jr.kernel(graph=True)` on a GPU program (Quadrants' option): the kernel's launches
    (one per task) are recorded once as a graph (`Graph`) and replayed, one driver call, at
    each later call with the same arguments (`arg_state`: arrays and fields by identity,
    numbers by value, a dataclass by its members). A call with other arguments runs and
    records again (the graph updated in place); after `MISSES` such calls in a row the kernel
    launches as usual for good (its arguments change at every call: recording would only add
    work). Launched as usual: inside a `jr.ad.Tape` or a recording `jr.graph`, under the
    kernel profiler, and a kernel that returns a value; on the CPU it is never asked
    (`graph_call` becomes the kernel's `__call__` on GPU programs only, in
    `launcher.install_fast_path`). Caches: the graph of the current program, the state of
    its arguments. `record`, where given, records a call into the graph instead of
    `Graph.record` (a `do_while` kernel's, `quadrants/graph_loop.py`)."""

    MISSES = 3

    def __init__(self, kernel: Any,
                 record: Callable[[Graph, tuple[Any, ...], dict[str, Any]], None] | None = None
                 ) -> None:
        self.kernel = kernel
        self.record = record
        self.graph: Graph | None = None
        self.state: tuple[Any, ...] = ()
        self.misses = 0
        self.off = False

    def launch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Launch through the graph; False where the kernel must be launched as usual."""
        if self.off:
            return False
        program = program_mod.current()
        if program.tape is not None or program.profile is not None or not program.stream_gpu:
            return False
        g = self.graph
        if g is None or g.program is not program:
            g = self.graph = Graph(self.kernel)
            self.misses = 0
        state = arg_state((args, kwargs))
        if g.launches and g._current() and same_state(state, self.state):
            self.misses = 0
            g._replay()
            return True
        if g.launches:
            self.misses += 1
            if self.misses > self.MISSES:
                self.off = True
                g.release()
                self.graph = None
                return False
        if self.record is None:
            g.record(*args, **kwargs)
        else:
            self.record(g, args, kwargs)
        self.state = state
        return True


def graph_call(kernel: Any, fast: Any) -> Any:
    """A graph kernel's `__call__` on a GPU program (`launcher.install_fast_path` asks for it
    through `kernel.graph_call`): through its `KernelGraph`, else `fast`, the launcher it
    would have had, which the recording itself calls."""
    state = kernel.__dict__.get("graph_launch")
    if state is None:
        state = kernel.__dict__["graph_launch"] = KernelGraph(kernel)
    plain = isinstance(fast, types.FunctionType)     # a Python launcher takes `self`
    launch = state.launch

    def call(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if launch(args, kwargs):
            return None
        return fast(self, *args, **kwargs) if plain else fast(*args, **kwargs)
    # (jitrt's errors reach the user without jitrt's frames, as from other kernels)
    return user_facing(call, "__call__", packed=True)


def arg_state(v: Any) -> Any:
    """What a graph kernel's replay depends on in argument `v`: a dataclass as its members
    (Genesis's states, frozen dataclasses of tensors), tuples, lists and dicts by their
    items, anything else as itself (`same_state` compares numbers by value, the rest by
    identity). The state of a frozen dataclass holding only frozen ones is kept (`_FROZEN`,
    weakly), since its members cannot be rebound."""
    return _state(v)[0]


def _state(v: Any) -> tuple[Any, bool]:
    """(the state of `v`, whether it can never change)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        kept = _FROZEN.get(id(v))
        if kept is not None and kept[0]() is v:
            return kept[1], True
        parts = [_state(getattr(v, f.name)) for f in dataclasses.fields(v)]
        state = (_DATACLASS, v) + tuple(p[0] for p in parts)
        fixed = bool(getattr(v, "__dataclass_params__").frozen) and all(p[1] for p in parts)
        if fixed:
            _keep(v, state)
        return state, fixed
    if isinstance(v, (tuple, list)):
        parts = [_state(x) for x in v]
        return (_SEQUENCE,) + tuple(p[0] for p in parts), \
            type(v) is tuple and all(p[1] for p in parts)
    if isinstance(v, dict):
        return (_SEQUENCE,) + tuple((k, arg_state(x)) for k, x in v.items()), False
    return v, True


def _keep(v: Any, state: Any) -> None:
    key = id(v)

    def forget(_: Any, kept: dict[int, tuple[Any, Any]] = _FROZEN) -> None:
        kept.pop(key, None)        # (bound now: at exit the module's names are None)
    try:
        _FROZEN[key] = (weakref.ref(v, forget), state)
    except TypeError:                     # no weak references (slots): not kept
        pass


_DATACLASS, _SEQUENCE = object(), object()
_FROZEN: dict[int, tuple[Any, Any]] = {}


def same_state(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return type(a) in (int, float, bool, str) and type(a) is type(b) and a == b


def graph(step: Callable[..., Any] | None = None) -> Graph:
    """Record the launches of one step and replay them as a whole (a CUDA graph on GPUs).

    `g = jr.graph(step)` then `g(*args)`: the first call records (running the step), later
    calls with the same arguments replay; `with jr.graph() as g: ...` then `g()`. See
    docs/gpu.md ("Graphs").

    Example::

        g = jr.graph(lambda: [substep() for _ in range(100)])
        g()        # records (and runs) the 100 launches
        g()        # replays them: one driver call on a GPU
    """
    return Graph(step)


graph.do_while = graph_do_while  # type: ignore[attr-defined]   # Quadrants' qd.graph.do_while(flag)
