"""The fast launch path never uses stale argument data, and the worker pool never mixes jobs."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitrt as jr

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_numpy_array_resized_in_place_is_repacked():
    @jr.kernel
    def iota(out: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(out.shape[0]):
            out[i] = i

    a = np.zeros(16, np.float32)
    iota(a)
    a.resize(1 << 18, refcheck=False)     # the buffer moves; the object stays the same
    iota(a)
    np.testing.assert_array_equal(a, np.arange(1 << 18, dtype=np.float32))
    a.shape = (1 << 18,)
    iota(a)
    a.dtype = np.int32                    # same shape, another dtype: now a wrong argument
    try:
        iota(a)
    except jr.KernelArgError as exc:
        assert "'out'" in str(exc) and "int32" in str(exc)
    else:
        raise AssertionError("a reinterpreted numpy array must be rejected")


def test_alternating_parallel_jobs_each_run_every_chunk_once():
    """Jobs of different sizes back to back: a late worker must never run a chunk of the next
    job with the previous job's parameters (or the reverse)."""
    small = jr.ndarray(jr.i32, shape=(2100,))
    big = jr.ndarray(jr.i32, shape=(65536,))

    @jr.kernel
    def inc(o: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in range(o.shape[0]):
            o[i] += 1

    rounds = 1500
    for _ in range(rounds):
        inc(small)
        inc(big)
    assert (small.to_numpy() == rounds).all()
    assert (big.to_numpy() == rounds).all()


def test_launches_from_several_threads_do_not_mix_arguments():
    """The first launches (program creation, compilation) and the steady state, from four
    threads at once: every launch writes its own array with its own scalar."""
    import threading

    jr.reset()

    @jr.kernel
    def fill(a: jr.types.ndarray(dtype=jr.f32, ndim=1), v: jr.f32):
        for i in range(a.shape[0]):
            a[i] = v

    arrays = [jr.ndarray(jr.f32, (1000,)) for _ in range(4)]
    wrong = []

    def work(t: int) -> None:
        for _ in range(200):
            fill(arrays[t], float(t + 1))
            if not (arrays[t].to_numpy() == t + 1).all():
                wrong.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong


# ---- arrays that change under a launch's feet (issue: memory safety) ----------------------

ND = jr.types.ndarray


@jr.kernel
def iota_sum(out: ND(dtype=jr.f32, ndim=1)) -> jr.f32:
    for i in range(out.shape[0]):
        out[i] = i
    total = 0.0
    jr.loop_config(serialize=True)
    for i in range(out.shape[0]):
        total += out[i]
    return total


@jr.kernel
def copy_into(src: ND(dtype=jr.f32, ndim=1), dst: ND(dtype=jr.f32, ndim=1)):
    for i in range(src.shape[0]):
        dst[i] = src[i] * 2


def run_snippet(code: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    """Run `code` from a file in a fresh interpreter (a use-after-free kills only that
    process; kernels need a source file)."""
    script = tmp_path / "snippet.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_bound_launch_follows_a_numpy_array_resized_after_binding(tmp_path):
    proc = run_snippet("""
        import gc
        import numpy as np
        import jitrt as jr
        jr.init(offline_cache=False)

        @jr.kernel
        def iota(out: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(out.shape[0]):
                out[i] = i

        a = np.zeros(16, np.float32)
        b = iota.bind(a)
        a.resize(1 << 20, refcheck=False)     # the buffer moves after binding
        b()
        assert (a == np.arange(1 << 20, dtype=np.float32)).all(), "stale buffer written"
        c = iota.bind(np.zeros(64, np.float32))
        gc.collect()                          # the bound launch keeps its array alive
        c(); c()
        print("ok")
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_same_shape_after_a_moving_resize_is_repacked():
    a = np.zeros(16, np.float32)
    assert iota_sum(a) == sum(range(16))
    a.resize(1 << 20, refcheck=False)
    a.resize(16, refcheck=False)                  # same shape and dtype, another buffer
    a[:] = -1
    assert iota_sum(a) == sum(range(16))
    np.testing.assert_array_equal(a, np.arange(16, dtype=np.float32))


def test_bound_launch_rejects_an_array_reinterpreted_after_binding():
    a = np.zeros(8, np.float32)
    b = iota_sum.bind(a)
    assert b() == sum(range(8))
    a.dtype = np.int32
    with pytest.raises(jr.KernelArgError, match=r"'out'.*int32"):
        b()


def test_read_only_array_rejected_where_written_accepted_where_read():
    ro = np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), np.float32)
    assert not ro.flags.writeable
    with pytest.raises(jr.KernelArgError, match=r"'dst'.*writable.*read-only"):
        copy_into(np.zeros(8, np.float32), ro)
    out = np.zeros(8, np.float32)
    copy_into(ro, out)                              # only read: fine
    np.testing.assert_array_equal(out, np.arange(8) * 2)
    locked = np.zeros(8, np.float32)
    copy_into(ro, locked)                           # the fast path packs it...
    locked.flags.writeable = False                  # ...then it is locked in place
    with pytest.raises(jr.KernelArgError, match=r"'dst'.*read-only"):
        copy_into(ro, locked)
    with pytest.raises(jr.KernelArgError, match=r"'dst'.*writable"):
        copy_into.bind(ro, ro)
    b = copy_into.bind(ro, out)
    with pytest.raises(jr.KernelArgError, match=r"'dst'.*writable"):
        b.set_arg("dst", ro)
    target = np.zeros(8, np.float32)
    b.set_arg("dst", target)
    b()
    np.testing.assert_array_equal(target, np.arange(8) * 2)
    target.flags.writeable = False
    with pytest.raises(jr.KernelArgError, match=r"'dst'.*read-only"):
        b()
    data = bytes(32)
    with pytest.raises(jr.KernelArgError):
        iota_sum(np.frombuffer(data, np.float32))
    assert data == bytes(32), "a bytes object must never change"


class Tagged(np.ndarray):
    """A numpy subclass, as users make them."""


def test_numpy_subclasses_and_memmaps_are_written_in_place(tmp_path):
    sub = np.zeros(10, np.float32).view(Tagged)
    assert iota_sum(sub) == sum(range(10))
    np.testing.assert_array_equal(np.asarray(sub), np.arange(10, dtype=np.float32))
    mm = np.memmap(tmp_path / "mm.bin", dtype=np.float32, mode="w+", shape=(12,))
    assert iota_sum(mm) == sum(range(12))
    mm.flush()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "mm.bin", np.float32),
                                  np.arange(12, dtype=np.float32))
    ro = np.memmap(tmp_path / "mm.bin", dtype=np.float32, mode="r", shape=(12,))
    with pytest.raises(jr.KernelArgError, match="'out'"):
        iota_sum(ro)


def test_a_launcher_refusing_checked_arguments_is_an_error_not_a_recursion(monkeypatch):
    """If the generated launcher ever refuses arguments the slow path accepted (the two
    paths' checks disagree: once, numpy bool arrays on CUDA), the call is a KernelArgError
    naming the kernel, not a RecursionError."""
    from jitrt.runtime import launcher

    @jr.kernel
    def fill_ones(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = 1.0

    a = np.zeros(3, np.float32)
    fill_ones(a)
    real = launcher.handle_for

    def refusing(kernel, values):
        handle = real(kernel, values)
        monkeypatch.setattr(handle, "launcher",
                            lambda kern, *v: launcher.DISPATCH(kern, v, {}))
        return handle
    monkeypatch.setattr(launcher, "handle_for", refusing)
    with pytest.raises(jr.KernelArgError, match="fill_ones: the launcher refused arguments "
                                                "the slow path accepted"):
        launcher.dispatch(fill_ones, (a,), {})
