"""The Program: one per `jr.init`, owning the configuration, the device and the counters.

Stage: runtime. `init()` replaces the current program (fresh in-memory caches: launch handles
of the old program are not used again; the disk cache stays) and closes every other one.
`current()` returns the program, creating a default one on first use. Several GPUs of one
process each have a program (`OPEN`, by (arch, device id)): `jr.device(k)` (`devices.py`)
opens device k's with the current program's configuration and makes it the current one for
a with-block; `activate` is that switch. `ACTIVE[0]` is what every generated launcher compares
with the program it was built for, in one identity test: the current program, its
`tape_token` while a `jr.ad.Tape` records, its `fwd_token` inside a `jr.ad.FwdMode` (where
forward-mode kernels compare with it instead), its `validate_token` while a
`jr.ad.Tape(validation=True)` records (validation kernels compare with it), or None after
`reset()`. A mismatch sends the
launch to the slow path, so neither `init` nor a Tape nor FwdMode walks the kernels ever
declared. Counters behind
`jr.debug.stats()` live here; per-launch counters live in the launch handles (a list cell each)
and are summed on demand.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from .. import logger as log
from .._version import __version__
from ..backends import registry
from ..errors import BackendUnavailableError, ConfigError

if TYPE_CHECKING:
    from ..backends.base import Device, HostServices, PoolInfo


class LaunchLock:
    """The program's launch lock: a reentrant lock and `held`, the number of Python launches
    (and handle builds) in flight, which a native launch (`runtime/native_launch.py`) reads: it
    holds the GIL and runs only when `held` is 0. Generated launchers inline `acquire(); held[0]
    += 1` and the reverse."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.held = (ctypes.c_int64 * 1)()
        self.acquire, self.release = self.lock.acquire, self.lock.release

    def __enter__(self) -> "LaunchLock":
        self.lock.acquire()
        self.held[0] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.held[0] -= 1
        self.lock.release()


