"""LLVM's shared library loaded on a helper thread while `import jitrt` runs.

Stage: backend (imported first by `jitrt/__init__.py`, which starts it). The
library llvmlite wraps (`libllvmlite.so`, ~180 MB with LLVM inside) took 9-15 ms of every
cold start to load: `dlopen` maps it, relocates it and runs LLVM's static constructors, and
CPython's `ctypes.CDLL` holds the GIL meanwhile, so nothing overlapped it. Here a daemon thread
calls libc's `dlopen` on the same path through a ctypes function, which releases the GIL, so
the load runs on another core while the main thread imports the package; llvmlite's own
`CDLL` at `jr.init` then finds the library loaded (`dlopen` of a loaded library only counts a
reference). Nothing is imported from llvmlite here.

The thread then compiles and loads a small function (`_warm_up`, WARM_IR) the way the quick
tier compiles a kernel, in LLVM objects of its own that it frees: LLVM's first compile in a
process paid ~10-15 ms on the development VM for lazy initialisation and for faulting in the
code pages of the library it runs, and here that happens on the other core while the main
thread imports the package. The CPU backend's first call into LLVM (`llvm_direct._library`)
and jitrt's llvmlite users (`llvm_setup.init_llvm`) wait for the thread, so no other call
into LLVM overlaps the warm-up, and interpreter exit waits for it (LLVM's static destructors
run at exit). `JITRT_WARM_LLVM=0` leaves the warm-up out.

glibc's `dlopen` holds one lock for a whole load, so an extension module the main thread
loads meanwhile waits for LLVM's library: `jitrt/__init__.py` imports the ones the package
needs before this module, and `tests/test_startup.py` checks that none loads after it (on a
busy machine, where the thread waits for a core, such a wait was longer than the load). A
fork waits for the thread (`os.register_at_fork`): a child forked during `dlopen` would
inherit the loader's lock held. Where anything fails (no llvmlite, another platform, no
`dlopen` symbol) the thread does nothing and llvmlite loads the library as before.
`JITRT_PRELOAD_LLVM=0` turns it off (docs/performance.md, "Cold start").
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
from typing import Any, Callable

from . import llvm_direct

_thread: list[threading.Thread] = []
library_path = llvm_direct.library_path

# what the warm-up compiles: a loop of loads, stores, a local and a math call, as kernels have
WARM_IR = b"""
declare float @llvm.sin.f32(float)
define void @jitrt_warm(ptr %p, i64 %n) {
entry:
  %acc = alloca float
  store float 0.0, ptr %acc
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %q = getelementptr float, ptr %p, i64 %i
  %v = load float, ptr %q
  %s = call float @llvm.sin.f32(float %v)
  %a = load float, ptr %acc
  %b = fadd float %a, %s
  store float %b, ptr %acc
  %next = add i64 %i, 1
  %c = icmp slt i64 %next, %n
  br i1 %c, label %loop, label %exit
exit:
  %r = load float, ptr %acc
  store float %r, ptr %p
  ret void
}
"""


def _load(path: str) -> None:
    try:
        dlopen = ctypes.CDLL(None).dlopen
        dlopen.restype = ctypes.c_void_p
        dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
        # llvmlite's flags (ctypes' RTLD_LOCAL, with the RTLD_NOW CPython adds), so that its
        # own load finds this one; the handle is kept, as llvmlite keeps its own
        if not dlopen(path.encode(), os.RTLD_NOW | os.RTLD_LOCAL):
            return
    except (OSError, AttributeError):
        return
    if os.environ.get("JITRT_WARM_LLVM", "1") != "0":
        try:
            _warm_up(ctypes.CDLL(path))
        except (OSError, AttributeError, RuntimeError):
            pass


def _host_string(call: Callable[..., Any], name: str) -> bytes:
    out = ctypes.c_void_p()
    call(name, ctypes.byref(out))
    try:
        return ctypes.string_at(out.value) if out.value else b""
    finally:
        if out.value:
            call("LLVMPY_DisposeString", out.value)


def _warm_up(library: ctypes.CDLL) -> None:
    """LLVM's first compile and load in the process, of WARM_IR: what the quick tier does
    (the host target machine at -O0, parse, verify, SROA, object code, an MCJIT engine)
    once, in a context, target machine and engine of its own, all freed after. A first use
    pays for LLVM's lazy initialisation and for faulting in the library's code pages, which
    this thread does on another core while `import jitrt` runs; `llvm_direct` waits for it
    before its own first call (docs/performance.md, "Cold start")."""
    declared: dict[str, Callable[..., Any]] = {}

    def call(name: str, *args: Any) -> Any:
        if name not in declared:
            declared[name] = llvm_direct.declare(library, name)
        return declared[name](*args)

    for part in ("Target", "AsmPrinter", "AsmParser"):
        call(f"LLVMPY_InitializeNative{part}")
    triple = _host_string(call, "LLVMPY_GetProcessTriple")
    err = ctypes.c_void_p()     # an error's message is left unfreed: none is expected
    target = call("LLVMPY_GetTargetFromTriple", triple, ctypes.byref(err))
    tm = target and call("LLVMPY_CreateTargetMachine", target, triple,
                         _host_string(call, "LLVMPY_GetHostCPUName"), b"", 0, b"static",
                         b"large", 0, 0, b"")
    context = call("LLVMPY_ContextCreate")
    module = tm and call("LLVMPY_ParseAssembly", context, WARM_IR, ctypes.byref(err))
    if module:
        _compile_and_load(call, context, tm, module)
    call("LLVMPY_ContextDispose", context)


def _compile_and_load(call: Callable[..., Any], context: int, tm: int, module: int) -> None:
    """The warm-up's SROA, -O0 object code and MCJIT load (which frees `tm` and `module`)."""
    err = ctypes.c_void_p()
    call("LLVMPY_VerifyModule", module, ctypes.byref(err))
    pto = call("LLVMPY_CreatePipelineTuningOptions")
    pb = call("LLVMPY_CreatePassBuilder", tm, pto)
    fpm = call("LLVMPY_CreateNewFunctionPassManager")
    call("LLVMPY_function_AddSROAPass", fpm)
    call("LLVMPY_RunNewFunctionPassManager", fpm,
         call("LLVMPY_GetNamedFunction", module, b"jitrt_warm"), pb)
    for name, handle in (("NewFunctionPassManger", fpm), ("PassBuilder", pb),
                         ("PipelineTuningOptions", pto)):
        call(f"LLVMPY_Dispose{name}", handle)
    buf = call("LLVMPY_TargetMachineEmitToMemory", tm, module, 1, ctypes.byref(err))
    call("LLVMPY_DisposeModule", module)
    if not buf:
        call("LLVMPY_DisposeTargetMachine", tm)
        return
    size = call("LLVMPY_GetBufferSize", buf)
    obj = call("LLVMPY_CreateObjectFile", ctypes.string_at(call("LLVMPY_GetBufferStart", buf),
                                                          size), size)
    call("LLVMPY_DisposeMemoryBuffer", buf)
    empty = call("LLVMPY_ParseAssembly", context, b"", ctypes.byref(err))
    engine = call("LLVMPY_CreateMCJITCompiler", empty, tm, False, ctypes.byref(err))
    if engine:     # it owns the target machine and the empty module
        call("LLVMPY_MCJITAddObjectFile", engine, obj)
        call("LLVMPY_FinalizeObject", engine)
        call("LLVMPY_GetFunctionAddress", engine, b"jitrt_warm")
        call("LLVMPY_DisposeExecutionEngine", engine)
    call("LLVMPY_DisposeObjectFile", obj)


def start() -> bool:
    """Start loading the library on a helper thread, once per process; whether it started."""
    if _thread or "llvmlite.binding" in sys.modules or \
            os.environ.get("JITRT_PRELOAD_LLVM", "1") == "0" or not hasattr(os, "RTLD_NOW"):
        return False
    path = library_path()
    if path is None:
        return False
    thread = threading.Thread(target=_load, args=(path,), name="jitrt-llvm-preload",
                              daemon=True)
    _thread.append(thread)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=wait)
    thread.start()
    atexit.register(wait)    # LLVM's static destructors must not run under its warm-up
    return True


def wait() -> None:
    """Until the helper thread is done (at once when there is none)."""
    for thread in _thread:
        if thread is not threading.current_thread():
            thread.join()


start()       # on import: `jitrt/__init__.py` imports this module first
