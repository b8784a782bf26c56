"""One GPU driver for every stream API whose calls have the CUDA driver API's shape.

Stage: backend. CUDA's driver API and HIP name the same calls differently (`cuMemAlloc`,
`hipMalloc`) and take them with the same arguments; their Python bindings (cuda-bindings,
hip-python) return `(error, value...)` tuples. `StreamDriver` implements the `GpuDriver`
protocol (`gpu_driver.py`) once over a vendor's binding module (`lib`) and a `StreamApi`: the
table of the vendor's call names and constants. The error-check rule is written once too: a
result whose first item is not the vendor's success code raises the vendor's error type naming
the call and the error (`cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY`). A vendor module
(`cuda.py`, `amdgpu.py`) holds its table and a subclass with only its differences: how the
device is opened and made current, what its artifact holds. Caches: the modules loaded (unloaded
at `close`), and per thread whether the device is current on it.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any, Callable

from ..errors import BackendUnavailableError
from ..frozen import frozen

Const = Callable[[Any], Any]      # a constant of the binding module: lib -> value


@frozen
class StreamApi:
    """One stream API's calls by name (each takes the arguments CUDA's namesake takes) and
    the constants it needs from the binding module."""
    success: Const                 # the success code results are compared with
    error_code: Callable[[Any, int], Any]   # (lib, raw code) -> the binding's error value
    get_error_name: str
    init: str
    device_count: str
    set_current: str               # makes the device (or its context) current on a thread
    attribute: str                 # (attribute, device) -> value
    multiprocessors: Const         # the attribute values of multiprocessors, threads per one
    threads_per_multiprocessor: Const
    driver_version: str
    stream_create: str
    stream_flags: Const            # `jr.Stream()`'s streams: non-blocking (torch's pool's too)
    device_stream_flags: Const     # the device's own stream: blocking (ordered with the legacy
    # default stream, as Taichi's and Quadrants' launches on it and torch's default stream are)
    stream_synchronize: str
    stream_destroy: str
    module_load: str
    module_unload: str
    module_function: str
    launch: str
    launch_extra: Any              # the launch call's last argument ("extra": 0 or None)
    event_create: str
    event_flags: Const             # no timing
    event_record: str
    event_synchronize: str
    event_destroy: str
    begin_capture: str
    capture_mode: Const            # thread-local capture
    end_capture: str
    instantiate: str
    exec_update: str
    exec_update_extra: tuple[Any, ...]    # arguments after (graph exec, graph)
    graph_launch: str
    graph_destroy: str
    exec_destroy: str
    alloc: str
    alloc_pinned: str
    pinned_flags: Callable[[Any], tuple[Any, ...]]  # arguments after the size
    free: str
    free_pinned: str
    copy_h2d: str
    copy_d2h: str
    copy_d2d: str
    memset: str                    # 1-byte words: (dst, value, count, stream)
    memset16: str                  # 2-byte words, as memset
    memset32: str                  # 4-byte words, as memset
    memset32_signed: bool = False  # memset32 takes a signed int (HIP's hipMemsetD32Async)
    stream_wait_event: str = ""    # (stream, event, flags): the stream waits for the event
    # (lib, "stream" or "event", address) -> the binding's handle of another library's
    # stream or event (torch's `cuda_stream`, an event's handle); the address by default
    from_address: Callable[[Any, str, int], Any] = lambda lib, kind, address: address


MemsetCall = tuple[int, int, int, int, int]   # (word bytes, offset, value, words, pitch)


@functools.lru_cache(maxsize=256)      # a training loop fills the same arrays every step
def memset_plan(pattern: bytes, count: int) -> tuple[MemsetCall, ...]:
    """The driver memsets that write `count` copies of `pattern` (one element's bytes): one
    memset of 1-, 2- or 4-byte words when the pattern repeats such a word (f32, i8, f64 0.0,
    an f64 whose halves are equal, a vector of equal components), else one pitched memset
    (pitch: the pattern's size, one word a row) per 4-byte word of the pattern (2-byte or
    1-byte words when its size is not a multiple of 4; `StreamDriver.fill` does not issue
    those: their presence sends it to `fill_doubling`). Values are little-endian words, as
    every GPU stores them; nothing for `count` 0."""
    size = len(pattern)
    if not count or not size:
        return ()
    for width in (1, 2, 4):
        if size % width == 0 and pattern == pattern[:width] * (size // width):
            return ((width, 0, int.from_bytes(pattern[:width], "little"), count * size // width,
                     0),)
    width = 4 if size % 4 == 0 else 2 if size % 2 == 0 else 1
    return tuple((width, k, int.from_bytes(pattern[k:k + width], "little"), count, size)
                 for k in range(0, size, width))


class _Bound(threading.local):
    """Per thread: the driver whose device (context) jitrt last made current on it, for all
    drivers of the process (two devices' drivers take turns on one thread)."""
    driver: object = None


BOUND = _Bound()


def first(value: Any) -> Any:
    """The first value of a call that returns several (`check` gives them as a list)."""
    return value[0] if isinstance(value, list) else value


class StreamDriver:
    """The `GpuDriver` calls over one device of a stream API, from its `StreamApi` table."""

    name = "?"                      # the arch name ("cuda", "amdgpu")
    api: StreamApi
    error: type[Exception] = RuntimeError     # what a failing call raises
    device_noun = "GPU(s)"          # in "this machine has 2 GPU(s)"
    dlpack_device_type = 0
    max_grid_threads = 0

    def __init__(self, lib: Any, device_id: int) -> None:
        self.jit_loads = 0          # modules the driver compiled at load (no ready image)
        self._pattern: Any = None   # the last pattern `fill_doubling` uploaded
        self.lib, api = lib, self.api
        self._success = api.success(lib)
        self.checked(api.init, 0)
        count = self.checked(api.device_count)
        if not 0 <= device_id < count:
            raise BackendUnavailableError(f"arch={self.name}: device_id={device_id} but this "
                                          f"machine has {count} {self.device_noun}")
        self.device = self.open(device_id)
        self._thread = BOUND
        self.bind()
        self.multiprocessors = self.attribute(api.multiprocessors(lib))
        self.max_threads_per_multiprocessor = self.attribute(
            api.threads_per_multiprocessor(lib))
        self.setup()
        self.driver_version = self.checked(api.driver_version)
        self.stream = self.checked(api.stream_create, api.device_stream_flags(lib))
        # the stream launches, copies and memsets go on: jitrt's own (`stream`) unless a
        # `jr.stream(...)` block chose another (`use_stream`)
        self.cur: list[Any] = [self.stream]
        self._launch, self._extra = getattr(lib, api.launch), api.launch_extra
        self._modules: list[Any] = []

    # ---- what a vendor may change ---------------------------------------------------------
    def open(self, device_id: int) -> Any:
        """The device handle `attribute` takes (the ordinal itself unless overridden)."""
        return device_id

    @property
    def current(self) -> Any:
        """What `set_current` makes current on a thread (the device unless overridden)."""
        return self.device

    def setup(self) -> None:
        """Read what else the vendor needs (compute capability, gfx name) once bound."""

    def load_module(self, image: bytes) -> Any:
        self.bind()
        module = self.checked(self.api.module_load, image)
        self._modules.append(module)
        return module

    def native_words(self) -> tuple[int, int, int, int] | None:
        """None: launches stay in the Python entry (see `GpuDriver.native_words`)."""
        return None

    # ---- calls ----------------------------------------------------------------------------
    def call(self, name: str, *args: Any) -> Any:
        return getattr(self.lib, name)(*args)

    def checked(self, name: str, *args: Any) -> Any:
        """Call `name` and return its value, raising the vendor's error if it failed."""
        return self.check(getattr(self.lib, name)(*args), name)

    def check(self, result: Any, what: str) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self._success:
            raise self.error(f"{what} failed: {self.error_text(err)}")
        return rest[0] if len(rest) == 1 else (rest or None)

    def error_text(self, err: Any) -> str:
        """The vendor's name of an error code (the code itself if it has none)."""
        name = self.call(self.api.get_error_name, err)
        text = name[-1] if isinstance(name, tuple) else name
        return str(text.decode() if isinstance(text, bytes) else text or err)

    def bind(self) -> None:
        """Make the device current on the calling thread (once per thread, again after
        another device's driver was made current there)."""
        if self._thread.driver is not self:
            self.checked(self.api.set_current, self.current)
            self._thread.driver = self

    def rebound(self, result: Any, name: str, *args: Any) -> Any:
        """After a failed call `name(*args)`: make the device current again and retry once,
        since another library may have made another device current on this thread
        (`torch.cuda.set_device`); a second failure raises."""
        self._thread.driver = None
        self.bind()
        return self.check(getattr(self.lib, name)(*args), name)

    def attribute(self, which: Any) -> int:
        return int(self.checked(self.api.attribute, which, self.device))

    # ---- code -----------------------------------------------------------------------------
    @property
    def graph_loops(self) -> bool:
        """Whether a capture can hold device-side loops (`loop_begin`/`loop_end`)."""
        return False

    def loop_prepare(self, depth: int) -> None:
        raise self.error(f"{self.name}: no device-side loops in graphs")

    def loop_begin(self) -> tuple[Any, Any, Any]:
        raise self.error(f"{self.name}: no device-side loops in graphs")

    def loop_end(self, state: tuple[Any, Any, Any], flag_ptr: int) -> None:
        raise self.error(f"{self.name}: no device-side loops in graphs")

    def function(self, module: Any, name: str) -> Any:
        """The handle of kernel `name` in `module`."""
        api = self.api.module_function
        return self.check(self.call(api, module, name.encode()), f"{api}({name})")

    def launch(self, function: Any, grid: int, block: int, params: int) -> None:
        if self._thread.driver is not self:
            self.bind()
        args = (function, grid, 1, 1, block, 1, 1, 0, self.cur[0], params, self._extra)
        result = self._launch(*args)
        if result[0] != self._success:
            self.rebound(result, self.api.launch, *args)

    def launch_source(self, function: str, grid: str, block: str, params: str
                      ) -> tuple[list[str], dict[str, Any]]:
        """`launch(...)` as lines of generated code (the GPU entry inlines it)."""
        names = {"_drv_launch": self._launch, "_drv_cur": self.cur, "_drv_self": self,
                 "_drv_ok": self._success, "_drv_tl": self._thread, "_drv_bind": self.bind,
                 "_drv_retry": self.launch}
        return ["if _drv_tl.driver is not _drv_self: _drv_bind()",
                f"err = _drv_launch({function}, {grid}, 1, 1, {block}, 1, 1, 0, _drv_cur[0], "
                f"{params}, {self.api.launch_extra!r})",
                f"if err[0] != _drv_ok: _drv_retry({function}, {grid}, {block}, {params})"], \
            names

    def function_handle(self, function: Any) -> int:
        return int(function)

    def launch_error(self, code: int) -> Exception:
        text = self.error_text(self.api.error_code(self.lib, code))
        return self.error(f"{self.api.launch} failed: {text}")

    # ---- events (when a pinned staging buffer may be written again) -----------------------
    def event_create(self) -> Any:
        self.bind()
        return self.checked(self.api.event_create, self.api.event_flags(self.lib))

    def event_record(self, event: Any) -> None:
        self.bind()
        self.checked(self.api.event_record, event, self.cur[0])

    def event_synchronize(self, event: Any) -> None:
        self.bind()
        self.checked(self.api.event_synchronize, event)

    def event_destroy(self, event: Any) -> None:
        self.call(self.api.event_destroy, event)

    # ---- graphs ---------------------------------------------------------------------------
    def begin_capture(self) -> None:
        self.bind()
        self.checked(self.api.begin_capture, self.cur[0], self.api.capture_mode(self.lib))

    def end_capture(self) -> Any:
        return self.checked(self.api.end_capture, self.cur[0])

    def instantiate(self, graph: Any) -> Any:
        self.bind()
        return first(self.checked(self.api.instantiate, graph, 0))

    def exec_update(self, graph_exec: Any, graph: Any) -> bool:
        result = self.call(self.api.exec_update, graph_exec, graph, *self.api.exec_update_extra)
        return bool(result[0] == self._success)

    def graph_launch(self, graph_exec: Any) -> None:
        self.bind()
        self.checked(self.api.graph_launch, graph_exec, self.cur[0])

    def destroy_graph(self, graph: Any) -> None:
        self.call(self.api.graph_destroy, graph)

    def destroy_exec(self, graph_exec: Any) -> None:
        self.call(self.api.exec_destroy, graph_exec)

    # ---- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        self.bind()
        return int(self.checked(self.api.alloc, nbytes))

    def alloc_pinned(self, nbytes: int) -> int:
        """Page-locked host memory (transfers to and from it are true DMA)."""
        self.bind()
        return int(self.checked(self.api.alloc_pinned, nbytes,
                                *self.api.pinned_flags(self.lib)))

    def free_pinned(self, ptr: int) -> None:
        self.bind()
        self.checked(self.api.free_pinned, ptr)

    def free(self, ptr: int) -> None:
        self.bind()
        self.checked(self.api.free, ptr)

    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        self.copy(self.api.copy_h2d, dst, src, nbytes)

    def copy_d2h(self, dst: int, src: int, nbytes: int) -> None:
        self.copy(self.api.copy_d2h, dst, src, nbytes)

    def copy_d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.copy(self.api.copy_d2d, dst, src, nbytes)

    def copy(self, name: str, dst: int, src: int, nbytes: int) -> None:
        """An asynchronous copy on the stream (none for zero bytes)."""
        self.bind()
        if nbytes:
            self.on_stream(name, dst, src, nbytes, self.cur[0])

    def on_stream(self, name: str, *args: Any) -> None:
        """A call queued on the stream (its last argument): retried once after making the
        device current again if it fails (`rebound`)."""
        result = getattr(self.lib, name)(*args)
        err = result[0] if isinstance(result, tuple) else result
        if err != self._success:
            self.rebound(result, name, *args)

    def memset(self, dst: int, nbytes: int) -> None:
        self.bind()
        self.on_stream(self.api.memset, dst, 0, nbytes, self.cur[0])

    def fill(self, dst: int, pattern: bytes, count: int) -> None:
        """`count` copies of `pattern` from `dst`, on the stream: one memset where the pattern
        repeats a 1-, 2- or 4-byte word (`fill_call`), else by doubling (`fill_doubling`:
        a pitched memset of one word per row ran at ~0.7 ns a row on an H200, 1.3 ms for 1M
        f64). `GpuDevice.fill_call` prefers its fill kernel to the doubling."""
        call = self.fill_call(dst, pattern, count)
        if call is None:
            self.fill_doubling(dst, pattern, count)
        else:
            call()

    def fill_call(self, dst: int, pattern: bytes, count: int) -> Callable[[], None] | None:
        """The memset writing `count` copies of `pattern` from `dst` as a prepared call (its
        function and arguments looked up here, so that a fill of the same value again is
        that one driver call), or None when the pattern repeats no 1-, 2- or 4-byte word."""
        plan = memset_plan(pattern, count)
        if not plan:
            return lambda: None
        (width, offset, value, n, pitch), = plan[:1]
        if len(plan) > 1 or pitch:
            return None
        api = self.api
        if width == 4 and api.memset32_signed and value >= 1 << 31:
            value -= 1 << 32
        name = api.memset32 if width == 4 else api.memset16 if width == 2 else api.memset
        fn, args, cur = getattr(self.lib, name), (dst + offset, value, n), self.cur
        ok, thread, bind, me = self._success, self._thread, self.bind, self

        def call() -> None:
            if thread.driver is not me:
                bind()
            result = fn(*args, cur[0])       # the stream current at the call
            if (result[0] if result.__class__ is tuple else result) != ok:
                me.rebound(result, name, *args, cur[0])
        return call

    def fill_doubling(self, dst: int, pattern: bytes, count: int) -> None:
        """The first element uploaded, then copies of what is written so far onto what
        follows it (1, 2, 4, ... elements: about log2(count) device-to-device copies)."""
        self._pattern = ctypes.create_string_buffer(pattern, len(pattern))   # (kept alive)
        self.copy_h2d(dst, ctypes.addressof(self._pattern), len(pattern))
        done, size = 1, len(pattern)
        while done < count:
            n = min(done, count - done)
            self.copy_d2d(dst + done * size, dst, n * size)
            done += n

    def synchronize(self) -> None:
        self.bind()
        self.checked(self.api.stream_synchronize, self.cur[0])

    def device_count(self) -> int:
        return int(self.checked(self.api.device_count))

    # ---- streams (`jr.Stream`, `jr.stream`) -----------------------------------------------
    def use_stream(self, stream: Any) -> Any:
        """Queue what follows on `stream` (a handle of this driver); returns the previous."""
        previous, self.cur[0] = self.cur[0], stream
        return previous

    def create_stream(self) -> Any:
        self.bind()
        return self.checked(self.api.stream_create, self.api.stream_flags(self.lib))

    def destroy_stream(self, stream: Any) -> None:
        self.call(self.api.stream_destroy, stream)

    def from_address(self, kind: str, address: int) -> Any:
        """The handle of another library's stream or event given its address."""
        return self.api.from_address(self.lib, kind, address)

    def stream_synchronize(self, stream: Any) -> None:
        self.bind()
        self.checked(self.api.stream_synchronize, stream)

    def record_on(self, event: Any, stream: Any) -> None:
        self.bind()
        self.checked(self.api.event_record, event, stream)

    def wait_event(self, stream: Any, event: Any) -> None:
        """`stream` waits (on the device) for the work `event` recorded."""
        self.bind()
        self.checked(self.api.stream_wait_event, stream, event, 0)

    def close(self) -> None:
        self.use_stream(self.stream)
        self.synchronize()
        for module in self._modules:
            self.call(self.api.module_unload, module)
        self._modules.clear()
        self.call(self.api.stream_destroy, self.stream)
