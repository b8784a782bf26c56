"""LLVM for the CPU backend through llvmlite's C library, without `llvmlite.binding`.

Stage: backend. `import llvmlite.binding` took 35-50 ms of CPU time of every cold start on the
development VM (its ~25 modules, each declaring the ctypes prototypes of a whole area of
LLVM's API, and `importlib.resources` with `zipfile` and `tempfile`, which it imports to find
its library), about a fifth of a cold start, while the CPU backend calls ~40 of its
functions. This module calls the same exported functions of the same library
(`libllvmlite.so`, the `LLVMPY_*` C API) through ctypes prototypes declared on first use, so
that the CPU path (target machines, parsing, the quick tier's SROA, the O3 pipeline, object
emission, the MCJIT engine, the host's triple, CPU and features) imports none of it.
`llvmlite.binding` stays for what only it offers (printing an optimised module, the GPU
targets, rebuilding the shipped runtime object); both load the one library, and what they
return is the same (`tests/test_llvm_direct.py` compares them).

Handles are plain integers (LLVM pointers). The caller owns what a function here creates and
frees it with the matching `dispose_*` (or hands it over: an engine owns the module and
target machine it is created with, `link` consumes its source). Strings LLVM allocates are
copied and freed here. Errors raise RuntimeError with LLVM's message, as llvmlite does.
Thread safety: none here; callers hold `llvm_setup.LLVM_LOCK` for the shared context and
target machines, and a thread with a context of its own may work without it
(`backends/cpu_tiers.py`).
"""
from __future__ import annotations

import ctypes
import functools
import os
from typing import Any, Callable, Iterator

from .llvm_preload import library_path

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_OUT = ctypes.POINTER(ctypes.c_void_p)
_I = ctypes.c_int
_B = ctypes.c_bool

# name -> (result type, argument types): the prototypes of llvmlite's C API used here
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "LLVMPY_InitializeNativeTarget": (None, []),
    "LLVMPY_InitializeNativeAsmPrinter": (None, []),
    "LLVMPY_InitializeNativeAsmParser": (None, []),
    "LLVMPY_GetVersionInfo": (ctypes.c_uint, []),
    "LLVMPY_DisposeString": (None, [_P]),
    "LLVMPY_GetProcessTriple": (None, [_OUT]),
    "LLVMPY_GetHostCPUName": (None, [_OUT]),
    "LLVMPY_GetHostCPUFeatures": (_I, [_OUT]),
    "LLVMPY_GetTargetFromTriple": (_P, [_S, _OUT]),
    "LLVMPY_CreateTargetMachine": (_P, [_P, _S, _S, _S, _I, _S, _S, _I, _I, _S]),
    "LLVMPY_DisposeTargetMachine": (None, [_P]),
    "LLVMPY_CreateTargetMachineData": (_P, [_P]),
    "LLVMPY_CopyStringRepOfTargetData": (None, [_P, _OUT]),
    "LLVMPY_DisposeTargetData": (None, [_P]),
    "LLVMPY_ContextCreate": (_P, []),
    "LLVMPY_ParseAssembly": (_P, [_P, _S, _OUT]),
    "LLVMPY_VerifyModule": (_I, [_P, _OUT]),
    "LLVMPY_DisposeModule": (None, [_P]),
    "LLVMPY_LinkModules": (_I, [_P, _P, _OUT]),
    "LLVMPY_GetNamedFunction": (_P, [_P, _S]),
    "LLVMPY_GlobalGetValueType": (_P, [_P]),
    "LLVMPY_PrintType": (_P, [_P]),
    "LLVMPY_ModuleFunctionsIter": (_P, [_P]),
    "LLVMPY_FunctionsIterNext": (_P, [_P]),
    "LLVMPY_DisposeFunctionsIter": (None, [_P]),
    "LLVMPY_ModuleGlobalsIter": (_P, [_P]),
    "LLVMPY_GlobalsIterNext": (_P, [_P]),
    "LLVMPY_DisposeGlobalsIter": (None, [_P]),
    "LLVMPY_IsDeclaration": (_I, [_P]),
    "LLVMPY_GetLinkage": (_I, [_P]),
    "LLVMPY_GetValueName": (_S, [_P]),
    "LLVMPY_SetValueName": (None, [_P, _S]),
    "LLVMPY_CreatePipelineTuningOptions": (_P, []),
    "LLVMPY_PTOSetLoopVectorization": (None, [_P, _B]),
    "LLVMPY_PTOSetSLPVectorization": (None, [_P, _B]),
    "LLVMPY_DisposePipelineTuningOptions": (None, [_P]),
    "LLVMPY_CreatePassBuilder": (_P, [_P, _P]),
    "LLVMPY_DisposePassBuilder": (None, [_P]),
    "LLVMPY_buildPerModuleDefaultPipeline": (_P, [_P, _I]),
    "LLVMPY_RunNewModulePassManager": (None, [_P, _P, _P]),
    "LLVMPY_DisposeNewModulePassManger": (None, [_P]),
    "LLVMPY_CreateNewFunctionPassManager": (_P, []),
    "LLVMPY_function_AddSROAPass": (None, [_P]),
    "LLVMPY_RunNewFunctionPassManager": (None, [_P, _P, _P]),
    "LLVMPY_DisposeNewFunctionPassManger": (None, [_P]),
    "LLVMPY_TargetMachineEmitToMemory": (_P, [_P, _P, _I, _OUT]),
    "LLVMPY_GetBufferStart": (_P, [_P]),
    "LLVMPY_GetBufferSize": (ctypes.c_size_t, [_P]),
    "LLVMPY_DisposeMemoryBuffer": (None, [_P]),
    "LLVMPY_CreateMCJITCompiler": (_P, [_P, _P, _B, _OUT]),
    "LLVMPY_CreateObjectFile": (_P, [_S, ctypes.c_size_t]),
    "LLVMPY_DisposeObjectFile": (None, [_P]),
    "LLVMPY_MCJITAddObjectFile": (None, [_P, _P]),
    "LLVMPY_FinalizeObject": (None, [_P]),
    "LLVMPY_GetFunctionAddress": (ctypes.c_uint64, [_P, _S]),
}

