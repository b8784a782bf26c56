"""Native launches: the launch tables of `native/native_launcher.py` and the builtins over them.

Stage: runtime. Input: a launch context (a handle's or a bound launch's), its `LaunchPlan` and
the generated Python launcher. Output: a builtin function (`PyCFunction_NewEx` over the runtime
module's `jitrt_launch`) that runs the steady-state launch in native code and calls the Python
launcher for anything else; it becomes the kernel's `__call__` (a bound launch's). Only kernels
whose launch the table can describe get one: no per-launch adstack sizing, no vector return, no
profiler, every parameter an ndarray, a template, a scalar or a vector/matrix (taken natively
as an exact tuple or list of numbers, or a C-contiguous float64/float32 or int64/int32 numpy
array; anything else goes to the Python launcher), a device with a native entry (the CPU: the
kernel's fused entry; a GPU whose driver offers one: `jitrt_gpu_entry` over the context's GPU
entry table, `backends/gpu.py`). `layout()` measures, once per process, the CPython offsets the
launcher reads (tuple size and items, an object's type, a float's value, `ACTIVE`'s items, a
ctypes array's buffer, `gen` and `grad` slots) and checks each on live objects; if one does not
hold (another Python implementation or build), or `JITRT_NATIVE_LAUNCH=0`, there are no native
launches and the Python launchers serve.
Caches: the layout (per process), the table and builtin (per handle or bound launch).
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..codegen import abi
from ..native import launch_table as nl
from ..data import Ndarray
from ..launch_plan import LaunchPlan
from ..linalg import Matrix, Vector
from . import program as program_mod
from .arguments import NPY_C_CONTIGUOUS, NPY_WRITEABLE
from .weak_templates import HeldWeakly

if TYPE_CHECKING:
    from .context import LaunchContext


class LaunchTable(ctypes.Array):  # type: ignore[type-arg]
    """The words `jitrt_launch` reads; `keep` holds what the words point at."""
    _type_ = ctypes.c_int64
    _length_ = 0


_NEW_BUILTIN = ctypes.pythonapi.PyCFunction_NewEx
_NEW_BUILTIN.restype = ctypes.py_object
_NEW_BUILTIN.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
_layout: dict[str, int] | None | bool = False     # False: not measured yet


def _word(addr: int) -> int:
    return ctypes.c_ssize_t.from_address(addr).value


def slot_offset(cls: type, name: str) -> int | None:
    """The byte offset of the `__slots__` member `name` in instances of `cls`, found by storing
    two marker objects and looking for their addresses."""
    probe: Any = object.__new__(cls)
    markers = (object(), object())
    offset = None
    for marker in markers:
        setattr(probe, name, marker)
        found = [off for off in range(16, cls.__basicsize__, 8)
                 if _word(id(probe) + off) == id(marker)]
        if len(found) != 1 or (offset is not None and found[0] != offset):
            return None
        offset = found[0]
    return offset


def layout() -> dict[str, int] | None:
    """The CPython offsets and C API addresses a launch table needs, or None (no native
    launches in this process)."""
    global _layout
    if _layout is not False:
        return _layout if isinstance(_layout, dict) else None
    _layout = None
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()   # free-threaded builds: no
    if os.environ.get("JITRT_NATIVE_LAUNCH", "1") == "0" or ctypes.sizeof(ctypes.c_void_p) != 8 \
            or not gil:
        return None
    a, b, x = object(), object(), 2.75
    pair, table = (a, b), (ctypes.c_int64 * 2)()
    checks = [_word(id(pair) + 16) == 2, _word(id(pair) + 24) == id(a),
              _word(id(pair) + 32) == id(b), _word(id(x) + 8) == id(float),
              ctypes.c_double.from_address(id(x) + 16).value == x,
              _word(_word(id(program_mod.ACTIVE) + 24)) == id(program_mod.ACTIVE[0]),
              _word(id(table) + nl.CTYPES_BUFFER_OFFSET) == ctypes.addressof(table)]
    arr = np.zeros((3, 5), np.float32)[::2]      # numpy's PyArrayObject fields
    checks += [_word(id(arr) + 16) == arr.ctypes.data,
               ctypes.c_int32.from_address(id(arr) + 24).value == 2,
               _word(_word(id(arr) + 32)) == 2 and _word(_word(id(arr) + 32) + 8) == 5,
               _word(id(arr) + 56) == id(arr.dtype),
               ctypes.c_int32.from_address(id(arr) + 64).value & NPY_C_CONTIGUOUS == 0,
               ctypes.c_int32.from_address(id(arr) + 64).value & NPY_WRITEABLE != 0]
    gen, grad = slot_offset(Ndarray, "gen"), slot_offset(Ndarray, "grad")
    if not all(checks) or gen is None or grad is None:
        return None
    if not all(hasattr(ctypes.pythonapi, name) for name in nl.API_WORDS):
        return None
    api = {name: ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
           for name in nl.API_WORDS}
    _layout = {"tuple_size": 16, "tuple_items": 24, "type": 8, "float_value": 16,
               "list_items": 24, "gen": gen, "grad": grad, "np_data": 16, "np_nd": 24,
               "np_dims": 32, "np_descr": 56, "np_flags": 64, **api}  # type: ignore[dict-item]
    return _layout


_GEN_OFFSETS: dict[type, int | None] = {}


def _gen_offset(cls: type) -> int | None:
    """The byte offset of the `gen` slot of `cls`'s instances (measured once per class)."""
    if cls not in _GEN_OFFSETS:
        _GEN_OFFSETS[cls] = slot_offset(cls, "gen")
    return _GEN_OFFSETS[cls]


