"""Launches: the slow path that finds or builds a LaunchHandle, and the generated fast path.

Stage: runtime. `dispatch(kernel, args, kwargs)` is the slow path: it validates every argument
(`arguments.py`), derives the specialization, finds or builds the `LaunchHandle` and installs
the kernel's fast path as its `__call__`: the handle's launcher when the kernel has one
specialization in the current program, else a router that tries each handle's launcher in
turn (a per-kernel dispatch table of straight-line checks, no re-validation). A handle is built
once per (kernel, specialization): it compiles the kernel, owns a `LaunchContext` and generates
a launcher (`launch_source.py`) whose steady state packs arguments in place (an ndarray
identical to the last one is not repacked), bumps the write set's generations, runs the device
entry and checks the fault slot. A launcher first compares `program.ACTIVE[0]` with its program:
a re-`init` or `reset` sends it here, and a recording `jr.ad.Tape` makes it record the launch
on the tape of the calling thread (launches of threads without one run unrecorded).
Inside a `jr.ad.FwdMode` every launch comes here and goes on to the kernel's forward-mode
kernel (`launch_forward`), whose launchers expect the program's `fwd_token` instead; inside a
`jr.ad.Tape(validation=True)` to its validation kernel (`launch_validating`, `validate_token`).
Anything unexpected falls back to `dispatch`.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codegen import abi
from ..data import CURRENT_DEVICE, MATERIALIZE_PENDING, materialize_pending
from ..errors import JitrtError, KernelArgError
from ..long_lived import age_young, paused
from . import native_launch
from . import program as program_mod
from .arguments import MISSING, as_host_array, bind_args, describe, fail, launch_value, specialize
from .artifact import CompiledKernel
from .compiler import compile_kernel
from .context import LaunchContext
from .devices import check_devices
from .launch_source import (array_lines, bump_lines, entry_lines, keyword_lines, return_lines,
                            scalar_lines, serialized, sizing_lines, template_lines)
from .plan_builder import build_plan
from .weak_templates import HeldWeakly, hold, watch

if TYPE_CHECKING:
    from .program import Program
    from .seams import KernelLike

MISS = object()   # a router's launcher attempt that does not match its specialization


def user_facing(fn: Any, name: str, packed: bool = False) -> Any:
    """`fn` wrapped so that a `JitrtError` reaches the user without jitrt's internal frames:
    the traceback shows the user's call and the message (file, line, caret), as Triton and
    numba do. The wrapper is compiled from a string, so its one frame (`<jitrt>`) is not a
    file of the package either. `packed`: the wrapper is a method `(self, *args, **kwargs)`
    calling `fn(self, args, kwargs)` (a kernel's first `__call__`)."""
    env: dict[str, Any] = {"fn": fn, "JitrtError": JitrtError}
    params, call = ("self, *args, **kwargs", "fn(self, args, kwargs)") if packed else \
        ("*args, **kwargs", "fn(*args, **kwargs)")
    source = (f"def {name}({params}):\n"
              "    try:\n"
              f"        return {call}\n"
              "    except JitrtError as exc:\n"
              "        raise exc.with_traceback(None) from None\n")
    exec(compile(source, "<jitrt>", "exec"), env)  # noqa: S102
    return env[name]


# ---- dispatch (slow path) -----------------------------------------------------------------

def dispatch(kernel: "KernelLike", args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    values = bind_args(kernel, args, kwargs)
    if CURRENT_DEVICE[0] is not None:     # a GPU program: arrays of another device refused
        check_devices(kernel, kernel.params, values, program_mod.current())
    values = [as_host_array(v) if p.kind == "ndarray" else v
              for p, v in zip(kernel.params, values)]
    originals = {i: v for i, (p, v) in enumerate(zip(kernel.params, values))
                 if p.kind == "ndarray" and v.__class__ is np.ndarray and v.ndim > 1
                 and v.flags.f_contiguous and not v.flags.c_contiguous}
    if not originals:
        return _dispatch(kernel, values)
    # a Fortran-ordered numpy array (`a.T`): the kernel works on a C-ordered copy, which is
    # copied back after the launch (what Taichi does); other strided arrays are refused
    for i, v in originals.items():
        values[i] = np.ascontiguousarray(v)
    try:
        return _dispatch(kernel, values)
    finally:
        program_mod.current().device.synchronize()
        for i, v in originals.items():
            np.copyto(v, values[i])


def _dispatch(kernel: "KernelLike", values: list[Any]) -> Any:
    if MATERIALIZE_PENDING[0]:          # fields created since: Quadrants' materialize hook
        materialize_pending()
    program = program_mod.current()
    if program.fwd is not None and kernel.dual_args is None:
        return launch_forward(kernel, values)
    validating = program_mod.ACTIVE[0] is program.validate_token and not kernel.validate
    tape = program.tape
    if validating and tape is not None and tape.validation:
        return launch_validating(kernel, values, program)
    with program.launch_lock:   # one thread builds a handle; others wait
        handle = handle_for(kernel, values)
        install_fast_path(kernel, handle, program)
    values = [launch_value(p, v) for p, v in zip(handle.compiled.params, values)]
    if validating:   # another thread validates: run it (recorded on this thread's own tape)
        return handle.record(kernel, *values)
    return _launch_once(kernel, handle, values)


_DISPATCHING = threading.local()     # the kernels whose slow path is launching (this thread)


def _launch_once(kernel: "KernelLike", handle: LaunchHandle, values: list[Any]) -> Any:
    """Run the handle's launcher with values the slow path checked. Should the launcher still
    find an argument that does not fit (a disagreement between the two paths' checks), it
    hands the call back to `dispatch`: that comes here again, and is a clear error instead of
    a recursion without end."""
    active: set[int] = _DISPATCHING.__dict__.setdefault("kernels", set())
    if id(kernel) in active:
        raise KernelArgError(f"kernel {kernel.qualname}: the launcher refused arguments the "
                             f"slow path accepted ({describe_values(values)}); this is a jitrt "
                             "bug: please report it with the kernel's parameters")
    active.add(id(kernel))
    try:
        return handle.launcher(kernel, *values)
    finally:
        active.discard(id(kernel))


def describe_values(values: list[Any]) -> str:
    return ", ".join(type(v).__name__ + (f" {v.dtype}" if hasattr(v, "dtype") else "")
                     for v in values)


def launch_forward(kernel: "KernelLike", values: list[Any]) -> Any:
    """A launch inside `jr.ad.FwdMode`: the forward-mode kernel of `kernel`, given the duals
    of the ndarray arguments that have one after the arguments themselves."""
    if kernel.adjoint:
        raise JitrtError(f"kernel {kernel.qualname}: its reverse-mode .grad cannot run inside "
                         "jr.ad.FwdMode; launch it outside the with-block")
    duals = tuple(i for i, (p, v) in enumerate(zip(kernel.params, values))
                  if p.kind == "ndarray" and getattr(v, "dual", None) is not None)
    fwd: Any = kernel.forward_kernel(duals)
    return fwd(*values, *(values[i].dual for i in duals))


def launch_validating(kernel: "KernelLike", values: list[Any], program: "Program") -> Any:
    """A launch inside `jr.ad.Tape(validation=True)`: recorded as `kernel`'s (its adjoint runs
    in the reverse pass), run as its validation kernel (`frontend/gdar.py`), then synchronised
    so that a broken rule raises from this launch on a GPU too. A grad kernel or a
    `@jr.ad.no_grad` one runs unchecked and unrecorded."""
    if kernel.adjoint or getattr(kernel, "grad_disabled", False):
        with program.launch_lock:
            handle = handle_for(kernel, values)
        values = [launch_value(p, v) for p, v in zip(handle.compiled.params, values)]
        return handle.record(kernel, *values)      # (the tape does not record these)
    checked = kernel.validation_kernel()
    with program.launch_lock:
        handle = handle_for(checked, values)
        install_fast_path(checked, handle, program)
    program.tape.record(kernel, tuple(values), handle)
    values = [launch_value(p, v) for p, v in zip(handle.compiled.params, values)]
    result = handle.launcher(checked, *values)
    program.device.synchronize()    # a GPU's broken rule raises here, at this launch
    return result


def handle_for(kernel: "KernelLike", values: list[Any]) -> "LaunchHandle":
    """The LaunchHandle of the specialization `values` select, compiled on first use."""
    program = program_mod.current()
    params, spec, templates, name = specialize(kernel, values, program.config)
    key = (program.serial, spec)      # one handle per specialization and device (program)
    handle = kernel.handles.get(key)
    if handle is None:
        with paused():      # no collector passes over the handle's allocations
            compiled = compile_kernel(kernel, params, templates, name, program)
            handle = LaunchHandle(kernel, compiled, program, hold({
                i: values[i] for i, p in enumerate(params) if p.kind == "template"}, spec))
            handle.template_watch = watch(handle, key, FIRST_CALL)
        age_young()         # what the build keeps: no later pass of the middle generation
        kernel.handles[key] = handle
        program.handles.append(handle)
    for i, p in enumerate(params):
        if i in handle.compiled.grad_params and not p.needs_grad:
            if kernel.params[i].grad_annotation is False:
                raise KernelArgError(f"kernel {kernel.qualname}: argument '{p.name}' is "
                                     "annotated needs_grad=False, but the kernel uses its .grad")
            raise fail(kernel, p, "an ndarray with needs_grad=True (the kernel uses its .grad)",
                       describe(values[i]))
    check_writable(handle, values)
    return handle


def check_writable(handle: "LaunchHandle", values: list[Any]) -> None:
    """A read-only numpy array (`flags.writeable` False, `np.frombuffer(bytes)`) is refused
    for a parameter the kernel writes, and accepted for one it only reads."""
    import numpy as np
    for i in handle.written:
        v = values[i]
        if isinstance(v, np.ndarray) and not v.flags.writeable:
            raise fail(handle.kernel, handle.compiled.params[i],
                       "a writable array (the kernel writes this parameter)", describe(v))


def install_fast_path(kernel: "KernelLike", handle: "LaunchHandle", program: "Program") -> None:
    """The kernel's `__call__`: the handle's native launcher or its Python launcher; with
    several specializations a router over every handle of the current program (the one just
    used first), behind a chain of their native launchers (each falls back to the next)."""
    handles = [handle] + [h for h in kernel.handles.values()
                          if h.program is program and h is not handle]
    if len(handles) == 1:
        fast = handle.launcher
    else:
        fast = make_router(kernel, handles, program)
    fallback = fast if len(handles) == 1 else functools.partial(fast, kernel)
    natives = [h for h in handles if h.native is not None]
    for h in reversed(natives):
        native_launch.set_fallback(h.native_table, h.python_fallback if len(handles) == 1
                                   else fallback)
        fallback = fast = h.native
    wrap = getattr(kernel, "graph_call", None)     # @jr.kernel(graph=True): graph.graph_call
    if wrap is not None and program.stream_gpu:
        fast = wrap(kernel, fast)
    setattr(type(kernel), "__call__", fast)


def make_router(kernel: "KernelLike", handles: list["LaunchHandle"], program: "Program") -> Any:
    """A `__call__` for a kernel with several specializations: first the handle whose last
    arrays and template values are the very objects passed (identity tests), then each handle's
    checks in turn; alternating specializations never go through `dispatch`."""
    argnames = [f"a{i}" for i in range(len(kernel.params))]
    all_args = "(" + "".join(a + ", " for a in argnames) + ")"
    env: dict[str, Any] = {"dispatch": DISPATCH, "MISS": MISS, "MISSING": MISSING,
                           "active": program_mod.ACTIVE, "prog": handles[0].active_key}
    sig = "".join(f"{a}=MISSING, " for a in argnames)
    lines = [f"def route(self, {sig}/, *extra, **kw):"] + keyword_lines(kernel, argnames, env) + [
             "    if active[0] is not prog:",
             f"        return dispatch(self, {all_args}, {{}})"]
    attempts = []
    for k, h in enumerate(handles):
        env[f"try{k}"] = h.try_launch
        attempts.append(f"r = try{k}(self, {', '.join(argnames)})")
        same = []
        for p in h.plan.params:
            i = p.index
            if p.kind == "ndarray":
                env[f"last{k}_{i}"] = h.last_arrays[i]
                same.append(f"a{i} is last{k}_{i}[0]")
            elif p.kind == "template" and isinstance(p.template, HeldWeakly):
                env[f"r{k}_{i}"] = p.template.ref
                same.append(f"a{i} is r{k}_{i}()")
            elif p.kind == "template":
                env[f"t{k}_{i}"] = p.template
                same.append(f"a{i} is t{k}_{i}")
        if same:
            lines += [f"    if {' and '.join(same)}:", f"        {attempts[-1]}",
                      "        if r is not MISS: return r"]
    for attempt in attempts:
        lines += [f"    {attempt}", "    if r is not MISS: return r"]
    lines.append(f"    return dispatch(self, {all_args}, {{}})")
    source = "\n".join(lines)
    exec(compile(source, f"<jitrt router {kernel.qualname}>", "exec"), env)  # noqa: S102
    route = env["route"]
    route.source = source
    return route


# ---- the handle ---------------------------------------------------------------------------

class LaunchHandle(LaunchContext):
    """One (kernel, specialization) of one program: its compiled kernel, its `LaunchPlan`
    (`plan`, built once: `plan_builder.py`), launch context and generated launchers
    (`launcher` falls back to `dispatch`, `try_launch` returns MISS, `record` also records the
    launch on the program's Tape). The last two are generated on first use: most kernels
    never run under a Tape or beside another specialization."""

    def __init__(self, kernel: "KernelLike", compiled: CompiledKernel, program: "Program",
                 template_values: dict[int, Any]) -> None:
        super().__init__(compiled, program,
                         build_plan(kernel, compiled, program.device, template_values))
        self.kernel = kernel
        # what `ACTIVE[0]` is when this handle's launches may run: the program, or for a
        # forward-mode kernel the program's FwdMode token (it runs inside FwdMode only)
        self.active_key: Any = program.fwd_token if kernel.dual_args is not None else \
            program.validate_token if kernel.validate else program
        self.launch_count = (ctypes.c_int64 * 1)()   # also counted by native launches
        self.written = self.plan.written
        # per ndarray parameter: what it remembers of the last array packed (`watch_state`)
        self.last_arrays: list[list[Any]] = [[MISSING, None, None, None, 0, None]
                                             for _ in compiled.params]
        self.tape_plan: Any = None     # what jr.ad.Tape checks of this kernel (built on use)
        native = native_launch.handle_table(self, self.active_key)
        self.native_table = None if native is None else native.table
        self._recording: Any = None    # the "record" and "try" launchers, made on first use
        self._try: Any = None
        self.template_watch: list[Any] = []   # `weak_templates.watch`: retires this handle
        self.launcher = make_launcher(self, "fast")
        # what the native launcher calls for anything but its steady state
        self.python_fallback: Any = functools.partial(self.launcher, kernel)
        # the kernel's `__call__` when it has one specialization: native, else `launcher`
        self.native = None if native is None else native_launch.activate(
            native, self, self.python_fallback, self.launch_count)
        if self.native is not None:    # its GPU entry table is complete only now
            self.launcher.__globals__["entry"] = native_launch.gpu_entry_call(self) or \
                self.entry

    def record(self, kernel: Any, *args: Any) -> Any:
        if self._recording is None:
            self._recording = make_launcher(self, "record")
        return self._recording(kernel, *args)

    @property
    def try_launch(self) -> Any:
        if self._try is None:
            self._try = make_launcher(self, "try")
        return self._try


def make_launcher(handle: LaunchHandle, mode: str) -> Any:
    """Generate a launcher: straight-line Python specialised to the handle's parameters.
    mode "fast": the kernel's `__call__`; it checks `ACTIVE` once and hands a changed program
    to `dispatch`, a recording Tape to the "record" variant. "try": called by a router, which
    checked the program and the argument count; a mismatch returns MISS instead of going to
    `dispatch`. "record": records the launch on the Tape, then runs it."""
    c = handle.compiled
    argnames = [f"a{i}" for i in range(len(c.params))]
    env: dict[str, Any] = {"buf": handle.buf, "dbuf": handle.dbuf, "addr": handle.addr,
                           "entry": handle.entry, "cnt": handle.launch_count, "MISSING": MISSING,
                           "handle": handle, "dispatch": DISPATCH, "MISS": MISS,
                           "active": program_mod.ACTIVE, "prog": handle.active_key,
                           "program": handle.program, "token": handle.program.tape_token}
    # a GPU's native entry where there is one: a launch the native launcher left to Python (a
    # bool or numpy scalar, a keyword, a router's, a recorded one) still launches natively
    # when nothing has to move (the native entry hands anything else to the Python entry);
    # the handle puts it in the "fast" launcher once its native launcher is made
    env["entry"] = native_launch.gpu_entry_call(handle) or handle.entry
    all_args = "(" + "".join(a + ", " for a in argnames) + ")"
    slow = "return MISS" if mode == "try" else f"return dispatch(self, {all_args}, {{}})"
    record: list[str] = []
    plain_args = "".join(", " + a for a in argnames)
    if mode == "fast":
        env["recording"] = handle.record
        sig = "".join(f"{a}=MISSING, " for a in argnames)
        # positional-only: a keyword argument always goes to `kw`, never to a slot by its name
        fill = [f"    if {a} is MISSING: {a} = {name}" for a, name in default_names(handle, env)]
        head = [f"def launch(self, {sig}/, *extra, **kw):"] + \
            keyword_lines(handle.kernel, argnames, env) + fill + [
                "    if active[0] is not prog:",
                f"        if active[0] is token: return recording(self{plain_args})",
                f"        return dispatch(self, {all_args}, {{}})"]
    else:
        head = [f"def launch(self{plain_args}):"]
        if mode == "record":   # on the calling thread's tape: others' launches run as they are
            record = ["    tape = program.tape",
                      f"    if tape is not None: tape.record(self, {all_args}, handle)"]
    plan = handle.plan
    body = (scalar_lines(plan, slow)
            + array_lines(plan, handle, handle.last_arrays, handle.native_table, env, slow)
            + template_lines(plan, env, slow) + record + ["    cnt[0] += 1"]
            + sizing_lines(plan, handle, env) + bump_lines(plan, c.field_objs, env)
            + entry_lines(c.name, env, handle.program)
            + (["    if buf[0]: handle.fault()"] if plan.faults_in_context else []))
    if plan.adstacks:
        body.append(f"    if buf[{abi.SLOT_OVERFLOW}]: handle.overflow()")
    body += return_lines(plan, c.field_objs, env)
    source = "\n".join(head + serialized(body, env, handle.program))
    filename = f"<jitrt {mode} launcher {c.name}>"
    if c.warm is None:
        code = compile(source, filename, "exec")
    else:                            # from the offline cache, or compiled and stored there
        code = c.warm.code(source, filename)
        c.warm.flush()
    exec(code, env)  # noqa: S102
    launch = env["launch"]
    launch.source = source
    return launch


def default_names(handle: LaunchHandle, env: dict[str, Any]) -> list[tuple[str, str]]:
    """(argument, name in env) for each parameter with a default (`s: jr.f32 = 2.0`): the
    fast launcher fills an argument not passed with it, as the slow path would pack it."""
    out = []
    for p in handle.plan.params[:handle.plan.nargs]:
        if p.has_default:
            env[f"default{p.index}"] = p.default
            out.append((f"a{p.index}", f"default{p.index}"))
    return out


DISPATCH = user_facing(dispatch, "dispatch")   # what generated launchers fall back to
FIRST_CALL = user_facing(dispatch, "__call__", packed=True)   # a kernel's first `__call__`
