"""One-time LLVM set-up through `llvmlite.binding`, and the lock every use of LLVM holds.

Stage: backend. Initialises llvmlite's targets once per process (the host's; all of them
when a GPU compile step asks), builds llvmlite target machines for the host (the CPU
backend's own compiles go through `llvm_direct.py`, which needs none of this) and runs the
O`n` pipeline on llvmlite modules. `llvmlite.binding` is imported by the functions that use
it, not with this module: the CPU path imports `LLVM_LOCK` from here and never loads it.
"""
from __future__ import annotations

import functools
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import llvmlite.binding as llvm

# llvmlite parses into LLVM's global context and shares one target machine: every use of the
# LLVM library (parse, optimise, emit, load) holds this lock, so kernels first launched from
# several Python threads at once compile one after the other.
LLVM_LOCK = threading.RLock()


def _llvmlite_lock() -> Any:
    """llvmlite's own lock around each call into LLVM (None where this llvmlite has none, or
    where `llvmlite.binding` is not loaded: then no thread calls through it)."""
    binding = sys.modules.get("llvmlite.binding")
    ffi = getattr(binding, "ffi", None)
    return getattr(getattr(getattr(ffi, "lib", None), "_lock", None), "_lock", None)


def hold_for_fork() -> None:
    """Before `os.fork`: wait for any thread's use of LLVM to end and hold it off, so that the
    child inherits LLVM, and both locks, in a consistent state (`runtime/forking.py`)."""
    LLVM_LOCK.acquire()
    lock = _llvmlite_lock()
    if lock is not None:
        lock.acquire()


def release_after_fork() -> None:
    """After `os.fork`, in the parent and in the child (where the forking thread, the only
    one, owns both locks)."""
    lock = _llvmlite_lock()
    if lock is not None:
        lock.release()
    LLVM_LOCK.release()


@functools.lru_cache(maxsize=None)
def init_llvm() -> None:
    """The host's target, assembly printer and parser, for llvmlite's users (all of LLVM's
    targets took another ~1 ms of every start). Under LLVM_LOCK, as LLVM's target registry
    is not safe to change while another thread compiles (`cpu_tiers.warm_up`)."""
    import llvmlite.binding as llvm
    with LLVM_LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()


@functools.lru_cache(maxsize=None)
def init_all_targets() -> None:
    """Every target LLVM was built with: the GPU compile steps (NVPTX, AMDGPU); under
    LLVM_LOCK, as `init_llvm`."""
    import llvmlite.binding as llvm
    init_llvm()
    with LLVM_LOCK:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()


@functools.lru_cache(maxsize=None)
def host_target_machine() -> llvm.TargetMachine:
    return make_target_machine(opt=3)


def make_target_machine(opt: int) -> llvm.TargetMachine:
    """A new llvmlite target machine for the host CPU generating code at -O`opt`."""
    import llvmlite.binding as llvm
    init_llvm()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=opt, reloc="static", codemodel="large")


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    """The O`level` pipeline with both vectorizers (`llvm_direct.optimise` runs the same on
    the CPU backend's modules)."""
    import llvmlite.binding as llvm
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
