"""Native launches (native/native_launcher.py, runtime/native_launch.py): the steady state of a
CPU launch runs in native code, and everything else reaches the Python launcher unchanged."""
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import jitrt as jr
from jitrt.runtime import native_launch

pytestmark = pytest.mark.cpu_only
ROOT = pathlib.Path(__file__).resolve().parents[1]
ND = jr.types.ndarray


def is_native(kernel_or_bound) -> bool:
    return type(type(kernel_or_bound).__call__).__name__ == "builtin_function_or_method"


@jr.kernel
def axpy(a: jr.f32, n: jr.i32, x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i] + n


def test_layout_is_measured_on_cpython():
    assert native_launch.layout() is not None


def test_steady_state_is_native_and_matches_numpy():
    x = jr.ndarray(jr.f32, 8)
    y = jr.ndarray(jr.f32, 8)
    x.from_numpy(np.arange(8, dtype=np.float32))
    axpy(2.0, 1, x, y)
    assert is_native(axpy)
    gen = y.gen
    for _ in range(5):
        axpy(2.0, 1, x, y)
    np.testing.assert_allclose(y.to_numpy(), 6 * (2 * np.arange(8) + 1))
    assert y.gen == gen + 5                 # the write set's generations move per launch
    assert jr.debug.stats()["launches"] == 6
    axpy(3, 0, x, y)                        # an int for a float parameter is converted
    np.testing.assert_allclose(y.to_numpy(), 6 * (2 * np.arange(8) + 1) + 3 * np.arange(8))


def test_everything_else_takes_the_python_launcher():
    x = jr.ndarray(jr.f32, 4)
    y = jr.ndarray(jr.f32, 4)
    axpy(1.0, 0, x, y)
    ynp = np.zeros(4, np.float32)
    axpy(1.0, 2, x, ynp)                    # a numpy array: re-checked in Python every time
    axpy(1.0, 2, x, ynp)
    np.testing.assert_array_equal(ynp, [4, 4, 4, 4])
    axpy(1.0, n=1, x=x, y=y)                # keywords
    axpy(np.float32(1.0), np.int32(1), x, y)   # numpy scalars
    axpy(1.0, True, x, y)                   # a bool for an int
    np.testing.assert_array_equal(y.to_numpy(), [3, 3, 3, 3])
    with pytest.raises(jr.KernelArgError, match="'n'"):
        axpy(1.0, 1 << 40, x, y)            # out of the i32 range
    with pytest.raises(jr.KernelArgError, match="'n'"):
        axpy(1.0, 1.5, x, y)
    with pytest.raises(jr.KernelArgError, match="'a'"):
        axpy("1", 1, x, y)
    with pytest.raises(TypeError):
        axpy(1.0, 1, x)
    with pytest.raises(TypeError):
        axpy(1.0, 1, x, y, y)
    other = jr.ndarray(jr.f32, 4)
    axpy(1.0, 0, x, other)                  # another array: repacked, then native again
    axpy(1.0, 0, x, other)
    np.testing.assert_array_equal(y.to_numpy(), [3, 3, 3, 3])
    assert jr.debug.stats()["launches"] == 8


def test_fault_is_reported_and_the_lock_released():
    @jr.kernel
    def shifted(x: ND(dtype=jr.f32, ndim=1), k: jr.i32):
        for i in range(x.shape[0]):
            x[i + k] = 1.0

    x = jr.ndarray(jr.f32, 4)
    shifted(x, 0)
    assert is_native(shifted)
    with pytest.raises(jr.KernelRuntimeError, match="index 4 out of bounds on axis 0"):
        shifted(x, 1)
    shifted(x, 0)                           # the launch lock was released by the fault
    done = []
    t = threading.Thread(target=lambda: done.append(shifted(x, 0)))
    t.start()
    t.join(timeout=30)
    assert done == [None]


@pytest.mark.parametrize("dtype,value", [(jr.f32, 1.5), (jr.f64, -2.25), (jr.i32, -7),
                                         (jr.i64, -(1 << 40)), (jr.u8, 200), (jr.u32, 1 << 31)])
def test_scalar_returns(dtype, value):
    @jr.kernel
    def give(v: dtype) -> dtype:
        return v

    assert give(value) == value
    assert give(value) == value and is_native(give)
    assert type(give(value)) is (float if dtype.is_float else int)


def test_templates_fields_and_bound_launches():
    f = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def fill(t: jr.template(), v: jr.f32):
        for i in range(4):
            t[i] = v

    fill(f, 2.0)
    gen = f.gen
    fill(f, 3.0)
    assert is_native(fill) and f.gen == gen + 1
    g = jr.field(jr.f32, shape=(4,))
    fill(g, 4.0)                            # another template value: another specialization
    np.testing.assert_array_equal(f.to_numpy(), [3] * 4)
    np.testing.assert_array_equal(g.to_numpy(), [4] * 4)

    y = jr.ndarray(jr.f32, 4)
    x = jr.ndarray(jr.f32, 4)
    x.fill(1.0)
    bound = axpy.bind(2.0, 0, x, y)
    assert is_native(bound)
    gen = y.gen
    bound()
    bound()
    assert y.gen == gen + 2
    np.testing.assert_array_equal(y.to_numpy(), [4] * 4)
    bound.set_arg("a", 1.0)
    bound()
    np.testing.assert_array_equal(y.to_numpy(), [5] * 4)
    with pytest.raises(TypeError):
        bound(1)
    held = axpy.bind(2.0, 0, x, np.zeros(4, np.float32))
    assert not is_native(held)              # a bound numpy array is re-checked per call