# LLVM's LLVMLinkage values (llvm-c/Core.h) of symbols that stay inside their object
INTERNAL_LINKAGE, PRIVATE_LINKAGE = 8, 9


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    path = library_path()
    if path is None:
        raise RuntimeError("llvmlite's library (libllvmlite) was not found")
    return ctypes.CDLL(path)


@functools.lru_cache(maxsize=None)
def fn(name: str) -> Callable[..., Any]:
    """The library's function `name` with its prototype (declared on first use)."""
    cfn = getattr(_library(), name)
    cfn.restype, cfn.argtypes = SIGNATURES[name]
    return cfn  # type: ignore[no-any-return]


def _taken(out: ctypes.c_void_p) -> str:
    """The string LLVM wrote to `out` (empty where none), freed."""
    if not out.value:
        return ""
    try:
        return ctypes.string_at(out.value).decode("utf-8", "replace")
    finally:
        fn("LLVMPY_DisposeString")(out.value)


def _string(name: str, *args: Any) -> str:
    """Call `name`, whose last parameter is a string it writes, and return that string."""
    out = ctypes.c_void_p()
    fn(name)(*args, ctypes.byref(out))
    return _taken(out)


def _checked(name: str, what: str, *args: Any) -> int:
    """Call `name`, which returns a handle (null on failure) and writes its error message."""
    out = ctypes.c_void_p()
    handle = fn(name)(*args, ctypes.byref(out))
    message = _taken(out)
    if not handle:
        raise RuntimeError(f"{what}{message}")
    return handle  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=None)
def init_native() -> None:
    """The host's target, assembly printer and parser (once per process; llvmlite's own
    initialisation of the same is harmless before or after)."""
    fn("LLVMPY_InitializeNativeTarget")()
    fn("LLVMPY_InitializeNativeAsmPrinter")()
    fn("LLVMPY_InitializeNativeAsmParser")()


@functools.lru_cache(maxsize=None)
def version_info() -> tuple[int, ...]:
    """LLVM's version, as `llvmlite.binding.llvm_version_info`."""
    x, parts = fn("LLVMPY_GetVersionInfo")(), []
    while x:
        parts.append(x & 0xFF)
        x >>= 8
    return tuple(reversed(parts))


