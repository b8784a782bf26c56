"""CPU backend: the `CpuDevice`, LLVM IR -> object code -> loaded native functions, the pool.

Stage: backend. `CpuDevice` is the device seam's CPU implementation (`backends/base.py`):
`compile` optimises and emits relocatable object code (what the offline cache stores), `load`
links it into the process's MCJIT engine (`CpuEngine`; an object already loaded is not loaded
twice) and returns function addresses, a launch is a direct native call of the kernel's fused
entry with the GIL released, memory is host memory. `WorkerPool` owns the pool state of
`native/threadpool.py` and the Python threads that run `jitrt_worker` in native code; they
stop at interpreter exit. Caches: loaded objects by symbol prefix, pools by thread count
(process-wide).
"""
from __future__ import annotations

import atexit
import ctypes
import functools
import sys
import threading

from typing import Any, Mapping

import xxhash
from llvmlite import ir

from ..codegen import abi
from ..codegen.targets import Target as CodegenTarget, TargetTraits
from .base import (NO_SERVICES, Device, DeviceTarget, EntryPoint, HostServices,
                   LaunchContext, Reducer, Required)
from . import llvm_direct as direct
from .cpu_tiers import Tiers
from .llvm_setup import LLVM_LOCK
from ..logger import logger as log

ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64)
REDUCER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
REQUIRED_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
# iterations of a parallel task with an inner loop one pass of its body runs (measured on the
# adstack benchmark's recurrence, docs/performance.md: 2 lanes 1.3x, 4 lanes 1.7x, 8 lanes 1.9x)
CPU_LANES = 4
# what the host gives kernels (`codegen.targets.TargetTraits`): chunks of consecutive indices
# through the pool, a writable context, Ctrl-C polling, each thread's stacks contiguous
CPU_TRAITS = TargetTraits(grid_launch=False, status_block=False, data_address_space=0,
                          host_interrupts=True, interleaved_stacks=False, unroll_hints=True,
                          local_stacks=False, fault_ends_thread=False)


def compile_object(module: ir.Module | str) -> bytes:
    """Object code of the module after LLVM's O3 pipeline, for the host CPU."""
    text = str(module)
    with LLVM_LOCK:
        tm = direct.host_machine(3)
        mod = direct.parse(text, direct.shared_context())
        try:
            direct.verify(mod)
            direct.optimise(mod, tm)
            return direct.emit_object(tm, mod)
        finally:
            direct.dispose_module(mod)


def optimized_ir(module: ir.Module | str) -> str:
    """The module's LLVM IR after the same O3 pipeline as `compile_object` (for inspection:
    through llvmlite, which prints modules)."""
    import llvmlite.binding as llvm

    from .llvm_setup import host_target_machine, init_llvm, optimize
    init_llvm()
    with LLVM_LOCK:
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        optimize(mod, host_target_machine())
        return str(mod)


def tiers() -> Tiers:
    """The process's tiered compilation (`backends/cpu_tiers.py`)."""
    global _tiers
    with LLVM_LOCK:
        if _tiers is None:
            _tiers = Tiers(engine())
        return _tiers


class CpuEngine:
    """The process's MCJIT engine. Objects are added once; addresses are looked up by name."""

    def __init__(self) -> None:
        with LLVM_LOCK:    # the engine owns its target machine
            self._engine = direct.Engine(direct.target_machine(
                direct.process_triple(), direct.host_cpu_name(), direct.host_cpu_features(), 3),
                direct.shared_context())
        self._loaded: dict[str, dict[str, int]] = {}
        self._lock = LLVM_LOCK

    def load(self, key: str, obj: bytes, names: list[str]) -> dict[str, int]:
        with self._lock:
            found = self._loaded.get(key)
            if found is not None:
                return found
            self._engine.add_object(obj)
            addrs = {name: self._engine.address(name) for name in names}
            missing = [k for k, v in addrs.items() if not v]
            if missing:
                raise RuntimeError(f"symbols missing after loading object {key}: {missing}")
            self._loaded[key] = addrs
            return addrs

    def is_loaded(self, key: str) -> bool:
        return key in self._loaded

    def address(self, name: str) -> int:
        """The address of the loaded function `name` (0 where none is loaded)."""
        with self._lock:
            return self._engine.address(name)


_engine: CpuEngine | None = None
_tiers: Tiers | None = None


def engine() -> CpuEngine:
    global _engine
    with LLVM_LOCK:
        if _engine is None:
            _engine = CpuEngine()
        return _engine


WORKER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