class _Builder:
    """A launch table under construction: header words, parameter and bump records."""

    def __init__(self, lay: dict[str, int], nparams: int, nbumps: int,
                 array_ndims: dict[int, int] | None = None, vectors: int = 0) -> None:
        records = nl.HEADER_WORDS + nl.RECORD_WORDS * (nparams + nbumps)
        self.array_records: dict[int, int] = {}     # parameter -> word of its array record
        for i, ndim in (array_ndims or {}).items():
            self.array_records[i] = records
            records += nl.A_SHAPE + ndim
        self.vector_records = [records + nl.V_WORDS * k for k in range(vectors)]
        records += nl.V_WORDS * vectors
        self.lay = lay
        self.table = type("LaunchTable", (LaunchTable,), {"_length_": records})()
        self.table.keep = []
        t = self.table
        t[nl.T_NP_DATA], t[nl.T_NP_ND], t[nl.T_NP_DIMS] = \
            lay["np_data"], lay["np_nd"], lay["np_dims"]
        t[nl.T_NP_DESCR], t[nl.T_NP_FLAGS] = lay["np_descr"], lay["np_flags"]
        t[nl.T_NPARAMS], t[nl.T_NBUMPS] = nparams, nbumps
        t[nl.T_TUPLE_SIZE], t[nl.T_TUPLE_ITEMS] = lay["tuple_size"], lay["tuple_items"]
        t[nl.T_TYPE], t[nl.T_FLOAT_VALUE] = lay["type"], lay["float_value"]
        t[nl.T_FLOAT_TYPE], t[nl.T_LONG_TYPE], t[nl.T_NONE] = id(float), id(int), id(None)
        t[nl.T_BOOL_TYPE], t[nl.T_TRUE] = id(bool), id(True)
        t[nl.T_TUPLE_TYPE], t[nl.T_LIST_TYPE], t[nl.T_NDARRAY_TYPE] = \
            id(tuple), id(list), id(np.ndarray)
        t[nl.T_VECTOR_TYPE], t[nl.T_MATRIX_TYPE] = id(Vector), id(Matrix)
        t[nl.T_LIST_ITEMS] = lay["list_items"]
        for k, name in enumerate(nl.API_WORDS):
            t[nl.T_API + k] = lay[name]
        self.nparams, self.nbumps = nparams, 0

    def obj(self, word: int, value: Any) -> None:
        """A word that points at a Python object (kept alive by the table)."""
        self.table.keep.append(value)
        self.table[word] = id(value)

    def param(self, i: int, kind: int, slot: int, a: int = 0, b: int = 0) -> None:
        at = nl.HEADER_WORDS + nl.RECORD_WORDS * i
        self.table[at:at + 4] = [kind, slot, a, b]

    def bump(self, arg: int, obj: Any, gen: int, grad: int = 0) -> None:
        at = nl.HEADER_WORDS + nl.RECORD_WORDS * (self.nparams + self.nbumps)
        if obj is not None:
            self.table.keep.append(obj)
        self.table[at:at + 4] = [arg, id(obj) if obj is not None else 0, gen, grad]
        self.nbumps += 1

    def finish(self, context: "LaunchContext", fallback: Callable[..., Any], count: Any) -> Any:
        """Fill the launch words and make the builtin."""
        t, plan = self.table, context.plan
        set_fallback(t, fallback)
        t[nl.T_HELD] = ctypes.addressof(context.program.launch_lock.held)
        self.obj(nl.T_FINISH, _finish(context))
        device = context.program.device
        t[nl.T_CONTEXT] = context.addr
        t[nl.T_ENTRY], t[nl.T_ENTRY_ARG] = device.native_entry(context, self.lay, slot_offset)
        # a GPU reports overflows at the next synchronisation, not in the context
        t[nl.T_OVERFLOW_SLOT] = abi.SLOT_OVERFLOW if plan.adstacks and \
            plan.faults_in_context else 0
        ret = plan.returns
        if ret.kind in RETURN_KINDS:
            t[nl.T_RETURN_KIND] = RETURN_KINDS[ret.kind]
            t[nl.T_RETURN_MASK] = ((1 << ret.bits) - 1) if ret.bits < 64 else -1
        t[nl.T_COUNT_ADDR] = ctypes.addressof(count)
        name = ctypes.create_string_buffer(b"launch")
        t.keep.append(name)
        t[nl.T_METHOD_DEF:nl.T_METHOD_DEF + 4] = [
            ctypes.addressof(name), device.native_launch_addr,
            nl.METH_VARARGS_KEYWORDS, 0]
        return _NEW_BUILTIN(ctypes.addressof(t), t, None)


