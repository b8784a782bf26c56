"""Bound launches: `k.bind(*args)` packs the arguments once into a context of its own.

Stage: runtime. A `BoundLaunch` shares its handle's compiled kernel and sizing infos and owns
a `LaunchContext`; calling it runs generated straight-line code (`launch_source.py`) with no
per-call argument work beyond re-checking plain numpy arrays, which can change in place after
binding. `set_arg` rebinds one argument within the same specialization. It reads the
handle's `LaunchPlan`, like every launcher; in the chain of the launch modules it comes last
(after `launcher.py`, whose handles it binds).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codegen import abi
from ..data import Ndarray
from ..errors import KernelArgCountError, KernelArgError
from . import native_launch
from . import program as program_mod
from .arguments import (as_host_array, bind_args, changed_expr, describe, fail, pack_vector,
                        specialize, watch_state)
from ..faults import raise_fault
from .context import LaunchContext
from .launch_source import entry_lines, return_lines, serialized, sizing_lines
from .launcher import LaunchHandle, handle_for

if TYPE_CHECKING:
    from .seams import KernelLike


class _Gen:
    """Stands in for data without a generation counter (a plain numpy array)."""
    __slots__ = ("gen", "escaped")

    def __init__(self) -> None:
        self.gen = 0
        self.escaped = False


def record(bound: "BoundLaunch") -> None:
    """A bound launch inside a `jr.ad.Tape` of the calling thread is recorded as a plain
    launch of its kernel with the bound values (its adjoint runs in the reverse pass); under
    a validating tape it runs unchecked. After `jr.init` or inside `jr.ad.FwdMode` it runs the
    kernel it was built for, as before."""
    tape = bound.program.tape
    if tape is not None:
        tape.record(bound.handle.kernel, tuple(bound.values), bound.handle)


class BoundLaunch(LaunchContext):
    """A launch with every argument packed into its own context buffer.

    `launch()` runs it with no per-call argument work; `launch.set_arg(name_or_index, value)`
    rebinds one argument (validated against the same specialization). Each bound launch gets
    its own small class whose `__call__` is generated straight-line code."""

    def __new__(cls, handle: "LaunchHandle", values: list[Any]) -> "BoundLaunch":
        return super().__new__(type(f"BoundLaunch[{handle.compiled.name}]", (cls,), {}))

    def __init__(self, handle: "LaunchHandle", values: list[Any]) -> None:
        super().__init__(handle.compiled, handle.program, handle.plan, handle.sizing_infos)
        self.handle = handle
        self.values = list(values)
        # what each ndarray argument was when packed: re-checked before every call, since a
        # numpy array can move its buffer (resize) or change in place after binding
        self.watch: dict[int, list[Any]] = {}
        for i in range(len(values)):
            self._pack(i)
        self.array_bumps: list[list[Any]] = [[_Gen()] for _ in self.plan.array_bumps]
        self._update_bumps()
        self.cells = [[v] for v in self.values]   # the bound values the snapshot reads
        setattr(type(self), "__call__", self._make_call())
        self.size_check = self._make_size_check()

    def _make_size_check(self) -> Any:
        """The adstack sizing part of a call alone (a graph replay runs it before launching
        the graph: a capacity that changed is written to the context, and the device graph
        updated before the replay). None when the capacities are fixed."""
        if self.sizing is None:
            return None
        env: dict[str, Any] = {"buf": self.buf, "addr": self.addr}
        lines = ["def size_check():"]
        for i, cell in enumerate(self.cells):
            env[f"cell{i}"] = cell
            lines.append(f"    a{i} = cell{i}[0]")
        lines += sizing_lines(self.plan, self, env)
        exec(compile("\n".join(lines), f"<jitrt size check {self.compiled.name}>", "exec"),
             env)  # noqa: S102
        return env["size_check"]

    def generation_bumps(self) -> list[Any]:
        """The objects whose `gen` a call of this launch moves (its write set)."""
        objs = self.compiled.field_objs
        fields = [objs[s].grad if g else objs[s] for s, g in self.plan.field_bumps]
        return fields + [cell[0] for cell in self.array_bumps]

    def _make_call(self) -> Any:
        c, plan = self.compiled, self.plan
        env: dict[str, Any] = {"cnt": self.handle.launch_count, "entry": self.entry,
                               "buf": self.buf, "dbuf": self.dbuf, "addr": self.addr,
                               "raise_fault": raise_fault, "c": c, "Ndarray": Ndarray,
                               "active": program_mod.ACTIVE, "prog": self.handle.active_key,
                               "record": record}
        # a Tape (any thread's) or a replaced program: record it on this thread's tape if any
        lines = ["def __call__(self):", "    if active[0] is not prog: record(self)"]
        for i, cell in enumerate(self.cells):
            env[f"cell{i}"] = cell
            if self.sizing is not None or i in self.watch:
                lines.append(f"    a{i} = cell{i}[0]")
        for i, state in self.watch.items():
            env[f"last{i}"] = state
            lines.append(f"    if {changed_expr(f'a{i}', f'last{i}', i in self.handle.written)}:"
                         f" self._pack({i})")
        lines.append("    cnt[0] += 1")
        if self.sizing is not None:
            lines += sizing_lines(plan, self, env)
        for k, (slot, grad) in enumerate(plan.field_bumps):
            env[f"f{k}"] = c.field_objs[slot].grad if grad else c.field_objs[slot]
            lines.append(f"    f{k}.gen += 1")
        for k, cell in enumerate(self.array_bumps):
            env[f"w{k}"] = cell
            lines.append(f"    w{k}[0].gen += 1")
        lines += entry_lines(c.name, env, self.program)
        if plan.faults_in_context:
            lines.append("    if buf[0]: raise_fault(buf, c)")
        if plan.adstacks:
            lines.append(f"    if buf[{abi.SLOT_OVERFLOW}]: self.overflow()")
        lines += return_lines(plan, c.field_objs, env)
        lines = lines[:1] + serialized(lines[1:], env, self.program)
        source = "\n".join(lines)
        exec(compile(source, f"<jitrt bound launch {c.name}>", "exec"), env)  # noqa: S102
        call = env["__call__"]
        call.source = source
        self.python_call = call        # what a native `__call__` falls back to
        if self.watch:      # a bound numpy array: re-checked by the Python call only
            return call
        return native_launch.bound_builtin(
            self, self.handle.active_key, [cell[0] for cell in self.array_bumps],
            functools.partial(call, self), self.handle.launch_count) or call

    def _pack(self, i: int) -> None:
        p, v = self.plan.params[i], self.values[i]
        slot, dt = p.slot, p.dtype
        if p.kind == "scalar" and dt is not None:
            if dt.is_float:
                self.dbuf[slot] = float(v)
            else:
                self.buf[slot] = int(v)
        elif p.kind == "vector" and dt is not None:
            pack_vector(self.buf, self.dbuf, slot, dt, v)
        elif p.kind == "ndarray" and dt is not None:
            written = p.written
            if not self.pack_array(self.buf, slot, v, dt, p.ndim, p.uses_grad, written,
                                   p.small):
                want = "a writable ndarray" if isinstance(v, np.ndarray) and written and \
                    not v.flags.writeable else "an ndarray"
                raise fail(self.handle.kernel, self.compiled.params[i],
                           f"{want} of {dt.name}, ndim={p.ndim} (C-contiguous)", describe(v))
            if isinstance(v, np.ndarray):   # a jitrt ndarray's buffer never moves: no watch
                state = self.watch.get(i)
                if state is None:
                    self.watch[i] = watch_state(v)
                else:
                    state[:] = watch_state(v)   # the generated __call__ reads this list
            else:
                self.watch.pop(i, None)

    def _update_bumps(self) -> None:
        for cell, (arg, grad) in zip(self.array_bumps, self.plan.array_bumps):
            v = self.values[arg]
            cell[0] = (v.grad if grad else v) if isinstance(v, Ndarray) else _Gen()

    def set_arg(self, key: int | str, value: Any) -> None:
        kernel = self.handle.kernel
        names = [p.name for p in kernel.params]
        if isinstance(key, str) and key not in names:
            raise KernelArgCountError(f"kernel {kernel.qualname}: Unexpected argument '{key}': "
                                      f"it has no parameter '{key}'")
        index = key if isinstance(key, int) else names.index(key)
        values = list(self.values)
        values[index] = value
        key_now = (self.program.serial, specialize(kernel, values, self.program.config)[1])
        if kernel.handles.get(key_now) is not self.handle:
            raise KernelArgError(f"kernel {kernel.qualname}: rebinding '{names[index]}' would "
                                 "change the specialization; bind a new launch instead")
        self.values = values
        self._pack(index)
        self._update_bumps()
        self.cells[index][0] = value
        setattr(type(self), "__call__", self._make_call())   # the watched arrays may differ
        self.size_check = self._make_size_check()


def bind(kernel: "KernelLike", args: tuple[Any, ...], kwargs: dict[str, Any]) -> BoundLaunch:
    """Validate and pack the arguments once; nothing runs until the bound launch is called."""
    values = [as_host_array(v) if p.kind == "ndarray" else v
              for p, v in zip(kernel.params, bind_args(kernel, args, kwargs))]
    return BoundLaunch(handle_for(kernel, values), values)
