"""The generated Python of a launch: straight-line code specialised to one launch plan.

Stage: runtime. Each function reads the handle's `LaunchPlan` (`jitrt/launch_plan.py`) and
returns source lines (and puts the objects they name into the `env` the code is executed in):
scalars written to their slots, arrays repacked only when they changed, template values
compared, the adstack sizing snapshot, generation bumps, the launch lock and the return value.
`launcher.py` assembles a LaunchHandle's launcher from them and `bound.py` a BoundLaunch's
call; the source of each is kept on it (`.source`). This module knows launch contexts and
plans, not handles: it comes before `launcher.py` and `bound.py` in the chain of the launch
modules (plan, builder, context, native tables, sources, launchers).
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codegen import abi
from ..data import Ndarray
from ..host_matrix import HostMatrix, as_host
from ..launch_plan import LaunchPlan
from . import native_launch
from .arguments import MISSING, changed_expr, watch_state
from .weak_templates import HeldWeakly

if TYPE_CHECKING:
    from .context import LaunchContext
    from .program import Program


def keyword_lines(kernel: Any, argnames: list[str], env: dict[str, Any]) -> list[str]:
    """A call with keyword arguments and no extra positional ones is made again as the
    positional call `bind_args` would turn it into (defaults filled), `self(a0, a1, ...)`, so
    that the kernel's native launcher or router takes it as it takes any positional call (a
    Genesis solver passes `write_L=True` at every step). A name that is not a parameter, or one
    given twice, goes to `dispatch`, which says so."""
    names = [p.name for p in kernel.params]
    env["by_position"], env["MISSING"] = by_position, MISSING
    env["param_index"] = {name: i for i, name in enumerate(names) if i < len(argnames)}
    env["param_defaults"] = {i: kernel.defaults[name] for i, name in enumerate(names)
                             if name in kernel.defaults and i < len(argnames)}
    args = "(" + "".join(a + ", " for a in argnames) + ")"
    return ["    if extra or kw:",
            f"        bound = None if extra else by_position(kw, param_index, {args}, "
            "param_defaults)",
            f"        if bound is None: return dispatch(self, {args} + extra, kw)",
            "        return self(*bound)"]


def by_position(kw: dict[str, Any], index: dict[str, int], args: tuple[Any, ...],
                defaults: dict[int, Any]) -> list[Any] | None:
    """`args` (MISSING where not passed) with the keyword arguments `kw` in their places and
    the defaults where still MISSING; None if a name is unknown or given twice."""
    out = list(args)
    for name, v in kw.items():
        i = index.get(name)
        if i is None or out[i] is not MISSING:
            return None
        out[i] = v
    for i, v in defaults.items():
        if out[i] is MISSING:
            out[i] = v
    return out


def scalar_lines(plan: LaunchPlan, slow: str) -> list[str]:
    """Scalars go straight into their slots; ctypes rejects a wrong type, ranges are checked.
    A vector/matrix argument is unpacked (nested for a matrix: a wrong shape raises; an
    object without `tolist` too) and its components stored the same way, at every launch (no
    value is remembered between them)."""
    scalars = plan.of_kind("scalar", "vector")
    if not scalars:
        return []
    lines = ["    try:"]
    for p in scalars:
        i, slot, dt = p.index, p.slot, p.dtype
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
                assert p.int_range is not None
                lo, hi = p.int_range
                lines.append(f"        buf[{slot + k}] = {value}")  # ctypes wraps silently
                lines.append(f"        if not {lo} <= {value} <= {hi}: raise TypeError")
    errors = "TypeError, ValueError, OverflowError" + (
        ", AttributeError" if any(p.kind == "vector" for p in scalars) else "")
    return lines + [f"    except ({errors}):", f"        {slow}"]


def unpack_target(shape: tuple[int, ...], names: list[str]) -> str:
    """`(v0, v1)` for a vector, `((v0, v1), (v2, v3))` for a 2x2 matrix."""
    if len(shape) == 1:
        return "(" + "".join(x + ", " for x in names) + ")"
    cols = shape[1]
    return "(" + "".join(unpack_target((cols,), names[r * cols:(r + 1) * cols]) + ", "
                         for r in range(shape[0])) + ")"


def array_lines(plan: LaunchPlan, ctx: "LaunchContext", last_arrays: list[list[Any]],
                native_table: Any, env: dict[str, Any], slow: str) -> list[str]:
    """An array identical to the last one is not repacked. A plain numpy array can be resized,
    reshaped, reinterpreted or locked in place, so its shape, dtype, data pointer and flags are
    re-checked (`changed_expr`). `last_arrays`: per parameter, what it remembers of the last
    array packed; `native_table`: the handle's native launch table, if any (told each array
    packed)."""
    lines: list[str] = []
    env.update(pack_array=ctx.pack_array, watch_state=watch_state, Ndarray=Ndarray)
    for p in plan.of_kind("ndarray"):
        i = p.index
        env[f"last{i}"], env[f"dt{i}"] = last_arrays[i], p.dtype
        # a gradient is needed where the kernel uses it or the annotation asks for one
        lines.append(f"    if {changed_expr(f'a{i}', f'last{i}', p.written)}:")
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
        lines += [f"        if not pack_array(buf, {p.slot}, a{i}, dt{i}, {p.ndim}, "
                  f"{p.packs_grad}, {p.written}, {p.small}): {slow}",
                  f"        last{i}[:] = watch_state(a{i})"]
        if native_table is not None:   # the native launcher matches it by identity
            env["native_words"], env["packed"] = native_table, native_launch.packed
            lines.append(f"        packed(native_words, {i}, a{i}, {p.ndim}, {p.written})")
    return lines


def template_lines(plan: LaunchPlan, env: dict[str, Any], slow: str) -> list[str]:
    lines = []
    for p in plan.of_kind("template"):
        i, value = p.index, p.template
        if isinstance(value, HeldWeakly):   # the very object, while it lives
            env[f"r{i}"] = value.ref
            lines.append(f"    if a{i} is not r{i}() or a{i} is None: {slow}")
            continue
        if isinstance(value, HostMatrix):   # compiled in by value: equal, of one type
            env[f"t{i}"], env["same_values"] = value, same_values
            lines.append(f"    if not same_values(a{i}, t{i}): {slow}")
            continue
        env[f"t{i}"], env[f"tt{i}"] = value, type(value)
        lines.append(f"    if a{i} is not t{i} and (type(a{i}) is not tt{i} or a{i} != t{i}):"
                     f" {slow}")
    return lines


def same_values(a: Any, t: np.ndarray) -> bool:
    """Whether `a` is a vector/matrix template value equal to `t`, the one compiled in: the
    same class, dtype, shape and values."""
    return type(a) is type(t) and a.dtype == t.dtype and a.shape == t.shape and \
        bool((a.view(np.ndarray) == t.view(np.ndarray)).all())


def bump_lines(plan: LaunchPlan, field_objs: tuple[Any, ...], env: dict[str, Any]
               ) -> list[str]:
    """Generation bumps of the write set (after sizing, which observes the old generations)."""
    lines = []
    for slot, grad in plan.field_bumps:
        fld = field_objs[slot]
        env[f"wf{slot}{int(grad)}"] = fld.grad if grad else fld
        lines.append(f"    wf{slot}{int(grad)}.gen += 1")
    for arg, grad in plan.array_bumps:
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


def sizing_lines(plan: LaunchPlan, ctx: "LaunchContext", env: dict[str, Any]) -> list[str]:
    """Adstack sizing before the launch (and before this launch bumps any generation): build
    the dependency snapshot; equal to the cached one -> a launch-cache hit, nothing else.
    `ctx`: the context being launched (a handle's, or a bound launch's: each has its own
    buffer and so its own `LaunchSizing`)."""
    if plan.sizing_snapshot is None:
        return []
    from .adstack import fingerprint
    sizing = ctx.sizing
    env.update(lsz=sizing, lsz_last=sizing.last, lsz_hits=sizing.hits, Ndarray=Ndarray,
               fingerprint=fingerprint)
    for index in plan.sizing_fields:
        env[f"F{index}"] = ctx.compiled.field_objs[index]
    sizing.bind_fields(ctx.compiled.field_objs)
    return [f"    snap = {plan.sizing_snapshot}",
            "    if snap != lsz_last[0]: lsz.miss(buf, addr, snap)",
            "    else: lsz_hits[0] += 1"]


def entry_lines(name: str, env: dict[str, Any], program: "Program") -> list[str]:
    """The native call; with the kernel profiler on, timed into the program's profile."""
    if program.profile is None:
        return ["    entry(addr)"]
    import time
    env["clock"], env["ktimes"] = time.perf_counter, program.profile.times(name)
    return ["    kstart = clock()", "    entry(addr)", "    ktimes.add(clock() - kstart)"]


def return_lines(plan: LaunchPlan, field_objs: tuple[Any, ...], env: dict[str, Any]
                 ) -> list[str]:
    """The launcher's return statement: the value in the context's return slot, decoded (a
    vector/matrix return: a copy of the kernel's hidden return field)."""
    ret = plan.returns
    if ret.kind == "field":
        env["retf"], env["as_host"] = field_objs[ret.fields[0][1]], as_host
        return ["    return as_host(retf.to_numpy())"]
    if ret.kind == "tuple":     # scalars from 0-d fields, vectors/matrices as jr.Vector/Matrix
        items = []
        env["as_host"] = as_host
        for k, index, scalar in ret.fields:
            env[f"retf{k}"] = field_objs[index]
            items.append(f"retf{k}[None]" if scalar else f"as_host(retf{k}.to_numpy())")
        return [f"    return ({', '.join(items)},)"]
    if ret.kind == "float":
        return [f"    return dbuf[{abi.SLOT_RETURN}]"]
    if ret.kind == "signed":
        return [f"    return buf[{abi.SLOT_RETURN}]"]
    if ret.kind == "unsigned":
        return [f"    return buf[{abi.SLOT_RETURN}] & {(1 << ret.bits) - 1}"]
    return []
