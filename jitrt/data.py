"""Fields and ndarrays: host-visible data with generation counters.

Stage: data (below every other layer: the frontend recognises fields, the runtime launches
with them). A `Field` is global data that kernels reach by closure; an `Ndarray` is
passed to kernels as an argument. Both own a C-contiguous numpy buffer whose address never
changes, and a generation counter `gen` bumped by every host write (`x[i] = v`, `from_numpy`,
`fill`) and by every launch of a kernel whose write set contains them. Caches observe data by
(identity, generation) and never re-read it. `needs_grad=True` adds `.grad` (reverse mode),
`needs_dual=True` adds `.dual` (forward mode): buffers of the same shape and dtype. A float
field declared without a shape (placed later by `jr.root`) always gets a gradient placed with it,
marked `implicit` until the program asks for it (`needs_grad=True`, `place(x.grad)`,
`jr.root.lazy_grad()`): the runtime differentiates through it, a Tape refuses it as a loss.
Host access to one element of a vector/matrix field (`v[i]`) gives a `FieldElement` view.
`shape` is Taichi's (the element's components left out; `storage_shape` has them), fixed at
creation as are `dtype`, `element_shape` and a field's `offset` (its first index per axis);
`jr.field` makes a `ScalarField`, vector and matrix types a `MatrixField`. Copies (`copy`,
`pickle`) own their memory (`_rebuild`).
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import math
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import dtypes
from .dtypes import DataType
from .data_element import FieldElement
from .data_index import host_index, offset_of, shape_of
from .errors import FloatDtypeError

if TYPE_CHECKING:
    from .backends.base import Device

_alloc_ids = itertools.count(1)
# the GPU device of the current program (set by the runtime's `jr.init`), else None: what
# `__cuda_array_interface__` and `__dlpack__` export from, and what foreign device arrays
# passed to kernels are wrapped for
CURRENT_DEVICE: list["Device | None"] = [None]
# device id -> that GPU of the current program's arch, opened if needed, or None on the CPU
# (set by the runtime: `runtime/devices.py`); what `Ndarray.to_device` copies to
OPEN_DEVICE: list[Callable[[int], "Device | None"]] = [lambda device_id: None]
# numpy < 2.1 imports DLPack tensors read-only and cannot export read-only views through it
DLPACK_WRITABLE = bool(np.from_dlpack(np.zeros(1)).flags.writeable)
_grad_fields: list["weakref.ref[Field]"] = []   # pruned as fields die (cheaper than a WeakSet)
_dual_buffers: list["weakref.ref[_Buffer]"] = []   # fields and ndarrays with a dual
_user_fields: list["weakref.ref[Field]"] = []   # fields made by jr.field & co (lazy_grad)


# Quadrants' materialization, for programs that wrap it (`qd.lang.impl.PyQuadrants.materialize`:
# Genesis defers its fields' first fills to it): fields created since it last ran, and what
# runs it (set by jitrt/quadrants/lang/impl.py); the next kernel dispatch runs it
# (runtime/launcher.py), as Quadrants materializes before a launch
MATERIALIZE_PENDING = [False]
MATERIALIZE: list[Callable[[], None]] = [lambda: None]


def materialize_pending() -> None:
    """Run the program's materialize hook if fields were created since it last ran: before a
    kernel dispatch and before any Python-scope access to a field's or ndarray's data (an
    element read or write, `to_numpy`, `from_numpy`, `fill`, `copy_from`, an export), where
    Quadrants and Taichi materialize too. A program that defers fields' first fills to it
    (Genesis's `V_SCALAR_FROM`) then reads the filled values, not zeros."""
    if MATERIALIZE_PENDING[0]:
        MATERIALIZE_PENDING[0] = False
        MATERIALIZE[0]()


def track(f: "Field") -> "Field":
    """Remember a field the program created (`jr.root.lazy_grad()` gives it a gradient)."""
    MATERIALIZE_PENDING[0] = True
    if len(_user_fields) > 64 and len(_user_fields) & (len(_user_fields) - 1) == 0:
        _user_fields[:] = [r for r in _user_fields if r() is not None]   # amortised pruning
    _user_fields.append(weakref.ref(f))
    return f


def live_user_fields() -> list["Field"]:
    """Every field alive now that the program created with `jr.field`, `jr.Vector.field`..."""
    return [f for f in (r() for r in _user_fields) if f is not None]


def live_dual_buffers() -> list["_Buffer"]:
    """Every field and ndarray alive now that has a dual (a FwdMode clears them on entry)."""
    alive = [b for b in (r() for r in _dual_buffers) if b is not None]
    if len(alive) != len(_dual_buffers):
        _dual_buffers[:] = [weakref.ref(b) for b in alive]
    return alive


def check_float(dtype: DataType, flag: str, kind: str, name: str | None) -> None:
    """Gradients and duals need a float dtype: `jr.FloatDtypeError` (a TypeError, and a
    RuntimeError as Taichi's refusal is) in Taichi's words, naming the data."""
    if not dtype.is_float:
        which = f" ({kind} {name!r})" if name else ""
        raise FloatDtypeError(f"{dtype.name} is not supported for {kind} with `needs_grad=True` "
                              f"or `needs_dual=True`{which}: {flag}=True needs a float dtype, "
                              "such as jr.f32 or jr.f64")


def live_grad_fields() -> list["Field"]:
    """Every field alive now that has a gradient (a Tape clears them on entry)."""
    alive = [f for f in (r() for r in _grad_fields) if f is not None]
    if len(alive) != len(_grad_fields):
        _grad_fields[:] = [weakref.ref(f) for f in alive]
    return alive


def has_companions(b: "_Buffer", grad: bool, dual: bool) -> None:
    """Count `b` among the buffers with a gradient (`live_grad_fields`) and/or a dual
    (`live_dual_buffers`): what placing a field declared without a shape does
    (`data_declare.PendingField.place_with`)."""
    if grad:
        _grad_fields.append(weakref.ref(b))  # type: ignore[arg-type]
    if dual:
        _dual_buffers.append(weakref.ref(b))


def bit_pattern(value: int, dt: DataType) -> Any:
    """A Python int stored into an integer element: a value of the type's width in either
    signedness converts as its bits say (`u8` given -128 holds 128, `i8` given 255 holds -1),
    as Taichi stores it; one that needs more bits is left to numpy, which refuses it."""
    if -(1 << (dt.bits - 1)) <= value < 0 and not dt.is_signed or \
            (1 << (dt.bits - 1)) <= value < (1 << dt.bits) and dt.is_signed:
        return np.array(value % (1 << dt.bits), np.uint64).astype(dt.np)
    return value


class _Buffer:
    """What Field and Ndarray share: the numpy buffer, host access and the generation."""

    __slots__ = ("_data", "_dtype", "_shape", "_dims", "_element", "_offset", "gen", "ptr",
                 "alloc_id", "grad", "name", "named", "_mirror", "dual", "implicit", "layout",
                 "escaped", "__weakref__", "__dict__")

    def __init__(self, dtype: Any, shape: Any, needs_grad: bool, name: str | None,
                 kind: str, storage: np.ndarray | None = None, needs_dual: bool = False,
                 element_shape: tuple[int, ...] = (), offset: Any = None) -> None:
        self._dtype: DataType = dtypes.coerce(dtype)
        self._shape = shape_of(shape, kind)
        # a field's first index on each axis (Taichi's offset; zeros for none)
        self._offset = offset_of(offset, self._shape)
        # vectors/matrices (jr.Vector.field...): the trailing dimensions holding components
        self._element = tuple(element_shape)
        self._dims = self._shape + self._element
        self._data = np.zeros(self._dims, dtype=self._dtype.np) if storage is None else storage
        self.ptr: int = self._data.ctypes.data
        self._mirror: Any = None   # a GPU's copy of the data (backends/gpu.py), if any
        self.gen = 0
        # a writable view that outlives every call has been handed out (`to_torch(copy=False)`):
        # writes through it move no generation, so caches keyed on it re-observe the data
        self.escaped = False
        self.alloc_id = next(_alloc_ids)
        self.name = name or f"{kind}{self.alloc_id}"
        self.named = name is not None   # else errors use the kernel's source name
        self.grad: Any = None
        self.dual: Any = None
        self.implicit = False   # a gradient placed with its field, not asked for (see top)
        # Quadrants' physical axis order (`jr.tensor(..., layout=)`): recorded, storage stays
        # row-major (quadrants/tensor.py)
        self.layout: tuple[int, ...] | None = None
        if needs_grad:
            check_float(self.dtype, "needs_grad", kind, name)
            self.grad = self._companion(".grad", kind)
            if kind == "field":
                _grad_fields.append(weakref.ref(self))  # type: ignore[arg-type]
        if needs_dual:
            check_float(self.dtype, "needs_dual", kind, name)
            self.dual = self._companion(".dual", kind)
            _dual_buffers.append(weakref.ref(self))

    def _companion(self, suffix: str, kind: str) -> Any:
        """A zeroed buffer like this one (a gradient or a dual), named after it."""
        out = type(self)(self._dtype, self._shape, False, self.name + suffix, kind,
                         element_shape=self._element, offset=self._offset)
        out.named = self.named
        return out

    # The shape, element shape and dtype are fixed at creation: compiled kernels and launch
    # packers trust them, so a changed one would read past the buffer.
    @property
    def dtype(self) -> DataType:
        return self._dtype

    @dtype.setter
    def dtype(self, value: Any) -> None:
        raise self._fixed("dtype")

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the field (ndarray): one extent per index, the element's components
        left out, as in Taichi (`(N,)` for `jr.Vector.field(3, jr.f32, shape=N)`)."""
        return self._shape

    @shape.setter
    def shape(self, value: Any) -> None:
        raise self._fixed("shape")

    @property
    def element_shape(self) -> tuple[int, ...]:
        """The shape of one element: () for scalars, (n,) for vectors, (n, m) for matrices."""
        return self._element

    @element_shape.setter
    def element_shape(self, value: Any) -> None:
        raise self._fixed("element_shape")

    @property
    def offset(self) -> tuple[int, ...]:
        """The first index on each axis (`offset=` of `jr.field`; zeros for none)."""
        return self._offset

    @offset.setter
    def offset(self, value: Any) -> None:
        raise self._fixed("offset")

    @property
    def storage_shape(self) -> tuple[int, ...]:
        """The shape of the data in memory: `shape + element_shape` (`to_numpy()`'s shape)."""
        return self._dims

    def _fixed(self, what: str) -> AttributeError:
        kind = "field" if isinstance(self, Field) else "ndarray"
        return AttributeError(f"the {what} of {kind} '{self.name}' cannot be changed (it is "
                              f"{getattr(self, what)!r}): create a new {kind} instead")

    @property
    def ndim(self) -> int:
        """The number of indices of an element: `len(x.shape)`."""
        return len(self._shape)

    def _unwrap(self) -> "_Buffer":
        """Quadrants' `qd.Tensor._unwrap()`: a jitrt field or ndarray is its own tensor."""
        return self

    @property
    def needs_grad(self) -> bool:
        """Whether the program asked for a gradient (an implicit one does not count)."""
        return self.grad is not None and not self.grad.implicit

    @property
    def n(self) -> int:
        """Components of a vector element, rows of a matrix element (as Taichi's `x.n`)."""
        if not self.element_shape:
            raise AttributeError(f"'{self.name}' holds scalars: .n is the length of a vector "
                                 "or the rows of a matrix field")
        return self.element_shape[0]

    @property
    def m(self) -> int:
        """Columns of a matrix element; 1 for a vector element (as Taichi's `x.m`)."""
        if not self.element_shape:
            raise AttributeError(f"'{self.name}' holds scalars: .m is the columns of a "
                                 "matrix field (1 for a vector field)")
        return self.element_shape[1] if len(self.element_shape) > 1 else 1

    @property
    def needs_dual(self) -> bool:
        """Whether the program asked for a dual (an implicit one does not count)."""
        return self.dual is not None and not self.dual.implicit

    # On a GPU the data may be newer in device memory: every host read of the whole array
    # goes through `_host()` (which downloads it then) and every host write of it ends in
    # `_wrote()` (the next launch uploads it); one element goes through `_read` and `_write`,
    # which move that element's bytes alone (docs/gpu.md, "Where data lives").
    def _host(self) -> np.ndarray:
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        if self._mirror is not None:
            self._mirror.before_host_read()
        return self._data

    def _wrote(self) -> None:
        if self._mirror is not None:
            self._mirror.after_host_write()
        self.gen += 1

    def _span(self, index: tuple[int, ...]) -> tuple[int, int]:
        """(byte offset, byte count) in the buffer of the part at storage index `index`: one
        int per leading storage axis (negative ones count from the end), so a contiguous
        block (an element, a component, a row)."""
        data, offset = self._data, 0
        if not index:
            return 0, data.nbytes
        for i, n, stride in zip(index, self._dims, data.strides):
            offset += (i % n if i < 0 else i) * stride
        return offset, data.itemsize * math.prod(self._dims[len(index):])

    def _read(self, index: tuple[int, ...]) -> Any:
        """The part at storage index `index` (see `_span`) of the host copy, made current
        there first: on a GPU only its bytes come down when the device copy is newer."""
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        if self._mirror is not None:
            self._mirror.read_part(*self._span(index), self.gen)
        return self._data[index]

    def _write(self, index: tuple[int, ...], value: Any) -> None:
        """Store `value` at storage index `index` (see `_span`): the host copy's part, and on
        a GPU its bytes alone, uploaded on the stream without waiting (unless the host copy
        holds writes the next launch uploads anyway)."""
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        self._data[index] = value
        if self._mirror is not None:
            self._mirror.wrote_part(*self._span(index))
        self.gen += 1

    def __getitem__(self, key: Any) -> Any:
        if key is None and not self._dims:     # `loss[None]`
            return self._read(()).item()
        if isinstance(key, slice):
            return self._host()[key].copy()
        index = host_index(key, self._dims, self.name, self._element, self._offset,
                           isinstance(self, Ndarray))
        if len(index) < len(self._dims):      # a whole vector/matrix element: a live proxy
            return FieldElement(self, index)
        return self._read(index).item()

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, slice):
            self._host()[key] = value
            self._wrote()
            return
        index: tuple[int, ...] = ()            # `loss[None] = 0`, every step of a training loop
        if key is not None or self._dims:
            index = host_index(key, self._dims, self.name, self._element, self._offset,
                               isinstance(self, Ndarray))
            if len(index) < len(self._dims):
                value = self._element_value(key, value)
        if value.__class__ is int and self._dtype.is_int:
            value = bit_pattern(value, self._dtype)
        self._write(index, value)

    def _device(self) -> "Device | None":
        """The GPU this data belongs to: the open device holding its device copy, else the
        current program's GPU (None on the CPU)."""
        mirror = self._mirror
        if mirror is not None and not mirror.device.closed:
            return mirror.device  # type: ignore[no-any-return]
        return CURRENT_DEVICE[0]

    def _element_value(self, key: Any, value: Any) -> np.ndarray:
        """What `x[i] = value` stores in a vector/matrix element: its shape, or a scalar."""
        arr = np.asarray(value)
        if arr.shape not in ((), self.element_shape):
            what = "vector" if len(self.element_shape) == 1 else "matrix"
            raise ValueError(f"{self.name}[{key!r}] = ...: a {what} element has shape "
                             f"{self.element_shape}, got a value of shape {arr.shape}")
        return arr

    def to_numpy(self, keep_dims: bool = False, dtype: Any = None) -> np.ndarray:
        """A copy of the storage (`storage_shape`). As in Taichi, `keep_dims=True` gives a
        vector element an explicit column (`(N, n, 1)`); `dtype` converts the copy."""
        out = self._host().copy()
        if keep_dims and len(self._element) == 1:
            out = out.reshape(self._dims + (1,))
        return out if dtype is None else out.astype(dtypes.coerce(dtype).np)

    def from_numpy(self, arr: Any) -> None:
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        arr = np.asarray(arr)
        if len(self._element) == 1 and arr.shape in (self._dims + (1,), self._shape + (
                1,) + self._element):      # a vector given as a column or a row (Taichi)
            arr = arr.reshape(self._dims)
        if arr.shape != self._dims:
            raise ValueError(f"{self.name}.from_numpy: shape {arr.shape} does not match "
                             f"{self._dims}")
        if self._mirror is not None:
            self._mirror.device_newer = False    # every element is overwritten
        np.copyto(self._data, arr, casting="same_kind")
        self._wrote()
        device = self._device()
        if device is not None:
            device.host_overwrote(self)          # a GPU's copy goes up now, asynchronously

    def copy_from(self, other: Any) -> None:
        """Copy every element of `other` (a field for a field, an ndarray for an ndarray) of
        the same shape and element shape, converting its values to this dtype as a kernel's
        assignment would; offsets may differ (elements pair up by position)."""
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        kind = "field" if isinstance(self, Field) else "ndarray"
        if not isinstance(other, Field if kind == "field" else Ndarray):
            raise TypeError(f"{self.name}.copy_from: a {kind} copies from another {kind}, "
                            f"got {type(other).__name__}")
        if other.storage_shape != self._dims:
            raise ValueError(f"{self.name}.copy_from: the source {other.name} has shape "
                             f"{other.shape} (element {other.element_shape}), this {kind} "
                             f"{self.shape} (element {self.element_shape})")
        device = self._device()
        if device is not None and device.copy_data(self, other):
            self.gen += 1                        # copied in device memory (docs/gpu.md)
            return
        source = other._host()
        if self._mirror is not None:
            self._mirror.device_newer = False    # every element is overwritten
        np.copyto(self._data, source, casting="unsafe")
        self._wrote()

    def fill(self, value: Any) -> None:
        """Every element becomes `value`: a number (every component too), or for a
        vector/matrix element a value of the element's shape (`jr.Vector([1, 2])`)."""
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        mirror = self._mirror
        if mirror is not None and mirror.fill_again(value):
            self.gen += 1                        # the device fill of this value again
            return
        arr = np.asarray(value)
        if arr.shape not in ((), self._element):
            raise ValueError(f"{self.name}.fill: the value has shape {arr.shape}; an element "
                             f"has shape {self._element} (or give a number)")
        device = self._device()
        if device is not None:
            element = np.empty(self._element, self._data.dtype)
            element[...] = arr                   # converted as a host fill converts it
            if device.fill_data(self, element.tobytes(), value):
                self.gen += 1                    # filled in device memory (docs/gpu.md)
                return
        if self._mirror is not None:
            self._mirror.device_newer = False
        self._data[...] = arr
        self._wrote()

    def __repr__(self) -> str:
        element = f" element_shape={self._element}" if self._element else ""
        offset = f" offset={self._offset}" if any(self._offset) else ""
        return (f"<{type(self).__name__} {self.name} {self.dtype!r} shape={self._shape}"
                f"{element}{offset}>")

    # ---- copies: each owns its memory (docs/usage.md, "Copies and pickling") ---------------
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """`pickle` and `copy.deepcopy`: a new field or ndarray (its own allocation, address
        and generation) holding a copy of the data, with copies of `.grad` and `.dual`
        (deepcopy's memo keeps `x` and `x.grad` copied together consistent)."""
        tracked = any(r() is self for r in _user_fields)
        return (_rebuild, (type(self), self._dtype.name, self._shape, self._element, self.name,
                           self.named, self._host(), self.grad, self.dual, self.implicit,
                           tracked, self._offset))

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        rebuild, args = self.__reduce__()
        return rebuild(*copy.deepcopy(args, memo))

    def __copy__(self) -> Any:
        """A copy owns its memory, as numpy's does: the same as `copy.deepcopy`."""
        return copy.deepcopy(self)

    def to_torch(self, device: Any = None, *, copy: bool = True) -> Any:
        """A torch tensor with a copy of the data, on `device` (default: the CPU, or the
        program's GPU for `copy=False`); torch is optional, never a dependency.
        `copy=False` (Quadrants' zero-copy view) shares the memory: the host buffer on the
        CPU, the device memory on a GPU program (through DLPack). Writes through such a view
        move no generation counter, so from then on the caches keyed on it (adstack sizing)
        re-observe this data at every launch instead of trusting the counter."""
        import torch
        if copy is False:
            tensor = torch.from_dlpack(self)
            if device is not None and tensor.device != torch.device(device):
                raise ValueError(f"{self.name}.to_torch(device={device!r}, copy=False): the "
                                 f"data lives on {tensor.device}; a zero-copy view cannot "
                                 "move it (drop copy=False to get a copy)")
            self.escaped = True
            if self._mirror is not None:     # a GPU program: the view is the device memory
                self._mirror.shared = True
            return tensor
        tensor = torch.from_numpy(self.to_numpy())
        return tensor if device is None else tensor.to(device)

    def from_torch(self, tensor: Any) -> None:
        """Copy a torch tensor of this shape into the data (moves it to the CPU)."""
        self.from_numpy(tensor.detach().cpu().numpy())

    # ---- zero-copy interop (the CPU: the data is host memory) ---------------------------
    def view(self) -> np.ndarray:
        """A read-only numpy view of the data (no copy). Read-only so that generation counters
        stay exact: write with `x[i] = v`, `from_numpy`, `fill`, a kernel, or `writable()`."""
        v = self._host().view()
        v.flags.writeable = False
        return v

    @contextlib.contextmanager
    def writable(self) -> Iterator[np.ndarray]:
        """A writable numpy view for the `with` block; the generation moves when it ends, so
        caches that observed the old data see the change."""
        try:
            yield self._host()
        finally:
            self._wrote()

    def touch(self) -> None:
        """Declare that the data changed behind jitrt's back (through a foreign view). On a
        GPU whose copy is the newer one (an export marks it so), the change is in device
        memory: the generation moves and nothing is uploaded over it."""
        mirror = self._mirror
        if mirror is not None and mirror.device_newer:
            self.gen += 1
            return
        self._wrote()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            return self._host().astype(dtype or self._data.dtype, copy=True)
        v = self.view()
        return v if dtype is None or np.dtype(dtype) == v.dtype else v.astype(dtype)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return self.view().__array_interface__

    def __dlpack__(self, **kwargs: Any) -> Any:
        """DLPack export, no copy. On a GPU program: the device memory itself
        (torch.from_dlpack, cupy.from_dlpack; writes through it need `.touch()`). On the
        CPU: the host memory, writable (torch writes through a read-only export without a
        check); the generation moves when the consumer releases it, so caches see its writes
        by then (`.touch()` makes them seen earlier). `copy=True` exports a copy."""
        from . import dlpack
        if MATERIALIZE_PENDING[0]:
            materialize_pending()
        device = self._device()
        if device is not None:
            stream = kwargs.get("stream")      # the consumer's stream: it waits, not the host
            ptr = device.export_ptr(self, wait=stream is None)
            if stream is not None and stream != -1:
                device.consumer_waits(int(stream))
            return dlpack.export(ptr, self._dims, self.dtype, device.dlpack_device_type,
                                 device.device_id, self)
        if kwargs.get("copy"):
            return self._host().copy().__dlpack__(
                **{k: v for k, v in kwargs.items() if k != "copy"})
        data = self._host()
        versioned = tuple(kwargs.get("max_version") or (0, 0)) >= (1, 0)
        return dlpack.export(data.ctypes.data, data.shape, self.dtype, dlpack.KDL_CPU, 0,
                             self, self._wrote, versioned)

    def __dlpack_device__(self) -> tuple[int, int]:
        device = self._device()
        if device is not None:
            return device.dlpack_device_type, device.device_id
        return self._data.__dlpack_device__()  # type: ignore[return-value]

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The device memory (GPU programs only: CuPy, torch.as_tensor, numba accept it).
        The data is brought to the device and the stream synchronised first; a consumer's
        writes are seen by later launches and host reads (call `.touch()` after them so that
        caches keyed on the generation see the change)."""
        device = self._device()
        if device is None:
            raise AttributeError("__cuda_array_interface__: the current program is not on "
                                 "a GPU (jr.init(arch=jr.cuda))")
        ptr = device.export_ptr(self)
        return {"shape": self._dims, "typestr": self.dtype.np.str, "data": (ptr, False),
                "strides": None, "version": 3, "stream": None}


def _rebuild(cls: type, dtype: str, shape: tuple[int, ...], element: tuple[int, ...],
             name: str, named: bool, data: np.ndarray, grad: Any, dual: Any, implicit: bool,
             tracked: bool, offset: tuple[int, ...] | None = None) -> Any:
    """A copied or unpickled field/ndarray (`_Buffer.__reduce__`): new memory, the data copied
    in, the gradient and dual already rebuilt, registered as a new one would be."""
    kind = "field" if issubclass(cls, Field) else "ndarray"
    out = cls(dtype, shape, False, name, kind, element_shape=element, offset=offset)
    if np.shape(data) != out.storage_shape:
        raise ValueError(f"cannot rebuild {kind} '{name}': its data has shape "
                         f"{np.shape(data)}, not {out.storage_shape}")
    np.copyto(out._data, data, casting="no")
    out.named, out.implicit = named, implicit
    out.grad, out.dual = grad, dual
    if grad is not None and kind == "field":
        _grad_fields.append(weakref.ref(out))
    if dual is not None:
        _dual_buffers.append(weakref.ref(out))
    return track(out) if tracked else out


class Field(_Buffer):
    """Global data referenced from kernels by closure: `x = jr.field(jr.f32, shape=(N,))`."""
    __slots__ = ()
    pending = False          # PendingField: declared, not yet placed

    @property
    def _name(self) -> str:
        """Taichi's `x._name`: the field's name (`name=` or the one jitrt gave it)."""
        return self.name

    def __iter__(self) -> Iterator[Any]:
        """`for i in x` is a kernel's loop over x's indices. At Python scope it is refused, as
        in Taichi: Python's fallback would give the values, not the indices."""
        raise NotImplementedError("Struct for is only available in Taichi scope: `for i in x` "
                                  "over a field loops over its indices in a kernel; at Python "
                                  "scope loop over jr.ndrange(*x.shape) or x.to_numpy()")

    def parent(self, n: int = 1) -> Any:
        """Taichi's `x.parent()`: the layout level that holds x (`Cells`), whose loop
        `for i, j in x.parent()` runs over x's indices, as Taichi's does for a dense level."""
        return Cells.of(self, n)


class Cells:
    """The layout level holding a field, as `x.parent()` gives it: a kernel loop over it
    (`for i, j in x.parent()`) runs over the field's indices (its shape, from its offset), as
    Taichi's loop over the dense level that places x does. jitrt stores a field without the
    blocks of chained levels, so only the level right above the field exists (n=1)."""

    def __init__(self, field: Any) -> None:
        self.field = field

    @classmethod
    def of(cls, field: Any, n: int) -> "Cells":
        if n != 1:
            raise NotImplementedError(f"{field.name}.parent({n}): only the level right above "
                                      "a field (parent() or parent(1)) is supported: jitrt "
                                      "places fields without the blocks of chained levels")
        return cls(field)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.field.shape)

    def __repr__(self) -> str:
        return f"<cells of {self.field.name}, shape {self.shape}>"


