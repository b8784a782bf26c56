"""Partials taped in the forward sweep (passes/autodiff.py, `tape_partials`): a math call of
primal values in the adjoint of a stack local's assignment (`v = sin(v)` -> `cos(top(v))`) is
computed beside the assignment in the forward sweep and read back from a stack of its own.
Gradients are checked against central differences in f64 for every taped function, for
partials of two stack locals, for partials under a branch, and the partial's stack is checked
to take its local's capacity."""
import re

import numpy as np
import pytest

import jitrt as jr
from jitrt.passes.autodiff import TAPED

nd = jr.types.ndarray
N = 13


def central_difference(run, x0: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(x0)
    for k in range(len(x0)):
        up, down = x0.copy(), x0.copy()
        up[k] += h
        down[k] -= h
        out[k] = (run(up) - run(down)) / (2 * h)
    return out


def check(kernel, x, loss, cnt, x0, tol=1e-6):
    """d loss / d x by the grad kernel against central differences of the forward kernel."""
    def run(values):
        x.from_numpy(values)
        loss[None] = 0
        kernel(cnt)
        return float(loss[None])
    want = central_difference(run, x0)
    x.from_numpy(x0)
    loss[None] = 0
    x.grad.fill(0)
    kernel(cnt)
    loss.grad[None] = 1
    kernel.grad(cnt)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=tol, atol=tol)


STEPS = {
    "sin": lambda v: jr.sin(v) * 1.1 + 0.1,
    "cos": lambda v: jr.cos(v) * 0.9,
    "tan": lambda v: jr.tan(v * 0.5),
    "exp": lambda v: jr.exp(v * 0.3) - 1.0,
    "log": lambda v: jr.log(v * v + 1.0),
    "tanh": lambda v: jr.tanh(v * 2.0),
    "pow": lambda v: jr.pow(v * v + 0.5, 0.7),
    "asin": lambda v: jr.asin(jr.tanh(v) * 0.9),
    "atan2": lambda v: jr.atan2(v, 1.5),
    "sinh": lambda v: jr.sinh(v * 0.5),
}


@pytest.mark.parametrize("fn", sorted(STEPS))
def test_taped_partials_give_the_gradient(fn):
    jr.init(arch=jr.cpu, offline_cache=False)
    step = STEPS[fn]
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def chain(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = step(v)
            loss[None] += v

    rng = np.random.default_rng(7)
    cnt = rng.integers(0, 5, N).astype(np.int32)
    check(chain, x, loss, cnt, rng.uniform(-0.8, 0.8, N))
    (grad_text,) = jr.debug.kernel_ir(chain, grad=True)
    reverse = grad_text.split("reversed(range")[1]
    if fn in ("log", "atan2"):      # their derivatives are rational: nothing to tape
        assert "$partial" not in grad_text
        return
    # the partial is on a stack of its own, read in the reverse sweep, which calls no libm
    assert re.search(r"top\(stack\d+:v\$partial0\)", reverse)
    assert re.search(r"pop\(stack\d+:v\$partial0\)", reverse)
    assert not any(f"{name}<" in reverse for name in TAPED)


def test_partials_of_two_stack_locals_and_under_a_branch():
    jr.init(arch=jr.cpu, offline_cache=False)
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def coupled(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            u = x[i]
            v = x[i] * 0.5 + 0.2
            for _ in range(cnt[i]):
                u = jr.sin(u * v) + v
                v = jr.exp(u) * 0.3 if u > 0.4 else jr.cos(v) + u * 0.1
            loss[None] += u * v

    rng = np.random.default_rng(8)
    cnt = rng.integers(0, 6, N).astype(np.int32)
    check(coupled, x, loss, cnt, rng.uniform(-0.5, 0.9, N))
    (grad_text,) = jr.debug.kernel_ir(coupled, grad=True)
    assert "u$partial" in grad_text and "v$partial" in grad_text


def test_a_partials_stack_takes_its_locals_capacity():
    jr.init(arch=jr.cpu, offline_cache=False)
    from test_adstack_sizing import evaluate, make_problem
    x, loss, recur = make_problem(N, jr.f64)
    x.from_numpy(np.linspace(0, 1, N))
    cnt = (np.arange(N) % 7).astype(np.int32)
    recur.grad(cnt)
    (info,) = jr.debug.sizing_infos(recur)
    caps = dict(zip(info.stack_names, info.size_exprs))
    assert set(caps) == {"v", "v$partial0"}
    assert caps["v$partial0"] == caps["v"]
    assert evaluate(caps["v"], {"cnt": cnt}) == cnt.max() + 2


def test_partials_of_memory_reads_are_not_taped():
    """A partial that reads memory stays in the reverse sweep: the forward sweep would read it
    where the primal did not (a select's other side may be out of bounds)."""
    jr.init(arch=jr.cpu, offline_cache=False)
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    w = jr.field(jr.f64, shape=(N,))
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def weighted(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v * w[i])
            loss[None] += v

    w.from_numpy(np.linspace(0.5, 1.5, N))
    rng = np.random.default_rng(9)
    cnt = rng.integers(0, 5, N).astype(np.int32)
    check(weighted, x, loss, cnt, rng.uniform(-1, 1, N))
    (grad_text,) = jr.debug.kernel_ir(weighted, grad=True)
    assert "$partial" not in grad_text


def test_gpu_targets_tape_no_partials():
    """A GPU's adstacks are in global memory, where an entry costs more than the math: only
    the CPU target tapes."""
    jr.init(arch=jr.cpu, offline_cache=False)
    from jitrt.backends import nvptx
    from jitrt.runtime import compiler, program
    from jitrt.runtime.arguments import bind_args, specialize
    from test_adstack_sizing import make_problem
    _, _, recur = make_problem(N, jr.f64)
    cnt = np.ones(N, np.int32)
    prog = program.current()
    stacks = {}
    for name, target in (("cpu", prog.device.codegen_target), ("cuda", nvptx.codegen_target())):
        params, _, templates, kname = specialize(recur.grad, bind_args(recur.grad, (cnt,), {}),
                                                 prog.config)
        ctx, kir = compiler.frontend(recur.grad, params, templates, kname, prog.config)
        lowered, _ = compiler.passes(recur.grad, params, ctx, kir, prog.config, target)
        stacks[name] = sorted(s.stack.name for s in lowered.stacks)
    assert stacks == {"cpu": ["v", "v$partial0"], "cuda": ["v"]}
