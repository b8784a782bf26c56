"""Launch path: argument validation, LaunchHandles, generated fast launchers, bound launches.

Stage: runtime. `dispatch(kernel, args, kwargs)` is the slow path: it validates every argument
(raising `KernelArgError` naming kernel, parameter, expected and got), derives the
specialization, finds or builds the `LaunchHandle` and installs the handle's fast launcher as
the kernel's `__call__`. A handle is built once per (kernel, specialization): it compiles the
kernel, allocates the context buffer, fills the constant slots (pool, field pointers) and
generates a launcher whose steady state packs arguments in place (an ndarray argument identical
to the last one is not repacked), bumps the generations of the write set, calls the native
entry with the GIL released and checks the fault slot. Anything unexpected falls back here.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .. import dtypes
from ..codegen import abi
from ..errors import KernelArgError, KernelRuntimeError, caret_text
from ..frontend.source import source_line
from ..ir import nodes as n
from . import program as program_mod
from .compiler import CompiledKernel, compile_kernel
from .data import Field, Ndarray

MISSING = object()
ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64)
INT_RANGE = {t: ((-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else
                 (0, (1 << t.bits) - 1)) for t in dtypes.ALL if t.is_int}


# ---- watching a plain numpy array's buffer ------------------------------------------------
# A numpy array is mutable in ways an object identity check cannot see: `resize(...,
# refcheck=False)` moves its buffer, `.shape =`/`.dtype =` reinterpret it, `flags.writeable =
# False` locks it. A launch that reuses what it packed earlier re-checks all of it: shape and
# dtype through attributes, the data pointer and the flags word through ctypes cells over the
# array object's C struct (numpy's PyArrayObject: data at +16, flags at +64; checked against
# the public accessors at import, with a slow but safe fallback).
NPY_C_CONTIGUOUS, NPY_WRITEABLE = 0x1, 0x400


class _SlowCell:
    """The fallback of a ctypes cell: reads the value through numpy's public API."""
    __slots__ = ("arr", "read")

    def __init__(self, arr: np.ndarray, read: Any) -> None:
        self.arr, self.read = arr, read

    @property
    def value(self) -> int:
        return self.read(self.arr)


def _probe_struct_offsets() -> bool:
    a = np.zeros(3, np.float32)
    try:
        data = ctypes.c_int64.from_address(id(a) + 16).value
        flags = ctypes.c_int32.from_address(id(a) + 64).value
        a.flags.writeable = False
        locked = ctypes.c_int32.from_address(id(a) + 64).value
    except (ValueError, OSError):   # no C struct to read (another interpreter)
        return False
    return (data == a.ctypes.data and flags & NPY_WRITEABLE and flags & NPY_C_CONTIGUOUS
            and not locked & NPY_WRITEABLE)


_FAST_CELLS = _probe_struct_offsets()


def _flags_word(a: np.ndarray) -> int:
    return (NPY_C_CONTIGUOUS if a.flags.c_contiguous else 0) | \
        (NPY_WRITEABLE if a.flags.writeable else 0)


def buffer_cells(a: np.ndarray) -> tuple[Any, Any]:
    """Live cells over `a`'s data pointer and flags word (valid while `a` is referenced)."""
    if _FAST_CELLS:
        return ctypes.c_int64.from_address(id(a) + 16), ctypes.c_int32.from_address(id(a) + 64)
    return _SlowCell(a, lambda x: x.ctypes.data), _SlowCell(a, _flags_word)


def watch_state(a: Any) -> list[Any]:
    """What a launch remembers of an array it packed: [array, shape, dtype, data cell, data
    pointer, flags cell]. The reference keeps the array (and its buffer) alive."""
    if isinstance(a, np.ndarray):
        data, flags = buffer_cells(a)
        return [a, a.shape, a.dtype, data, data.value, flags]
    return [a, a.shape, a.dtype, None, 0, None]


def changed_expr(var: str, last: str, written: bool) -> str:
    """A Python expression, true when `var` is not the array `last` remembers unchanged."""
    mask = NPY_C_CONTIGUOUS | (NPY_WRITEABLE if written else 0)
    return (f"{var} is not {last}[0] or (type({var}) is not Ndarray and ({var}.shape != "
            f"{last}[1] or {var}.dtype is not {last}[2] or {last}[3].value != {last}[4] or "
            f"{last}[5].value & {mask} != {mask}))")