class ScalarField(Field):
    """A field of scalars: what `jr.field(jr.f32, ...)` returns (Taichi's `ti.ScalarField`)."""
    __slots__ = ()


class MatrixField(Field):
    """A field of vectors or matrices: what `jr.Vector.field`, `jr.Matrix.field` and
    `jr.field(jr.math.vec3, ...)` return (Taichi's `ti.MatrixField`)."""
    __slots__ = ()

    def get_scalar_field(self, *indices: int) -> Any:
        """Component `indices` (`i` of a vector, `i, j` of a matrix) as a scalar field, to
        place the components separately (Taichi's SOA placement) or to read and write one
        component (`data_component.ComponentField`)."""
        from .data_component import ComponentField
        return ComponentField(self, tuple(indices))


class TensorType:
    """A vector or matrix element's type as Taichi's `Ndarray.element_type` gives it (its
    `TensorType`): methods `shape()` and `element_type()`; equal to another of one shape and
    dtype; shown as Taichi's messages show it, `[Tensor (3) i32]`."""
    __slots__ = ("dims", "dtype")

    def __init__(self, dims: tuple[int, ...], dtype: DataType) -> None:
        self.dims, self.dtype = tuple(dims), dtype

    def shape(self) -> list[int]:
        return list(self.dims)

    def element_type(self) -> DataType:
        return self.dtype

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TensorType) and (self.dims, self.dtype) == \
            (other.dims, other.dtype)

    def __hash__(self) -> int:
        return hash((self.dims, self.dtype))

    def __repr__(self) -> str:
        return f"[Tensor ({', '.join(map(str, self.dims))}) {self.dtype.name}]"


