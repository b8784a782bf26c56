"""Arrays in and out without copies: numpy views of jitrt ndarrays, DLPack both ways, and
foreign array objects (anything exposing `__dlpack__` or `__array_interface__`) as kernel
arguments, written in place. Generation counters stay exact: numpy views are read-only,
`writable()` bumps the generation when its block ends, and a DLPack export (writable, since
torch writes through a read-only one) bumps it when the consumer releases it."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import jitrt as jr

ND = jr.types.ndarray
needs_dlpack_v1 = pytest.mark.skipif(
    not jr.data.DLPACK_WRITABLE,
    reason=f"numpy {np.__version__} imports DLPack read-only and cannot export read-only views")


@jr.kernel
def scale(a: ND(dtype=jr.f32, ndim=1), k: jr.f32):
    for i in range(a.shape[0]):
        a[i] = a[i] * k


class DLPackOnly:
    """An object that offers its memory only through the DLPack protocol."""

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


class InterfaceOnly:
    """An object that offers its memory only through `__array_interface__`."""

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


@pytest.mark.cpu_only     # views are of the host copy; on GPUs the data lives in device memory
@needs_dlpack_v1
def test_numpy_views_share_memory_and_are_read_only():
    a = jr.ndarray(jr.f32, (4,))
    a.from_numpy(np.arange(4, dtype=np.float32))
    v = np.asarray(a)
    assert np.shares_memory(v, a.view()) and not v.flags.writeable
    d = np.from_dlpack(a)
    assert np.shares_memory(d, v) and (d == [0, 1, 2, 3]).all()
    scale(a, 2.0)
    assert (v == [0, 2, 4, 6]).all()             # the view sees the kernel's writes
    with pytest.raises(ValueError):
        v[0] = 1.0
    gen = a.gen
    with a.writable() as w:
        w[0] = 5.0
    assert a.gen == gen + 1 and a[0] == 5.0


@pytest.mark.cpu_only     # the CPU export; GPU exports are tested in test_gpu.py
@needs_dlpack_v1
def test_a_dlpack_export_is_writable_and_its_release_bumps_the_generation():
    """Consumers such as torch write through a read-only DLPack export without a check, so
    the CPU export is writable and the generation moves when the consumer lets it go."""
    import gc
    a = jr.ndarray(jr.f32, (3,))
    gen = a.gen
    d = np.from_dlpack(a)                      # asks for DLPack 1.0 (max_version)
    d[1] = 9.0
    assert a[1] == 9.0 and a.gen == gen        # the same memory; not released yet
    del d
    gc.collect()
    assert a.gen == gen + 1                    # released: caches see the write
    legacy = np.from_dlpack(DLPackLegacy(a))   # an old consumer (no max_version)
    assert np.shares_memory(legacy, a.view()) and a.gen == gen + 1
    del legacy
    gc.collect()
    assert a.gen == gen + 2
    unused = a.__dlpack__(max_version=(1, 0))  # never consumed: nothing was written
    del unused
    gc.collect()
    assert a.gen == gen + 2
    c = np.from_dlpack(a, copy=True)
    c[0] = 5.0
    assert a[0] == 0.0


class DLPackLegacy:
    """A producer seen through a consumer that predates DLPack 1.0 (no max_version)."""

    def __init__(self, arr) -> None:
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__()

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.parametrize("wrap", [pytest.param(DLPackOnly, marks=needs_dlpack_v1),
                                  InterfaceOnly])
def test_foreign_arrays_are_kernel_arguments_written_in_place(wrap):
    data = np.arange(5, dtype=np.float32)
    scale(wrap(data), 3.0)
    np.testing.assert_array_equal(data, np.arange(5) * 3)
    launch = scale.bind(wrap(data), 2.0)
    launch()
    np.testing.assert_array_equal(data, np.arange(5) * 6)


def test_numpy_asarray_view_everywhere():
    a = jr.ndarray(jr.f32, (3,))
    a.fill(2.0)
    v = np.asarray(a)
    assert not v.flags.writeable and (v == 2).all() and np.shares_memory(v, a.view())


def test_memmap_and_subclass_are_arguments(tmp_path):
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(3,))
    mm[:] = 1
    scale(mm, 4.0)
    mm.flush()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "m.bin", np.float32), [4, 4, 4])


@needs_dlpack_v1
def test_from_dlpack_wraps_without_copy():
    base = np.arange(6, dtype=np.float32)
    nd = jr.ndarray.from_dlpack(base)
    scale(nd, 10.0)
    np.testing.assert_array_equal(base, np.arange(6) * 10)
    assert nd.shape == (6,) and nd.dtype is jr.f32
    with pytest.raises(ValueError, match="not C-contiguous"):
        jr.ndarray.from_dlpack(np.arange(6, dtype=np.float32)[::2])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_cpu_tensor_is_an_argument():
    import torch
    t = torch.arange(4, dtype=torch.float32)
    scale(t, 2.0)
    assert t.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_public_api_is_documented_and_typed():
    import pathlib
    missing = [n for n in jr.__all__ if callable(getattr(jr, n))
               and not (getattr(jr, n).__doc__ or "").strip()]
    assert not missing, f"public names without a docstring: {missing}"
    assert (pathlib.Path(jr.__file__).parent / "py.typed").exists()


TYPO = """
import numpy as np
import jitrt as jr
factor = 2.0