# ---- argument validation ----------------------------------------------------------------

def _fail(kernel: Any, param: n.Param, expected: str, got: str) -> KernelArgError:
    return KernelArgError(f"kernel {kernel.qualname}: argument '{param.name}': expected "
                          f"{expected}, got {got}")


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"numpy array dtype={v.dtype} ndim={v.ndim}" + (
            "" if v.flags.c_contiguous else " (not C-contiguous)") + (
            "" if v.flags.writeable else " (read-only)")
    if isinstance(v, (Ndarray, Field)):
        return f"{type(v).__name__} dtype={v.dtype.name} ndim={len(v.shape)}"
    return f"{type(v).__name__} {v!r}"[:120]


def bind_args(kernel: Any, args: tuple, kwargs: dict) -> list[Any]:
    params = kernel.params
    if len(args) > len(params):
        raise KernelArgError(f"kernel {kernel.qualname} takes {len(params)} argument(s), got "
                             f"{len(args) + len(kwargs)}")
    values = list(args) + [MISSING] * (len(params) - len(args))
    names = [p.name for p in params]
    for key, v in kwargs.items():
        if key not in names:
            raise KernelArgError(f"kernel {kernel.qualname} has no parameter '{key}'")
        if values[names.index(key)] is not MISSING:
            raise KernelArgError(f"kernel {kernel.qualname}: '{key}' given twice")
        values[names.index(key)] = v
    for p, v in zip(params, values):
        if v is MISSING:
            raise KernelArgError(f"kernel {kernel.qualname}: missing argument '{p.name}'")
    return values


def check_scalar(kernel: Any, p: n.Param, dt: dtypes.DataType, v: Any) -> None:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                              np.floating)):
        if not isinstance(v, (bool, np.bool_)):
            raise _fail(kernel, p, f"a {dt.name} scalar", _describe(v))
    if dt.is_int:
        if isinstance(v, (float, np.floating)):
            raise _fail(kernel, p, f"an integer ({dt.name})", _describe(v))
        lo, hi = INT_RANGE[dt]
        if not lo <= int(v) <= hi:
            raise _fail(kernel, p, f"a {dt.name} in [{lo}, {hi}]", repr(int(v)))
    else:
        try:
            float(v)
        except OverflowError:
            raise _fail(kernel, p, f"a {dt.name} scalar", "an int too large for a float") from None


def array_info(v: Any) -> tuple[dtypes.DataType | None, int, bool] | None:
    if isinstance(v, Ndarray):
        return v.dtype, len(v.shape), v.grad is not None
    if isinstance(v, np.ndarray):
        return dtypes.from_numpy(v.dtype), v.ndim, False
    return None


def specialize(kernel: Any, values: list[Any], cfg: Any) -> tuple[tuple[n.Param, ...], tuple,
                                                                    dict[str, Any], str]:
    """Concrete params, the handle key, template values and the content-stable kernel name."""
    params, key, templates, name_parts = [], [], {}, []
    for p, v in zip(kernel.params, values):
        if p.kind == "scalar":
            dt = p.dtype or _default_scalar(kernel, p, cfg)
            check_scalar(kernel, p, dt, v)
            params.append(n.Param(p.name, "scalar", dt))
            key.append(None)
            name_parts.append(dt.name)
        elif p.kind == "ndarray":
            info = array_info(v)
            want = f"an ndarray{'' if p.dtype is None else ' of ' + p.dtype.name}" + (
                "" if p.ndim < 0 else f" with ndim={p.ndim}")
            if info is None:
                raise _fail(kernel, p, want, _describe(v))
            dt, ndim, has_grad = info
            if dt is None or (p.dtype is not None and dt != p.dtype) or (
                    p.ndim >= 0 and ndim != p.ndim):
                raise _fail(kernel, p, want, _describe(v))
            if isinstance(v, np.ndarray) and not v.flags.c_contiguous:
                raise _fail(kernel, p, want + " (C-contiguous)", _describe(v))
            params.append(n.Param(p.name, "ndarray", dt, ndim, has_grad))
            key.append((dt, ndim, has_grad))
            name_parts.append(f"nd({dt.name},{ndim})")
        else:
            tkey, text = template_key(kernel, p, v)
            params.append(n.Param(p.name, "template"))
            templates[p.name] = v
            key.append(tkey)
            name_parts.append(text)
    grad = ".grad" if kernel.adjoint else ""
    name = f"{kernel.qualname}{grad}[{','.join(name_parts)}]"
    return tuple(params), tuple(key), templates, name