def test_tape_records_native_kernels():
    x = jr.field(jr.f32, shape=(4,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def square(x: jr.template(), loss: jr.template()):
        for i in range(4):
            loss[None] += x[i] * x[i]

    x.from_numpy(np.arange(4, dtype=np.float32))
    square(x, loss)
    with jr.ad.Tape(loss=loss):
        square(x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4))


def test_threads_launch_in_turn():
    y = jr.ndarray(jr.i64, 1)

    @jr.kernel
    def bump(y: ND(dtype=jr.i64, ndim=1)):
        for _ in range(1):
            y[0] += 1

    bump(y)

    def work():
        for _ in range(2000):
            bump(y)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert y.to_numpy()[0] == 8001
    assert jr.debug.stats()["launches"] == 8001


def test_switched_off_by_the_environment(tmp_path):
    code = textwrap.dedent("""
        import jitrt as jr
        @jr.kernel
        def one(x: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(x.shape[0]):
                x[i] = 1.0
        x = jr.ndarray(jr.f32, 2)
        one(x)
        print(type(type(one).__call__).__name__, x.to_numpy().tolist())
    """)
    script = tmp_path / "one.py"
    script.write_text(code)
    env = dict(os.environ, JITRT_NATIVE_LAUNCH="0", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["function", "[1.0,", "1.0]"]


def test_native_and_python_launches_of_one_kernel_from_two_threads():
    """A numpy array takes the Python launcher, which releases the GIL while the kernel runs;
    a native launch of the same kernel (same context buffer) must wait for it."""
    @jr.kernel
    def add(y: ND(dtype=jr.i64, ndim=1)):
        for i in range(y.shape[0]):
            y[i] += 1

    nd = jr.ndarray(jr.i64, 4096)
    host = np.zeros(4096, np.int64)
    add(nd)

    def work(arr):
        for _ in range(3000):
            add(arr)

    threads = [threading.Thread(target=work, args=(a,)) for a in (nd, host, nd, host)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (nd.to_numpy() == 6001).all() and (host == 6000).all()


def test_numpy_arrays_changed_in_place_are_rechecked():
    """A numpy argument identical to the last one launches natively only while its data
    pointer, dtype, flags and shape are unchanged."""
    @jr.kernel
    def iota(out: ND(dtype=jr.f32, ndim=1)):
        for i in range(out.shape[0]):
            out[i] = i

    a = np.zeros(8, np.float32)
    iota(a)
    iota(a)
    a.resize(16, refcheck=False)            # moved and longer
    iota(a)
    np.testing.assert_array_equal(a, np.arange(16))
    a.flags.writeable = False               # locked in place: the kernel writes it
    with pytest.raises(jr.KernelArgError, match="writable"):
        iota(a)
    a.flags.writeable = True
    iota(a)
    a.shape = (4, 4)                        # reshaped in place: wrong ndim now
    with pytest.raises(jr.KernelArgError, match="'out'"):
        iota(a)
    a.shape = (16,)
    a.dtype = np.int32                      # reinterpreted in place
    with pytest.raises(jr.KernelArgError, match="int32"):
        iota(a)
    a.dtype = np.float32
    a[:] = 0
    iota(a)
    np.testing.assert_array_equal(a, np.arange(16))


@jr.kernel
def scaled(x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=1), k: jr.f32 = 2.0,
           shift: jr.template() = 0):
    for i in range(x.shape[0]):
        y[i] = k * x[i] + shift


def test_keyword_calls_take_the_fast_path(monkeypatch):
    """A call with keyword arguments is made again positionally (defaults filled) and taken
    by the native launcher: after the first call no launch binds its arguments in the slow
    path; one with several specializations goes through the router the same way. What the
    kernel computes is what the positional call computes."""
    from jitrt.runtime import launcher
    bound = []
    original = launcher.bind_args
    monkeypatch.setattr(launcher, "bind_args", lambda *a: bound.append(1) or original(*a))
    x, y = jr.ndarray(jr.f32, 4), jr.ndarray(jr.f32, 4)
    x.from_numpy(np.arange(4, dtype=np.float32))
    scaled(x, y, k=3.0)
    assert len(bound) == 1 and is_native(scaled)
    for k in (4.0, 5.0):
        scaled(x, k=k, y=y)
    assert len(bound) == 1
    np.testing.assert_allclose(y.to_numpy(), 5.0 * np.arange(4))
    scaled(x, y, shift=1)                        # a second specialization: the router
    scaled(x, y, shift=0, k=1.0)
    scaled(y=y, x=x, shift=1)
    assert len(bound) == 2
    np.testing.assert_allclose(y.to_numpy(), 2.0 * np.arange(4) + 1)
    with pytest.raises(jr.KernelArgError, match="Multiple values for argument 'x'"):
        scaled(x, y, x=x)
    with pytest.raises(jr.KernelArgError, match="Unexpected argument 'z'"):
        scaled(x, y, z=1)


def python_frames(call) -> list[str]:
    """The generated Python launchers' frames `call()` entered (a native launch: none)."""
    seen = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith("<jitrt"):
            seen.append(frame.f_code.co_filename)
    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_a_bool_for_an_integer_parameter_is_launched_natively():
    """`True`/`False` for an integer parameter: 1 and 0, in the native launcher (Genesis passes
    `write_L=True` to an `int` parameter at every step); for a float one: the Python launcher,
    the same value as before."""
    x, y = jr.ndarray(jr.f32, 4), jr.ndarray(jr.f32, 4)
    axpy(1.0, 0, x, y)
    assert python_frames(lambda: axpy(1.0, True, x, y)) == []
    assert python_frames(lambda: axpy(1.0, False, x, y)) == []
    np.testing.assert_array_equal(y.to_numpy(), [1, 1, 1, 1])
    assert python_frames(lambda: axpy(True, 1, x, y))      # a float parameter: Python
    np.testing.assert_array_equal(y.to_numpy(), [2, 2, 2, 2])
