"""The native launcher: one CPython-callable function, in LLVM IR, that launches any CPU kernel.

Stage: codegen (part of the runtime module that `backends/cpu.py` builds, and the offline
cache stores, once per machine). `jitrt_launch(self, args, kwargs)` is the C function of a
builtin (`METH_VARARGS | METH_KEYWORDS`) whose `self` is a *launch table*: a ctypes array of
64-bit words that `runtime/native_launch.py` fills per launch handle or bound launch (layout:
the `T_*` word indices and the 4-word records below). One function serves every kernel, so a
new kernel costs a table, not a compile. It never assumes a CPython struct layout: the offsets
it needs (tuple size and items, an object's type, a float's value, a `gen` slot) and the C API
functions it calls are words of the table, measured and checked in Python at start-up. The
table's layout is `launch_table.py` (no llvmlite there: the runtime fills tables without
loading the IR builder).

The launch, for the steady state only (anything else calls the table's `fallback`, the
generated Python launcher or the next specialization's builtin, with the same arguments): no
keyword arguments, the expected count of positional ones, `ACTIVE[0]` still the table's
program, no Python launch of the program in flight (its launch lock's `held` count is 0: a
Python launch releases the GIL while its kernel runs); each ndarray argument the very object
last packed (a jitrt ndarray; the Python launcher records it in its record), each template
argument the very object compiled for, each scalar an exact `float` or `int` (ints
range-checked) written to its slot; the launch counter and the write set's generations bumped
(a new int stored in each `gen` slot); the entry called; a fault or overflow handed to the
table's `finish` (Python: raises the error); the return slot decoded. It holds the GIL
throughout, which is what makes it exclusive: no other launch of the program can start or be
running meanwhile, so it needs no lock calls.
"""
from __future__ import annotations

from llvmlite import ir

from .abi import SLOT_ERROR, SLOT_RETURN
from .kernel_module import I8P, I64P
from .launch_table import (A_DATA, A_DESCR, A_FLAGS, A_NDIM, A_NUMPY, A_SHAPE, API_WORDS,
                           CTYPES_BUFFER_OFFSET, HEADER_WORDS, P_ARRAY, P_FLOAT, P_TEMPLATE,
                           RECORD_WORDS, RET_FLOAT, RET_SIGNED, RET_UNSIGNED, T_ACTIVE, T_API,
                           T_CONTEXT, T_COUNT_ADDR, T_ENTRY, T_FALLBACK, T_FINISH, T_FLOAT_TYPE,
                           T_FLOAT_VALUE, T_HELD, T_LONG_TYPE, T_NARGS, T_NBUMPS, T_NONE,
                           T_NP_DATA, T_NP_DESCR, T_NP_DIMS, T_NP_FLAGS, T_NP_ND, T_NPARAMS,
                           T_OVERFLOW_SLOT, T_PROGRAM, T_RETURN_KIND, T_RETURN_MASK, T_TUPLE_ITEMS,
                           T_TUPLE_SIZE, T_TYPE)

I32, I64 = ir.IntType(32), ir.IntType(64)
F64 = ir.DoubleType()