class Ndarray(_Buffer):
    """Data passed to kernels as an argument: `a = jr.ndarray(jr.i32, shape=(N,))`."""
    __slots__ = ("_owner", "readonly")
    _owner: Any                 # what a from_dlpack wrapper keeps alive
    readonly: bool              # a wrapped device array the producer exported read-only

    def _get_element_size(self) -> int:
        """Taichi's: the bytes of one element (a vector's or matrix's components together)."""
        return self.dtype.np.itemsize * int(np.prod(self.element_shape, dtype=np.int64))

    def _get_nelement(self) -> int:
        """Taichi's: the number of elements (the product of `shape`)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def to_device(self, device_id: int) -> "Ndarray":
        """A copy of this ndarray (with copies of `.grad` and `.dual`) that belongs to GPU
        `device_id` of the current program's arch (docs/gpu.md, "Several devices"): the data
        comes down from the device holding it and goes up to the other one at once, without
        waiting (through host memory: no peer-to-peer copy). On the CPU only device 0 exists,
        and the copy is a plain one."""
        target = OPEN_DEVICE[0](device_id)
        out = copy.copy(self)
        for buf in (out, out.grad, out.dual):
            if buf is not None and target is not None:
                target.data_ptr(buf)             # its device memory on `target`
                target.host_overwrote(buf)       # the data goes up now, asynchronously
        return out  # type: ignore[no-any-return]

    @property
    def element_type(self) -> Any:
        """Taichi's: the dtype of a scalar element, else a `TensorType` (the element's
        `shape()` as a list and its scalar `element_type()`)."""
        return TensorType(self.element_shape, self.dtype) if self.element_shape else self.dtype

    @classmethod
    def from_dlpack(cls, obj: Any, name: str | None = None) -> "Ndarray":
        """Wrap any DLPack producer (a torch CPU tensor, a numpy array...) without copying.
        The producer keeps its memory; writes it makes itself are not seen by the generation
        counters (call `.touch()` after them). A GPU tensor (torch/CuPy/JAX on CUDA) is
        wrapped the same way on a GPU program of its device (docs/gpu.md, "Zero-copy
        exchange")."""
        where = getattr(obj, "__dlpack_device__", None)
        if where is not None and int(where()[0]) != 1:       # not kDLCPU: device memory
            device = CURRENT_DEVICE[0]
            imported = None if device is None else device.import_dlpack(obj)
            if imported is None:
                raise ValueError(f"jr.ndarray.from_dlpack: the tensor is in device memory "
                                 f"(DLPack device {tuple(where())}); the current program is "
                                 "on the CPU (jr.init(arch=jr.cuda))")
            if name is not None:
                imported.name, imported.named = name, True
            return imported
        arr = np.from_dlpack(obj)
        if not arr.flags.c_contiguous:
            raise ValueError("jr.ndarray.from_dlpack: the tensor is not C-contiguous; "
                             "make it contiguous first")
        if not arr.flags.writeable:
            raise ValueError("jr.ndarray.from_dlpack: the tensor is read-only" + (
                "" if DLPACK_WRITABLE else f" (numpy {np.__version__} imports every DLPack "
                "tensor read-only; numpy >= 2.1 keeps them writable)"))
        dt = dtypes.from_numpy(arr.dtype)
        if dt is None:
            raise TypeError(f"jr.ndarray.from_dlpack: dtype {arr.dtype} has no jitrt type")
        out = cls(dt, arr.shape, False, name, "ndarray", storage=arr)
        out._owner = obj        # keep the producer (and its memory) alive
        return out

    @classmethod
    def _on_device(cls, mirror_of: Any, shape: tuple[int, ...], dt: DataType,
                   owner: Any) -> "Ndarray":
        """An ndarray over another library's device memory (`mirror_of(ndarray)` makes its
        device mirror): no copy; the host copy is filled only when the host reads it."""
        out = cls(dt, shape, False, None, "ndarray", storage=np.empty(shape, dt.np))
        out._owner = owner
        out._mirror = mirror_of(out)
        return out


def requires_grad(v: Any) -> bool:
    """Whether `v` is a CPU tensor of an autodiff library that requires a gradient (torch's
    `requires_grad`), which DLPack refuses to export."""
    return bool(getattr(v, "requires_grad", False)) and hasattr(v, "detach") and \
        getattr(getattr(v, "device", None), "type", None) == "cpu"


def grad_tensor_view(v: Any) -> Ndarray:
    """A torch CPU tensor that requires a gradient, as Taichi takes it: an ndarray over its
    memory whose `.grad` is over the tensor's `.grad` (allocated as zeros when None, as
    Taichi does), both without copying. A launch or a Tape reads the tensor's current
    `.grad` through it."""
    if v.grad is None:
        v.grad = v.detach().new_zeros(v.shape)
    out = Ndarray.from_dlpack(v.detach())
    out.grad = Ndarray.from_dlpack(v.grad)
    return out