def _default_scalar(kernel: Any, p: n.Param, cfg: Any) -> dtypes.DataType:
    ann = kernel.fn.__annotations__.get(p.name)
    return cfg.default_ip if ann is int or ann == "int" else cfg.default_fp


def template_key(kernel: Any, p: n.Param, v: Any) -> tuple[Any, str]:
    if isinstance(v, Field):
        return ("field", id(v)), f"field({v.dtype.name},{v.shape})"
    if isinstance(v, (bool, int, float, str, dtypes.DataType)) or v is None:
        return (type(v), v), repr(v)
    if isinstance(v, tuple) and all(isinstance(x, (bool, int, float)) for x in v):
        return (tuple, v), repr(v)
    raise _fail(kernel, p, "a field or a Python constant (jr.template())", _describe(v))


# ---- dispatch (slow path) -----------------------------------------------------------------

def dispatch(kernel: Any, args: tuple, kwargs: dict) -> Any:
    values = bind_args(kernel, args, kwargs)
    with program_mod.current().launch_lock:   # one thread builds a handle; others wait
        handle = handle_for(kernel, values)
    tape = handle.program.tape
    if tape is not None:
        tape.record(kernel, values, handle)   # stay on the slow path while recording
    else:
        type(kernel).__call__ = handle.launcher
    return handle.launcher(kernel, *values)


def handle_for(kernel: Any, values: list[Any]) -> LaunchHandle:
    """The LaunchHandle of the specialization `values` select, compiled on first use."""
    program = program_mod.current()
    params, key, templates, name = specialize(kernel, values, program.config)
    handle = kernel.handles.get(key)
    if handle is None or handle.program is not program:
        compiled = compile_kernel(kernel, params, templates, name, program)
        handle = LaunchHandle(kernel, compiled, program,
                              {i: values[i] for i, p in enumerate(params) if p.kind == "template"})
        kernel.handles[key] = handle
        program.handles.append(handle)
    for i, p in enumerate(params):
        if i in handle.compiled.grad_params and not p.needs_grad:
            raise _fail(kernel, p, "an ndarray with needs_grad=True (the kernel uses its .grad)",
                        _describe(values[i]))
    check_writable(handle, values)
    return handle


def written_params(compiled: CompiledKernel) -> frozenset[int]:
    """Ndarray parameters whose data (not gradient) the kernel may write."""
    return frozenset(arg for arg, grad in compiled.lowered.writes.arrays if not grad)


def check_writable(handle: LaunchHandle, values: list[Any]) -> None:
    """A read-only numpy array (`flags.writeable` False, `np.frombuffer(bytes)`) is refused
    for a parameter the kernel writes, and accepted for one it only reads."""
    for i in handle.written:
        v = values[i]
        if isinstance(v, np.ndarray) and not v.flags.writeable:
            raise _fail(handle.kernel, handle.compiled.params[i],
                        "a writable array (the kernel writes this parameter)", _describe(v))


# ---- the handle ---------------------------------------------------------------------------

class LaunchHandle:
    def __init__(self, kernel: Any, compiled: CompiledKernel, program: Any,
                 template_values: dict[int, Any]) -> None:
        self.kernel, self.compiled, self.program = kernel, compiled, program
        self.template_values = template_values
        layout = compiled.layout
        self.buf = (ctypes.c_int64 * max(layout.size, abi.HEADER_SLOTS))()
        self.dbuf = (ctypes.c_double * len(self.buf)).from_buffer(self.buf)
        self.addr = ctypes.addressof(self.buf)
        self.entry = ENTRY_TYPE(compiled.entry_addr)
        self.launch_count = [0]
        fill_header(self.buf, program, compiled)
        self.sizing_infos = register_tasks(self.buf, program, compiled)
        plan = compiled.sizing
        self.sizing = None
        if plan is not None and plan.constant:
            plan.size_launch(self.buf, self.addr, program)  # capacities known at compile time
        elif plan is not None:
            from .adstack import LaunchSizing
            self.sizing = LaunchSizing(plan, program, self.sizing_infos)
        self.written = written_params(compiled)
        # per ndarray parameter: what it remembers of the last array packed (`watch_state`)
        self.last_arrays: list[list[Any]] = [[MISSING, None, None, None, 0, None]
                                             for _ in compiled.params]
        self.launcher = make_launcher(self)

    def overflow(self) -> None:
        from .adstack import raise_overflow
        raise_overflow(self.buf, self.addr, self.compiled.sizing, self.sizing_infos,
                       self.program)

    def fault(self) -> None:
        raise_fault(self.buf, self.compiled)