@functools.lru_cache(maxsize=None)
def process_triple() -> str:
    return _string("LLVMPY_GetProcessTriple")


@functools.lru_cache(maxsize=None)
def host_cpu_name() -> str:
    return _string("LLVMPY_GetHostCPUName")


@functools.lru_cache(maxsize=None)
def host_cpu_features() -> str:
    """The host's features as `llvmlite.binding.get_host_cpu_features().flatten()` gives
    them: `+name` or `-name`, sorted by name, comma-separated."""
    out = ctypes.c_void_p()
    known = fn("LLVMPY_GetHostCPUFeatures")(ctypes.byref(out))
    text = _taken(out)
    if not known:
        return ""
    flags = {feat[1:]: feat[0] for feat in text.split(",") if feat}
    return ",".join(sign + name for name, sign in sorted(flags.items()))


def target_machine(triple: str, cpu: str, features: str, opt: int,
                   reloc: str = "static", codemodel: str = "large") -> int:
    """A new target machine (the caller owns it: `dispose_target_machine`, or an engine)."""
    init_native()
    target = _checked("LLVMPY_GetTargetFromTriple", "", triple.encode())
    tm = fn("LLVMPY_CreateTargetMachine")(target, triple.encode(), cpu.encode(),
                                          features.encode(), opt, reloc.encode(),
                                          codemodel.encode(), 0, 0, b"")
    if not tm:
        raise RuntimeError(f"Cannot create target machine for {triple} ({cpu})")
    return tm  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=None)
def host_machine(opt: int) -> int:
    """The process's target machine for the host CPU at -O`opt` (shared: its users hold
    `llvm_setup.LLVM_LOCK`; a thread of its own makes its own with `target_machine`)."""
    return target_machine(process_triple(), host_cpu_name(), host_cpu_features(), opt)


def dispose_target_machine(tm: int) -> None:
    fn("LLVMPY_DisposeTargetMachine")(tm)


def data_layout(tm: int) -> str:
    """The target machine's data layout string (`str(tm.target_data)` in llvmlite)."""
    td = fn("LLVMPY_CreateTargetMachineData")(tm)
    try:
        return _string("LLVMPY_CopyStringRepOfTargetData", td)
    finally:
        fn("LLVMPY_DisposeTargetData")(td)


def new_context() -> int:
    """An LLVM context of the caller's own (never freed: one per process or thread)."""
    return fn("LLVMPY_ContextCreate")()  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=None)
def shared_context() -> int:
    """The process's context for the CPU backend's compiles (its users hold `LLVM_LOCK`;
    llvmlite's global context is not this one)."""
    return new_context()


def parse(text: str, context: int) -> int:
    """A module parsed from LLVM IR text (the caller owns it: `dispose_module`)."""
    return _checked("LLVMPY_ParseAssembly", "LLVM IR parsing error\n", context,
                    ctypes.c_char_p(text.encode()))


def verify(module: int) -> None:
    out = ctypes.c_void_p()
    failed = fn("LLVMPY_VerifyModule")(module, ctypes.byref(out))
    message = _taken(out)
    if failed:
        raise RuntimeError(message)


def dispose_module(module: int) -> None:
    fn("LLVMPY_DisposeModule")(module)


def link(dst: int, src: int) -> None:
    """Link `src` into `dst`; `src` is consumed either way."""
    out = ctypes.c_void_p()
    failed = fn("LLVMPY_LinkModules")(dst, src, ctypes.byref(out))
    message = _taken(out)
    if failed:
        raise RuntimeError(message)


def function_type(module: int, name: str) -> str:
    """The type of the function `name` as LLVM prints it (e.g. `void (ptr)`)."""
    value = fn("LLVMPY_GetNamedFunction")(module, name.encode())
    if not value:
        raise NameError(name)
    printed = ctypes.c_void_p(fn("LLVMPY_PrintType")(fn("LLVMPY_GlobalGetValueType")(value)))
    return _taken(printed)


def _walk(module: int, kind: str) -> Iterator[int]:
    it = fn(f"LLVMPY_Module{kind}Iter")(module)
    try:
        while True:
            value = fn(f"LLVMPY_{kind}IterNext")(it)
            if not value:
                return
            yield value
    finally:
        fn(f"LLVMPY_Dispose{kind}Iter")(it)