RETURN_KINDS = {"float": nl.RET_FLOAT, "signed": nl.RET_SIGNED, "unsigned": nl.RET_UNSIGNED}


def _eligible(context: "LaunchContext") -> dict[str, int] | None:
    """The layout, when this context's launch can be native."""
    program, plan = context.program, context.plan
    if getattr(program.device, "native_launch_addr", None) is None or program.profile \
            is not None or context.sizing is not None:
        return None
    if plan.returns.kind in ("field", "tuple"):
        return None
    return layout()


def _finish(context: "LaunchContext") -> Callable[[], None]:
    """What the native launcher calls after a fault or an overflow: raise it."""
    buf, adstacks = context.buf, context.plan.adstacks

    def finish() -> None:
        if buf[abi.SLOT_ERROR]:
            context.fault()
        if adstacks and buf[abi.SLOT_OVERFLOW]:
            context.overflow()
    return finish


def set_fallback(table: Any, fallback: Any) -> None:
    """Where a launch that is not the table's steady state goes (same arguments)."""
    table.fallback = fallback       # kept alive by the table
    table[nl.T_FALLBACK] = id(fallback)


def handle_table(context: "LaunchContext", active_key: Any) -> _Builder | None:
    """The launch table of a handle's native `__call__` (`.table`), or None; `activate`
    makes the builtin once the handle's Python launchers exist. Those write each packed
    ndarray's identity into the table (`packed`). `active_key`: what `ACTIVE[0]` must be."""
    lay = _eligible(context)
    plan = context.plan
    if lay is None or any(p.kind not in ("ndarray", "scalar", "template", "vector")
                          for p in plan.params):
        return None
    build = _Builder(lay, len(plan.params), len(plan.field_bumps) + len(plan.array_bumps),
                     {p.index: p.ndim for p in plan.of_kind("ndarray")},
                     len(plan.of_kind("vector")))
    vector_records = iter(build.vector_records)
    build.table[nl.T_NARGS] = len(plan.params)
    build.table[nl.T_ACTIVE] = id(program_mod.ACTIVE) + lay["list_items"]
    build.obj(nl.T_PROGRAM, active_key)
    for p in plan.params:
        if p.kind == "ndarray":
            build.param(p.index, nl.P_ARRAY, p.slot, 0, build.array_records[p.index])
        elif p.kind == "template":
            if isinstance(p.template, HeldWeakly):   # not kept: `weak_templates.retire`
                build.param(p.index, nl.P_TEMPLATE, 0, p.template.ident)
            else:
                build.table.keep.append(p.template)
                build.param(p.index, nl.P_TEMPLATE, 0, id(p.template))
        elif p.kind == "vector":     # row-major into the slots: see `native_launcher.vector`
            assert p.dtype is not None
            at = next(vector_records)
            lo, hi = p.int_range or (0, 0)
            rows, cols = (0, p.element_shape[0]) if len(p.element_shape) == 1 else \
                p.element_shape
            wide, narrow = (np.dtype(np.float64), np.dtype(np.float32)) if p.dtype.is_float \
                else (np.dtype(np.int64), np.dtype(np.int32))
            build.table.keep += [wide, narrow]
            build.table[at:at + nl.V_WORDS] = [nl.P_FLOAT if p.dtype.is_float else nl.P_INT,
                                               rows, cols, lo, min(hi, (1 << 63) - 1),
                                               id(wide), id(narrow)]
            build.param(p.index, nl.P_VECTOR, p.slot, at)
        elif p.dtype is not None and p.dtype.is_float:
            build.param(p.index, nl.P_FLOAT, p.slot)
        else:
            assert p.int_range is not None
            lo, hi = p.int_range
            build.param(p.index, nl.P_INT, p.slot, lo, min(hi, (1 << 63) - 1))
    if not _add_field_bumps(build, plan, context.compiled.field_objs):
        return None
    for arg, grad in plan.array_bumps:     # only a jitrt Ndarray has a generation
        build.bump(arg, Ndarray, lay["gen"], lay["grad"] if grad else 0)
    return build