def register_tasks(buf: Any, program: Any, compiled: CompiledKernel) -> tuple:
    """Register every task with adstacks (content-stable ids) and write the ids into the
    context; returns the sizing infos of the handle (one tuple, never copied per launch)."""
    plan = compiled.sizing
    if plan is None:
        return ()
    from ..passes import sizeexpr as se
    from .adstack import AdStackSizingInfo
    infos = []
    for task, _stride_slot, reg_slot in compiled.layout.task_slots:
        rid = program.registry.register(compiled.name, task)
        buf[reg_slot] = rid
        stacks = [p for p in plan.stacks if p.task == task]
        exprs = tuple(p.capacity if p.capacity is not None else se.Const(plan.forced)
                      for p in stacks)
        specs = tuple(s for s in plan.specs if any(s in se.closed_reductions(e) for e in exprs))
        infos.append(AdStackSizingInfo(rid, compiled.name, task,
                                       tuple(p.stack.name for p in stacks), exprs, specs))
    return tuple(infos)


def fill_header(buf: Any, program: Any, compiled: CompiledKernel) -> None:
    buf[abi.SLOT_POOL] = program.pool.address
    buf[abi.SLOT_PARALLEL_FOR] = program.pool.parallel_for_addr
    buf[abi.SLOT_NUM_THREADS] = program.pool.num_threads
    for k, fld in enumerate(compiled.field_objs):
        buf[compiled.layout.field_slots[k]] = fld.ptr
        buf[compiled.layout.field_grad_slots[k]] = fld.grad.ptr if fld.grad is not None else 0


def pack_array(buf: Any, slot: int, v: Any, dt: dtypes.DataType, ndim: int,
               need_grad: bool, written: bool = True) -> bool:
    """Write an ndarray argument's slots; False if `v` does not fit the specialization (the
    caller then takes the slow path, which names the problem)."""
    if type(v) is Ndarray:
        if v.dtype is not dt or len(v.shape) != ndim or (need_grad and v.grad is None):
            return False
        buf[slot] = v.ptr
        buf[slot + 1] = v.grad.ptr if v.grad is not None else 0
        shape = v.shape
    elif isinstance(v, np.ndarray) and not need_grad:   # numpy subclasses (memmap) too
        if v.dtype != dt.np or v.ndim != ndim or not v.flags.c_contiguous or (
                written and not v.flags.writeable):
            return False
        buf[slot] = v.ctypes.data
        buf[slot + 1] = 0
        shape = v.shape
    else:
        return False
    for k in range(ndim):
        buf[slot + 2 + k] = shape[k]
    return True


def raise_fault(buf: Any, compiled: CompiledKernel) -> None:
    if buf[abi.SLOT_ERROR] == abi.ERROR_INTERRUPTED:
        buf[abi.SLOT_ERROR] = 0
        raise KeyboardInterrupt(f"kernel {compiled.name} was interrupted and stopped early; "
                                "the data it writes may be partly updated")
    site_id, axis, index = buf[abi.SLOT_ERROR] - 1, buf[abi.SLOT_ERROR_AXIS], \
        buf[abi.SLOT_ERROR_INDEX]
    buf[abi.SLOT_ERROR] = buf[abi.SLOT_ERROR_AXIS] = buf[abi.SLOT_ERROR_INDEX] = 0
    site = compiled.sites[site_id]
    line = source_line(site.loc)
    raise KernelRuntimeError(
        f"kernel {compiled.name}: index {index} out of bounds on axis {axis} of '{site.name}' "
        f"({site.kind}) at {site.loc}; the access was skipped"
        + ("\n" + caret_text(line, site.loc.col) if line else ""))


