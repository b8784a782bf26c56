"""`fill` on a GPU program costs one driver call (issue 32): a memset for an element that
repeats a 1-, 2- or 4-byte word, one launch of the device's fill kernel (backends/gpu_fill.py)
for other elements of up to 16 words, and a fill of a number the array was filled with
before replays the prepared call without converting the value again. Counted on the fake
vendor (tests/fakegpu_lib.py, which runs the fill kernel's effect), with the Python work of
a fill counted as jitrt functions entered."""
import sys

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import amdgcn, gpu_fill, nvptx
from jitrt.backends.gpu import GpuDevice

nd = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


@pytest.fixture
def lib(fakegpu_program):
    return fakegpu_program[0]


def jitrt_calls(fn):
    """The jitrt functions (qualified names) entered while `fn()` runs."""
    entered = []

    def profile(frame, event, arg):
        if event == "call" and "/jitrt/" in frame.f_code.co_filename:
            entered.append(frame.f_code.co_qualname)
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return entered


def test_a_repeated_fill_is_its_one_prepared_driver_call(lib):
    x = jr.ndarray(jr.f32, shape=(1024,), needs_grad=True)
    x.grad.fill(0)                       # the first fill of a value: converted, prepared
    lib.calls.clear()
    lib.log.clear()
    entered = jitrt_calls(lambda: x.grad.fill(0))
    # before: 13 jitrt functions (asarray and conversion, fill_data, on_device, data_ptr,
    # the memset plan, the driver's checked call...) around the one memset
    assert entered == ["_Buffer.fill", "DeviceMirror.fill_again",
                       "StreamDriver.fill_call.<locals>.call"]
    assert [name for name, _ in lib.log] == ["fgMemsetD8Async"]
    gen = x.grad.gen
    x.grad.fill(2.5)                     # another value: converted once, then replayed too
    x.grad.fill(2.5)
    assert x.grad.gen == gen + 2
    assert [c[0] for c in lib.calls][-2:] == ["memset", "memset"]
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(1024, 2.5, np.float32))


def test_negative_zero_is_not_the_fill_of_zero(lib):
    x = jr.ndarray(jr.f32, shape=(16,))
    x.fill(0.0)
    x.fill(-0.0)                         # equal to 0.0 as a dict key, not as bytes
    assert np.signbit(x.to_numpy()).all()
    x.fill(0.0)
    assert not np.signbit(x.to_numpy()).any()


@pytest.mark.parametrize("make, value, want", [
    (lambda: jr.ndarray(jr.f64, shape=(1000,)), 1.5, np.full(1000, 1.5)),
    (lambda: jr.Vector.ndarray(3, jr.f32, shape=(3333,)), jr.Vector([1.0, 2.0, -3.0]),
     np.tile(np.float32([1, 2, -3]), (3333, 1))),
    (lambda: jr.Matrix.field(4, 4, jr.f32, shape=(70,)), jr.Matrix(np.arange(16.0).reshape(4, 4)),
     np.tile(np.arange(16, dtype=np.float32).reshape(4, 4), (70, 1, 1))),
], ids=["f64", "vec3", "mat4"])
def test_an_element_repeating_no_word_is_one_launch_of_the_fill_kernel(lib, make, value, want):
    # before: the first element uploaded, then ~log2(n) device-to-device copies (11 calls
    # for 1000 f64)
    x = make()
    x.fill(value)
    lib.calls.clear()
    lib.log.clear()
    x.fill(value)
    assert [c[:2] for c in lib.calls] == [("launch", gpu_fill.NAME)]
    assert [name for name, _ in lib.log] == ["fgLaunchKernel"]
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_a_repeated_vector_fill_replays_its_prepared_call(lib):
    # a value that is no number: converted again (its bytes are the key), but the driver call
    # is not prepared again (the memset plan and the fill kernel's parameters: ~6 us of host
    # time a fill on the H200's host)
    v = jr.Vector.ndarray(3, jr.f32, shape=(5000,))
    v.fill(jr.Vector([1.0, 2.0, -3.0]))
    entered = jitrt_calls(lambda: v.fill(jr.Vector([1.0, 2.0, -3.0])))
    assert "GpuDevice.fill_call" not in entered and "kernel_call" not in entered
    assert [c[:2] for c in lib.calls][-2:] == [("launch", gpu_fill.NAME)] * 2
    v.fill(jr.Vector([4.0, 5.0, 6.0]))                   # another element: prepared anew
    np.testing.assert_array_equal(v.to_numpy(), np.tile(np.float32([4, 5, 6]), (5000, 1)))
    v.fill(jr.Vector([1.0, 2.0, -3.0]))
    np.testing.assert_array_equal(v.to_numpy(), np.tile(np.float32([1, 2, -3]), (5000, 1)))


