"""The generated Python of a launch: straight-line code specialised to one compiled kernel.

Stage: runtime. Each function returns source lines (and puts the objects they name into the
`env` the code is executed in): scalars written to their slots, arrays repacked only when
they changed, template values compared, the adstack sizing snapshot, generation bumps, the
launch lock and the return value. `launcher.py` assembles a LaunchHandle's launcher from them
and `bound.py` a BoundLaunch's `__call__`; the source of each is kept on it (`.source`).
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any

from .. import dtypes
from ..codegen import abi
from ..data import Ndarray
from ..frontend.context import RETURN_FIELD
from . import native_launch
from .arguments import INT_RANGE, changed_expr, watch_state

if TYPE_CHECKING:
    from .program import Program
    from .compiler import CompiledKernel
    from .launcher import LaunchHandle


def scalar_lines(c: "CompiledKernel", slow: str) -> list[str]:
    """Scalars go straight into their slots; ctypes rejects a wrong type, ranges are checked.
    A vector/matrix argument is unpacked (nested for a matrix: a wrong shape raises; an
    object without `tolist` too) and its components stored the same way, at every launch (no
    value is remembered between them)."""
    scalars = [i for i, p in enumerate(c.params) if p.kind in ("scalar", "vector")]
    if not scalars:
        return []
    lines = ["    try:"]
    for i in scalars:
        p, slot = c.params[i], c.layout.param_slots[i]
        dt = p.dtype
        assert dt is not None              # concrete parameters of a compiled kernel
        values = [f"a{i}"]
        if p.kind == "vector":
            values = [f"v{i}_{k}" for k in range(prod(p.element_shape))]
            # a numpy array (jr.Vector) unpacks several times faster through tolist()
            lines.append(f"        {unpack_target(p.element_shape, values)} = a{i} if "
                         f"type(a{i}) is tuple or type(a{i}) is list else a{i}.tolist()")
        for k, value in enumerate(values):
            if dt.is_float:
                lines.append(f"        dbuf[{slot + k}] = {value}")
            else:
                lo, hi = INT_RANGE[dt]
                lines.append(f"        buf[{slot + k}] = {value}")  # ctypes wraps silently
                lines.append(f"        if not {lo} <= {value} <= {hi}: raise TypeError")
    errors = "TypeError, ValueError, OverflowError" + (
        ", AttributeError" if any(c.params[i].kind == "vector" for i in scalars) else "")
    return lines + [f"    except ({errors}):", f"        {slow}"]


def unpack_target(shape: tuple[int, ...], names: list[str]) -> str:
    """`(v0, v1)` for a vector, `((v0, v1), (v2, v3))` for a 2x2 matrix."""
    if len(shape) == 1:
        return "(" + "".join(x + ", " for x in names) + ")"
    cols = shape[1]
    return "(" + "".join(unpack_target((cols,), names[r * cols:(r + 1) * cols]) + ", "
                         for r in range(shape[0])) + ")"


def array_lines(handle: "LaunchHandle", env: dict[str, Any], slow: str) -> list[str]:
    """An array identical to the last one is not repacked. A plain numpy array can be resized,
    reshaped, reinterpreted or locked in place, so its shape, dtype, data pointer and flags are
    re-checked (`changed_expr`)."""
    c, lines = handle.compiled, []
    env.update(pack_array=handle.pack_array, watch_state=watch_state, Ndarray=Ndarray)
    for i, p in enumerate(c.params):
        if p.kind != "ndarray":
            continue
        env[f"last{i}"], env[f"dt{i}"] = handle.last_arrays[i], p.dtype
        # a gradient is needed where the kernel uses it or the annotation asks for one
        slot, need_grad = c.layout.param_slots[i], i in c.grad_params or bool(p.grad_annotation)
        written = i in handle.written
        lines.append(f"    if {changed_expr(f'a{i}', f'last{i}', written)}:")
        # element checks first: a slow path after packing would leave the slots out of step
        # with what `last{i}` remembers
        if p.element_shape:      # the components' trailing dimensions must match
            lines.append(f"        if tuple(a{i}.storage_shape if type(a{i}) is Ndarray else "
                         f"getattr(a{i}, 'shape', ()))[{p.ndim - len(p.element_shape)}:] != "
                         f"{p.element_shape!r}: {slow}")
        if p.element_dim < 0:    # the element is the array's: a jitrt ndarray's, else ()
            lines.append(f"        if (a{i}.element_shape if type(a{i}) is Ndarray else ()) "
                         f"!= {p.element_shape!r}: {slow}")
        elif p.element_dim > 0:  # a jitrt ndarray of other elements (vectors, not matrices)
            lines.append(f"        if type(a{i}) is Ndarray and a{i}.element_shape not in "
                         f"((), {p.element_shape!r}): {slow}")
        lines += [f"        if not pack_array(buf, {slot}, a{i}, dt{i}, {p.ndim}, {need_grad}, "
                  f"{written}): {slow}",
                  f"        last{i}[:] = watch_state(a{i})"]
        if handle.native_table is not None:   # the native launcher matches it by identity
            env["native_words"], env["packed"] = handle.native_table, native_launch.packed
            lines.append(f"        packed(native_words, {i}, a{i}, {p.ndim}, {written})")
    return lines


def template_lines(handle: "LaunchHandle", env: dict[str, Any], slow: str) -> list[str]:
    lines = []
    for i, p in enumerate(handle.compiled.params):
        if p.kind == "template":
            value = handle.template_values[i]
            env[f"t{i}"], env[f"tt{i}"] = value, type(value)
            lines.append(f"    if a{i} is not t{i} and (type(a{i}) is not tt{i} or a{i} != t{i}):"
                         f" {slow}")
    return lines


def bump_lines(c: "CompiledKernel", env: dict[str, Any]) -> list[str]:
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


def serialized(body: list[str], env: dict[str, Any], program: "Program") -> list[str]:
    """Wrap a launcher body in the program's launch lock. A launch packs the handle's shared
    context buffer and the adstack heap is per program, so launches from several Python
    threads (the native call releases the GIL) run one at a time instead of mixing their
    arguments. Reentrant: the slow path may call back into a launcher. `held` counts the
    Python launches in flight, which native launches wait for (`runtime/native_launch.py`)."""
    lock = program.launch_lock
    env["acquire"], env["release"], env["held"] = lock.acquire, lock.release, lock.held
    return ["    acquire()", "    held[0] += 1", "    try:"] + ["    " + line for line in body] + \
        ["    finally:", "        held[0] -= 1", "        release()"]


def sizing_lines(handle: "LaunchHandle", env: dict[str, Any], sizing: Any = None) -> list[str]:
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


def entry_lines(name: str, env: dict[str, Any], program: "Program") -> list[str]:
    """The native call; with the kernel profiler on, timed into the program's profile."""
    if program.profile is None:
        return ["    entry(addr)"]
    import time
    env["clock"], env["ktimes"] = time.perf_counter, program.profile.times(name)
    return ["    t0 = clock()", "    entry(addr)", "    ktimes.add(clock() - t0)"]


def return_lines(ret: dtypes.DataType | None, c: Any = None,
                 env: dict[str, Any] | None = None) -> list[str]:
    """The launcher's return statement: the value in the context's return slot, decoded (a
    vector/matrix return: a copy of the kernel's hidden return field)."""
    if ret is None and c is not None and env is not None:
        for f in c.field_objs:
            if f.name == RETURN_FIELD:
                env["retf"] = f
                return ["    return retf.to_numpy()"]
        parts = sorted((int(f.name.rsplit(".", 1)[1]), f) for f in c.field_objs
                       if f.name.startswith(RETURN_FIELD + "."))
        if parts:       # a tuple: scalars from 0-d fields, vectors/matrices as arrays
            items = []
            for k, f in parts:
                env[f"retf{k}"] = f
                items.append(f"retf{k}[None]" if f.shape == () else f"retf{k}.to_numpy()")
            return [f"    return ({', '.join(items)},)"]
    if ret is None:
        return []
    if ret.is_float:
        return [f"    return dbuf[{abi.SLOT_RETURN}]"]
    if ret.is_signed:
        return [f"    return buf[{abi.SLOT_RETURN}]"]
    return [f"    return buf[{abi.SLOT_RETURN}] & {(1 << ret.bits) - 1}"]