def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class _Table:
    """Reads of the table and of objects by byte offsets it holds."""

    def __init__(self, b: ir.IRBuilder, words: ir.Value) -> None:
        self.b, self.words = b, words

    def word(self, index: ir.Value | int) -> ir.Value:
        idx = c64(index) if isinstance(index, int) else index
        return self.b.load(self.b.gep(self.words, [idx]))

    def fn(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Value:
        ptr = self.word(T_API + API_WORDS.index(name))
        return self.b.inttoptr(ptr, ir.FunctionType(ret, args).as_pointer())

    def at(self, obj: ir.Value, offset: ir.Value, ty: ir.Type) -> ir.Value:
        """The value of type `ty` at `obj + offset` bytes."""
        addr = self.b.add(self.b.ptrtoint(obj, I64), offset)
        return self.b.load(self.b.inttoptr(addr, ty.as_pointer()))

    def slot_ptr(self, obj: ir.Value, offset: ir.Value) -> ir.Value:
        return self.b.inttoptr(self.b.add(self.b.ptrtoint(obj, I64), offset), I8P.as_pointer())


def _numpy_unchanged(fn: ir.Function, b: ir.IRBuilder, t: _Table, arr: ir.Value, rec: ir.Value,
                     same: ir.Block, changed: ir.Block) -> None:
    """Branch to `same` when the numpy array `arr` still has the data pointer, dtype, flags
    and shape its array record (at word `rec`) holds: a numpy array can be resized, reshaped,
    reinterpreted or locked in place, and the Python launcher repacks it then."""
    def field(word: int) -> ir.Value:
        return t.word(b.add(rec, c64(word)))
    flags = b.zext(t.at(arr, t.word(T_NP_FLAGS), I32), I64)
    ndim = b.sext(t.at(arr, t.word(T_NP_ND), I32), I64)
    ok = b.and_(b.and_(b.icmp_unsigned("==", t.at(arr, t.word(T_NP_DATA), I64), field(A_DATA)),
                       b.icmp_unsigned("==", t.at(arr, t.word(T_NP_DESCR), I64),
                                       field(A_DESCR))),
                b.and_(b.icmp_unsigned("==", b.and_(flags, field(A_FLAGS)), field(A_FLAGS)),
                       b.icmp_signed("==", ndim, field(A_NDIM))))
    dims = b.inttoptr(t.at(arr, t.word(T_NP_DIMS), I64), I64P)
    head, body, step = (fn.append_basic_block(n) for n in ("shape", "shape_axis", "shape_next"))
    start = b.block
    b.cbranch(ok, head, changed)
    b.position_at_end(head)
    d = b.phi(I64)
    d.add_incoming(c64(0), start)
    b.cbranch(b.icmp_signed("<", d, ndim), body, same)
    b.position_at_end(body)
    extent = t.word(b.add(rec, b.add(c64(A_SHAPE), d)))
    b.cbranch(b.icmp_signed("==", b.load(b.gep(dims, [d])), extent), step, changed)
    b.position_at_end(step)
    d.add_incoming(b.add(d, c64(1)), step)
    b.branch(head)


def emit(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P, I8P]), "jitrt_launch")
    self_obj, args, kwargs = fn.args
    blocks = {name: fn.append_basic_block(name) for name in (
        "entry", "positional", "locked", "param", "param_next", "array", "scalar", "float",
        "long_to_float", "store_float", "int", "store_int", "params_done", "bump", "bump_obj",
        "bump_next", "bumped", "finish", "ret", "fallback")}
    b = ir.IRBuilder(blocks["entry"])
    words_addr = b.load(b.inttoptr(b.add(b.ptrtoint(self_obj, I64), c64(CTYPES_BUFFER_OFFSET)),
                                   I64P.as_pointer()))
    t = _Table(b, words_addr)
    call = t.fn("PyObject_Call", I8P, [I8P, I8P, I8P])
    call0 = t.fn("PyObject_CallNoArgs", I8P, [I8P])
    decref = t.fn("Py_DecRef", ir.VoidType(), [I8P])
    as_long = t.fn("PyLong_AsLongLongAndOverflow", I64, [I8P, I32.as_pointer()])
    overflow = b.alloca(I32)
    null = ir.Constant(I8P, None)

    def obj(word: int) -> ir.Value:
        return b.inttoptr(t.word(word), I8P)

    # -- keywords, argument count, the active program, no Python launch in flight
    nargs = t.at(args, t.word(T_TUPLE_SIZE), I64)
    ok = b.and_(b.icmp_unsigned("==", kwargs, null), b.icmp_signed("==", nargs, t.word(T_NARGS)))
    b.cbranch(ok, blocks["positional"], blocks["fallback"])
    b.position_at_end(blocks["positional"])
    active_field = t.word(T_ACTIVE)
    check_active = fn.append_basic_block("check_active")
    check_held = fn.append_basic_block("check_held")
    b.cbranch(b.icmp_unsigned("==", active_field, c64(0)), check_held, check_active)
    b.position_at_end(check_active)
    items0 = b.load(b.inttoptr(active_field, I64P.as_pointer()))
    b.cbranch(b.icmp_unsigned("==", b.load(items0), t.word(T_PROGRAM)), check_held,
              blocks["fallback"])
    b.position_at_end(check_held)
    held = b.load(b.inttoptr(t.word(T_HELD), I64P))
    b.cbranch(b.icmp_unsigned("==", held, c64(0)), blocks["locked"], blocks["fallback"])

    # -- each parameter (scalars are written as they are read: nothing else uses the
    # context now, and every launch writes all of them)
    b.position_at_end(blocks["locked"])
    ctx = b.inttoptr(t.word(T_CONTEXT), I64P)
    items = b.inttoptr(b.add(b.ptrtoint(args, I64), t.word(T_TUPLE_ITEMS)), I8P.as_pointer())
    nparams = t.word(T_NPARAMS)
    b.branch(blocks["param"])
    b.position_at_end(blocks["param"])
    k = b.phi(I64)
    k.add_incoming(c64(0), blocks["locked"])
    b.cbranch(b.icmp_signed("<", k, nparams), blocks["param_next"], blocks["params_done"])
    b.position_at_end(blocks["param_next"])
    rec = b.add(c64(HEADER_WORDS), b.mul(k, c64(RECORD_WORDS)))
    kind, slot = t.word(rec), t.word(b.add(rec, c64(1)))
    lo, hi = t.word(b.add(rec, c64(2))), t.word(b.add(rec, c64(3)))
    arg = b.load(b.gep(items, [k]))
    next_k = b.add(k, c64(1))
    cont = fn.append_basic_block("param_ok")
    b.cbranch(b.icmp_signed("<=", kind, c64(P_TEMPLATE)), blocks["array"], blocks["scalar"])
    b.position_at_end(blocks["array"])      # ARRAY or TEMPLATE: the very object expected
    same = fn.append_basic_block("same_object")
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(arg, I64), lo), same, blocks["fallback"])
    b.position_at_end(same)
    numpy_bb = fn.append_basic_block("numpy_array")
    is_numpy = b.and_(b.icmp_signed("==", kind, c64(P_ARRAY)),
                      b.icmp_unsigned("!=", t.word(b.add(hi, c64(A_NUMPY))), c64(0)))
    b.cbranch(is_numpy, numpy_bb, cont)
    b.position_at_end(numpy_bb)
    _numpy_unchanged(fn, b, t, arg, hi, cont, blocks["fallback"])
    b.position_at_end(blocks["scalar"])
    arg_type = t.at(arg, t.word(T_TYPE), I64)
    is_long = b.icmp_unsigned("==", arg_type, t.word(T_LONG_TYPE))
    b.cbranch(b.icmp_signed("==", kind, c64(P_FLOAT)), blocks["float"], blocks["int"])
    b.position_at_end(blocks["float"])
    float_value = t.at(arg, t.word(T_FLOAT_VALUE), F64)   # read only when it is a float
    b.cbranch(b.icmp_unsigned("==", arg_type, t.word(T_FLOAT_TYPE)), blocks["store_float"],
              blocks["long_to_float"])
    b.position_at_end(blocks["long_to_float"])
    from_long_ok = fn.append_basic_block("from_long_ok")
    b.cbranch(is_long, from_long_ok, blocks["fallback"])
    b.position_at_end(from_long_ok)
    b.store(ir.Constant(I32, 0), overflow)
    as_int = b.call(as_long, [arg, overflow])
    converted = b.sitofp(as_int, F64)
    b.cbranch(b.icmp_signed("==", b.load(overflow), ir.Constant(I32, 0)), blocks["store_float"],
              blocks["fallback"])
    b.position_at_end(blocks["store_float"])
    value = b.phi(F64)
    value.add_incoming(float_value, blocks["float"])
    value.add_incoming(converted, from_long_ok)
    b.store(value, b.bitcast(b.gep(ctx, [slot]), F64.as_pointer()))
    b.branch(cont)
    b.position_at_end(blocks["int"])
    read_int = fn.append_basic_block("read_int")
    b.cbranch(is_long, read_int, blocks["fallback"])
    b.position_at_end(read_int)
    b.store(ir.Constant(I32, 0), overflow)
    v = b.call(as_long, [arg, overflow])
    in_range = b.and_(b.icmp_signed("==", b.load(overflow), ir.Constant(I32, 0)),
                      b.and_(b.icmp_signed(">=", v, lo), b.icmp_signed("<=", v, hi)))
    b.cbranch(in_range, blocks["store_int"], blocks["fallback"])
    b.position_at_end(blocks["store_int"])
    b.store(v, b.gep(ctx, [slot]))
    b.branch(cont)
    b.position_at_end(cont)
    k.add_incoming(next_k, cont)
    b.branch(blocks["param"])

    # -- the launch counter and the write set's generations
    b.position_at_end(blocks["params_done"])
    count_ptr = b.inttoptr(t.word(T_COUNT_ADDR), I64P)
    b.store(b.add(b.load(count_ptr), c64(1)), count_ptr)
    bumps_at = b.add(c64(HEADER_WORDS), b.mul(nparams, c64(RECORD_WORDS)))
    nbumps = t.word(T_NBUMPS)
    b.branch(blocks["bump"])
    b.position_at_end(blocks["bump"])
    j = b.phi(I64)
    j.add_incoming(c64(0), blocks["params_done"])
    b.cbranch(b.icmp_signed("<", j, nbumps), blocks["bump_obj"], blocks["bumped"])
    b.position_at_end(blocks["bump_obj"])
    brec = b.add(bumps_at, b.mul(j, c64(RECORD_WORDS)))
    arg_index = t.word(brec)
    of_arg, of_const, got = (fn.append_basic_block(n) for n in ("bump_arg", "bump_const",
                                                                 "bump_target"))
    b.cbranch(b.icmp_signed(">=", arg_index, c64(0)), of_arg, of_const)
    b.position_at_end(of_arg)
    from_arg = b.load(b.gep(items, [arg_index]))
    typed = fn.append_basic_block("bump_typed")   # a numpy argument has no generation
    b.cbranch(b.icmp_unsigned("==", t.at(from_arg, t.word(T_TYPE), I64),
                              t.word(b.add(brec, c64(1)))), typed, blocks["bump_next"])
    b.position_at_end(typed)
    b.branch(got)
    b.position_at_end(of_const)
    from_table = b.inttoptr(t.word(b.add(brec, c64(1))), I8P)
    b.branch(got)
    b.position_at_end(got)
    target = b.phi(I8P)
    target.add_incoming(from_arg, typed)
    target.add_incoming(from_table, of_const)
    grad_offset = t.word(b.add(brec, c64(3)))
    follow, bump_at = fn.append_basic_block("bump_grad"), fn.append_basic_block("bump_gen")
    b.cbranch(b.icmp_unsigned("==", grad_offset, c64(0)), bump_at, follow)
    b.position_at_end(follow)
    grad = t.at(target, grad_offset, I8P)
    b.branch(bump_at)
    b.position_at_end(bump_at)
    owner = b.phi(I8P)
    owner.add_incoming(target, got)
    owner.add_incoming(grad, follow)
    gen_slot = t.slot_ptr(owner, t.word(b.add(brec, c64(2))))
    old = b.load(gen_slot)
    b.store(ir.Constant(I32, 0), overflow)
    new = b.call(t.fn("PyLong_FromLongLong", I8P, [I64]),
                 [b.add(b.call(as_long, [old, overflow]), c64(1))])
    # out of memory for an int: the generation stays, and CPython reports the launch's
    # pending MemoryError as a SystemError once it returns (the launch itself completes)
    store_bb, skip_bb = fn.append_basic_block("bump_store"), blocks["bump_next"]
    b.cbranch(b.icmp_unsigned("==", new, null), skip_bb, store_bb)
    b.position_at_end(store_bb)
    b.store(new, gen_slot)
    b.call(decref, [old])
    b.branch(skip_bb)
    b.position_at_end(skip_bb)
    j.add_incoming(b.add(j, c64(1)), skip_bb)
    b.branch(blocks["bump"])

    # -- the entry (the GIL stays held: see the module docstring)
    b.position_at_end(blocks["bumped"])
    entry = b.inttoptr(t.word(T_ENTRY), ir.FunctionType(ir.VoidType(), [I64]).as_pointer())
    b.call(entry, [t.word(T_CONTEXT)])
    fault = b.load(b.gep(ctx, [c64(SLOT_ERROR)]))
    ov_slot = t.word(T_OVERFLOW_SLOT)
    ov = b.select(b.icmp_unsigned("==", ov_slot, c64(0)), c64(0), b.load(b.gep(ctx, [ov_slot])))
    b.cbranch(b.icmp_unsigned("==", b.or_(fault, ov), c64(0)), blocks["ret"], blocks["finish"])
    b.position_at_end(blocks["finish"])
    b.ret(b.call(call0, [obj(T_FINISH)]))    # raises: NULL

    # -- the return value
    b.position_at_end(blocks["ret"])
    raw = b.load(b.gep(ctx, [c64(SLOT_RETURN)]))
    kind = t.word(T_RETURN_KIND)
    none_bb, float_bb, int_bb, uint_bb = (
        fn.append_basic_block(n) for n in ("ret_none", "ret_float", "ret_int", "ret_uint"))
    sw = b.switch(kind, none_bb)
    sw.add_case(c64(RET_FLOAT), float_bb)
    sw.add_case(c64(RET_SIGNED), int_bb)
    sw.add_case(c64(RET_UNSIGNED), uint_bb)
    b.position_at_end(none_bb)
    none = obj(T_NONE)
    b.call(t.fn("Py_IncRef", ir.VoidType(), [I8P]), [none])
    b.ret(none)
    b.position_at_end(float_bb)     # NULL when building a value fails: its exception is set
    b.ret(b.call(t.fn("PyFloat_FromDouble", I8P, [F64]), [b.bitcast(raw, F64)]))
    b.position_at_end(int_bb)
    b.ret(b.call(t.fn("PyLong_FromLongLong", I8P, [I64]), [raw]))
    b.position_at_end(uint_bb)
    b.ret(b.call(t.fn("PyLong_FromUnsignedLongLong", I8P, [I64]),
                 [b.and_(raw, t.word(T_RETURN_MASK))]))

    # -- anything but the steady state: the fallback, with the same arguments
    b.position_at_end(blocks["fallback"])
    b.ret(b.call(call, [obj(T_FALLBACK), args, kwargs]))
    return fn
