"""The native launcher: one CPython-callable function, in LLVM IR, that launches any CPU kernel.

Stage: native (part of the runtime module that `backends/cpu.py` builds, and the offline
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
range-checked; a `bool` for an integer parameter, as 0 or 1) written to its slot, each
vector/matrix an exact tuple or list (of rows) of such numbers or a C-contiguous numpy array
of its shape and of one of two dtypes, its components written to its slots; the launch
counter and the write set's generations bumped (a new int stored in each `gen` slot); the
entry called; a fault or overflow handed to the table's `finish` (Python: raises the error);
the return slot decoded. It holds the GIL
throughout, which is what makes it exclusive: no other launch of the program can start or be
running meanwhile, so it needs no lock calls.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..codegen.abi import ERROR_RAISED, SLOT_ERROR, SLOT_RETURN
from ..codegen.kernel_module import I8P, I64P
from .launch_table import (A_DATA, A_DESCR, A_FLAGS, A_NDIM, A_NUMPY, A_SHAPE, API_WORDS,
                           CTYPES_BUFFER_OFFSET, HEADER_WORDS, P_ARRAY, P_FLOAT, P_TEMPLATE,
                           P_VECTOR, RECORD_WORDS, RET_FLOAT, RET_SIGNED, RET_UNSIGNED,
                           T_ACTIVE, T_API, T_CONTEXT, T_COUNT_ADDR, T_ENTRY, T_ENTRY_ARG,
                           T_BOOL_TYPE, T_FALLBACK, T_FINISH, T_FLOAT_TYPE, T_FLOAT_VALUE, T_HELD,
                           T_LONG_TYPE, T_NARGS, T_NBUMPS, T_NONE, T_NP_DATA, T_NP_DESCR,
                           T_NP_DIMS, T_NP_FLAGS, T_NP_ND, T_NPARAMS, T_OVERFLOW_SLOT, T_PROGRAM,
                           T_RETURN_KIND, T_RETURN_MASK, T_TUPLE_ITEMS, T_TUPLE_SIZE,
                           T_TUPLE_TYPE, T_TYPE, T_LIST_TYPE, T_LIST_ITEMS, T_NDARRAY_TYPE,
                           T_VECTOR_TYPE, T_MATRIX_TYPE, T_TRUE,
                           V_COLS, V_HI, V_KIND, V_LO, V_NARROW, V_ROWS, V_WIDE,
                           NPY_C_CONTIGUOUS)

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
    """Add `jitrt_launch` to the runtime module: the checks, the parameter and bump loops over
    the table's records, the entry and the return value, and the fallback."""
    fn = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P, I8P]), "jitrt_launch")
    _LaunchIR(fn).emit()
    return fn