class Program:
    def __init__(self, cfg: config_mod.Config) -> None:
        self.config = cfg
        self.serial = next(_serials)    # part of every launch handle's key (`launcher.py`)
        self.cache_store = None
        if cfg.offline_cache:
            from ..cache.store import CacheStore, default_dir
            self.cache_store = CacheStore(default_dir(cfg.offline_cache_dir),
                                          cfg.offline_cache_max_bytes,
                                          cfg.offline_cache_cleaning_factor)
        from .. import backends
        self.device: Device = backends.create_device(cfg.arch, cfg.device_id,
                                                     host_services(cfg, self.cache_store))
        self.arch = self.device.arch
        # a GPU of the stream driver (CUDA, HIP, the fake vendor): graphs of launches
        self.stream_gpu: bool = getattr(registry.BACKENDS.get(self.arch), "stream_gpu", False)
        tiers = self.device.tiers() if cfg.tiered_compile else None
        if tiers is not None and config_mod._cores() > 1:
            tiers.warm_up()     # LLVM's first use, on another core (`backends/cpu_tiers.py`)
        self.counters: Counter[str] = Counter()
        self.launch_lock = LaunchLock()   # launches from several threads run in turn
        self.handles: list[Any] = []   # every LaunchHandle built by this program
        from .adstack import AdStackHeap
        from .registry import Registry
        self.registry = Registry()
        self.heap = self.device.adstack_heap() or AdStackHeap()
        self._thread = threading.local()  # per thread: `.tape`, its recording Tape (or graph)
        self.recorders: dict[int, Any] = {}   # thread id -> its recording Tape or graph
        self._recorders_lock = threading.Lock()
        self.tape_token = object()     # ACTIVE[0] while a Tape records (in any thread)
        self.fwd: Any = None           # the active jr.ad.FwdMode, if any
        self.fwd_token = object()      # ACTIVE[0] inside FwdMode (what forward kernels expect)
        self.validate_token = object()  # ACTIVE[0] while a Tape(validation=True) records
        self.grad_replay: Any = None    # the last Tape's reverse pass (`tape_replay.py`)
        self.spec_cache: dict[Any, tuple[tuple[Any, ...], int]] = {}   # max-reducer per-spec cache
        self.warm_files: dict[str, Any] = {}   # offline cache: `prekey.WarmFile`s read so far
        # every live LaunchSizing (handles, bound launches): weak, so that discarded bound
        # launches do not accumulate
        self.sizing_states: weakref.WeakSet[Any] = weakref.WeakSet()
        self.current_results: Any = None                     # results map of the last miss
        self.profile: Any = None       # a profiler.KernelProfile with kernel_profiler=True
        if cfg.kernel_profiler:
            from .profile import KernelProfile
            self.profile = KernelProfile()

    @property
    def tape(self) -> Any:
        """The jr.ad.Tape (or recording jr.graph) of the calling thread, if any: a tape
        belongs to the thread that entered it, and launches of other threads are neither
        recorded on it nor refused."""
        return getattr(self._thread, "tape", None)

    @tape.setter
    def tape(self, recorder: Any) -> None:      # this thread only (grad_replaced's pause)
        self._thread.tape = recorder

    def start_recording(self, recorder: Any) -> None:
        """The calling thread records on `recorder` (a Tape or a graph's recorder)."""
        with self._recorders_lock:
            self._thread.tape = recorder
            self.recorders[threading.get_ident()] = recorder
            self._mark_active()

    def stop_recording(self) -> None:
        with self._recorders_lock:
            self._thread.tape = None
            self.recorders.pop(threading.get_ident(), None)
            self._mark_active()

    def _mark_active(self) -> None:
        """`ACTIVE[0]` while threads record: the validate token if one of them validates,
        else the tape token (launchers then look up their own thread's tape), else the
        program. Left alone when the program was replaced or a FwdMode is active."""
        if ACTIVE[0] not in (self, self.tape_token, self.validate_token):
            return
        recorders = self.recorders.values()
        ACTIVE[0] = self.validate_token if any(getattr(r, "validation", False)
                                               for r in recorders) else \
            self.tape_token if recorders else self

    @property
    def log_level(self) -> str:
        """Taichi's `ti.init(_test_mode=True).log_level`: the level as `init` was given it (in
        Taichi's spelling: "warn", "trace"), else `TI_LOG_LEVEL`, else Taichi's "info"; jitrt's
        logging follows `config.log_level` (docs/porting.md)."""
        return str(self.config.taichi_log_level)

    @property
    def gdb_trigger(self) -> bool:
        """Taichi's `ti.init(_test_mode=True).gdb_trigger`, as given (else `TI_GDB_TRIGGER`,
        else False); jitrt installs no crash handler, so it changes nothing."""
        return bool(self.config.gdb_trigger)

    @property
    def pool(self) -> PoolInfo | None:
        """The CPU worker pool (CPU programs only)."""
        return self.device.pool

    def count(self, name: str, amount: int = 1) -> None:
        self.counters[name] += amount

    def stats(self) -> dict[str, int]:
        out = {k: 0 for k in STAT_NAMES}
        out.update(self.counters)
        for name, value in self.device.stat_counts().items():
            out[name] = out.get(name, 0) + value
        out["launches"] += sum(h.launch_count[0] for h in self.handles)
        out["launch_cache_hits"] += sum(s.hits[0] for s in self.sizing_states)
        return out

    def reset_stats(self) -> None:
        self.counters.clear()
        self.device.reset_counts()
        for h in self.handles:
            h.launch_count[0] = 0
        for state in self.sizing_states:
            state.hits[0] = 0


STAT_NAMES = ("compiles", "quick_compiles", "offline_cache_hits", "offline_cache_misses",
              "offline_cache_frontend_skips", "offline_cache_quick_hits",
              "optimised_after_drops", "launches",
              "launch_cache_hits", "launch_cache_misses", "spec_cache_hits", "spec_cache_misses",
              "max_reducer_dispatches", "h2d_skipped")