def make_launcher(handle: LaunchHandle) -> Any:
    """Generate the handle's fast launcher: straight-line Python specialised to its params."""
    c = handle.compiled
    argnames = [f"a{i}" for i in range(len(c.params))]
    env: dict[str, Any] = {"buf": handle.buf, "dbuf": handle.dbuf, "addr": handle.addr,
                           "entry": handle.entry, "cnt": handle.launch_count, "MISSING": MISSING,
                           "handle": handle, "dispatch": dispatch, "pack_array": pack_array,
                           "Ndarray": Ndarray, "watch_state": watch_state}
    all_args = "(" + "".join(a + ", " for a in argnames) + ")"
    slow = f"return dispatch(self, {all_args} + extra, kw)"
    sig = "".join(f"{a}=MISSING, " for a in argnames)
    # positional-only: a keyword argument always goes to `kw`, never to a slot by its a<i> name
    head = [f"def launch(self, {sig}/, *extra, **kw):", f"    if extra or kw: {slow}"]
    body = (scalar_lines(c, slow) + array_lines(handle, env, slow)
            + template_lines(handle, env, slow) + ["    cnt[0] += 1"]
            + sizing_lines(handle, env) + bump_lines(c, env)
            + ["    entry(addr)", "    if buf[0]: handle.fault()"])
    if c.sizing is not None:
        body.append(f"    if buf[{abi.SLOT_OVERFLOW}]: handle.overflow()")
    body += return_lines(c.lowered.tasked.ret)
    source = "\n".join(head + serialized(body, env, handle.program))
    exec(compile(source, f"<jitrt launcher {c.name}>", "exec"), env)  # noqa: S102
    launch = env["launch"]
    launch.source = source
    return launch


def scalar_lines(c: CompiledKernel, slow: str) -> list[str]:
    """Scalars go straight into their slots; ctypes rejects a wrong type, ranges are checked."""
    scalars = [i for i, p in enumerate(c.params) if p.kind == "scalar"]
    if not scalars:
        return []
    lines = ["    try:"]
    for i in scalars:
        p, slot = c.params[i], c.layout.param_slots[i]
        if p.dtype.is_float:
            lines.append(f"        dbuf[{slot}] = a{i}")
        else:
            lo, hi = INT_RANGE[p.dtype]
            lines.append(f"        buf[{slot}] = a{i}")  # ctypes wraps silently: check
            lines.append(f"        if not {lo} <= a{i} <= {hi}: raise TypeError")
    return lines + ["    except (TypeError, OverflowError):", f"        {slow}"]


def array_lines(handle: LaunchHandle, env: dict[str, Any], slow: str) -> list[str]:
    """An array identical to the last one is not repacked. A plain numpy array can be resized,
    reshaped, reinterpreted or locked in place, so its shape, dtype, data pointer and flags are
    re-checked (`changed_expr`)."""
    c, lines = handle.compiled, []
    for i, p in enumerate(c.params):
        if p.kind != "ndarray":
            continue
        env[f"last{i}"], env[f"dt{i}"] = handle.last_arrays[i], p.dtype
        slot, need_grad = c.layout.param_slots[i], i in c.grad_params
        written = i in handle.written
        lines += [f"    if {changed_expr(f'a{i}', f'last{i}', written)}:",
                  f"        if not pack_array(buf, {slot}, a{i}, dt{i}, {p.ndim}, {need_grad}, "
                  f"{written}): {slow}",
                  f"        last{i}[:] = watch_state(a{i})"]
    return lines


def template_lines(handle: LaunchHandle, env: dict[str, Any], slow: str) -> list[str]:
    lines = []
    for i, p in enumerate(handle.compiled.params):
        if p.kind == "template":
            value = handle.template_values[i]
            env[f"t{i}"], env[f"tt{i}"] = value, type(value)
            lines.append(f"    if a{i} is not t{i} and (type(a{i}) is not tt{i} or a{i} != t{i}):"
                         f" {slow}")
    return lines


def bump_lines(c: CompiledKernel, env: dict[str, Any]) -> list[str]:
    """Generation bumps of the write set (after sizing, which observes the old generations)."""
    lines = []
    for slot, grad in c.lowered.writes.fields:
        fld = c.field_objs[slot]
        env[f"wf{slot}{int(grad)}"] = fld.grad if grad else fld
        lines.append(f"    wf{slot}{int(grad)}.gen += 1")
    for arg, grad in c.lowered.writes.arrays:
        target = f"a{arg}.grad" if grad else f"a{arg}"
        lines.append(f"    if type(a{arg}) is Ndarray: {target}.gen += 1")
    return lines


