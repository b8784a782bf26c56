"""Cheaper cold compiles (docs/performance.md, "Start-up"): a task whose box test fails only
in launches that fault gets its checked loop as a separate function LLVM does not optimise
(`bounds.fault_only`), and loops where LLVM's unrolling or vectorizing buys nothing carry
metadata that turns it off (`codegen/loop_hints.py`). Results, fault reports and gradients must
be what they were."""
import re

import numpy as np
import pytest

import jitrt as jr

nd = jr.types.ndarray


def module_text(kernel, *args) -> str:
    """The host's LLVM module of `kernel` for these arguments, before optimisation, with the
    adstack sizing functions of a gradient kernel."""
    from jitrt.backends.cpu import cpu_target
    from jitrt.codegen.kernel_module import build_module
    from jitrt.runtime import compiler, program
    from jitrt.runtime.arguments import bind_args, specialize
    prog = program.current()
    params, _, templates, name = specialize(kernel, bind_args(kernel, args, {}), prog.config)
    ctx, kir = compiler.frontend(kernel, params, templates, name, prog.config)
    lowered, layout = compiler.passes(kernel, params, ctx, kir, prog.config,
                                      prog.device.codegen_target)
    module, _, _ = build_module(lowered.tasked, cpu_target(), layout, "jk", lowered.local_types,
                                compiler.codegen_facts(lowered, cpu_target(), 0))
    compiler.add_sizing_functions(module, "jk", lowered, layout, params, cpu_target())
    return str(module)


# the checked copy's definition line carries cold, noinline and optnone (among other
# attributes, e.g. the CPU's flush-to-zero `denormal-fp-math`)
FAULT_ONLY = re.compile(r'define internal void @"\w+_task0_checked"\([^)]*\)(?=[^\n{]*\bcold\b)'
                        r'(?=[^\n{]*\bnoinline\b)(?=[^\n{]*\boptnone\b)')


@jr.kernel
def shifted(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1), k: jr.i32):
    for i in range(y.shape[0]):
        y[i] = x[i + k] * 2.0


@jr.kernel
def guarded(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
    for i in range(y.shape[0]):
        if i > 0:
            y[i] = x[i - 1] + x[i]


@jr.kernel
def repeated(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1), m: jr.i32):
    for i in range(y.shape[0]):
        for _ in range(m):
            y[i] = x[i - 1]


