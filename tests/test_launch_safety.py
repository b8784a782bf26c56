"""The fast launch path never uses stale argument data, and the worker pool never mixes jobs."""
from __future__ import annotations

import numpy as np

import jitrt as jr


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