def test_a_small_array_repeating_no_word_is_one_upload_and_compiles_nothing(lib):
    # a Tape's `loss.grad.fill(1)` of an f64 loss: no fill kernel to build for 8 bytes
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    v = jr.Vector.ndarray(3, jr.f32, shape=(5,))
    lib.calls.clear()
    loss.grad.fill(1)
    v.fill(jr.Vector([1.0, 2.0, -3.0]))
    assert [c[0::2] for c in lib.calls] == [("h2d", 8), ("h2d", 60)]
    assert loss.grad[None] == 1.0 and v[4][2] == -3.0
    assert jr.debug.stats()["module_loads"] == 0


def test_other_element_sizes_are_filled_by_doubling_copies(lib):
    v = jr.Vector.ndarray(3, jr.i8, shape=(2000,))        # 3 bytes: not whole words
    v.fill(jr.Vector([1, 2, 3]))
    big = jr.Matrix.ndarray(5, 5, jr.f32, shape=(50,))    # 25 words: over FILL_WORDS
    lib.calls.clear()
    big.fill(jr.Matrix(np.arange(25.0).reshape(5, 5)))
    assert [c[0::2] for c in lib.calls] == [("h2d", 100)]  # then d2d copies (not recorded)
    np.testing.assert_array_equal(v.to_numpy(), np.tile(np.int8([1, 2, 3]), (2000, 1)))
    np.testing.assert_array_equal(big.to_numpy(),
                                  np.tile(np.arange(25, dtype=np.float32).reshape(5, 5),
                                          (50, 1, 1)))


def test_a_warm_start_loads_the_fill_kernel_from_the_offline_cache(lib, tmp_path,
                                                                  monkeypatch):
    def start():
        jr.init(arch="fakegpu", offline_cache=True, offline_cache_dir=str(tmp_path),
                enable_fallback=False)
        x = jr.ndarray(jr.f64, shape=(4096,))
        x.fill(1.5)
        assert x[4095] == 1.5
    start()                                              # compiles it, saves it
    monkeypatch.setattr(GpuDevice, "compile", lambda self, module: pytest.fail("compiled"))
    start()                                              # a new program: from the cache
    assert lib.images[-1] == lib.images[-2]


@pytest.mark.parametrize("period", range(1, gpu_fill.FILL_WORDS + 1))
def test_the_fill_kernel_is_launched_with_threads_a_multiple_of_the_element(period):
    # each thread writes one word of the element at every stride (the kernel picks it once)
    for total in (1, period, 1000 * period, 10 ** 7):
        for resident in (2048, 132 * 2048, 104 * 2048):
            blocks = gpu_fill.fill_blocks(total, period, resident)
            threads = blocks * gpu_fill.FILL_BLOCK
            assert threads % period == 0
            assert threads >= min(total, resident)
            assert threads < max(total, resident) + period * gpu_fill.FILL_BLOCK


def test_a_fill_wider_than_the_resident_threads_strides_by_whole_elements(lib):
    # vec3: 3 * 300,000 words over the fake device's resident threads (not a multiple of 3)
    # in strides; the fake runs the kernel as the device does, thread by thread
    x = jr.Vector.ndarray(3, jr.f32, shape=(300_000,))
    x.fill(jr.Vector([1.0, 2.0, -3.0]))
    np.testing.assert_array_equal(x.to_numpy(), np.tile(np.float32([1, 2, -3]), (300_000, 1)))


def test_the_fill_kernel_builds_for_both_vendors():
    ptx = nvptx.compile_ptx(gpu_fill.fill_module(nvptx.codegen_target()), 90)
    assert f".entry {gpu_fill.NAME}(" in ptx
    if nvptx.ptxas_path() is not None:
        assert nvptx.assemble(ptx, 90)
    if amdgcn.linker() is not None:
        code = amdgcn.compile_code_object(gpu_fill.fill_module(amdgcn.codegen_target()),
                                          "gfx942")
        assert gpu_fill.NAME in amdgcn.kernel_descriptors(code)


def test_the_ndarray_step_fills_with_three_driver_calls_and_no_conversion(lib):
    # the ndarray form of benchmarks/gpu/bench.py's adstack step: its three fills, in the
    # steady state, are three memsets and three jitrt functions each
    x = jr.ndarray(jr.f32, shape=(256,), needs_grad=True)
    loss = jr.ndarray(jr.f32, shape=(), needs_grad=True)

    def fills():
        loss.fill(0)
        x.grad.fill(0)
        loss.grad.fill(1)
    fills()
    lib.log.clear()
    entered = jitrt_calls(fills)
    assert len(entered) == 9
    assert [name for name, _ in lib.log] == ["fgMemsetD8Async", "fgMemsetD8Async",
                                             "fgMemsetD32Async"]
    assert loss.grad[None] == 1.0 and loss[None] == 0.0