def functions(module: int) -> list[int]:
    return list(_walk(module, "Functions"))


def global_variables(module: int) -> list[int]:
    return list(_walk(module, "Globals"))


def is_declaration(value: int) -> bool:
    return bool(fn("LLVMPY_IsDeclaration")(value))


def linkage(value: int) -> int:
    return fn("LLVMPY_GetLinkage")(value)  # type: ignore[no-any-return]


def name(value: int) -> str:
    return str((fn("LLVMPY_GetValueName")(value) or b"").decode())


def set_name(value: int, new: str) -> None:
    fn("LLVMPY_SetValueName")(value, new.encode())


def run_sroa(module: int, tm: int) -> None:
    """SROA over each function defined in `module` (the quick tier's only pass)."""
    pto = fn("LLVMPY_CreatePipelineTuningOptions")()
    pb = fn("LLVMPY_CreatePassBuilder")(tm, pto)
    fpm = fn("LLVMPY_CreateNewFunctionPassManager")()
    try:
        fn("LLVMPY_function_AddSROAPass")(fpm)
        run = fn("LLVMPY_RunNewFunctionPassManager")
        for value in functions(module):
            if not is_declaration(value):
                run(fpm, value, pb)
    finally:
        fn("LLVMPY_DisposeNewFunctionPassManger")(fpm)
        fn("LLVMPY_DisposePassBuilder")(pb)
        fn("LLVMPY_DisposePipelineTuningOptions")(pto)


def optimise(module: int, tm: int, level: int = 3) -> None:
    """LLVM's default module pipeline at O`level` with both vectorizers (what
    `llvm_setup.optimize` runs through llvmlite)."""
    pto = fn("LLVMPY_CreatePipelineTuningOptions")()
    fn("LLVMPY_PTOSetLoopVectorization")(pto, True)
    fn("LLVMPY_PTOSetSLPVectorization")(pto, True)
    pb = fn("LLVMPY_CreatePassBuilder")(tm, pto)
    mpm = fn("LLVMPY_buildPerModuleDefaultPipeline")(pb, level)
    try:
        fn("LLVMPY_RunNewModulePassManager")(mpm, module, pb)
    finally:
        fn("LLVMPY_DisposeNewModulePassManger")(mpm)
        fn("LLVMPY_DisposePassBuilder")(pb)
        fn("LLVMPY_DisposePipelineTuningOptions")(pto)


def emit_object(tm: int, module: int) -> bytes:
    """The module's relocatable object code."""
    buf = _checked("LLVMPY_TargetMachineEmitToMemory", "LLVM code generation failed: ",
                   tm, module, 1)
    try:
        return ctypes.string_at(fn("LLVMPY_GetBufferStart")(buf),
                                fn("LLVMPY_GetBufferSize")(buf))
    finally:
        fn("LLVMPY_DisposeMemoryBuffer")(buf)


class Engine:
    """An MCJIT engine that object code is added to (it owns the target machine it is made
    with; it lives as long as the process)."""

    def __init__(self, tm: int, context: int) -> None:
        # llvmlite's own memory manager where llvmlite uses it by default (64-bit ARM: the
        # default one's placement breaks MCJIT's relocations there)
        own_memory = hasattr(os, "uname") and os.uname().machine.lower() in ("arm64",
                                                                            "aarch64")
        self._ee = _checked("LLVMPY_CreateMCJITCompiler", "", parse("", context), tm,
                            own_memory)

    def add_object(self, obj: bytes) -> None:
        handle = fn("LLVMPY_CreateObjectFile")(obj, len(obj))
        try:
            fn("LLVMPY_MCJITAddObjectFile")(self._ee, handle)
        finally:
            fn("LLVMPY_DisposeObjectFile")(handle)
        fn("LLVMPY_FinalizeObject")(self._ee)

    def address(self, symbol: str) -> int:
        """The address of the function `symbol` (0 where there is none)."""
        return fn("LLVMPY_GetFunctionAddress")(self._ee, symbol.encode())  # type: ignore[no-any-return]
