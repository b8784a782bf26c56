"""`while jr.graph.do_while(flag):` in a `@jr.kernel(graph=True)` kernel (Quadrants' device-side
loop over a kernel's tasks), run as a host-side do-while over sub-kernels.

Stage: API (above kernels). Input: a kernel function whose top level holds one or more
`while jr.graph.do_while(flag):` loops (`flag` a 0-d i32 ndarray parameter), possibly nested
directly inside one another, as Quadrants allows. Output: a `GraphLoopKernel`, the callable the
decorator returns instead of a `Kernel`: the statements before, inside and after each loop
become kernels of their own (same function, same parameters, one part of the body each, named
`<kernel>[do_while part k]`, so each has its own offline-cache entry), and a call runs them
in order, each loop's part(s) at least once and again while `flag` holds a non-zero value
after them. Reading the flag is a Python-scope element read (on a GPU: one 4-byte copy and a
stream wait per iteration): Quadrants' own fallback on GPUs without conditional graph nodes
and on the CPU. Caches the sub-kernels (per GraphLoopKernel).

Refused at decoration, with the line: a flag that is not a parameter name, a `return` in such a
kernel, a kernel-scope local assigned in one part and read in another (each part is a launch of
its own: keep such values in a field or an ndarray).
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import TYPE_CHECKING, Any, Callable, Union

from ..errors import KernelSyntaxError
from ..frontend.source import SourceInfo, capture

if TYPE_CHECKING:
    from ..runtime.graph import KernelGraph

Part = Union["_Run", "_Loop"]


@dataclasses.dataclass
class _Run:
    """Statements of one part: a kernel of their own."""
    stmts: list[ast.stmt]
    kernel: Any = None


@dataclasses.dataclass
class _Loop:
    """A do-while: `parts` run, then again while the parameter `flag` is non-zero."""
    flag: str
    parts: list[Part]


def _is_do_while(node: ast.stmt, fn: Callable) -> bool:
    """`while <...>.do_while(x):` whose callee is jitrt's `graph.do_while` builtin."""
    if not isinstance(node, ast.While) or not isinstance(node.test, ast.Call):
        return False
    callee = node.test.func
    if not (isinstance(callee, ast.Attribute) and callee.attr == "do_while"):
        return False
    from ..frontend.builtins import graph_do_while
    try:
        value = eval(compile(ast.Expression(callee), "<do_while>", "eval"),  # noqa: S307
                     fn.__globals__, _closure(fn))
    except Exception:          # not resolvable here: the kernel frontend reports it
        return False
    return value is graph_do_while


def _closure(fn: Callable) -> dict[str, Any]:
    cells = fn.__closure__ or ()
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def has_do_while(fn: Callable) -> bool:
    """Whether `fn`'s source mentions `do_while` at all (cheap; no parse)."""
    try:
        return "do_while" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def split(body: list[ast.stmt], fn: Callable, src: SourceInfo, params: set[str]) -> list[Part]:
    """The parts of a body: runs of statements between top-level do-while loops."""
    parts: list[Part] = []
    run: list[ast.stmt] = []
    for stmt in body:
        if not _is_do_while(stmt, fn):
            if isinstance(stmt, ast.Return):
                raise src.error(stmt, "a kernel with jr.graph.do_while() cannot return a "
                                "value (its parts are launched one by one)", KernelSyntaxError)
            run.append(stmt)
            continue
        assert isinstance(stmt, ast.While) and isinstance(stmt.test, ast.Call)
        args = stmt.test.args
        if len(args) != 1 or stmt.test.keywords or not isinstance(args[0], ast.Name) \
                or args[0].id not in params:
            raise src.error(stmt.test, "jr.graph.do_while(flag) takes one argument: the name "
                            "of a 0-d i32 ndarray parameter of the kernel", KernelSyntaxError)
        if stmt.orelse:
            raise src.error(stmt, "a `while jr.graph.do_while(...)` loop has no `else`",
                            KernelSyntaxError)
        if run:
            parts.append(_Run(run))
            run = []
        parts.append(_Loop(args[0].id, split(stmt.body, fn, src, params)))
    if run:
        parts.append(_Run(run))
    return parts


def _runs(parts: list[Part]) -> list[_Run]:
    out: list[_Run] = []
    for p in parts:
        out += [p] if isinstance(p, _Run) else _runs(p.parts)
    return out


def _names(stmts: list[ast.stmt], ctx: type) -> dict[str, ast.Name]:
    return {node.id: node for s in stmts for node in ast.walk(s)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ctx)}


def check_locals(runs: list[_Run], src: SourceInfo, params: set[str]) -> None:
    """No kernel-scope local crosses from one part to another."""
    stored = [_names(r.stmts, ast.Store) for r in runs]
    for k, r in enumerate(runs):
        for name, node in _names(r.stmts, ast.Load).items():
            if name in params or name in stored[k]:
                continue
            if any(name in other for j, other in enumerate(stored) if j != k):
                raise src.error(node, f"'{name}' is assigned in another part of this kernel "
                                "than the jr.graph.do_while() loop reading it; each part is "
                                "launched on its own: keep the value in a field or an ndarray",
                                KernelSyntaxError)