_current: Program | None = None
_serials = itertools.count(1)
# every open program by (arch, device id): the current one and those `jr.device` opened
OPEN: dict[tuple[str, int], Program] = {}
ACTIVE: list[Any] = [None]       # see the module docstring
_init_lock = threading.RLock()   # the first launches may come from several threads at once


def init(arch: Any = None, **options: Any) -> Program:
    """Create the program every launch uses (calling it again replaces it).

    Args:
        arch: `jr.cpu` (default), `jr.cuda`, `jr.amdgpu`, `jr.gpu` or their names;
            `JITRT_ARCH` overrides it.
        **options: `device_id`, `enable_fallback`, `debug`, `fast_math`, `random_seed`,
            `tiered_compile`, `offline_cache`, `offline_cache_dir`,
            `offline_cache_max_bytes`, `offline_cache_cleaning_factor`, `ad_stack_size`,
            `ad_stack_experimental_enabled`,
            `default_fp`, `default_ip`, `num_threads`, `kernel_profiler`, `tape_graph`,
            `log_level`, `parallel_grain`, `loop_guard` (the table `OPTIONS` in
            jitrt/config.py; docs/usage.md, "Configuration"); each also from `JITRT_<NAME>`.

    Returns the Program. A GPU arch whose runtime or device is missing falls back to the CPU
    with one warning naming what is missing (as Taichi does); with `enable_fallback=False` it
    raises `jr.BackendUnavailableError` instead. Raises `jr.ConfigError` for a bad value
    (naming the option and the accepted values), `TypeError` for an unknown option. A failed
    init leaves the previous program in place.
    """
    from ..long_lived import settled
    with _init_lock, settled():      # the backend's modules and objects live on
        return _init(arch, **options)


def _init(arch: Any = None, **options: Any) -> Program:
    global _current
    if arch is not None:
        options["arch"] = getattr(arch, "name", arch)
    cfg = config_mod.resolve(**options)
    log.configure(cfg.log_level)
    previous = list(OPEN.values()) or ([_current] if _current is not None else [])
    gpu_archs = {p.arch for p in previous if p.stream_gpu}
    if cfg.arch in gpu_archs or (gpu_archs and cfg.arch == registry.ANY_GPU):
        close_all()          # one context per GPU: the new program opens it again
    program = _start(cfg)
    close_all()
    OPEN[(program.arch, program.config.device_id)] = program
    activate(program)
    from .. import data_placement, dtypes
    data_placement.new_program()      # the previous program's unplaced fields are not ours
    dtypes.DEFAULT_FP[0] = program.config.default_fp     # what float and jr.math.vec3 mean
    dtypes.DEFAULT_IP[0] = program.config.default_ip
    from ..frontend import random as random_mod
    random_mod.reset(program.config.random_seed)
    store = program.cache_store
    log.logger.info("jitrt %s: arch=%s (device %d), %d thread(s), offline cache %s",
                    __version__, program.arch, cfg.device_id,
                    program.device.max_resident_threads,
                    store.dir if store is not None else "off")
    return program


def activate(program: Program) -> None:
    """Make `program` (open) the current one: what launches compare with (`ACTIVE`), and the
    device other libraries' arrays are exchanged with (none where memory is the host's)."""
    global _current
    from .. import data, data_index
    _current = program
    data.CURRENT_DEVICE[0] = None if registry.get(program.arch).host_memory else program.device
    data_index.DEBUG_BUILD[0] = bool(program.config.debug)
    ACTIVE[0] = program
    program._mark_active()             # its own recording threads, if any


def open_program(device_id: int) -> Program:
    """The program of device `device_id` of the current program's arch, opened (with the
    current program's configuration) on first use; it stays open until `jr.init`/`reset`."""
    with _init_lock:
        program = current()
        if program.arch == "cpu" and device_id != 0:
            raise ConfigError(f"device {device_id}: the CPU is device 0; device ids choose a "
                              "GPU (jr.init(arch=jr.cuda) first)")
        found = OPEN.get((program.arch, device_id))
        if found is not None:
            return found
        import dataclasses
        opened = Program(dataclasses.replace(program.config, arch=program.arch,
                                             device_id=device_id))
        OPEN[(opened.arch, device_id)] = opened
        return opened


