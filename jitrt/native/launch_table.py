"""The layout of a native launch table: word indices and record formats, shared by the launcher
that reads tables (`native_launcher.py`, LLVM IR) and the runtime that fills them
(`runtime/native_launch.py`).

Stage: native (constants only; no llvmlite import, so filling a table loads no IR builder).
"""
from __future__ import annotations

# ---- the launch table: word indices --------------------------------------------------------
T_METHOD_DEF = 0        # 4 words: the PyMethodDef of the builtin (name, function, flags, doc)
T_FALLBACK = 4          # callable(*args, **kwargs): the generated Python launcher
T_NARGS = 5             # positional arguments expected
T_ACTIVE = 6            # address of the `ob_item` field of program.ACTIVE, 0: no program check
T_PROGRAM = 7           # the object ACTIVE[0] must be
T_HELD = 8              # address of the launch lock's `held` count (an i64)
T_FINISH = 10           # called after a fault or overflow: raises the error
T_CONTEXT, T_ENTRY = 11, 12     # context buffer address, fused entry `void(i64 context)`
T_OVERFLOW_SLOT = 13    # context slot of the overflow flag, 0: the kernel has no adstacks
T_RETURN_KIND, T_RETURN_MASK = 14, 15   # RET_*; the mask of an unsigned return
T_COUNT_ADDR = 16       # address of the handle's launch counter (an i64)
T_ENTRY_ARG = 17        # what the entry is called with: the context (CPU), a GPU entry table
T_NPARAMS, T_NBUMPS = 18, 19
T_TUPLE_SIZE, T_TUPLE_ITEMS = 20, 21    # byte offsets in a tuple object
T_TYPE, T_FLOAT_VALUE = 22, 23          # byte offsets of ob_type and of a float's value
T_FLOAT_TYPE, T_LONG_TYPE, T_NONE = 24, 25, 26
T_NP_DATA, T_NP_ND, T_NP_DIMS, T_NP_DESCR, T_NP_FLAGS = 40, 41, 42, 43, 44  # numpy array offsets
T_LIST_ITEMS = 9        # byte offset of a list's item array pointer
T_TUPLE_TYPE, T_LIST_TYPE, T_NDARRAY_TYPE = 45, 46, 47   # what a vector argument may be
T_VECTOR_TYPE, T_MATRIX_TYPE = 48, 49   # ... or jr.Vector / jr.Matrix (numpy array subclasses)
T_BOOL_TYPE, T_TRUE = 50, 51    # bool and the True object: a bool for an integer parameter
API_WORDS = ("PyObject_Call", "PyObject_CallNoArgs", "Py_IncRef", "Py_DecRef",
             "PyLong_AsLongLongAndOverflow", "PyFloat_FromDouble", "PyLong_FromLongLong",
             "PyLong_FromUnsignedLongLong")
T_API = 27              # the C API functions above, in that order (up to word 39)
HEADER_WORDS = 52
RECORD_WORDS = 4
# a parameter record (one per parameter, from HEADER_WORDS): kind, context slot, a, b
P_ARRAY, P_TEMPLATE, P_FLOAT, P_INT = 1, 2, 3, 4   # ARRAY/TEMPLATE: a = the expected object
# (0: none yet); ARRAY: b = the word index of its array record; INT: a..b = the accepted range
P_VECTOR = 5            # a = the word index of its vector record
# a vector record (one per vector/matrix parameter, after the array records): the components'
# kind (P_FLOAT or P_INT), rows (0: a vector, an exact tuple or list of `cols` numbers; else a
# matrix, a tuple or list of `rows` such rows), cols, the accepted range of an int component,
# and the numpy dtype objects a numpy array of the shape may have: 8 and 4 bytes wide
V_KIND, V_ROWS, V_COLS, V_LO, V_HI, V_WIDE, V_NARROW = 0, 1, 2, 3, 4, 5, 6
V_WORDS = 7
NPY_C_CONTIGUOUS = 0x1  # numpy's flag (checked at start-up, `runtime/native_launch.layout`)
# an array record (one per ndarray parameter, after the bump records): 0 for a jitrt ndarray;
# for a numpy array: 1, data pointer, dtype object, required flags, ndim, then the shape
A_NUMPY, A_DATA, A_DESCR, A_FLAGS, A_NDIM, A_SHAPE = 0, 1, 2, 3, 4, 5
# a bump record (after the parameter records): argument index or -1, the object (-1) or the
# type an argument must have (its generation is bumped only then), byte offset of the `gen`
# slot, byte offset of the `grad` slot to follow first (0: none)
RET_NONE, RET_FLOAT, RET_SIGNED, RET_UNSIGNED = 0, 1, 2, 3
METH_VARARGS_KEYWORDS = 0x0001 | 0x0002
CTYPES_BUFFER_OFFSET = 16   # where a ctypes array object keeps its buffer pointer (checked)

# ---- the GPU entry table (`native_gpu_entry.py`): one per GPU launch context ----------------
G_LAUNCH = 0            # the driver's cuLaunchKernel-shaped function (hipModuleLaunchKernel too)
G_GET_CURRENT = 1       # cuCtxGetCurrent-shaped: int(void **)
G_GPU_CONTEXT = 2       # the driver context launches need current on the calling thread
G_STREAM, G_PARAMS, G_THREADS = 3, 4, 5   # stream; kernel parameter array; threads-launched word
G_CONTEXT = 6           # the host launch context (its SLOT_ERROR takes ERROR_RAISED)
G_SLOW = 7              # nonzero: every launch goes to the Python entry (staging, a return value)
G_PYTHON_ENTRY = 8      # callable(): the generated Python entry of this context
G_ON_ERROR = 9          # callable(): raises the driver error stored in G_ERROR
G_ERROR = 10
G_SKIPPED = 11          # address of the device's native h2d_skipped count (an i64)
G_HOST_NEWER, G_DEVICE_NEWER = 12, 13     # byte offsets of those DeviceMirror slots
G_TRUE = 14             # the `True` object
G_API = 15              # Py_IncRef, Py_DecRef, PyObject_CallNoArgs (words 15-17)
G_NINPUTS, G_NOUTPUTS, G_NTASKS = 18, 19, 20
G_INPUTS, G_OUTPUTS, G_TASKS = 21, 22, 23  # word index of the first input / output / task
G_HEADER_WORDS = 24
G_API_NAMES = ("Py_IncRef", "Py_DecRef", "PyObject_CallNoArgs")
# a task record: function, block size, grid (a fixed grid) or its cap (a box), extents: -1 a
# serial task (one thread), 0 a fixed grid, k a box of k extents, then k (begin, end) pairs of
# bound words, each pair (is a context slot, value)
MAX_EXTENTS = 4
TASK_WORDS = 4 + 4 * MAX_EXTENTS