class WorkerPool:
    """Spinning worker threads running native code; `num_threads` counts the caller too."""

    def __init__(self, num_threads: int, grain: int, spin_limit: int = 100_000,
                 host: HostServices = NO_SERVICES) -> None:
        addrs = runtime_functions(host)
        self.parallel_for_addr = addrs["jitrt_parallel_for"]
        self.launch_addr = addrs["jitrt_launch"]     # native/native_launcher.py
        self._state = (ctypes.c_int64 * abi.POOL_SLOTS)()
        self.address = ctypes.addressof(self._state)
        interrupt_state = ctypes.CFUNCTYPE(ctypes.c_int64)(addrs["jitrt_interrupt_state"])()
        self._state[abi.POOL_INTERRUPTS] = interrupt_state
        chain_sigint(addrs["jitrt_on_sigint"], interrupt_state + 8)
        self.num_threads = max(1, num_threads)
        self._state[abi.POOL_NWORKERS] = 0
        self._state[abi.POOL_GRAIN] = max(1, grain)
        self.spin_limit = spin_limit
        self._state[abi.POOL_SPIN] = spin_limit
        self._worker = WORKER_FN(addrs["jitrt_worker"])
        self._threads: list[threading.Thread] = []
        for tid in range(1, self.num_threads):
            t = threading.Thread(target=self._worker, args=(self.address, tid),
                                 name=f"jitrt-worker-{tid}", daemon=True)
            t.start()
            self._threads.append(t)
        self._state[abi.POOL_NWORKERS] = len(self._threads)
        atexit.register(self.shutdown)

    def set_grain(self, grain: int) -> None:
        self._state[abi.POOL_GRAIN] = max(1, grain)

    def shutdown(self) -> None:
        self._state[abi.POOL_NWORKERS] = 0
        self._state[abi.POOL_SHUTDOWN] = 1
        for t in self._threads:
            t.join(timeout=2.0)
        self._threads.clear()


class _Sigaction(ctypes.Structure):
    """glibc's `struct sigaction` (Linux, 64-bit)."""
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


SA_SIGINFO = 4
# Linux's number (the module `signal` is not imported for it: building its enums took ~3 ms
# of a cold start, and this is the only use)
SIGINT = 2


def chain_sigint(handler: int, previous_slot: int) -> bool:
    """Put the runtime's SIGINT handler in front of the current one (CPython's), which it
    calls after counting the signal: Ctrl-C then stops a running kernel at its next check and
    Python raises KeyboardInterrupt as usual. Done again at each `jr.init` (a Python-level
    `signal.signal(SIGINT, ...)` reinstalls CPython's C handler, ours is then out until the next
    init). Linux only; elsewhere, or when SIGINT is ignored or left to the default, nothing is
    changed and kernels run to completion."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        old = _Sigaction()
        if libc.sigaction(SIGINT, None, ctypes.byref(old)) != 0:
            return False
        if old.handler == handler:
            return True
        if not old.handler or old.handler == 1 or old.flags & SA_SIGINFO:
            return False
        ctypes.c_int64.from_address(previous_slot).value = old.handler
        new = _Sigaction(handler, old.mask, old.flags, None)
        return bool(libc.sigaction(SIGINT, ctypes.byref(new), None) == 0)
    except (OSError, AttributeError, ValueError):
        return False


RUNTIME_SYMBOLS = ["jitrt_parallel_for", "jitrt_worker", "jitrt_interrupt_state",
                   "jitrt_on_sigint", "jitrt_launch", "jitrt_gpu_entry"]


def runtime_functions(host: HostServices) -> dict[str, int]:
    """The runtime module's functions, loaded once per process (the CPU pool and a GPU
    device's native launches share them)."""
    return engine().load("jitrt_runtime", runtime_object(host), RUNTIME_SYMBOLS)


def runtime_object(host: HostServices) -> bytes:
    """Object code of the runtime module: the one shipped for this target and these sources
    (`cache/prebuilt.py`, handed down as `host.prebuilt_runtime`), else from the offline cache
    when there is one, else compiled.

    The key names the module's inputs, not its text: building the module and printing it
    cost several ms of every start. `build_runtime_module` is a function of jitrt's sources
    (`compiler_hash`), the triple and data layout only (no process address, no Python version:
    the native launcher reads such things from its tables), so these inputs decide the text.
    The rest of the key (host target, LLVM versions, jitrt's compiler hash) comes from the
    runtime (`host.runtime_key`), as the store does."""
    triple, data_layout = direct.process_triple(), host_data_layout()
    store = host.store
    shipped = host.prebuilt_runtime(triple, data_layout)
    if shipped is not None:
        log.debug("runtime module: the shipped object for %s", triple)
        return shipped
    log.debug("runtime module: none shipped for %s and these sources, compiling it", triple)
    from ..native import threadpool      # its IR builders (and theirs) load only here
    if store is None:
        return compile_with_helpers(threadpool.build_runtime_module(triple, data_layout), host)
    key = "runtime-" + xxhash.xxh3_128_hexdigest(
        "\0".join([triple, data_layout, host.runtime_key()]).encode())
    obj = store.load(key)
    if not isinstance(obj, bytes):
        obj = compile_with_helpers(threadpool.build_runtime_module(triple, data_layout), host)
        store.save(key, "jitrt runtime (thread pool)", obj)
    return obj