def serialized(body: list[str], env: dict[str, Any], program: Any) -> list[str]:
    """Wrap a launcher body in the program's launch lock. A launch packs the handle's shared
    context buffer and the adstack heap is per program, so launches from several Python
    threads (the native call releases the GIL) run one at a time instead of mixing their
    arguments. Reentrant: the slow path may call back into a launcher."""
    env["acquire"], env["release"] = program.launch_lock.acquire, program.launch_lock.release
    return ["    acquire()", "    try:"] + ["    " + line for line in body] + \
        ["    finally:", "        release()"]


def sizing_lines(handle: LaunchHandle, env: dict[str, Any], sizing: Any = None) -> list[str]:
    """Adstack sizing before the launch (and before this launch bumps any generation): build
    the dependency snapshot; equal to the cached one -> a launch-cache hit, nothing else.
    `sizing` is the LaunchSizing of the context buffer being launched (the handle's own by
    default; a bound launch has its own buffer and so its own)."""
    plan = handle.compiled.sizing
    if plan is None or plan.constant:
        return []
    from .adstack import fingerprint
    sizing = sizing or handle.sizing
    env.update(lsz=sizing, lsz_last=sizing.last, lsz_hits=sizing.hits, Ndarray=Ndarray,
               fingerprint=fingerprint)
    for d in plan.deps:
        if d.kind == "field":
            env[f"F{d.index}"] = handle.compiled.field_objs[d.index]
    sizing.bind_fields(handle.compiled.field_objs)
    return [f"    snap = {plan.snapshot_expr()}",
            "    if snap != lsz_last[0]: lsz.miss(buf, addr, snap)",
            "    else: lsz_hits[0] += 1"]


def return_lines(ret: dtypes.DataType | None) -> list[str]:
    """The launcher's return statement: the value in the context's return slot, decoded."""
    if ret is None:
        return []
    if ret.is_float:
        return [f"    return dbuf[{abi.SLOT_RETURN}]"]
    if ret.is_signed:
        return [f"    return buf[{abi.SLOT_RETURN}]"]
    return [f"    return buf[{abi.SLOT_RETURN}] & {(1 << ret.bits) - 1}"]


# ---- bound launches -----------------------------------------------------------------------

def bind(kernel: Any, args: tuple, kwargs: dict) -> "BoundLaunch":
    """Validate and pack the arguments once; nothing runs until the bound launch is called."""
    values = bind_args(kernel, args, kwargs)
    return BoundLaunch(handle_for(kernel, values), values)


class _Gen:
    """Stands in for data without a generation counter (a plain numpy array)."""
    __slots__ = ("gen",)

    def __init__(self) -> None:
        self.gen = 0