def host_services(cfg: config_mod.Config, store: Any) -> "HostServices":
    """What a backend gets from the runtime when it opens a device (`backends/base.py`)."""
    from ..backends.base import HostServices

    def runtime_key() -> str:
        from ..cache import keys
        return "\0".join([keys.host_target(), keys.llvm_versions(), keys.compiler_hash()])
    from .compiler import prefetch_pipeline
    from ..cache import prebuilt
    return HostServices(cfg.num_threads, cfg.parallel_grain, store, runtime_key,
                        config_mod._cores(), (prefetch_pipeline,), prebuilt.load)


def _start(cfg: config_mod.Config) -> Program:
    """The Program of `cfg`; a GPU arch this machine cannot run becomes the CPU when
    `cfg.enable_fallback` (one warning line with the reason), else the error propagates."""
    try:
        return Program(cfg)
    except BackendUnavailableError as exc:
        if not cfg.enable_fallback or cfg.arch == "cpu":
            raise
        import dataclasses
        import warnings
        warnings.warn(f"{exc}; falling back to arch=cpu (jr.init(enable_fallback=False) makes "
                      "this an error)", stacklevel=4)
        return Program(dataclasses.replace(cfg, arch="cpu", device_id=0))


def clear_cache() -> int:
    """Delete every entry of the offline cache the current configuration points at (as
    `python -m jitrt cache clear`); returns how many were deleted."""
    from ..cache.store import CacheStore, default_dir
    program = current()
    program.device.synchronize()    # entries of optimised copies still compiling land first
    cfg = program.config
    store = CacheStore(default_dir(cfg.offline_cache_dir), cfg.offline_cache_max_bytes)
    count = store.clear()
    log.logger.info("cleared %d offline-cache entries in %s", count, store.dir)
    return count


def current() -> Program:
    program = _current
    if program is None:
        with _init_lock:
            return _current if _current is not None else _init()
    return program


def reset() -> None:
    """Drop the current program; the next launch or `jr.init` creates a new one. Compiled
    kernels stay in the offline cache."""
    global _current
    if _current is not None and _current not in OPEN.values():
        _close(_current)
    close_all()
    _current = None
    ACTIVE[0] = None


def close_all() -> None:
    """Close every open program (`jr.init`, `jr.reset`)."""
    for program in list(OPEN.values()):
        _close(program)


def _close(program: Program) -> None:
    """Release a replaced program's device: GPU data goes back to the host copies of the
    fields and ndarrays, device memory is freed; its launch handles leave their kernels."""
    from .. import data, data_index
    ACTIVE[0] = None
    data.CURRENT_DEVICE[0] = None
    data_index.DEBUG_BUILD[0] = False
    if OPEN.get((program.arch, program.config.device_id)) is program:
        del OPEN[(program.arch, program.config.device_id)]
    for handle in program.handles:
        handles = handle.kernel.handles
        for key in [key for key, h in handles.items() if h is handle]:
            del handles[key]
    program.device.close()


def sync() -> None:
    """Wait for outstanding work; a fault a GPU kernel recorded since the last synchronisation
    raises `jr.KernelRuntimeError` here. CPU launches are synchronous; on the CPU this waits
    for the optimised copies of kernels compiled so far (`jr.init(tiered_compile=True)`, the
    default: a kernel's first launches run a quickly compiled copy), so launches timed after
    it run optimised code and the offline cache holds them."""
    current().device.synchronize()


__all__ = ["Program", "init", "current", "reset", "sync", "clear_cache",
           "BackendUnavailableError"]


from . import forking  # noqa: E402 - its hooks read this module's locks and program
forking.register()
