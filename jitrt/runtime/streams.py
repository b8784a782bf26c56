"""Streams and events: `jr.Stream`, `jr.Event` and `with jr.stream(s):`.

Stage: runtime. A `Stream` is one stream of one device: made by jitrt (`jr.Stream()`) or
another library's (`jr.Stream.from_handle(torch.cuda.current_stream().cuda_stream)`). Inside
`with jr.stream(s):` every launch, upload, fill, copy and graph replay of that device is
queued on `s` (the device seam's `use_stream`; the launchers read the stream from a cell the
block changes, so a launch outside a block costs what it did). An `Event` records a point of
a stream; another stream waits for it on the device (`wait`), the host with `synchronize`.
On the CPU, launches run in order on the calling thread: streams and events are accepted and
do nothing. docs/gpu.md, "Several devices, streams and interop", has the rules. Caches: none.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from ..errors import JitrtError
from . import program as program_mod
from .devices import device as device_block

if TYPE_CHECKING:
    from ..backends.base import Device, Handle
    from .program import Program


def _program_of(device_id: int | None) -> "Program":
    """The program of device `device_id` (None: the current one), opened if needed."""
    if device_id is None:
        return program_mod.current()
    return program_mod.open_program(device_id)


def _open(program: "Program", what: str) -> "Program":
    if program_mod.OPEN.get((program.arch, program.config.device_id)) is not program:
        raise JitrtError(f"{what} belongs to a program that jr.init or jr.reset closed; "
                         "make a new one")
    return program


class _DriverObject:
    """A stream or event of one device's driver: destroyed by `close()` (or when collected)
    if jitrt made it and its program is still open; one wrapped `from_handle` is never."""
    _owned: bool
    _program: "Program"
    device_id: int
    handle: "Handle | None"

    def _destroy(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Destroy the driver object jitrt made (work queued on a stream still runs); also
        done when the object is collected."""
        if self._owned and program_mod.OPEN.get(
                (self._program.arch, self.device_id)) is self._program:
            self._destroy()
        self._owned = False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


class Stream(_DriverObject):
    """A stream of one GPU (`device`: its id; None: the current program's device). On the
    CPU a stream is accepted and launches still run in order."""

    def __init__(self, device: int | None = None) -> None:
        self._program = _program_of(device)
        self.device_id: int = self._program.config.device_id
        self.handle = self._program.device.create_stream()
        self._owned = self.handle is not None

    @classmethod
    def from_handle(cls, address: int, device: int | None = None) -> "Stream":
        """Another library's stream by its address (`torch.cuda.current_stream().cuda_stream`,
        `cupy.cuda.get_current_stream().ptr`); jitrt never destroys it."""
        out = cls.__new__(cls)
        out._program = _program_of(device)
        out.device_id = out._program.config.device_id
        out.handle = out._program.device.from_address("stream", int(address))
        out._owned = False
        return out

    @property
    def cuda_stream(self) -> int:
        """The stream's address (0 on the CPU), for `torch.cuda.ExternalStream(...)`."""
        return self._program.device.address_of(self.handle)

    def synchronize(self) -> None:
        """The host waits for the work queued on this stream."""
        if self.handle is not None:
            _open(self._program, "this stream").device.synchronize_stream(self.handle)

    def wait_event(self, event: "Event") -> None:
        """Work queued on this stream from now on waits (on the device) for `event`."""
        event.wait(self)

    def wait_stream(self, other: "Stream") -> None:
        """Work queued on this stream from now on waits for what `other` has queued so far."""
        self.wait_event(Event(self.device_id).record(other))

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record `event` (a new one when None) on this stream and return it."""
        return (event or Event(self.device_id)).record(self)

    def _destroy(self) -> None:
        self._program.device.destroy_stream(self.handle)

    def __repr__(self) -> str:
        return f"<jr.Stream {self._program.arch}:{self.device_id} 0x{self.cuda_stream:x}>"


class Event(_DriverObject):
    """A point in a stream of one GPU: `record` it, then `wait` for it on another stream (on
    the device) or `synchronize` the host with it. On the CPU it does nothing."""

    def __init__(self, device: int | None = None) -> None:
        self._program = _program_of(device)
        self.device_id: int = self._program.config.device_id
        self.handle = self._program.device.create_event()
        self._owned = self.handle is not None

    @classmethod
    def from_handle(cls, address: int, device: int | None = None) -> "Event":
        """Another library's event by its address (`torch.cuda.Event().cuda_event`)."""
        out = cls.__new__(cls)
        out._program = _program_of(device)
        out.device_id = out._program.config.device_id
        out.handle = out._program.device.from_address("event", int(address))
        out._owned = False
        return out

    def record(self, stream: Stream | None = None) -> "Event":
        """Record this event on `stream` (None: the stream the device queues on now)."""
        if self.handle is not None:
            _open(self._program, "this event").device.record_event(
                self.handle, None if stream is None else self._same(stream).handle)
        return self

    def wait(self, stream: Stream | None = None) -> None:
        """`stream` (None: the one the device queues on now) waits for this event on the
        device; the host does not wait."""
        if self.handle is not None:
            _open(self._program, "this event").device.wait_event(
                None if stream is None else self._same(stream).handle, self.handle)

    def synchronize(self) -> None:
        """The host waits for the work this event recorded."""
        if self.handle is not None:
            _open(self._program, "this event").device.synchronize_event(self.handle)

    def _same(self, stream: Stream) -> Stream:
        if stream._program is not self._program:
            raise JitrtError(f"an event of device {self.device_id} cannot be recorded on or "
                             f"waited for by a stream of device {stream.device_id}")
        return stream

    def _destroy(self) -> None:
        self._program.device.destroy_event(self.handle)


@contextlib.contextmanager
def stream(s: Stream) -> Iterator[Stream]:
    """`with jr.stream(s):` queues the launches, copies, fills and graph replays of the
    stream's device on `s` (and makes that device the current one for the block, as
    `jr.device` does); the stream used before is current again after it. On the device,
    `s` first waits for what the stream before it had queued, and that stream, after the
    block, for what the block queued on `s`: jitrt's work stays in order across the block
    (the host never waits)."""
    program = _open(s._program, "this stream")
    with contextlib.ExitStack() as scope:
        if program is not program_mod.current():
            scope.enter_context(device_block(s.device_id))
        device = program.device
        previous = device.use_stream(s.handle)
        _order(device, s.handle, previous)
        try:
            yield s
        finally:
            if program_mod.OPEN.get((program.arch, s.device_id)) is program:
                _order(device, previous, s.handle)
                device.use_stream(previous)


def _order(device: "Device", waiter: "Handle | None", waited: "Handle | None") -> None:
    """`waiter` waits on the device for the work queued so far on `waited` (one event,
    released at once: a wait keeps what it needs); nothing where there are no streams or
    both are one stream."""
    if waiter is None or waited is None or waiter is waited:
        return
    event = device.create_event()
    if event is None:
        return
    device.record_event(event, waited)
    device.wait_event(waiter, event)
    device.destroy_event(event)