class _LaunchIR:
    """The builder state of `jitrt_launch`; each method emits one phase of the launch."""

    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.self_obj, self.args, self.kwargs = fn.args
        self.b = b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.fallback = fn.append_basic_block("fallback")
        words = b.load(b.inttoptr(b.add(b.ptrtoint(self.self_obj, I64),
                                        c64(CTYPES_BUFFER_OFFSET)), I64P.as_pointer()))
        self.t = t = _Table(b, words)
        self.as_long = t.fn("PyLong_AsLongLongAndOverflow", I64, [I8P, I32.as_pointer()])
        self.overflow = b.alloca(I32)
        self.null = ir.Constant(I8P, None)
        self.ctx: ir.Value = ir.Constant(I64P, None)     # set by `checks`
        self.items: ir.Value = ir.Constant(I8P.as_pointer(), None)

    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def obj(self, word: int) -> ir.Value:
        return self.b.inttoptr(self.t.word(word), I8P)

    def long_value(self, obj: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(the int's value, whether it fits an i64) of an exact int object."""
        b = self.b
        b.store(ir.Constant(I32, 0), self.overflow)
        value = b.call(self.as_long, [obj, self.overflow])
        return value, b.icmp_signed("==", b.load(self.overflow), ir.Constant(I32, 0))

    def emit(self) -> None:
        self.checks()
        self.record_loop(T_NPARAMS, c64(HEADER_WORDS), "param", self.param)
        b, t = self.b, self.t
        count_ptr = b.inttoptr(t.word(T_COUNT_ADDR), I64P)
        b.store(b.add(b.load(count_ptr), c64(1)), count_ptr)
        bumps_at = b.add(c64(HEADER_WORDS), b.mul(t.word(T_NPARAMS), c64(RECORD_WORDS)))
        self.record_loop(T_NBUMPS, bumps_at, "bump", self.bump)
        self.run_and_return()
        b.position_at_end(self.fallback)      # anything but the steady state, same arguments
        call = t.fn("PyObject_Call", I8P, [I8P, I8P, I8P])
        b.ret(b.call(call, [self.obj(T_FALLBACK), self.args, self.kwargs]))

    def checks(self) -> None:
        """Keywords, argument count, the active program, no Python launch in flight."""
        b, t = self.b, self.t
        nargs = t.at(self.args, t.word(T_TUPLE_SIZE), I64)
        positional, check_active, check_held, ok_bb = (
            self.block(n) for n in ("positional", "check_active", "check_held", "checked"))
        ok = b.and_(b.icmp_unsigned("==", self.kwargs, self.null),
                    b.icmp_signed("==", nargs, t.word(T_NARGS)))
        b.cbranch(ok, positional, self.fallback)
        b.position_at_end(positional)
        active_field = t.word(T_ACTIVE)
        b.cbranch(b.icmp_unsigned("==", active_field, c64(0)), check_held, check_active)
        b.position_at_end(check_active)
        items0 = b.load(b.inttoptr(active_field, I64P.as_pointer()))
        b.cbranch(b.icmp_unsigned("==", b.load(items0), t.word(T_PROGRAM)), check_held,
                  self.fallback)
        b.position_at_end(check_held)
        held = b.load(b.inttoptr(t.word(T_HELD), I64P))
        b.cbranch(b.icmp_unsigned("==", held, c64(0)), ok_bb, self.fallback)
        b.position_at_end(ok_bb)
        self.ctx = b.inttoptr(t.word(T_CONTEXT), I64P)
        self.items = b.inttoptr(b.add(b.ptrtoint(self.args, I64), t.word(T_TUPLE_ITEMS)),
                                I8P.as_pointer())

    def record_loop(self, count_word: int, first: ir.Value, name: str,
                    body: Callable[[ir.Value, ir.Value, ir.Block], None]) -> None:
        """for k in range(table[count_word]): body(k, word index of record k, next block)."""
        b = self.b
        start, head, step_bb, done = b.block, self.block(name), self.block(f"{name}_next"), \
            self.block(f"{name}_done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(c64(0), start)
        body_bb = self.block(f"{name}_body")
        b.cbranch(b.icmp_signed("<", k, self.t.word(count_word)), body_bb, done)
        b.position_at_end(body_bb)
        body(k, b.add(first, b.mul(k, c64(RECORD_WORDS))), step_bb)
        b.position_at_end(step_bb)
        k.add_incoming(b.add(k, c64(1)), step_bb)
        b.branch(head)
        b.position_at_end(done)

    def param(self, k: ir.Value, rec: ir.Value, cont: ir.Block) -> None:
        """One parameter record: an ndarray or template must be the very object expected
        (a numpy array also unchanged); a scalar an exact float or int, written to its slot
        (nothing else uses the context now, and every launch writes all of them)."""
        b, t = self.b, self.t
        kind, slot = t.word(rec), t.word(b.add(rec, c64(1)))
        lo, hi = t.word(b.add(rec, c64(2))), t.word(b.add(rec, c64(3)))
        arg = b.load(b.gep(self.items, [k]))
        array, scalar, same, numpy_bb, not_array, vector = (self.block(n) for n in (
            "array", "scalar", "same_object", "numpy_array", "not_array", "vector"))
        b.cbranch(b.icmp_signed("<=", kind, c64(P_TEMPLATE)), array, not_array)
        b.position_at_end(not_array)
        b.cbranch(b.icmp_signed("==", kind, c64(P_VECTOR)), vector, scalar)
        b.position_at_end(vector)
        self.vector(arg, lo, slot, cont)
        b.position_at_end(array)
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(arg, I64), lo), same, self.fallback)
        b.position_at_end(same)
        is_numpy = b.and_(b.icmp_signed("==", kind, c64(P_ARRAY)),
                          b.icmp_unsigned("!=", t.word(b.add(hi, c64(A_NUMPY))), c64(0)))
        b.cbranch(is_numpy, numpy_bb, cont)
        b.position_at_end(numpy_bb)
        _numpy_unchanged(self.fn, b, t, arg, hi, cont, self.fallback)
        b.position_at_end(scalar)
        self.scalar(kind, arg, b.gep(self.ctx, [slot]), lo, hi, cont)

    def sequence(self, obj: ir.Value, size: ir.Value) -> ir.Value:
        """The items of `obj` (an `i8**`), continuing only when it is an exact tuple or list
        of `size` items (else the fallback)."""
        b, t = self.b, self.t
        obj_type = t.at(obj, t.word(T_TYPE), I64)
        tuple_items = b.inttoptr(b.add(b.ptrtoint(obj, I64), t.word(T_TUPLE_ITEMS)),
                                 I8P.as_pointer())
        start = b.block
        not_tuple, is_list, got = (self.block(n) for n in ("seq_not_tuple", "seq_list",
                                                           "seq_got"))
        b.cbranch(b.icmp_unsigned("==", obj_type, t.word(T_TUPLE_TYPE)), got, not_tuple)
        b.position_at_end(not_tuple)
        b.cbranch(b.icmp_unsigned("==", obj_type, t.word(T_LIST_TYPE)), is_list,
                  self.fallback)
        b.position_at_end(is_list)
        list_items = t.at(obj, t.word(T_LIST_ITEMS), I8P.as_pointer())
        b.branch(got)
        b.position_at_end(got)
        items = b.phi(I8P.as_pointer())
        items.add_incoming(tuple_items, start)
        items.add_incoming(list_items, is_list)
        sized = self.block("seq_sized")    # a tuple's and a list's size are at one offset
        b.cbranch(b.icmp_signed("==", t.at(obj, t.word(T_TUPLE_SIZE), I64), size), sized,
                  self.fallback)
        b.position_at_end(sized)
        return items

    def vector(self, arg: ir.Value, vrec: ir.Value, slot: ir.Value, cont: ir.Block) -> None:
        """A vector parameter: an exact tuple or list of numbers, or a C-contiguous numpy array
        (a plain one, a jr.Vector or a jr.Matrix) of float64/float32 (int64/int32 for an
        integer vector) of its shape; a matrix: a tuple or list of such rows, or such an
        array. Every component is checked and stored as a scalar of its kind, row-major from
        the parameter's first slot; anything else goes to the fallback (the Python
        launcher)."""
        b, t = self.b, self.t
        def word(k: int) -> ir.Value:
            return t.word(b.add(vrec, c64(k)))
        kind, rows, cols, lo, hi = (word(k) for k in (V_KIND, V_ROWS, V_COLS, V_LO, V_HI))
        array, nested = self.block("vec_array"), self.block("vec_nested")
        ty = t.at(arg, t.word(T_TYPE), I64)
        is_array = b.or_(b.icmp_unsigned("==", ty, t.word(T_NDARRAY_TYPE)), b.or_(
            b.icmp_unsigned("==", ty, t.word(T_VECTOR_TYPE)),
            b.icmp_unsigned("==", ty, t.word(T_MATRIX_TYPE))))
        b.cbranch(is_array, array, nested)
        b.position_at_end(array)
        self.vector_array(arg, word, slot, cont)
        b.position_at_end(nested)
        self.vector_nested(arg, slot, cont, (kind, rows, cols, lo, hi))

    def vector_nested(self, arg: ir.Value, slot: ir.Value, cont: ir.Block,
                      record: tuple[ir.Value, ...]) -> None:
        """A vector as a tuple or list of numbers, a matrix as a tuple or list of such rows
        (`record`: the parameter's kind, rows (0: a vector), columns and integer range)."""
        b = self.b
        kind, rows, cols, lo, hi = record
        start = b.block
        matrix, row_head, row_body, row_of_matrix, row_got, col_head, col_body, col_next, \
            row_next = (self.block(n) for n in (
                "vec_matrix", "vec_row", "vec_row_body", "vec_row_of_matrix", "vec_row_got",
                "vec_col", "vec_col_body", "vec_col_next", "vec_row_next"))
        is_matrix = b.icmp_signed("!=", rows, c64(0))
        b.cbranch(is_matrix, matrix, row_head)
        b.position_at_end(matrix)
        row_items = self.sequence(arg, rows)
        checked = b.block
        b.branch(row_head)
        b.position_at_end(row_head)            # r over the rows (one row, arg, for a vector)
        r, matrix_items = b.phi(I64), b.phi(I8P.as_pointer())
        r.add_incoming(c64(0), start)
        r.add_incoming(c64(0), checked)
        matrix_items.add_incoming(ir.Constant(I8P.as_pointer(), None), start)
        matrix_items.add_incoming(row_items, checked)
        b.cbranch(b.icmp_signed("<", r, b.select(is_matrix, rows, c64(1))), row_body, cont)
        b.position_at_end(row_body)
        b.cbranch(is_matrix, row_of_matrix, row_got)
        b.position_at_end(row_of_matrix)
        nth = b.load(b.gep(matrix_items, [r]))
        b.branch(row_got)
        b.position_at_end(row_got)
        row = b.phi(I8P)
        row.add_incoming(arg, row_body)
        row.add_incoming(nth, row_of_matrix)
        items = self.sequence(row, cols)
        self.vector_row(items, b.add(slot, b.mul(r, cols)), (kind, cols, lo, hi),
                        (col_head, col_body, col_next, row_next))
        b.position_at_end(row_next)
        r.add_incoming(b.add(r, c64(1)), row_next)
        matrix_items.add_incoming(matrix_items, row_next)
        b.branch(row_head)

    def vector_row(self, items: ir.Value, first: ir.Value, record: tuple[ir.Value, ...],
                   blocks: tuple[ir.Block, ...]) -> None:
        """The loop storing one row's `cols` items (checked scalars of `kind`) into the slots
        from `first`; it leaves for `row_next` (the last of `blocks`) when done."""
        b = self.b
        kind, cols, lo, hi = record
        col_head, col_body, col_next, row_next = blocks
        entered = b.block
        b.branch(col_head)
        b.position_at_end(col_head)
        c = b.phi(I64)
        c.add_incoming(c64(0), entered)
        b.cbranch(b.icmp_signed("<", c, cols), col_body, row_next)
        b.position_at_end(col_body)
        item = b.load(b.gep(items, [c]))
        self.scalar(kind, item, b.gep(self.ctx, [b.add(first, c)]), lo, hi, col_next)
        b.position_at_end(col_next)
        c.add_incoming(b.add(c, c64(1)), col_next)
        b.branch(col_head)

    def vector_array(self, arr: ir.Value, word: Callable[[int], ir.Value], slot: ir.Value,
                     cont: ir.Block) -> None:
        """A numpy array for a vector/matrix parameter: C-contiguous, its shape, and a dtype
        of the record's two (the wide one, 8 bytes, or the narrow one, 4); its components
        converted to the slot's double or int64 (an int checked against the range)."""
        b, t = self.b, self.t
        kind, rows, cols, lo, hi = (word(k) for k in (V_KIND, V_ROWS, V_COLS, V_LO, V_HI))
        is_matrix = b.icmp_signed("!=", rows, c64(0))
        nd = b.sext(t.at(arr, t.word(T_NP_ND), I32), I64)
        flags = b.zext(t.at(arr, t.word(T_NP_FLAGS), I32), I64)
        shaped, typed = self.block("vec_array_shape"), self.block("vec_array_dtype")
        b.cbranch(b.and_(b.icmp_signed("==", nd, b.select(is_matrix, c64(2), c64(1))),
                         b.icmp_unsigned("!=", b.and_(flags, c64(NPY_C_CONTIGUOUS)), c64(0))),
                  shaped, self.fallback)
        b.position_at_end(shaped)
        dims = b.inttoptr(t.at(arr, t.word(T_NP_DIMS), I64), I64P)
        d0, d1 = b.load(dims), b.load(b.gep(dims, [b.select(is_matrix, c64(1), c64(0))]))
        ok = b.select(is_matrix, b.and_(b.icmp_signed("==", d0, rows),
                                        b.icmp_signed("==", d1, cols)),
                      b.icmp_signed("==", d0, cols))
        b.cbranch(ok, typed, self.fallback)
        b.position_at_end(typed)
        descr = t.at(arr, t.word(T_NP_DESCR), I64)
        data = b.inttoptr(t.at(arr, t.word(T_NP_DATA), I64), I8P)
        count = b.mul(b.select(is_matrix, rows, c64(1)), cols)
        is_float = b.icmp_signed("==", kind, c64(P_FLOAT))
        wide, not_wide, narrow = (self.block(n) for n in ("vec_wide", "vec_not_wide",
                                                           "vec_narrow"))
        b.cbranch(b.icmp_unsigned("==", descr, word(V_WIDE)), wide, not_wide)
        b.position_at_end(not_wide)
        b.cbranch(b.icmp_unsigned("==", descr, word(V_NARROW)), narrow, self.fallback)
        for block, elem, bits in ((wide, F64, 64), (narrow, ir.FloatType(), 32)):
            b.position_at_end(block)
            self.copy_components(data, count, slot, is_float, elem, bits, lo, hi, cont)

    def copy_components(self, data: ir.Value, count: ir.Value, slot: ir.Value,
                        is_float: ir.Value, float_type: ir.Type, bits: int, lo: ir.Value,
                        hi: ir.Value, cont: ir.Block) -> None:
        """for k in range(count): slot k = component k of `data` (floats of `float_type`, or
        ints of `bits` bits, range-checked), read unaligned."""
        b = self.b
        start = b.block
        head, body, as_float, as_int, store_int, step = (self.block(n) for n in (
            "copy", "copy_body", "copy_float", "copy_int", "copy_store_int", "copy_next"))
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(c64(0), start)
        b.cbranch(b.icmp_signed("<", k, count), body, cont)
        b.position_at_end(body)
        target = b.gep(self.ctx, [b.add(slot, k)])
        b.cbranch(is_float, as_float, as_int)
        b.position_at_end(as_float)
        fptr = b.gep(b.bitcast(data, float_type.as_pointer()), [k])
        value = b.load(fptr, align=1)
        if bits != 64:
            value = b.fpext(value, F64)
        b.store(value, b.bitcast(target, F64.as_pointer()))
        b.branch(step)
        b.position_at_end(as_int)
        iptr = b.gep(b.bitcast(data, ir.IntType(bits).as_pointer()), [k])
        ivalue = b.load(iptr, align=1)
        if bits != 64:
            ivalue = b.sext(ivalue, I64)
        in_range = b.and_(b.icmp_signed(">=", ivalue, lo), b.icmp_signed("<=", ivalue, hi))
        b.cbranch(in_range, store_int, self.fallback)
        b.position_at_end(store_int)
        b.store(ivalue, target)
        b.branch(step)
        b.position_at_end(step)
        k.add_incoming(b.add(k, c64(1)), step)
        b.branch(head)

    def scalar(self, kind: ir.Value, arg: ir.Value, slot_ptr: ir.Value, lo: ir.Value,
               hi: ir.Value, cont: ir.Block) -> None:
        b, t = self.b, self.t
        arg_type = t.at(arg, t.word(T_TYPE), I64)
        is_long = b.icmp_unsigned("==", arg_type, t.word(T_LONG_TYPE))
        float_bb, long_to_float, from_long, store_float, int_bb, read_int, store_int = (
            self.block(n) for n in ("float", "long_to_float", "from_long", "store_float",
                                    "int", "read_int", "store_int"))
        b.cbranch(b.icmp_signed("==", kind, c64(P_FLOAT)), float_bb, int_bb)
        b.position_at_end(float_bb)
        float_value = t.at(arg, t.word(T_FLOAT_VALUE), F64)   # read only when it is a float
        b.cbranch(b.icmp_unsigned("==", arg_type, t.word(T_FLOAT_TYPE)), store_float,
                  long_to_float)
        b.position_at_end(long_to_float)
        b.cbranch(is_long, from_long, self.fallback)
        b.position_at_end(from_long)
        as_int, fits = self.long_value(arg)
        converted = b.sitofp(as_int, F64)
        b.cbranch(fits, store_float, self.fallback)
        b.position_at_end(store_float)
        value = b.phi(F64)
        value.add_incoming(float_value, float_bb)
        value.add_incoming(converted, from_long)
        b.store(value, b.bitcast(slot_ptr, F64.as_pointer()))
        b.branch(cont)
        b.position_at_end(int_bb)
        maybe_bool, from_bool, check_int = (self.block(n) for n in ("maybe_bool", "from_bool",
                                                                     "check_int"))
        b.cbranch(is_long, read_int, maybe_bool)
        b.position_at_end(maybe_bool)         # a bool for an integer parameter: 0 or 1
        b.cbranch(b.icmp_unsigned("==", arg_type, t.word(T_BOOL_TYPE)), from_bool,
                  self.fallback)
        b.position_at_end(from_bool)
        bool_value = b.zext(b.icmp_unsigned("==", b.ptrtoint(arg, I64), t.word(T_TRUE)), I64)
        b.branch(check_int)
        b.position_at_end(read_int)
        long_value, long_fits = self.long_value(arg)
        long_end = b.block
        b.branch(check_int)
        b.position_at_end(check_int)
        v = b.phi(I64)
        v.add_incoming(long_value, long_end)
        v.add_incoming(bool_value, from_bool)
        fits = b.phi(ir.IntType(1))
        fits.add_incoming(long_fits, long_end)
        fits.add_incoming(ir.Constant(ir.IntType(1), 1), from_bool)
        in_range = b.and_(fits, b.and_(b.icmp_signed(">=", v, lo), b.icmp_signed("<=", v, hi)))
        b.cbranch(in_range, store_int, self.fallback)
        b.position_at_end(store_int)
        b.store(v, slot_ptr)
        b.branch(cont)

    def bump(self, j: ir.Value, brec: ir.Value, next_bb: ir.Block) -> None:
        """One bump record: a new int, one more, in the `gen` slot of the object (an argument
        of the expected type, or the record's own object; through its `grad` slot if set)."""
        b, t = self.b, self.t
        arg_index = t.word(brec)
        of_arg, typed, of_const, got, follow, bump_at, store_bb = (self.block(n) for n in (
            "bump_arg", "bump_typed", "bump_const", "bump_target", "bump_grad", "bump_gen",
            "bump_store"))
        b.cbranch(b.icmp_signed(">=", arg_index, c64(0)), of_arg, of_const)
        b.position_at_end(of_arg)
        from_arg = b.load(b.gep(self.items, [arg_index]))
        b.cbranch(b.icmp_unsigned("==", t.at(from_arg, t.word(T_TYPE), I64),   # numpy: none
                                  t.word(b.add(brec, c64(1)))), typed, next_bb)
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
        value, _ = self.long_value(old)
        new = b.call(t.fn("PyLong_FromLongLong", I8P, [I64]), [b.add(value, c64(1))])
        # out of memory for an int: the generation stays, and CPython reports the launch's
        # pending MemoryError as a SystemError once it returns (the launch itself completes)
        b.cbranch(b.icmp_unsigned("==", new, self.null), next_bb, store_bb)
        b.position_at_end(store_bb)
        b.store(new, gen_slot)
        b.call(t.fn("Py_DecRef", ir.VoidType(), [I8P]), [old])
        b.branch(next_bb)

    def run_and_return(self) -> None:
        """The entry (the GIL stays held: see the module docstring) with the table's entry
        argument (the context on the CPU, a GPU entry table on GPUs), a fault or overflow handed
        to `finish` (which raises), a GPU entry's raised exception returned as NULL, else the
        return slot decoded."""
        b, t, ctx = self.b, self.t, self.ctx
        entry = b.inttoptr(t.word(T_ENTRY), ir.FunctionType(ir.VoidType(), [I64]).as_pointer())
        b.call(entry, [t.word(T_ENTRY_ARG)])
        error_slot = b.gep(ctx, [c64(SLOT_ERROR)])
        fault = b.load(error_slot)
        ov_slot = t.word(T_OVERFLOW_SLOT)
        ov = b.select(b.icmp_unsigned("==", ov_slot, c64(0)), c64(0),
                      b.load(b.gep(ctx, [ov_slot])))
        finish, raised, ret = self.block("finish"), self.block("raised"), self.block("ret")
        b.cbranch(b.icmp_unsigned("==", b.or_(fault, ov), c64(0)), ret, finish)
        b.position_at_end(raised)     # a GPU entry's Python call raised: its exception is set
        b.store(c64(0), error_slot)
        b.ret(self.null)
        b.position_at_end(finish)
        is_raised = b.icmp_signed("==", fault, c64(ERROR_RAISED))
        finish_call = self.block("finish_call")
        b.cbranch(is_raised, raised, finish_call)
        b.position_at_end(finish_call)
        b.ret(b.call(t.fn("PyObject_CallNoArgs", I8P, [I8P]), [self.obj(T_FINISH)]))  # NULL
        b.position_at_end(ret)
        raw = b.load(b.gep(ctx, [c64(SLOT_RETURN)]))
        none_bb, float_bb, int_bb, uint_bb = (
            self.block(n) for n in ("ret_none", "ret_float", "ret_int", "ret_uint"))
        sw = b.switch(t.word(T_RETURN_KIND), none_bb)
        sw.add_case(c64(RET_FLOAT), float_bb)
        sw.add_case(c64(RET_SIGNED), int_bb)
        sw.add_case(c64(RET_UNSIGNED), uint_bb)
        b.position_at_end(none_bb)
        none = self.obj(T_NONE)
        b.call(t.fn("Py_IncRef", ir.VoidType(), [I8P]), [none])
        b.ret(none)
        b.position_at_end(float_bb)     # NULL when building a value fails: its exception is set
        b.ret(b.call(t.fn("PyFloat_FromDouble", I8P, [F64]), [b.bitcast(raw, F64)]))
        b.position_at_end(int_bb)
        b.ret(b.call(t.fn("PyLong_FromLongLong", I8P, [I64]), [raw]))
        b.position_at_end(uint_bb)
        b.ret(b.call(t.fn("PyLong_FromUnsignedLongLong", I8P, [I64]),
                     [b.and_(raw, t.word(T_RETURN_MASK))]))
