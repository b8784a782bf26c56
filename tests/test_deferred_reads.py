"""CUDA's code for a thread's inner loops, without a GPU (the LLVM IR jitrt emits for the
NVPTX target, and LLVM's PTX for it).

`TargetTraits.deferred_reads`: in a loop of unknown trip count that only computes, a read
whose check depends on data loads the module's zero sink when outside its array, and its
failure is tested at the loop's end; elsewhere reads check at once. `loop_hints.UNROLL_BY_4`:
such a loop is unrolled by four. `codegen/loop_versions.py`: an inner loop that computes and
stores runs a copy without its checks when a test before it proves every index inside. What
they do on a device: tests/test_gpu.py.
"""
import dataclasses

import numpy as np
import pytest

import jitrt as jr
from test_codegen_targets import module_text_for, nvptx_module_text

pytestmark = pytest.mark.cpu_only
nd = jr.types.ndarray


def without_deferred_reads():
    from jitrt.backends import nvptx
    target = nvptx.codegen_target()
    return dataclasses.replace(target, traits=dataclasses.replace(target.traits,
                                                                  deferred_reads=False))


@jr.kernel
def gather(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
           out: nd(dtype=jr.f32, ndim=1)):
    for c in range(1):
        s = 0.0
        for k in range(out.shape[0]):
            s += a[idx[k]] * 2.0
        out[c] = s


@jr.kernel
def gather_store(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
                 out: nd(dtype=jr.f32, ndim=1)):
    for c in range(1):
        for k in range(out.shape[0]):
            out[k] = a[idx[k]] * 2.0


@jr.kernel
def gather_once(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1),
                out: nd(dtype=jr.f32, ndim=1)):
    for k in range(out.shape[0]):
        out[k] = a[idx[k]] * 2.0


@jr.kernel
def envelope(pos: nd(dtype=jr.i32, ndim=1), didx: nd(dtype=jr.i32, ndim=2),
             count: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.i32, ndim=1)):
    for c in range(out.shape[0]):
        m = 100
        for j in range(count[c]):
            m = jr.min(m, pos[didx[c, j]])
        out[c] = m


@jr.kernel
def hessian(active: nd(dtype=jr.i32, ndim=1), jac: nd(dtype=jr.f32, ndim=2),
            first: nd(dtype=jr.i32, ndim=1), out: nd(dtype=jr.f32, ndim=2), rows: jr.i32):
    for c in range(first.shape[0]):
        i_c = first[c]
        for d in range(jac.shape[1]):
            h = 0.0
            for r in range(rows):
                i_cr = i_c + r
                if active[i_cr]:
                    h += jac[i_cr, d] * jac[i_cr, d]
            out[c, d] = h


@jr.kernel
def stores_in_loop(a: nd(dtype=jr.f32, ndim=1), n: jr.i32):
    for c in range(1):
        for j in range(n):
            a[j] = a[j] + 1.0


@jr.kernel
def atomics_in_loop(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1), n: jr.i32):
    for c in range(1):
        for j in range(n):
            a[idx[j]] += 1.0


def args_envelope():
    return (np.zeros(6, np.int32), np.zeros((3, 4), np.int32), np.zeros(3, np.int32),
            np.zeros(3, np.int32))


def args_hessian():
    return (np.zeros(8, np.int32), np.zeros((8, 3), np.float32), np.zeros(2, np.int32),
            np.zeros((2, 3), np.float32), 4)


def test_a_read_indexed_by_data_loads_the_sink_and_is_tested_at_the_loops_end():
    """`a[idx[k]]` in a thread's inner loop that only computes: its check selects the sink
    instead of branching; the loop's end is followed by the deferred test, whose failing arm
    records and ends the thread. Outside such a loop (in a task's loop, in a loop that
    stores), or without `deferred_reads`, the read branches to its own failing arm."""
    args = (np.ones(4, np.float32), np.zeros(3, np.int32), np.zeros(3, np.float32))
    for kernel in (gather_once, gather_store):
        text = nvptx_module_text(kernel, *args)
        assert "jitrt.read_sink" not in text and "deferred_out_of_bounds" not in text
    text = nvptx_module_text(gather, *args)
    assert '@"jitrt.read_sink"' in text and "deferred_out_of_bounds" in text
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("deferred_out_of_bounds"))
    arm = lines[start + 1:next(k for k in range(start + 1, len(lines))
                               if not lines[k].startswith(" "))]
    assert any('call void @"jitrt_record_fault"' in x for x in arm)
    assert any('"exit;"' in x for x in arm)
    plain = module_text_for(gather, without_deferred_reads(), *args)
    assert "jitrt.read_sink" not in plain and "deferred_out_of_bounds" not in plain


def test_inner_loops_that_only_compute_and_store_are_versioned_and_unrolled_by_four():
    """The Hessian's inner loop (affine reads, a data-independent test) gets a copy without
    checks behind one test, and its checked copy, which runs only where an index leaves, is
    not unrolled; the copy without checks and the envelope's gather loop, of unknown trip
    counts, carry the unroll-by-4 hint; so does the copy without checks of a loop that
    stores at affine indices; a loop with an atomic gets neither."""
    text = nvptx_module_text(hessian, *args_hessian())
    assert "for_r_unchecked" in text and "for_r_checked" in text
    assert '!"llvm.loop.unroll.count", i32 4' in text
    assert '!"llvm.loop.unroll.disable"' in text       # the checked copy: kept small
    text = nvptx_module_text(envelope, *args_envelope())
    assert "for_j_unchecked" not in text                # its gather stays checked (deferred)
    assert '!"llvm.loop.unroll.count", i32 4' in text
    text = nvptx_module_text(stores_in_loop, np.zeros(4, np.float32), 3)
    assert "for_j_unchecked" in text and '!"llvm.loop.unroll.count", i32 4' in text
    text = nvptx_module_text(atomics_in_loop, np.zeros(4, np.float32), np.zeros(4, np.int32), 3)
    assert "for_j_unchecked" not in text and "llvm.loop.unroll.count" not in text
    assert "jitrt.read_sink" not in text


def test_gpu_code_of_such_loops_compiles_without_llvm_warnings(capfd):
    """LLVM warns ("loop not unrolled") when it cannot honour an unroll hint; the hinted
    loops have one exit, so it never does."""
    from jitrt.backends import nvptx
    if nvptx.libdevice_path() is None:
        pytest.skip("no libdevice (pip install 'jitrt[cuda]')")

    @jr.kernel
    def shapes(a: nd(dtype=jr.f32, ndim=1), idx: nd(dtype=jr.i32, ndim=1), n: jr.i32):
        for c in range(2):
            s = 0.0
            for j in range(n):
                if j % 3 == 0:
                    continue
                s += a[idx[j]] * jr.sin(a[j])
            t = 0
            for j in range(c, n):
                t = jr.max(t, idx[idx[j]])
            a[c] = s + t

    capfd.readouterr()
    for kernel, args in ((gather, (np.ones(4, np.float32), np.zeros(3, np.int32),
                                   np.zeros(3, np.float32))),
                         (envelope, args_envelope()), (hessian, args_hessian()),
                         (shapes, (np.ones(8, np.float32), np.zeros(8, np.int32), 5))):
        assert jr.debug.gpu_asm(kernel, *args, arch="cuda")
    assert "loop not unrolled" not in capfd.readouterr().err
