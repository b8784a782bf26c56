"""Device graphs on a GPU (`jr.graph`): the launches of a recorded sequence as one driver call.

Stage: backend (helpers of `gpu.py`). `GpuGraph` captures the kernels of its launch entries on
the device's stream into a graph and instantiates it; a replay does the host-side bookkeeping
of every launch (uploads, staging, device-newer marks) around one graph launch. Caches the
instantiated graph (updated in place when arguments change).
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Sequence, cast

from .base import EntryPoint, GraphLayout, GraphLoop
from .gpu_residency import unique
from .gpu_staging import copy_back

if TYPE_CHECKING:
    from .gpu import GpuDevice
    from .gpu_launch import GpuLaunch


class GpuGraph:
    """Bound launches recorded into one device graph (`jr.graph`): `replay()` brings changed
    host data to the device, stages host arrays, launches the graph (one driver call for all
    kernels) and does each launch's bookkeeping. `update(entries)` re-captures after changed
    arguments and updates the instantiated graph in place (instantiating again only when the
    driver refuses the update)."""

    def __init__(self, device: "GpuDevice", entries: Sequence[EntryPoint],
                 layout: GraphLayout | None = None) -> None:
        self.device = device
        self.exec: object = None       # the instantiated graph (the driver's handle)
        # the entries' order, with device-side loops (`GraphLoop`); None: in order
        self.layout = layout
        self.update(entries)

    def update(self, launches: Sequence[EntryPoint]) -> None:
        device, driver = self.device, self.device.driver
        entries = cast("list[GpuLaunch]", launches)     # what this device's launch_entry made
        for entry in entries:
            entry.prepare()
        flags = _flags(self.layout or ())
        if flags:           # device memory, the loop test and its streams: not in a capture
            for flag in flags:
                device.data_ptr(flag)
            driver.loop_prepare(_depth(self.layout or ()))
        driver.begin_capture()
        try:
            self._capture(entries, range(len(entries)) if self.layout is None else self.layout)
        finally:
            graph = driver.end_capture()
        if self.exec is not None and driver.exec_update(self.exec, graph):
            device.counters["graph_updates"] += 1
        else:
            if self.exec is not None:
                driver.destroy_exec(self.exec)
            self.exec = driver.instantiate(graph)
            device.counters["graph_instantiations"] += 1
        driver.destroy_graph(graph)
        self.entries = entries
        # what each captured launch's parameters were (a graph holds them by value)
        self.captured = {id(e): ctypes.string_at(e.context.addr, 8 * e.slots)
                         for e in entries}
        # a flag the host wrote goes up before a replay, as any input
        self.mirrors = unique([m for e in entries for m in e.inputs] +
                              [flag._mirror for flag in flags])
        self.written = unique([m for e in entries for m in e.outputs])
        self.staged = [e for e in entries if e.staging]

    def _capture(self, entries: "list[GpuLaunch]", layout: "GraphLayout | range") -> None:
        """Each entry's tasks on the stream, in the layout's order; a loop's body is
        captured into a conditional node of its own, its test at its end (the driver's
        `loop_begin` / `loop_end`)."""
        device = self.device
        for item in layout:
            if isinstance(item, GraphLoop):
                state = device.driver.loop_begin()
                try:
                    self._capture(entries, item.body)
                finally:
                    device.driver.loop_end(state, device.data_ptr(item.flag))
            else:
                entry = entries[item]
                device.run_tasks(entry.plan, entry.context)

    def recapture_if_changed(self, launches: Sequence[EntryPoint]) -> None:
        """Before a replay: if a launch's context changed since the capture (an adstack
        capacity or heap that grew), capture again and update the graph in place."""
        for e in cast("list[GpuLaunch]", launches):
            if ctypes.string_at(e.context.addr, 8 * e.slots) != self.captured[id(e)]:
                self.update(self.entries)
                return

    def replay(self) -> None:
        device = self.device
        for m in self.mirrors:
            if m.host_newer:
                m.to_device()
        copy_out: list[tuple[Any, int, int]] = [c for e in self.staged for c in e.stage_in()]
        device.driver.graph_launch(self.exec)
        device.counters["graph_replays"] += 1
        for m in self.written:
            m.device_newer = True
        if copy_out:
            copy_back(device, copy_out)

    def release(self) -> None:
        if self.exec is not None and not self.device.closed:
            self.device.driver.destroy_exec(self.exec)
        self.exec = None


def _flags(layout: GraphLayout) -> list[Any]:
    """The flag arrays of a layout's loops, nested ones too."""
    found: list[Any] = []
    for item in layout:
        if isinstance(item, GraphLoop):
            found += [item.flag] + _flags(item.body)
    return found


def _depth(layout: GraphLayout) -> int:
    """How deep a layout's loops nest."""
    return max((1 + _depth(item.body) for item in layout if isinstance(item, GraphLoop)),
               default=0)
