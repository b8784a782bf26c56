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
"""
from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import dtypes
from .dtypes import DataType
from .errors import FloatDtypeError

_alloc_ids = itertools.count(1)
# the GPU device of the current program (set by the runtime's `jr.init`), else None: what
# `__cuda_array_interface__` and `__dlpack__` export from, and what foreign device arrays
# passed to kernels are wrapped for
CURRENT_DEVICE: list[Any] = [None]
# numpy < 2.1 imports DLPack tensors read-only and cannot export read-only views through it
DLPACK_WRITABLE = bool(np.from_dlpack(np.zeros(1)).flags.writeable)
_grad_fields: list["weakref.ref[Field]"] = []   # pruned as fields die (cheaper than a WeakSet)
_dual_buffers: list["weakref.ref[_Buffer]"] = []   # fields and ndarrays with a dual
_user_fields: list["weakref.ref[Field]"] = []   # fields made by jr.field & co (lazy_grad)


def track(f: "Field") -> "Field":
    """Remember a field the program created (`jr.root.lazy_grad()` gives it a gradient)."""
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


def _check_float(dtype: DataType, flag: str, kind: str, name: str | None) -> None:
    """Gradients and duals need a float dtype: `jr.FloatDtypeError` (a TypeError, and a
    RuntimeError as Taichi's refusal is) in Taichi's words, naming the data."""
    if not dtype.is_float:
        which = f" ({kind} {name!r})" if name else ""
        raise FloatDtypeError(f"{dtype.name} is not supported for {kind} with {flag}=True"
                              f"{which}: {flag}=True needs a float dtype, such as jr.f32 or "
                              "jr.f64")


def live_grad_fields() -> list["Field"]:
    """Every field alive now that has a gradient (a Tape clears them on entry)."""
    alive = [f for f in (r() for r in _grad_fields) if f is not None]
    if len(alive) != len(_grad_fields):
        _grad_fields[:] = [weakref.ref(f) for f in alive]
    return alive


MAX_ELEMENTS = 1 << 40   # far past any memory: a shape beyond is a typo, not a request


def _shape(shape: Any) -> tuple[int, ...]:
    """A shape as a tuple of non-negative Python ints; anything else is an error naming it."""
    items = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    for s in items:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"shape {shape!r}: extent {s!r} is not an integer")
        if s < 0:
            raise ValueError(f"shape {shape!r} has a negative extent")
    out = tuple(int(s) for s in items)
    if int(np.prod(out, dtype=object)) > MAX_ELEMENTS:
        raise ValueError(f"shape {shape!r} has more than 2**40 elements")
    return out


def _host_index(key: Any, shape: tuple[int, ...], name: str,
                element_shape: tuple[int, ...] = ()) -> Any:
    """A host-side index: `x[i]`, `x[i, j]`, `x[None]` for a 0-d field. With vector/matrix
    elements, either one index per element dimension (the whole element) or one per storage
    dimension (one component)."""
    if key is None:
        key = ()
    index = key if isinstance(key, tuple) else (key,)
    outer = len(shape) - len(element_shape)
    if len(index) != len(shape) and not (element_shape and len(index) == outer):
        if element_shape:
            raise IndexError(
                f"{name} is a field of {element_shape} elements with shape {shape[:outer]} "
                f"(storage {shape}): give {outer} index(es) for an element or {len(shape)} "
                f"for one component, not {len(index)}: {key!r}"
                + (" (use x[None] for the element of a 0-d field)" if not outer else ""))
        hint = " (use x[None] for a 0-d field or ndarray)" if not shape else ""
        raise IndexError(f"{name} has {len(shape)} dimension(s) (shape {shape}) but "
                         f"{len(index)} index(es) were given: {key!r}{hint}")
    for k, (i, n) in enumerate(zip(index, shape)):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise IndexError(f"{name}[{key!r}]: index {i!r} on axis {k} is not an integer")
        if not -n <= i < n:
            raise IndexError(f"{name}[{key!r}]: index {i} is out of bounds for axis {k} with "
                             f"extent {n}")
    return index


class _Buffer:
    """What Field and Ndarray share: the numpy buffer, host access and the generation."""

    __slots__ = ("_data", "dtype", "shape", "gen", "ptr", "alloc_id", "grad", "name",
                 "named", "_mirror", "element_shape", "dual", "implicit", "layout",
                 "__weakref__")

    def __init__(self, dtype: Any, shape: Any, needs_grad: bool, name: str | None,
                 kind: str, storage: np.ndarray | None = None, needs_dual: bool = False) -> None:
        self.dtype: DataType = dtypes.coerce(dtype)
        self.shape = _shape(shape)
        # vectors/matrices (jr.Vector.field...): the trailing dimensions holding components
        self.element_shape: tuple[int, ...] = ()
        self._data = np.zeros(self.shape, dtype=self.dtype.np) if storage is None else storage
        self.ptr: int = self._data.ctypes.data
        self._mirror: Any = None   # a GPU's copy of the data (backends/gpu.py), if any
        self.gen = 0
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
            _check_float(self.dtype, "needs_grad", kind, name)
            self.grad = type(self)(self.dtype, self.shape, False, self.name + ".grad", kind)
            self.grad.named = self.named
            if kind == "field":
                _grad_fields.append(weakref.ref(self))  # type: ignore[arg-type]
        if needs_dual:
            _check_float(self.dtype, "needs_dual", kind, name)
            self.dual = type(self)(self.dtype, self.shape, False, self.name + ".dual", kind)
            self.dual.named = self.named
            _dual_buffers.append(weakref.ref(self))

    @property
    def ndim(self) -> int:
        return len(self.shape)

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

    # On a GPU the data may be newer in device memory: every host read goes through `_host()`
    # (which downloads it then) and every host write ends in `_wrote()` (the next launch
    # uploads it).
    def _host(self) -> np.ndarray:
        if self._mirror is not None:
            self._mirror.before_host_read()
        return self._data

    def _wrote(self) -> None:
        if self._mirror is not None:
            self._mirror.after_host_write()
        self.gen += 1

    def __getitem__(self, key: Any) -> Any:
        if key is None and not self.shape:     # `loss[None]`
            return self._host()[()].item()
        if isinstance(key, slice):
            return self._host()[key].copy()
        index = _host_index(key, self.shape, self.name, self.element_shape)
        if len(index) < len(self.shape):      # a whole vector/matrix element: a live proxy
            return FieldElement(self, index)
        return self._host()[index].item()

    def __setitem__(self, key: Any, value: Any) -> None:
        if key is None and not self.shape:     # `loss[None] = 0`, every step of a training loop
            index: Any = ()
        elif isinstance(key, slice):
            index = key
        else:
            index = _host_index(key, self.shape, self.name, self.element_shape)
            if len(index) < len(self.shape):
                value = self._element_value(key, value)
        self._host()[index] = value
        self._wrote()

    def _element_value(self, key: Any, value: Any) -> np.ndarray:
        """What `x[i] = value` stores in a vector/matrix element: its shape, or a scalar."""
        arr = np.asarray(value)
        if arr.shape not in ((), self.element_shape):
            what = "vector" if len(self.element_shape) == 1 else "matrix"
            raise ValueError(f"{self.name}[{key!r}] = ...: a {what} element has shape "
                             f"{self.element_shape}, got a value of shape {arr.shape}")
        return arr

    def to_numpy(self) -> np.ndarray:
        return self._host().copy()

    def from_numpy(self, arr: Any) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.shape:
            raise ValueError(f"{self.name}.from_numpy: shape {arr.shape} does not match "
                             f"{self.shape}")
        if self._mirror is not None:
            self._mirror.device_newer = False    # every element is overwritten
        np.copyto(self._data, arr, casting="same_kind")
        self._wrote()

    def fill(self, value: Any) -> None:
        if self._mirror is not None:
            self._mirror.device_newer = False
        self._data.fill(value)
        self._wrote()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.dtype!r} shape={self.shape}>"

    def to_torch(self, device: Any = None, *, copy: bool = True) -> Any:
        """A torch tensor with a copy of the data, on `device` (default: the CPU); torch is
        optional, never a dependency. For a view without a copy on a GPU program, use
        `torch.from_dlpack(x)`. `copy=False` (Quadrants' writable zero-copy view) is a
        ValueError: writes through such a view would escape the generation counters (use
        `view()` to read without a copy, `writable()` to write)."""
        if copy is False:
            raise ValueError(f"{self.name}.to_torch(copy=False): jitrt gives no writable "
                             "zero-copy view (writes through it would escape the generation "
                             "counters); use view() to read, writable() to write")
        import torch
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
        """Declare that the data changed behind jitrt's back (through a foreign view)."""
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
        """DLPack export. On a GPU program: the device memory itself (torch.from_dlpack,
        cupy.from_dlpack; writes through it need `.touch()`). On the CPU: a read-only view
        (consumers that pass `max_version=(1, 0)` or newer, such as `np.from_dlpack`, accept
        it; older consumers get numpy's BufferError: copy first)."""
        device = CURRENT_DEVICE[0]
        if device is not None:
            from . import dlpack
            ptr = device.export_ptr(self)
            return dlpack.export(ptr, self.shape, self.dtype, device.dlpack_device_type,
                                 device.device_id, self)
        return self.view().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device = CURRENT_DEVICE[0]
        if device is not None:
            return device.dlpack_device_type, device.device_id
        return self._data.__dlpack_device__()  # type: ignore[return-value]

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The device memory (GPU programs only: CuPy, torch.as_tensor, numba accept it).
        The data is brought to the device and the stream synchronised first; a consumer's
        writes are seen by later launches and host reads (call `.touch()` after them so that
        caches keyed on the generation see the change)."""
        device = CURRENT_DEVICE[0]
        if device is None or not hasattr(device, "export_ptr"):
            raise AttributeError("__cuda_array_interface__: the current program is not on "
                                 "a GPU (jr.init(arch=jr.cuda))")
        ptr = device.export_ptr(self)
        return {"shape": self.shape, "typestr": self.dtype.np.str, "data": (ptr, False),
                "strides": None, "version": 3, "stream": None}


class FieldElement:
    """One vector/matrix element of a field or ndarray at Python scope (`x[i]`, `s[None]`).

    A view, not a copy: reading it reads the field now (bringing GPU data home as `x[i, k]`
    does) and `e[k] = v`, `e[r, c] = v`, `e.x = v`, `e[k] -= v` write through it (the field's
    generation moves, as with `x[i, k] = v`). An index that leaves dimensions (`m[i][r]` of
    a matrix) gives a view of that part. Arithmetic, `np.asarray(e)`, `print(e)` use its
    current value as a numpy array (`e.to_numpy()`)."""

    __slots__ = ("_buf", "_index")

    def __init__(self, buf: Any, index: tuple[int, ...]) -> None:
        self._buf, self._index = buf, tuple(int(i) for i in index)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._buf.shape[len(self._index):])

    @property
    def n(self) -> int:
        return self.shape[0]

    @property
    def m(self) -> int:
        return self.shape[1] if len(self.shape) > 1 else 1

    def _key(self, key: Any) -> tuple[Any, ...]:
        key = key if isinstance(key, tuple) else (key,)
        shape = self.shape
        if len(key) > len(shape):
            raise IndexError(f"{self._buf.name}{list(self._index)}: an element of shape "
                             f"{shape} takes at most {len(shape)} index(es), got {key!r}")
        for k, (i, n) in enumerate(zip(key, shape)):
            if isinstance(i, slice):
                continue
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
                raise IndexError(f"component index {i!r} is not an integer")
            if not -n <= i < n:
                raise IndexError(f"component index {i} is out of range for an element of "
                                 f"shape {shape}")
        return self._index + tuple(i if isinstance(i, slice) or i >= 0 else i + n
                                   for i, n in zip(key, shape))

    def __getitem__(self, key: Any) -> Any:
        full = self._key(key)
        if any(isinstance(i, slice) for i in full):
            return self._buf._host()[full].copy()
        if len(full) < len(self._buf.shape):
            return FieldElement(self._buf, full)
        return self._buf._host()[full].item()

    def __setitem__(self, key: Any, value: Any) -> None:
        full = self._key(key)
        arr = np.asarray(value)
        part = np.shape(self._buf._host()[full])
        if arr.shape not in ((), part):
            raise ValueError(f"{self._buf.name}: a part of shape {part} cannot take a value "
                             f"of shape {arr.shape}")
        self._buf._host()[full] = arr
        self._buf._wrote()

    def to_numpy(self) -> np.ndarray:
        return np.array(self._buf._host()[self._index])

    def to_list(self) -> list:
        return self.to_numpy().tolist()  # type: ignore[no-any-return]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        return repr(self.to_numpy())

    def __str__(self) -> str:
        return str(self.to_numpy())

    def __eq__(self, other: Any) -> Any:
        return ElementComparison.of(self.to_numpy() == np.asarray(other), "all")

    def __ne__(self, other: Any) -> Any:
        return ElementComparison.of(self.to_numpy() != np.asarray(other), "any")

    __hash__ = None  # type: ignore[assignment]

    def norm(self) -> Any:
        return np.sqrt(np.sum(self.to_numpy() ** 2))

    def dot(self, other: Any) -> Any:
        return np.dot(self.to_numpy(), np.asarray(other))


class ElementComparison(np.ndarray):
    """The element-wise result of comparing a vector/matrix element at Python scope
    (`x[i] == [1, 2]`, `x[i] != y[i]`, `x[i] < 3`): a numpy bool array whose truth value is
    defined, so `assert x[i] == [a, b]` and `if x[i] != v:` test every component. `==`, `<`,
    `<=`, `>`, `>=` are true when they hold for every component; `!=` when any component
    differs (so `a != b` is `not (a == b)`, as for tuples). Numpy operations on it (`~c`,
    `c & d`, `c.all()`, `np.sum(c)`) give plain numpy results, with numpy's rules."""

    _rule: str

    @classmethod
    def of(cls, result: Any, rule: str) -> Any:
        """`result` (a comparison's numpy output) as an ElementComparison; a scalar as is."""
        if not isinstance(result, np.ndarray) or result.ndim == 0:
            return result
        out = result.view(cls)
        out._rule = rule
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self._rule = getattr(obj, "_rule", "all")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        def plain(x: Any) -> Any:
            return x.view(np.ndarray) if isinstance(x, ElementComparison) else x
        if "out" in kwargs:
            kwargs["out"] = tuple(plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*(plain(x) for x in inputs), **kwargs)

    def __bool__(self) -> bool:
        values = self.view(np.ndarray)
        return bool(values.all() if self._rule == "all" else values.any())

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


def _component(k: int) -> property:
    def get(e: FieldElement) -> Any:
        return e[k]

    def put(e: FieldElement, value: Any) -> None:
        e[k] = value
    return property(get, put)


def _numpy_op(name: str) -> Any:
    op = getattr(np.ndarray, name)
    compare = name in ("__lt__", "__le__", "__gt__", "__ge__")

    def method(self: FieldElement, *other: Any) -> Any:
        result = op(self.to_numpy(), *(np.asarray(o) for o in other))
        return ElementComparison.of(result, "all") if compare else result
    method.__name__ = name
    return method


for _k, _c in enumerate("xyzw"):
    setattr(FieldElement, _c, _component(_k))
for _op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
            "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "neg", "pos", "abs",
            "lt", "le", "gt", "ge"):
    setattr(FieldElement, f"__{_op}__", _numpy_op(f"__{_op}__"))


class Field(_Buffer):
    """Global data referenced from kernels by closure: `x = jr.field(jr.f32, shape=(N,))`."""
    __slots__ = ()


class PendingField(Field):
    """A field declared without a shape, waiting for `jr.root....place(x)`. A float one has a
    gradient from the start (pending too): `needs_grad=True` asks for it; otherwise it is
    `implicit` until `place(x.grad)` or `jr.root.lazy_grad()` (see the module docstring)."""
    __slots__ = ()

    def __init__(self, dtype: Any, needs_grad: bool, name: str | None,
                 element_shape: tuple[int, ...] = (), needs_dual: bool = False,
                 derived: bool = False) -> None:
        self.dtype = dtypes.coerce(dtype)
        self.name = name or "field"
        self.named = name is not None
        self.element_shape = element_shape
        self.grad = self.dual = None
        self.implicit = False
        if needs_grad:
            _check_float(self.dtype, "needs_grad", "field", name)
        if not derived and (needs_grad or self.dtype.is_float):
            self.grad = PendingField(self.dtype, False, self.name + ".grad", element_shape,
                                     derived=True)
            self.grad.named = self.named
            self.grad.implicit = not needs_grad
        if needs_dual:
            _check_float(self.dtype, "needs_dual", "field", name)
        if not derived and (needs_dual or self.dtype.is_float):   # as the gradient above
            self.dual = PendingField(self.dtype, False, self.name + ".dual", element_shape,
                                     derived=True)
            self.dual.named = self.named
            self.dual.implicit = not needs_dual

    def __getattr__(self, attr: str) -> Any:
        raise RuntimeError(f"field '{self.name}' has no shape yet: give it one with "
                           f"jr.root.dense(jr.i, n).place({self.name}) (or create it with "
                           "shape=...)")

    def place_with(self, shape: tuple[int, ...]) -> None:
        """Become an ordinary Field of `shape` (plus the element's component dimensions); a
        gradient not placed yet is placed with it, one placed already must match."""
        grad, dual, element = self.grad, self.dual, self.element_shape
        implicit = self.implicit
        Field.__init__(self, self.dtype, shape + element, False,
                       self.name if self.named else None, "field")
        self.__class__ = Field  # type: ignore[assignment]
        self.element_shape, self.implicit = element, implicit
        if isinstance(grad, PendingField):
            grad.place_with(shape)
        if grad is not None:
            if grad.shape != self.shape:
                raise ValueError(f"field '{self.name}' gets shape {self.shape} but its gradient "
                                 f"was placed with shape {grad.shape}: place both alike")
            self.grad = grad
            _grad_fields.append(weakref.ref(self))
        if isinstance(dual, PendingField):
            dual.place_with(shape)
            self.dual = dual
            _dual_buffers.append(weakref.ref(self))


class Ndarray(_Buffer):
    """Data passed to kernels as an argument: `a = jr.ndarray(jr.i32, shape=(N,))`."""
    __slots__ = ("_owner", "readonly")
    _owner: Any                 # what a from_dlpack wrapper keeps alive
    readonly: bool              # a wrapped device array the producer exported read-only

    @classmethod
    def from_dlpack(cls, obj: Any, name: str | None = None) -> "Ndarray":
        """Wrap any DLPack producer (a torch CPU tensor, a numpy array...) without copying.
        The producer keeps its memory; writes it makes itself are not seen by the generation
        counters (call `.touch()` after them)."""
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


_NO_SHAPE: Any = object()


def field(dtype: Any, shape: Any = _NO_SHAPE, needs_grad: bool = False,
          name: str | None = None, needs_dual: bool = False) -> Field:
    """A global array kernels reach by name (a module global or a closure variable).

    Args:
        dtype: a jitrt dtype (`jr.f32`...), a numpy dtype, or `int`/`float`.
        shape: an int or a tuple of ints; `()` for a scalar field, read and written as
            `x[None]`.
        needs_grad: also allocate `x.grad` (float dtypes only), for reverse-mode autodiff.
        name: the name used in error messages (default: the name the kernel source uses).
        needs_dual: also allocate `x.dual` (float dtypes only), for forward-mode autodiff
            (`jr.ad.FwdMode`).

    Raises:
        TypeError: no shape, a non-integer extent, or a dtype jitrt does not know;
            `needs_grad`/`needs_dual` with an integer dtype (`jr.FloatDtypeError`, also a
            RuntimeError as in Taichi).
        ValueError: a negative extent or more than 2**40 elements.

    Example::

        x = jr.field(jr.f32, shape=(1024,), needs_grad=True)
        x.fill(1.0); x[3] = 2.0; x.to_numpy()
    """
    if shape is _NO_SHAPE:
        shape = None                              # placed later: jr.root.dense(...).place(x)
    if hasattr(dtype, "element_field"):           # jr.field(jr.math.vec3, shape=N)
        return dtype.element_field(shape, needs_grad, name,  # type: ignore[no-any-return]
                                   needs_dual=needs_dual)
    if shape is None:
        return track(PendingField(dtype, needs_grad, name, needs_dual=needs_dual))
    return track(Field(dtype, shape, needs_grad, name, "field", needs_dual=needs_dual))


def ndarray(dtype: Any, shape: Any, needs_grad: bool = False, name: str | None = None,
            needs_dual: bool = False) -> Ndarray:
    """An array passed to kernels as an argument (`jr.types.ndarray(...)` parameters).

    Same arguments as `jr.field`. A plain numpy array may be passed where a kernel takes an
    ndarray; a jitrt ndarray adds a generation counter (exact adstack-sizing caches), `.grad`
    with `needs_grad=True`, `.dual` with `needs_dual=True`, and the cheapest launches.
    `jr.ndarray.from_dlpack(obj)` wraps another library's array without copying.

    Example::

        a = jr.ndarray(jr.i32, shape=(N,)); a.from_numpy(np.arange(N, dtype=np.int32))
    """
    if hasattr(dtype, "element_ndarray"):     # jr.ndarray(jr.math.vec3, shape=N)
        return dtype.element_ndarray(shape, needs_grad, name,  # type: ignore[no-any-return]
                                     needs_dual=needs_dual)
    return Ndarray(dtype, shape, needs_grad, name, "ndarray", needs_dual=needs_dual)


ndarray.from_dlpack = Ndarray.from_dlpack  # type: ignore[attr-defined]