def compile_with_helpers(module: ir.Module, host: HostServices) -> bytes:
    """`compile_object(module)` with `host.while_compiling` run on threads meanwhile (the
    runtime module's LLVM time, ~0.3 s on the development VM, holds no GIL: the runtime
    imports the kernel compile pipeline there, so that the first kernel compile of a cold
    start does not pay for it, ~8 ms); they are joined before it returns (no import runs
    alongside the caller's own)."""
    helpers = [threading.Thread(target=work, name="jitrt-prefetch", daemon=True)
               for work in host.while_compiling]
    for helper in helpers:
        helper.start()
    try:
        return compile_object(module)
    finally:
        for helper in helpers:
            helper.join()


_pools: dict[int, WorkerPool] = {}
_retired: list[WorkerPool] = []  # kept alive: old launch contexts may still point at them


def worker_pool(num_threads: int | None, grain: int,
                host: HostServices = NO_SERVICES) -> WorkerPool:
    """The process's pool for this thread count (pools are kept: threads are not recreated)."""
    cores = host.cores
    count = num_threads or cores
    pool = _pools.get(count)
    if pool is None:
        for other in _pools.values():
            other.shutdown()
            _retired.append(other)
        _pools.clear()
        # more threads than cores: idle workers must not spin (a spinning worker holds a core
        # that a worker with a chunk, or the caller, needs); they poll with usleep instead
        spin = 100_000 if count <= cores else 0
        pool = _pools[count] = WorkerPool(count, grain, spin_limit=spin, host=host)
    pool.set_grain(grain)
    return pool


@functools.lru_cache(maxsize=None)
def host_data_layout() -> str:
    with LLVM_LOCK:
        return direct.data_layout(direct.host_machine(3))


def cpu_target() -> CodegenTarget:
    return CodegenTarget("cpu", direct.process_triple(), host_data_layout(), CPU_TRAITS,
                         lanes=CPU_LANES, tape=True)


class CpuDevice(Device):
    """The host CPU: object code in the process's MCJIT engine, launches through the pool."""

    arch = "cpu"
    tiered = True

    def __init__(self, host: HostServices = NO_SERVICES) -> None:
        super().__init__(0)
        self.pool: WorkerPool = worker_pool(host.num_threads, host.parallel_grain, host)
        self._codegen_target = cpu_target()
        self._target = DeviceTarget("cpu", direct.process_triple(), host_data_layout(),
                                    direct.host_cpu_name(), direct.host_cpu_features())
        self._buffers: dict[int, Any] = {}

    @property
    def target(self) -> DeviceTarget:
        return self._target

    @property
    def codegen_target(self) -> CodegenTarget:
        return self._codegen_target

    def compile(self, module: ir.Module) -> bytes:
        return compile_object(module)

    def _load(self, key: str, artifact: bytes, symbols: list[str]) -> dict[str, object]:
        return {**engine().load(key, artifact, symbols)}

    def tiers(self) -> Tiers:
        return tiers()

    def synchronize(self) -> None:
        """Launches are synchronous; what may be outstanding is the optimised copies of
        kernels compiled quickly (tiered compilation): wait for them."""
        if _tiers is not None:
            _tiers.wait()

    close = synchronize     # a replaced program's optimised copies land and are cached

    def entry(self, address: int) -> EntryPoint:
        """The fused entry function at `address` as a callable (the GIL released)."""
        entry: EntryPoint = ENTRY_TYPE(address)
        return entry

    def launch_entry(self, context: LaunchContext) -> EntryPoint:
        return self.entry(context.compiled.entry_addr)

    def sizing_calls(self, functions: Mapping[str, object], prefix: str, nspecs: int,
                     nstacks: int, sizable: bool) -> tuple[list[Reducer], Required | None]:
        def address(name: str) -> int:
            found = functions[name]
            assert isinstance(found, int), name
            return found
        reducers: list[Reducer] = [REDUCER_TYPE(address(f"{prefix}_red{k}"))
                                   for k in range(nspecs)]
        required: Required | None = REQUIRED_TYPE(address(f"{prefix}_required")) \
            if sizable else None
        return reducers, required

    @property
    def max_resident_threads(self) -> int:
        return self.pool.num_threads

    @property
    def native_launch_addr(self) -> int | None:
        return self.pool.launch_addr

    def fill_context_header(self, buf: Any) -> None:
        buf[abi.SLOT_POOL] = self.pool.address
        buf[abi.SLOT_PARALLEL_FOR] = self.pool.parallel_for_addr
        buf[abi.SLOT_NUM_THREADS] = self.pool.num_threads

    def alloc(self, nbytes: int) -> int:
        block = (ctypes.c_uint8 * max(nbytes, 1))()
        ptr = ctypes.addressof(block)
        self._buffers[ptr] = block
        return ptr

    def free(self, ptr: int) -> None:
        self._buffers.pop(ptr, None)

    def copy_h2d(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    copy_d2h = copy_d2d = copy_h2d


# ---- the registry's entry points (`registry.BackendModule`) ----------------------------------
def available() -> tuple[bool, str]:
    return True, ""


def open_device(device_id: int, host: HostServices) -> CpuDevice:
    return CpuDevice(host)


codegen_target = cpu_target