def activate(build: _Builder, context: "LaunchContext", fallback: Callable[..., Any],
             count: Any) -> Any:
    """The builtin `__call__` of a handle, falling back to `fallback` (its Python launcher)."""
    return build.finish(context, fallback, count)


def _add_field_bumps(build: _Builder, plan: LaunchPlan, field_objs: tuple[Any, ...]) -> bool:
    for slot, grad in plan.field_bumps:
        fld = field_objs[slot].grad if grad else field_objs[slot]
        offset = _gen_offset(type(fld))
        if offset is None:
            return False
        build.bump(-1, fld, offset)
    return True


def packed(table: Any, i: int, a: Any, ndim: int, written: bool) -> None:
    """Record in `table` the array the Python launcher just packed for parameter `i` (of
    `ndim` dimensions): a jitrt ndarray by identity, a numpy array with the state the native
    launcher re-checks (what `arguments.changed_expr` compares), anything else not at all
    (another library's array is repacked by every launch)."""
    rec = nl.HEADER_WORDS + nl.RECORD_WORDS * i
    at = table[rec + 3]
    if type(a) is Ndarray:
        table[rec + 2], table[at + nl.A_NUMPY] = id(a), 0
    elif isinstance(a, np.ndarray) and a.ndim == ndim:
        flags = NPY_C_CONTIGUOUS | (NPY_WRITEABLE if written else 0)
        table[at:at + nl.A_SHAPE + ndim] = [1, a.ctypes.data, id(a.dtype), flags, ndim,
                                            *a.shape]
        table[rec + 2] = id(a)
    else:
        table[rec + 2] = 0


def bound_builtin(context: "LaunchContext", active_key: Any, bumped: list[Any],
                  fallback: Callable[[], Any], count: Any) -> Any:
    """The builtin `__call__` of a bound launch (no arguments), or None. `bumped`: the
    ndarrays whose generation a call moves (the write set's arrays, as bound). The caller
    leaves out a bound numpy array (re-checked before every call, which the Python call
    does)."""
    lay = _eligible(context)
    if lay is None:
        return None
    plan = context.plan
    build = _Builder(lay, 0, len(plan.field_bumps) + len(bumped))
    build.table[nl.T_ACTIVE] = id(program_mod.ACTIVE) + lay["list_items"]
    build.obj(nl.T_PROGRAM, active_key)   # else the Python call: a Tape records
    if not _add_field_bumps(build, plan, context.compiled.field_objs):
        return None
    for obj in bumped:
        offset = _gen_offset(type(obj))
        if offset is None:
            return None
        build.bump(-1, obj, offset)
    return build.finish(context, fallback, count)


def gpu_entry_call(handle: Any) -> Callable[[int], None] | None:
    """The handle's native GPU entry (`jitrt_gpu_entry` over its context's GPU entry table)
    as the `entry(addr)` its recording launcher calls: a launch a `jr.ad.Tape` records then
    skips the Python GPU entry when nothing has to move, as the native launcher's launches
    do (the entry hands anything else to the Python entry itself). None on the CPU, or
    without a native launcher."""
    table = handle.native_table
    functions = getattr(handle.program.device, "native_functions", None)
    native = functions() if functions is not None else None
    if table is None or native is None or table[nl.T_ENTRY] != int(native["jitrt_gpu_entry"]):
        return None
    call = ctypes.PYFUNCTYPE(None, ctypes.c_int64)(table[nl.T_ENTRY])
    arg, buf = table[nl.T_ENTRY_ARG], handle.buf

    def entry(addr: int) -> None:
        try:
            call(arg)        # the GIL held; a raise inside leaves its exception set
        except BaseException:
            buf[abi.SLOT_ERROR] = 0     # the entry marked the context: the exception says it
            raise
    return entry