@jr.kernel
def chosen(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
    for i in range(y.shape[0]):
        y[i] = x[i - 1] if i > 0 else 0.0


@jr.kernel
def short_circuit(x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
    for i in range(y.shape[0]):
        if i > 0 and x[i - 1] > 0:
            y[i] = 1.0


@pytest.mark.cpu_only
def test_only_a_box_test_that_means_a_fault_gets_the_unoptimised_copy():
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    assert FAULT_ONLY.search(module_text(shifted, x, y, 0))
    # a box test that fails without a fault (an access under a condition, in a loop that may
    # run no iteration, in one arm of `a if c else b`, right of `and`): the checked loop stays
    # an optimised copy in the task function
    for kernel, args in ((guarded, (x, y)), (repeated, (x, y, 0)), (chosen, (x, y)),
                         (short_circuit, (x, y))):
        text = module_text(kernel, *args)
        assert "_checked" not in text and "optnone" not in text, kernel.qualname


def test_conditional_accesses_outside_the_box_run_the_checked_loop_exactly():
    x = np.arange(1, 9, dtype=np.float32)
    for kernel, want in ((guarded, np.r_[0, x[:-1] + x[1:]]), (chosen, np.r_[0, x[:-1]]),
                         (short_circuit, np.r_[0, np.ones(7)])):
        y = np.zeros(8, np.float32)
        kernel(x, y)
        np.testing.assert_array_equal(y, want.astype(np.float32), err_msg=kernel.qualname)
    y = np.full(8, 5, np.float32)
    repeated(x, y, 0)                      # x[-1] is in the box, but never read
    assert (y == 5).all()
    with pytest.raises(jr.KernelRuntimeError, match="index -1 out of bounds on axis 0 of 'x'"):
        repeated(x, y, 2)
        jr.sync()
    np.testing.assert_array_equal(y[1:], x[:-1])


@pytest.mark.parametrize("k, bad", [(1, 8), (-1, -1)])
def test_the_fault_only_copy_reports_the_index_and_runs_the_other_points(k, bad):
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match=rf"index {bad} out of bounds on axis 0 "
                                                    r"of 'x'"):
        shifted(x, y, k)
        jr.sync()
    good = np.arange(8)[(np.arange(8) + k >= 0) & (np.arange(8) + k < 8)]
    np.testing.assert_array_equal(y[good], x[good + k] * 2)


def test_the_fault_only_copy_adds_its_partial_sums():
    @jr.kernel
    def total(x: nd(dtype=jr.f64, ndim=1), out: nd(dtype=jr.f64, ndim=1), k: jr.i32):
        for i in range(x.shape[0]):
            out[0] += x[i + k]

    x = np.arange(1.0, 1001.0)
    out = np.zeros(1)
    total(x, out, 0)
    assert out[0] == x.sum()
    out[0] = 0
    with pytest.raises(jr.KernelRuntimeError, match="index 1000 out of bounds"):
        total(x, out, 1)
        jr.sync()
    assert out[0] == x[1:].sum()          # the points inside ran; the bad read was skipped


def test_two_dimensional_fault_only_copy():
    @jr.kernel
    def down(a: nd(dtype=jr.f32, ndim=2), out: nd(dtype=jr.f32, ndim=2)):
        for i, j in jr.ndrange(a.shape[0], a.shape[1]):
            out[i, j] = a[i + 1, j]

    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    out = np.zeros_like(a)
    with pytest.raises(jr.KernelRuntimeError, match="index 4 out of bounds on axis 0 of 'a'"):
        down(a, out)
        jr.sync()
    np.testing.assert_array_equal(out[:3], a[1:])


def recurrence_kernels(n: int):
    x = jr.field(jr.f64, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def chain(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    return x, loss, chain


def test_adstack_pair_gradient_matches_finite_differences():
    """The kernel pair the cold-start target is about: its serial loops call libm (no runtime
    unrolling) and its max-reducer loop is scalar."""
    n = 64
    x, loss, chain = recurrence_kernels(n)
    rng = np.random.default_rng(3)
    x0 = rng.uniform(0.1, 1.0, n)
    counts = rng.integers(0, 9, n).astype(np.int32)

    def f(values: np.ndarray) -> float:
        x.from_numpy(values)
        loss[None] = 0
        chain(counts)
        return float(loss[None])

    x.from_numpy(x0)
    loss[None] = 0
    x.grad.fill(0)
    chain(counts)
    loss.grad[None] = 1
    chain.grad(counts)
    grad = x.grad.to_numpy()
    h = 1e-6
    for i in (0, 7, 31, 63):
        up, down = x0.copy(), x0.copy()
        up[i] += h
        down[i] -= h
        assert grad[i] == pytest.approx((f(up) - f(down)) / (2 * h), rel=1e-6, abs=1e-9)


def test_adstack_pair_with_a_short_count_array_reports_it():
    x, loss, chain = recurrence_kernels(16)
    counts = np.full(8, 3, np.int32)          # 8 entries for 16 points
    with pytest.raises(jr.KernelRuntimeError, match="out of bounds on axis 0 of 'cnt'"):
        chain(counts)
        jr.sync()


@pytest.mark.cpu_only
def test_loop_hints_in_the_module():
    n = 16
    x, loss, chain = recurrence_kernels(n)
    counts = np.ones(n, np.int32)
    forward = module_text(chain, counts)
    # the serial sin loop and the chunk loop around it: no runtime unrolling
    assert forward.count('!"llvm.loop.unroll.runtime.disable"') == 1
    assert len(re.findall(r"!llvm\.loop !\d+", forward)) >= 2
    assert FAULT_ONLY.search(forward)
    gradient = module_text(chain.grad, counts)
    assert gradient.count('!"llvm.loop.unroll.runtime.disable"') == 1
    reducer = gradient[gradient.index('define void @"jk_red0_task"'):]
    loop_id = re.search(r"!llvm\.loop (!\d+)", reducer[:reducer.index("\n}")]).group(1)
    entries = re.search(rf"^{loop_id} = !{{ {loop_id}, (!\d+), (!\d+) }}", gradient, re.M)
    hints = {re.search(rf"^{e} = (.*)$", gradient, re.M).group(1) for e in entries.groups()}
    assert hints == {'!{ !"llvm.loop.vectorize.enable", i1 false }',    # a scalar reducer
                     '!{ !"llvm.loop.unroll.disable" }'}

    @jr.kernel
    def saxpy(s: jr.f32, a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            b[i] = s * a[i] + b[i]

    assert "llvm.loop" not in module_text(saxpy, 2.0, np.ones(4, np.float32),
                                          np.ones(4, np.float32))