class GraphLoopKernel:
    """A `@jr.kernel(graph=True)` kernel with `jr.graph.do_while` loops (module docstring)."""

    is_jitrt_kernel = True

    def __init__(self, fn: Callable, make: Callable[[Callable, SourceInfo, int], Any],
                 fastcache: bool) -> None:
        self.fn, self.fastcache, self.graph = fn, fastcache, True
        self.name, self.qualname = fn.__name__, f"{fn.__module__}.{fn.__qualname__}"
        self.signature = inspect.signature(fn)
        src = capture(fn)
        params = set(self.signature.parameters)
        self.parts = split(list(src.tree.body), fn, src, params)
        self.flags = _flag_names(self.parts)        # every loop's flag, nested ones too
        runs = _runs(self.parts)
        check_locals(runs, src, params)
        for k, r in enumerate(runs):
            tree = ast.FunctionDef(**{f: getattr(src.tree, f) for f in src.tree._fields})
            tree.body = r.stmts
            r.kernel = make(fn, dataclasses.replace(src, tree=tree), k)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        call = self.signature.bind(*args, **kwargs)
        if not self._device_loops(args, kwargs, call.arguments):
            self._run(self.parts, args, kwargs, call.arguments)

    # ---- on a GPU whose graphs hold loops (CUDA's conditional nodes) --------------------
    _replays: "KernelGraph | None" = None
    device_loops = True     # False: the host loop at every call (benchmarks/gpu/bench.py)

    def _device_loops(self, args: tuple, kwargs: dict, named: dict) -> bool:
        """The call as one device graph whose loops run on the device (no flag read on the
        host), through a `KernelGraph`: recorded at a call (the parts run as usual, each
        loop's first iteration recorded as its body, `_record_call`), replayed at each later
        call with the same arguments. False where the host-side loop runs: not a GPU with
        graph loops, a flag that is not a jitrt ndarray, and where a `KernelGraph` launches
        as usual (a Tape or a recording graph, the profiler, arguments that changed at
        `KernelGraph.MISSES` calls in a row)."""
        from ..runtime import graph as graph_mod
        from ..runtime import program as program_mod
        program = program_mod.current()
        if not self.device_loops or not program.stream_gpu or \
                not program.device.graph_loops or not all(
                hasattr(named.get(f), "_mirror") for f in self.flags):
            return False
        if self._replays is None:
            self._replays = graph_mod.KernelGraph(None, self._record_call)
        return self._replays.launch(args, kwargs)

    def _record_call(self, g: Any, args: tuple, kwargs: dict) -> None:
        """Record a call into `g`: its launches, and their layout with the loops."""
        named = self.signature.bind(*args, **kwargs).arguments
        g._begin()
        try:
            layout = self._record(self.parts, args, kwargs, named, g)
        finally:
            records = g._end()
        g.layout = layout
        g._build(records)

    def _record(self, parts: list[Part], args: tuple, kwargs: dict, named: dict,
                g: Any) -> list[Any]:
        """Run `parts` as `_run` does while `g` records, and return their layout: the
        indices of the recorded launches, a loop as a `GraphLoop` of its first iteration's
        (later iterations run unrecorded: the same launches again)."""
        from ..backends.base import GraphLoop
        recorder, program = g._recorder, g.program
        layout: list[Any] = []
        for p in parts:
            if isinstance(p, _Run):
                start = len(recorder.launches)
                p.kernel(*args, **kwargs)
                layout += range(start, len(recorder.launches))
                continue
            layout.append(GraphLoop(named[p.flag], self._record(p.parts, args, kwargs,
                                                                named, g)))
            program.stop_recording()
            try:
                while flag_value(named[p.flag], p.flag, self.qualname):
                    self._run(p.parts, args, kwargs, named)
            finally:
                program.start_recording(recorder)
        return layout

    def _run(self, parts: list[Part], args: tuple, kwargs: dict, named: dict) -> None:
        for p in parts:
            if isinstance(p, _Run):
                p.kernel(*args, **kwargs)
                continue
            while True:
                self._run(p.parts, args, kwargs, named)
                if not flag_value(named[p.flag], p.flag, self.qualname):
                    break

    def __repr__(self) -> str:
        return f"<jitrt kernel {self.qualname} (graph do_while)>"


def _flag_names(parts: list[Part]) -> list[str]:
    """The flags of the loops among `parts`, nested ones too."""
    found: list[str] = []
    for p in parts:
        if isinstance(p, _Loop):
            found += [p.flag] + _flag_names(p.parts)
    return found


def flag_value(v: Any, name: str, where: str) -> int:
    """The flag's value: a 0-d array (jitrt ndarray, numpy or torch) read on the host."""
    if hasattr(v, "item") and not hasattr(v, "to_numpy"):
        return int(v.item())                        # numpy, torch
    try:
        return int(v[()])
    except Exception as exc:
        raise TypeError(f"kernel {where}: jr.graph.do_while({name}) needs a 0-d i32 ndarray "
                        f"argument, got {type(v).__name__}") from exc