@jr.kernel
def scale(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = a[i] * factr

scale(np.ones(3, np.float32))
"""


@pytest.mark.parametrize("when", ["first launch", "wrong argument later"])
def test_errors_reach_the_user_without_jitrt_frames(tmp_path, when):
    import os
    import pathlib
    import subprocess
    import sys
    code = TYPO if when == "first launch" else TYPO.replace("* factr", "* factor") + \
        "scale(np.ones(3, np.float64))\n"
    script = tmp_path / "user.py"
    script.write_text(code)
    root = pathlib.Path(jr.__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(root),
                                   JITRT_CACHE_DIR=str(tmp_path / "c")), timeout=120)
    frames = [line for line in proc.stderr.splitlines() if line.strip().startswith("File ")]
    package = str(pathlib.Path(jr.__file__).resolve().parent)
    assert frames and not [f for f in frames if package in f], proc.stderr
    if when == "first launch":
        assert 'Name "factr" is not defined; did you mean \'factor\'?' in proc.stderr
    else:
        assert "KernelArgValueError" in proc.stderr and "'a'" in proc.stderr   # a KernelArgError


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_field_to_torch_and_from_torch_copy():
    import torch
    f = jr.field(jr.f32, shape=(2, 3))
    f.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = f.to_torch()
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t[1, 2].item() == 5.0
    t += 1                                    # a copy: the field does not change
    assert f[1, 2] == 5.0
    gen = f.gen
    f.from_torch(t * 2)
    assert f.gen == gen + 1 and f[0, 0] == 2.0 and f[1, 2] == 12.0
    if torch.cuda.is_available():
        assert f.to_torch(device="cuda").device.type == "cuda"


HELD_AT_EXIT = """
import jitrt as jr
import torch
jr.init(arch=jr.cpu)
x = jr.field(jr.f32, shape=4)
y = jr.ndarray(jr.f32, shape=4)
t = x.to_torch(copy=False)
u = y.to_torch(copy=False)

class Holder:
    pass

h = Holder()
h.t, h.u = t, u
h.cycle = h                  # collected only in the interpreter's last garbage collection
print("done")
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_zero_copy_views_alive_at_interpreter_exit_do_not_crash_it(tmp_path):
    """A torch view of jitrt memory held in a reference cycle is released in the last garbage
    collection at exit, after jitrt's module globals are gone: its DLPack deleter must still
    find the managed tensor and the callback (it segfaulted, exit status -11, in Genesis)."""
    import os
    import pathlib
    import subprocess
    import sys
    script = tmp_path / "held.py"
    script.write_text(HELD_AT_EXIT)
    root = pathlib.Path(jr.__file__).resolve().parents[1]
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(root),
                                       JITRT_CACHE_DIR=str(tmp_path / "c")), timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr


def test_a_torch_tensor_that_requires_grad_passes_its_gradient(arch):
    torch = pytest.importorskip("torch")
    n = 3

    @jr.kernel
    def total(x: jr.types.ndarray(), y: jr.types.ndarray()):
        for i in x:
            y[0] += x[i] * x[i]

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = torch.zeros(1, requires_grad=True)
    if arch != "cpu":                # a GPU kernel cannot reach the tensor's host .grad
        with pytest.raises(jr.KernelArgError, match="taken .with its .grad. by CPU programs"):
            total(x, y)
        return
    with jr.ad.Tape(loss=y):         # a tensor as the loss: its .grad is seeded
        total(x, y)
    assert y.item() == 14.0 and x.grad.tolist() == [2.0, 4.0, 6.0]
    assert y.grad.tolist() == [1.0]

    @jr.kernel
    def frozen(x: jr.types.ndarray(needs_grad=False), y: jr.types.ndarray()):
        for i in range(n):
            y[0] += x[i] * 2.0

    x = torch.ones(n, requires_grad=True)
    y = torch.zeros(1, requires_grad=True)
    frozen(x, y)
    assert x.grad is not None and y.grad is not None   # allocated as zeros, as Taichi does
    y.grad.fill_(1.0)
    frozen.grad(x, y)
    assert x.grad.tolist() == [0.0, 0.0, 0.0] and y.item() == 6.0