class BoundLaunch:
    """A launch with every argument packed into its own context buffer.

    `launch()` runs it with no per-call argument work; `launch.set_arg(name_or_index, value)`
    rebinds one argument (validated against the same specialization). Each bound launch gets
    its own small class whose `__call__` is generated straight-line code."""

    def __init__(self, handle: LaunchHandle, values: list[Any]) -> None:
        self.handle = handle
        self.values = list(values)
        c = handle.compiled
        self.buf = (ctypes.c_int64 * len(handle.buf))()
        self.dbuf = (ctypes.c_double * len(self.buf)).from_buffer(self.buf)
        self.addr = ctypes.addressof(self.buf)
        fill_header(self.buf, handle.program, c)
        # what each ndarray argument was when packed: re-checked before every call, since a
        # numpy array can move its buffer (resize) or change in place after binding
        self.watch: dict[int, list[Any]] = {}
        for i in range(len(values)):
            self._pack(i)
        writes = c.lowered.writes
        self.array_bumps = [[_Gen()] for _ in writes.arrays]
        self._update_bumps()
        self.sizing = None
        self.cells = [[v] for v in self.values]   # the bound values the snapshot reads
        plan = c.sizing
        if plan is not None:   # grad kernels: registry ids, then capacities in our own buffer
            register_tasks(self.buf, handle.program, c)
            if plan.constant:
                plan.size_launch(self.buf, self.addr, handle.program)
            else:
                from .adstack import LaunchSizing
                self.sizing = LaunchSizing(plan, handle.program, handle.sizing_infos)
        type(self).__call__ = self._make_call()

    def __new__(cls, handle: LaunchHandle, values: list[Any]) -> "BoundLaunch":
        return super().__new__(type(f"BoundLaunch[{handle.compiled.name}]", (cls,), {}))

    def _make_call(self) -> Any:
        c = self.handle.compiled
        env: dict[str, Any] = {"cnt": self.handle.launch_count, "entry": self.handle.entry,
                               "buf": self.buf, "dbuf": self.dbuf, "addr": self.addr,
                               "raise_fault": raise_fault, "c": c, "Ndarray": Ndarray}
        lines = ["def __call__(self):"]
        for i, cell in enumerate(self.cells):
            env[f"cell{i}"] = cell
            if self.sizing is not None or i in self.watch:
                lines.append(f"    a{i} = cell{i}[0]")
        for i, state in self.watch.items():
            env[f"last{i}"] = state
            lines.append(f"    if {changed_expr(f'a{i}', f'last{i}', i in self.handle.written)}:"
                         f" self._pack({i})")
        lines.append("    cnt[0] += 1")
        if self.sizing is not None:
            lines += sizing_lines(self.handle, env, self.sizing)
        for k, (slot, grad) in enumerate(c.lowered.writes.fields):
            env[f"f{k}"] = c.field_objs[slot].grad if grad else c.field_objs[slot]
            lines.append(f"    f{k}.gen += 1")
        for k, cell in enumerate(self.array_bumps):
            env[f"w{k}"] = cell
            lines.append(f"    w{k}[0].gen += 1")
        lines += ["    entry(addr)", "    if buf[0]: raise_fault(buf, c)"]
        if c.sizing is not None:
            lines.append(f"    if buf[{abi.SLOT_OVERFLOW}]: self.overflow()")
        lines += return_lines(c.lowered.tasked.ret)
        lines = lines[:1] + serialized(lines[1:], env, self.handle.program)
        exec(compile("\n".join(lines), f"<jitrt bound launch {c.name}>", "exec"), env)  # noqa: S102
        return env["__call__"]

    def overflow(self) -> None:
        from .adstack import raise_overflow
        raise_overflow(self.buf, self.addr, self.handle.compiled.sizing,
                       self.handle.sizing_infos, self.handle.program)

    def _pack(self, i: int) -> None:
        c = self.handle.compiled
        p, v, slot = c.params[i], self.values[i], c.layout.param_slots[i]
        if p.kind == "scalar":
            if p.dtype.is_float:
                self.dbuf[slot] = float(v)
            else:
                self.buf[slot] = int(v)
        elif p.kind == "ndarray":
            written = i in self.handle.written
            if not pack_array(self.buf, slot, v, p.dtype, p.ndim, i in c.grad_params, written):
                want = "a writable ndarray" if isinstance(v, np.ndarray) and written and \
                    not v.flags.writeable else "an ndarray"
                raise _fail(self.handle.kernel, p, f"{want} of {p.dtype.name}, ndim={p.ndim} "
                            "(C-contiguous)", _describe(v))
            state = self.watch.get(i)
            if state is None:
                self.watch[i] = watch_state(v)
            else:
                state[:] = watch_state(v)   # the generated __call__ reads this very list

    def _update_bumps(self) -> None:
        writes = self.handle.compiled.lowered.writes
        for cell, (arg, grad) in zip(self.array_bumps, writes.arrays):
            v = self.values[arg]
            cell[0] = (v.grad if grad else v) if isinstance(v, Ndarray) else _Gen()

    def set_arg(self, key: int | str, value: Any) -> None:
        kernel = self.handle.kernel
        names = [p.name for p in kernel.params]
        if isinstance(key, str) and key not in names:
            raise KernelArgError(f"kernel {kernel.qualname} has no parameter '{key}'")
        index = key if isinstance(key, int) else names.index(key)
        values = list(self.values)
        values[index] = value
        key_now = specialize(kernel, values, self.handle.program.config)[1]
        if kernel.handles.get(key_now) is not self.handle:
            raise KernelArgError(f"kernel {kernel.qualname}: rebinding '{names[index]}' would "
                                 "change the specialization; bind a new launch instead")
        self.values = values
        self._pack(index)
        self._update_bumps()
        self.cells[index][0] = value
