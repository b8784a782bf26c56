"""Tiered compilation on the CPU: a quick copy of a kernel runs at once, the optimised copy
replaces it when a background thread has compiled it.

Stage: backend. Input: a kernel module's LLVM IR text and its exported symbols (the fused
entry, the adstack max-reducers, the capacity function). Output of `Tiers.quick`: for each
symbol the address of a *tier stub*, a function of the symbol's signature that calls through
a cell (a pointer in memory). The quick copy is the same IR with only SROA run and code
generated at -O0 (about a sixth of the LLVM time of the O3 copy on the adstack benchmark's
kernels, docs/performance.md); its definitions are renamed (`$quick`) so that the optimised
object, loaded into the same MCJIT engine later, keeps the kernel's own names (the offline
cache stores that object, and a warm start loads it with no stubs).

`Tiers.optimise_later` queues the text for the one background thread (a kernel this process
compiled first, in order; kernels whose quick copy came from the offline cache once no job has
been queued for SETTLE_S, the shortest text first), which compiles it with
the same O3 pipeline as a synchronous compile, in an LLVM context and target machine of its
own, and hands the object to a callback (`runtime/compiler.py` loads it, points the cells at
it with `retarget` and saves it in the offline cache). LLVM is called through
`llvm_direct.py` (llvmlite's C library without its Python layer, whose one global lock made
every call wait for any other thread's): the thread takes no lock, which is safe because
nothing else touches its context, module or target machine, so the caller's own compiles
(which hold `LLVM_LOCK` for the shared context) do not wait behind it. Calls already
running keep the code they entered (MCJIT never unloads code), new calls take the cell's new
target.

Caches: the quick objects by symbol prefix (the engine's), the thread and its LLVM state
(process-wide). `wait()` returns once every queued job is done: `jr.sync`, `jr.init`,
`jr.reset` and interpreter exit call it, so the offline cache is complete when a program
ends. `os.fork` (`runtime/forking.py`) only `pause`s the thread: the job in progress ends,
no other starts until the fork is done (a child must not inherit a lock the thread held
mid-call); the child drops the queue and starts a thread of its own when it compiles.

`warm_up` (once per process, when a program opens the CPU with tiered compilation and the
process may use more than one core: on one core it would only delay the main thread)
compiles a small kernel-shaped function through `quick_object` on a helper thread and drops
it: the quick tier's target machine, its host subtarget, the pass builder and the code
generator's first use (~4-6 ms of a cold start's first compile on the development VM) then
happen on another core while the main thread lowers the first kernel. It holds `LLVM_LOCK`
like any compile, so a compile that comes first waits for it (no longer than doing that work
itself), a fork waits for it, and so does interpreter exit (up to EXIT_GRACE_S);
`JITRT_PRELOAD_LLVM=0` turns it off with the library's preload.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
import time
import warnings
from collections import deque
from typing import Any, Callable, Iterator, Mapping

from .. import logger as log
from . import llvm_direct as direct
from .llvm_setup import LLVM_LOCK

QUICK = "$quick"      # suffix of the quick copy's exported definitions
STUB = "$tier"        # the stub of a symbol: calls through its cell
CELL = "$cell"        # the cell of a symbol: the address of the copy its stub calls
# a job whose text is still to be built (Python: it holds the GIL, and each of a compile's
# many short LLVM calls on another thread would then wait up to the switch interval for it)
# starts once no compile has run for this long, or at once when someone waits for the queue:
# a kernel's compile and its first launch are followed at once by the next kernel's compile
QUIET_S = 0.02
# a job whose text is at hand (a quick copy from the offline cache: an earlier process ended
# before compiling its optimised copy) starts once no job has been queued for this long, or at
# once when someone waits: the kernels a program loads together are then all queued, and the
# shortest goes first (`_pick`), instead of the first one loaded, however long
SETTLE_S = 0.5
# interpreter exit waits this long for the optimised copies still queued or compiling, then
# drops them (`Tiers.at_exit`): a process ends within about this long of its script's end
EXIT_GRACE_S = 0.5


def stub_text(name: str, signature: str) -> str:
    """LLVM IR of the cell and stub of `name`, a function whose type is `signature` (as
    LLVM prints it, e.g. `void (ptr)`)."""
    ret, _, rest = signature.partition(" (")
    params = [p for p in rest.rstrip(")").split(", ") if p]
    if "..." in params:
        raise ValueError(f"{name}: a variadic function has no tier stub")
    formal = ", ".join(f"{p} %a{k}" for k, p in enumerate(params))
    call = f"call {ret} %f({formal})"
    tail = f"  %r = tail {call}\n  ret {ret} %r" if ret != "void" else \
        f"  tail {call}\n  ret void"
    return (f'@"{name}{CELL}" = global ptr @"{name}", align 8\n'
            f'declare {ret} @"{name}"({", ".join(params)})\n'
            f'define {ret} @"{name}{STUB}"({formal}) {{\n'
            f'  %f = load atomic ptr, ptr @"{name}{CELL}" monotonic, align 8\n'
            f"{tail}\n}}\n")


def quick_object(text: str, symbols: list[str]) -> bytes:
    """Object code of the quick copy of `text`, with a cell and a stub per symbol."""
    with LLVM_LOCK:
        context = direct.shared_context()
        mod = direct.parse(text, context)
        try:
            direct.verify(mod)
            stubs = "".join(stub_text(s, direct.function_type(mod, s)) for s in symbols)
            direct.link(mod, direct.parse(stubs, context))
            local = (direct.INTERNAL_LINKAGE, direct.PRIVATE_LINKAGE)
            for value in [*direct.functions(mod), *direct.global_variables(mod)]:
                if direct.is_declaration(value) or direct.linkage(value) in local:
                    continue
                name = direct.name(value)
                if not name.endswith((STUB, CELL)):
                    direct.set_name(value, name + QUICK)
            tm = direct.host_machine(0)
            direct.run_sroa(mod, tm)   # locals out of allocas: -O0 code keeps each in memory
            return direct.emit_object(tm, mod)
        finally:
            direct.dispose_module(mod)


# what `warm_up` compiles: the constructs of a kernel's quick copy (a loop over a checked load,
# a local in memory, a math call, an atomic add, a branch to a fault recorder)
WARM_UP_TEXT = """\
declare float @llvm.sin.f32(float)
declare void @jitrt_warm_up_fault(ptr, i64)
define void @jitrt_warm_up(ptr %ctx, ptr %data, i64 %n) {
entry:
  %v = alloca float
  store float 0.0, ptr %v
  br label %cond
cond:
  %i = phi i64 [0, %entry], [%next, %join]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %exit
body:
  %inside = icmp ult i64 %i, 1024
  br i1 %inside, label %load, label %fault
load:
  %p = getelementptr float, ptr %data, i64 %i
  %x = load float, ptr %p
  br label %join
fault:
  call void @jitrt_warm_up_fault(ptr %ctx, i64 %i)
  br label %join
join:
  %got = phi float [%x, %load], [0.0, %fault]
  %s = call float @llvm.sin.f32(float %got)
  %old = load float, ptr %v
  %sum = fadd float %old, %s
  store float %sum, ptr %v
  %next = add i64 %i, 1
  br label %cond
exit:
  %total = load float, ptr %v
  %r = atomicrmw fadd ptr %data, float %total monotonic
  ret void
}
"""
_WARMED: list[threading.Thread] = []


def warm_up() -> bool:
    """Compile WARM_UP_TEXT's quick copy on a helper thread, once per process (module
    docstring); whether a thread started."""
    if _WARMED or os.environ.get("JITRT_PRELOAD_LLVM", "1") == "0":
        return False
    thread = threading.Thread(target=_warm_up, name="jitrt-llvm-warm-up", daemon=True)
    _WARMED.append(thread)
    thread.start()
    # a program that ends at once does not tear LLVM down under it (it takes ~10 ms)
    atexit.register(thread.join, EXIT_GRACE_S)
    return True


def _warm_up() -> None:
    try:
        quick_object(WARM_UP_TEXT, ["jitrt_warm_up"])
    except Exception as exc:  # noqa: BLE001 - only a head start: the first compile does it
        log.logger.debug("LLVM warm-up failed: %s", exc)


def end_before_native_destructors() -> bool:
    """Interpreter exit while the background thread is inside LLVM: the C library's exit
    runs shared libraries' static destructors after Python has finalized, and LLVM's global
    state then goes away under the compile still running (an assertion in LLVM's code
    generator or a segmentation fault at exit: 5 of 60 runs of a short script, two at a
    time, on the development VM). So the process ends at the start of the C library's exit
    handlers: `_exit(status)` registered with glibc's `on_exit`, which runs before the
    handlers registered earlier (the libraries' destructors) and passes the exit status on.
    Python's own finalization (its atexit functions, flushing sys.stdout and sys.stderr) has
    run by then. False where the C library has no `on_exit` (then exit goes on as before)."""
    try:
        libc = ctypes.CDLL(None)
        on_exit, end = libc.on_exit, libc._exit
    except (OSError, AttributeError):
        return False
    on_exit.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    on_exit.restype = ctypes.c_int
    # `_exit(int)` called as on_exit's `void (*)(int status, void *arg)`: arg goes unread
    return bool(on_exit(ctypes.cast(end, ctypes.c_void_p), None) == 0)


class _ThreadLLVM:
    """The background thread's LLVM context and target machine (its own: LLVM allows one
    thread per context at a time, and a target machine is not shared between threads), so
    that its calls need no lock (llvmlite's global lock is not involved: `llvm_direct`)."""

    def __init__(self) -> None:
        self.context = direct.new_context()
        self.tm = direct.target_machine(direct.process_triple(), direct.host_cpu_name(),
                                        direct.host_cpu_features(), 3)

    def compile(self, text: str) -> bytes:
        mod = direct.parse(text, self.context)
        try:
            direct.optimise(mod, self.tm)
            return direct.emit_object(self.tm, mod)
        finally:
            direct.dispose_module(mod)


def optimised_object(text: str) -> bytes:
    """The optimised copy of a module text, compiled on the calling thread for this host (what
    the background thread makes; `python -m jitrt cache finish` calls it)."""
    return _ThreadLLVM().compile(text)


# (key, IR text or what builds it, what to do with the object, the kernel's name)
Job = tuple[str, "str | Callable[[], str]", Callable[[bytes], None], str]


class Tiers:
    """The process's tiered compilation: quick copies now, optimised copies on one thread."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine              # the process's `cpu.CpuEngine`: load, is_loaded
        self._jobs: deque[Job] = deque()
        self._queued: set[str] = set()     # keys queued or compiling
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.landed = 0                    # optimised copies swapped in
        self._foreground = 0               # compiles running on other threads (`foreground`)
        self._last_compile = 0.0           # when the last of them ended (time.monotonic)
        self._last_queued = 0.0            # when the last job was queued (time.monotonic)
        self._waiting = 0                  # threads in `wait`
        self._paused = False               # a fork is under way (`pause`): start no job
        self._running = False              # a job is past its start (building or compiling)
        self._current = ""                 # the kernel of the job running (the exit's log)
        self._closed = False               # the interpreter exits: results are dropped
        # prefix -> what its drop does, given the job's text where it is built
        self._dropped: dict[str, Callable[[str | None], None]] = {}
        self._built: dict[str, str] = {}   # prefix -> the text of the job compiling
        # run at exit after the dropped jobs' `dropped` (the runtime's: start a process that
        # finishes their optimised copies, `cache/finishing.py`)
        self.exit_hooks: list[Callable[[], None]] = []

    @staticmethod
    def warm_up() -> bool:
        """LLVM's first use by the quick tier, on a helper thread (`warm_up`)."""
        return warm_up()

    def quick(self, prefix: str, text: str, symbols: list[str]) -> dict[str, int]:
        """Compile and load the quick copy: symbol -> its stub's address, and
        `symbol + CELL` -> its cell's address."""
        return self.load_quick(prefix, self.compile_quick(prefix, text, symbols), symbols)

    def compile_quick(self, prefix: str, text: str, symbols: list[str]) -> bytes | None:
        """The quick copy's object (`quick_object`), or None when it is loaded already."""
        return None if self._engine.is_loaded(prefix + QUICK) else quick_object(text, symbols)

    def load_quick(self, prefix: str, obj: bytes | None, symbols: list[str]) -> dict[str, int]:
        """Load a quick copy's object (`quick_object`'s, from this process or the offline
        cache; None: already loaded), as `quick` returns it."""
        names = [s + STUB for s in symbols] + [s + CELL for s in symbols]
        addrs = self._engine.load(prefix + QUICK, obj or b"", names)
        return {**{s: addrs[s + STUB] for s in symbols},
                **{s + CELL: addrs[s + CELL] for s in symbols}}

    def optimise_later(self, prefix: str, text: str | Callable[[], str],
                       done: Callable[[bytes], None], kernel: str = "",
                       dropped: Callable[[str | None], None] | None = None) -> None:
        """Queue `text` (or a function building it, called on the background thread) for the
        background thread; `done(object)` runs there afterwards. A prefix already queued is
        not queued again. `kernel` names it in the log. `dropped(text)` runs at interpreter
        exit if the job is dropped then (`at_exit`), with its text where it is at hand (given
        as a string, or built by the time of the exit; else None)."""
        with self._cond:
            if prefix in self._queued:
                return
            self._queued.add(prefix)
            if dropped is not None:
                self._dropped[prefix] = dropped
            self._jobs.append((prefix, text, done, kernel or prefix))
            self._last_queued = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="jitrt-optimiser",
                                                daemon=True)
                self._thread.start()
                atexit.register(self.at_exit)
            self._cond.notify_all()

    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """Mark a kernel compile on the calling thread: a job whose text is still to be built
        waits until none has run for QUIET_S."""
        with self._cond:
            self._foreground += 1
        try:
            yield
        finally:
            with self._cond:
                self._foreground -= 1
                self._last_compile = time.monotonic()
                self._cond.notify_all()

    def _quiet(self) -> None:
        """Return once no compile has run for QUIET_S, a thread waits for the queue or a
        fork pauses the thread (the caller holds `_cond`)."""
        while not self._waiting and not self._paused:
            idle = time.monotonic() - self._last_compile
            if not self._foreground and idle >= QUIET_S:
                return
            self._cond.wait(None if self._foreground else QUIET_S - idle)

    @staticmethod
    def retarget(quick: dict[str, int], optimised: Mapping[str, object]) -> None:
        """Point each symbol's cell at its optimised copy (one aligned 8-byte store each)."""
        for name, address in optimised.items():
            cell = quick.get(name + CELL)
            if cell is not None and isinstance(address, int):
                ctypes.c_uint64.from_address(cell).value = address

    def wait(self, timeout: float | None = None) -> bool:
        """Return True once no job is queued or compiling, False if `timeout` seconds pass
        first."""
        if not self._queued:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                while self._queued:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(left)
                return True
            finally:
                self._waiting -= 1

    def at_exit(self) -> None:
        """Interpreter exit: wait up to EXIT_GRACE_S for the queue, then drop the jobs not
        started and the result of the one compiling (no one will launch the kernel again),
        calling each dropped job's `dropped` (the compiler's puts the kernel's quick copy in
        the offline cache: the next process loads it and compiles the optimised copy again
        in the background, instead of compiling both). Its thread is a daemon: the process
        exits while LLVM still works on it, ending before LLVM's static destructors run
        (`end_before_native_destructors`)."""
        if self.wait(EXIT_GRACE_S):
            return
        with self._cond:
            self._closed = True
            dropped = [kernel for _, _, _, kernel in self._jobs]
            texts = {prefix: text for prefix, text, _, _ in self._jobs if isinstance(text, str)}
            texts.update(self._built)
            callbacks = [(self._dropped[p], texts.get(p)) for p in self._queued
                         if p in self._dropped]
            self._jobs.clear()
            self._queued.clear()
            self._dropped.clear()
            self._cond.notify_all()
        for callback, text in callbacks:     # (the quick copies go to the offline cache)
            try:
                callback(text)
            except Exception as exc:  # noqa: BLE001 - exit goes on; the next process compiles
                log.logger.debug("exit: keeping a quick copy failed: %s", exc)
        for hook in self.exit_hooks:
            try:
                hook()
            except Exception as exc:  # noqa: BLE001 - exit goes on
                log.logger.debug("exit: %s failed: %s", hook, exc)
        with self._cond:
            running = self._running
        if running:
            end_before_native_destructors()
        log.logger.info("exit: the optimised compile%s of %s %s dropped after %.1f s (the "
                        "quick copies are cached; jr.sync() before the end waits for them)",
                        "s" if dropped else "", ", ".join([self._current, *dropped]),
                        "are" if dropped else "is", EXIT_GRACE_S)

    def pause(self) -> None:
        """Before a fork (`runtime/forking.py`): start no further job and return once the job
        in progress, if any, has ended, so that the thread holds no lock, LLVM's included."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()
            while self._running:
                self._cond.wait()

    def resume(self) -> None:
        """After a fork, in the parent: the queue goes on."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def after_fork_in_child(self) -> None:
        """The child has no background thread and does not inherit the parent's queue: its
        kernels queued there keep running their quick copies (the parent still builds their
        optimised copies and caches them); its own compiles start a thread of its own."""
        self._thread = None
        self._cond = threading.Condition()
        self._jobs.clear()
        self._queued.clear()
        self._dropped.clear()
        self._built.clear()
        self._foreground = self._waiting = 0
        self._paused = self._running = False

    def _next(self) -> Job:
        """The next job to run, once one may start (the caller holds `_cond`): the first whose
        text is still to be built (a kernel this process compiled, in their order), else the
        one with the shortest text (kernels whose quick copy came from the offline cache:
        a long compile that an earlier process did not finish does not keep the short ones
        behind it from landing again and again)."""
        while True:
            while not self._jobs or self._paused:
                self._cond.wait()
            pick = self._pick()
            if not isinstance(self._jobs[pick][1], str):
                self._quiet()
            else:
                self._settle()
            if self._paused or not self._jobs:
                continue
            pick = self._pick()
            self._running = True
            job = self._jobs[pick]
            del self._jobs[pick]
            self._current = job[3]
            return job

    def _settle(self) -> None:
        """Return once no job has been queued for SETTLE_S, a thread waits for the queue or a
        fork pauses the thread (the caller holds `_cond`)."""
        while not self._waiting and not self._paused:
            idle = time.monotonic() - self._last_queued
            if idle >= SETTLE_S:
                return
            self._cond.wait(SETTLE_S - idle)

    def _pick(self) -> int:
        """The index in the queue of the job `_next` runs: the first whose text is still to
        be built, else the one with the shortest text (the first of equals)."""
        sizes = []
        for k, (_, text, _, _) in enumerate(self._jobs):
            if not isinstance(text, str):
                return k
            sizes.append((len(text), k))
        return min(sizes)[1]

    def _run(self) -> None:
        state: _ThreadLLVM | None = None
        while True:
            with self._cond:
                prefix, text, done, kernel = self._next()
            try:
                with log.slow_compile(kernel, "optimised copy, background"):
                    if state is None:
                        state = _ThreadLLVM()
                    if not isinstance(text, str):
                        text = text()
                    with self._cond:
                        self._built[prefix] = text     # for `dropped`, at exit
                    obj = state.compile(text)
                if not self._closed:
                    done(obj)
                    self.landed += 1
            except Exception as exc:  # noqa: BLE001 - the quick copy stays; the user is told
                warnings.warn(f"jitrt: the optimised compile of {kernel} failed ({exc}); the "
                              "kernel keeps running its quickly compiled copy", RuntimeWarning,
                              stacklevel=1)
            finally:
                with self._cond:
                    self._running = False
                    self._queued.discard(prefix)
                    self._dropped.pop(prefix, None)
                    self._built.pop(prefix, None)
                    self._cond.notify_all()
