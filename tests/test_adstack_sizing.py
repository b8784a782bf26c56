"""The adstack sizing service as a user sees it: sizing infos, max-reducers, errors, overflow.

Capacities are checked two ways: by evaluating the printed SizeExpr on the launch's data with
an independent Python evaluator (it must equal the pushes on the longest path plus the initial
entry), and by forcing `ad_stack_size` one below / at that size and watching the launch
overflow / succeed. Bounds outside the sizing grammar must fail at compile time at the loop's
line unless `ad_stack_size` is set; overflow must raise once, name kernel, task and registry id,
and leave the program usable.
"""
import re
from pathlib import Path

import numpy as np
import pytest

import jitrt as jr
from jitrt.ir import sizeexpr as se
from jitrt.runtime.registry import fnv1a64_fold32

nd = jr.types.ndarray

N = 32
CLOSE = {"rtol": 1e-10, "atol": 1e-12}


def line_of(marker: str) -> int:
    """The 1-based line of this file that carries `marker` in a comment."""
    lines = Path(__file__).read_text().splitlines()
    (found,) = [k + 1 for k, text in enumerate(lines) if text.rstrip().endswith("# " + marker)]
    return found


def evaluate(e: se.SizeExpr, arrays: dict, env: dict | None = None) -> int:
    """A SizeExpr's value on host data: the oracle the compiled sizing code must agree with."""
    env = env or {}
    if isinstance(e, se.Const):
        return e.value
    if isinstance(e, se.BoundVar):
        return env[e.name]
    if isinstance(e, se.ScalarArg):
        return arrays[e.name]
    if isinstance(e, se.NdarrayShape):
        return arrays[e.name].shape[e.axis]
    if isinstance(e, (se.FieldLoad, se.NdarrayRead)):
        arr = arrays[e.name]
        idx = tuple(evaluate(i, arrays, env) for i in e.indices)
        inside = all(0 <= k < s for k, s in zip(idx, arr.shape))
        return int(arr[idx]) if inside else 0
    if isinstance(e, se.MaxOverRange):
        lo, hi = evaluate(e.begin, arrays, env), evaluate(e.end, arrays, env)
        return max((evaluate(e.body, arrays, {**env, e.var: k}) for k in range(lo, hi)),
                   default=0)
    a, b = evaluate(e.a, arrays, env), evaluate(e.b, arrays, env)
    return {se.Add: a + b, se.Sub: max(a - b, 0), se.Mul: a * b, se.Max: max(a, b),
            se.Min: min(a, b)}[type(e)]


def sin_recurrence(xv, cnt):
    """v -> sin(v) * 1.1 + 0.1 applied cnt[i] times, and d v / d x."""
    v, dv = xv.astype(np.float64), np.ones(len(xv))
    for k in range(int(cnt.max(initial=0))):
        live = k < cnt
        v, dv = np.where(live, np.sin(v) * 1.1 + 0.1, v), np.where(live, dv * np.cos(v) * 1.1,
                                                                    dv)
    return v, dv


def make_problem(n=N, dtype=jr.f64):
    x = jr.field(dtype, shape=(n,), needs_grad=True)
    loss = jr.field(dtype, shape=(), needs_grad=True)

    @jr.kernel
    def recur(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    return x, loss, recur


def run_grad(kernel, x, loss, *args):
    """Clear x.grad, seed loss.grad = 1 and launch the grad kernel."""
    x.grad.fill(0)
    loss.grad[None] = 1.0
    kernel.grad(*args)


def stack_of(info, name):
    names = [s.split(".")[-1] for s in info.stack_names]
    return info.size_exprs[names.index(name)]


# ---- sizing infos -------------------------------------------------------------------------------

def test_sizing_info_records(rng):
    x, _, recur = make_problem()
    x.from_numpy(rng.uniform(-1, 1, N))
    cnt = rng.integers(0, 9, N).astype(np.int32)
    assert jr.debug.sizing_infos(recur) == ()          # nothing compiled yet
    recur.grad(cnt)
    (info,) = jr.debug.sizing_infos(recur)
    assert info.task_id_in_kernel == 0
    assert "recur" in info.kernel_name and ".grad" in info.kernel_name
    assert info.registry_id == fnv1a64_fold32(info.kernel_name, 0)
    assert info.registry_id == jr.debug.registry_id(info.kernel_name, 0)
    cap = stack_of(info, "v")
    text = se.text(cap)
    assert text.startswith(f"max_{{i in [0, {N})}}") and "cnt[i]" in text
    # initial entry + `v = x[i]` + one push per iteration of the longest loop
    assert evaluate(cap, {"cnt": cnt}) == cnt.max() + 2
    assert len(info.max_reducer_specs) == 1
    (spec,) = info.max_reducer_specs
    assert se.is_closed(spec) and spec in se.closed_reductions(cap)
    assert jr.debug.sizing_infos(recur, grad=False) == ()  # the primal kernel has no stacks


def test_constant_bound_gives_constant_size_and_no_reducer(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def fixed():
        for i in x:
            v = x[i]
            for _ in range(5):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    jr.debug.reset_max_reducer_dispatch_count()
    with jr.ad.Tape(loss=loss):
        fixed()
    (info,) = jr.debug.sizing_infos(fixed)
    assert stack_of(info, "v") == se.Const(7) and se.text(stack_of(info, "v")) == "7"
    assert info.max_reducer_specs == ()
    fixed.grad()
    assert jr.debug.max_reducer_dispatch_count() == 0
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * sin_recurrence(xv, np.full(N, 5))[1],
                               **CLOSE)


def test_capacity_with_scalar_argument_and_shape(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def k(a: nd(dtype=jr.i32, ndim=1), extra: jr.i32):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[i] + extra):
                v = v * 0.5 + 1.0
            if a[i] > 3:
                for _ in range(a.shape[0]):
                    v = v * 0.5
            loss[None] += v

    a = rng.integers(0, 7, N).astype(np.int32)
    k.grad(a, 3)
    (info,) = jr.debug.sizing_infos(k)
    cap = stack_of(info, "v")
    text = se.text(cap)
    assert "$extra" in text and "a.shape[0]" in text
    longest = max(1 + a[i] + 3 + (N if a[i] > 3 else 0) for i in range(N))
    assert evaluate(cap, {"a": a, "extra": 3}) == longest + 1


def test_max_reducer_dispatch_count_follows_data_changes(rng):
    x, loss, recur = make_problem()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cnt = jr.ndarray(jr.i32, shape=(N,))
    cv = rng.integers(0, 6, N).astype(np.int32)
    cnt.from_numpy(cv)
    jr.debug.reset_max_reducer_dispatch_count()
    recur(cnt)                                   # forward launches never size stacks
    assert jr.debug.max_reducer_dispatch_count() == 0
    recur.grad(cnt)
    (info,) = jr.debug.sizing_infos(recur)
    specs = len(info.max_reducer_specs)
    assert specs == 1 and jr.debug.max_reducer_dispatch_count() == specs
    assert jr.debug.stats()["max_reducer_dispatches"] == specs

    cv[3] = 25                                   # longer loop: the capacity must follow
    cnt.from_numpy(cv)
    run_grad(recur, x, loss, cnt)
    assert jr.debug.max_reducer_dispatch_count() == 2 * specs
    np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, cv)[1], **CLOSE)
    jr.debug.reset_max_reducer_dispatch_count()
    assert jr.debug.max_reducer_dispatch_count() == 0


def test_two_tasks_get_distinct_registry_ids(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def two(a: nd(dtype=jr.i32, ndim=1), b: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = v * 0.9 + 0.1
            loss[None] += v
        for i in x:
            u = x[i]
            for _ in range(b[i]):
                u = jr.sin(u)
            loss[None] += u

    a = rng.integers(0, 5, N).astype(np.int32)
    b = rng.integers(0, 9, N).astype(np.int32)
    two.grad(a, b)
    infos = jr.debug.sizing_infos(two)
    assert len(infos) == 2
    assert len({i.registry_id for i in infos}) == 2
    assert len({i.task_id_in_kernel for i in infos}) == 2
    for info in infos:
        assert info.registry_id == jr.debug.registry_id(info.kernel_name, info.task_id_in_kernel)
        ((name, cap),) = [(n, e) for n, e in zip(info.stack_names, info.size_exprs)
                          if n.split(".")[-1] in ("u", "v")]
        data = b if name.split(".")[-1] == "u" else a
        assert evaluate(cap, {"a": a, "b": b}) == data.max() + 2


@pytest.mark.parametrize("dtype,values", [
    (jr.i8, [-5, 0, 3, 100]), (jr.u8, [0, 3, 200]), (jr.i16, [-300, 5, 40]),
    (jr.i64, [-(1 << 40), 7, 33]), (jr.u32, [0, 9, 50]), (jr.u64, [0, 9, 50])])
def test_bound_arrays_of_every_integer_dtype(dtype, values, rng):
    """Loads in the sizing code widen like the kernel's: sign- or zero-extended, negatives
    counting as empty loops."""
    x, loss = (jr.field(jr.f64, shape=(16,), needs_grad=True), jr.field(jr.f64, shape=(),
                                                                        needs_grad=True))
    xv = rng.uniform(-1, 1, 16)
    x.from_numpy(xv)

    @jr.kernel
    def recur(c: nd(dtype=dtype, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    cnt = np.resize(np.array(values, dtype.np), 16)
    rng.shuffle(cnt)
    run_grad(recur, x, loss, cnt)
    wide = cnt.astype(np.int64)
    np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, wide)[1], **CLOSE)
    (info,) = jr.debug.sizing_infos(recur)
    assert evaluate(stack_of(info, "v"), {"c": wide}) == max(wide.max(), 0) + 2


def test_each_specialization_has_its_own_sizing_info(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def recur(cnt: nd(ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = v * 0.5
            loss[None] += v

    recur.grad(rng.integers(0, 5, N).astype(np.int32))
    recur.grad(rng.integers(0, 5, N).astype(np.int64))
    infos = jr.debug.sizing_infos(recur)
    assert len(infos) == 2
    assert len({i.kernel_name for i in infos}) == 2 and len({i.registry_id for i in infos}) == 2
    assert any("i64" in i.kernel_name for i in infos)


# ---- sizes follow the data (caches are validated, never trusted) ------------------------------

def check_grad(kernel, x, loss, xv, expect_counts, *args):
    """A grad launch that would overflow (or be wrong) if the capacity were stale."""
    run_grad(kernel, x, loss, *args)
    np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, expect_counts)[1], **CLOSE)


def test_sizes_follow_ndarray_writes_from_host_and_kernels(rng):
    x, loss, recur = make_problem()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cv = rng.integers(0, 3, N).astype(np.int32)
    cnt = jr.ndarray(jr.i32, shape=(N,))
    cnt.from_numpy(cv)

    @jr.kernel
    def bump(c: nd(dtype=jr.i32, ndim=1), by: jr.i32):
        for i in range(c.shape[0]):
            c[i] = c[i] + by

    check_grad(recur, x, loss, xv, cv, cnt)
    jr.debug.reset_max_reducer_dispatch_count()
    check_grad(recur, x, loss, xv, cv, cnt)          # unchanged data: served from a cache
    assert jr.debug.max_reducer_dispatch_count() == 0
    cnt[4] = 20                                      # host element write
    cv[4] = 20
    check_grad(recur, x, loss, xv, cv, cnt)
    assert jr.debug.max_reducer_dispatch_count() == 1
    bump(cnt, 9)                                     # a kernel that writes the bound array
    check_grad(recur, x, loss, xv, cv + 9, cnt)
    other = jr.ndarray(jr.i32, shape=(N,))           # another allocation, same shape
    other.from_numpy(cv + 15)
    check_grad(recur, x, loss, xv, cv + 15, other)
    check_grad(recur, x, loss, xv, cv + 9, cnt)


def test_sizes_follow_numpy_arrays_changed_in_place(rng):
    x, loss, recur = make_problem()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cv = rng.integers(0, 3, N).astype(np.int32)
    check_grad(recur, x, loss, xv, cv, cv)
    cv[9] = 23                                       # same object, new content
    check_grad(recur, x, loss, xv, cv, cv)
    cv[:] = 0
    cv[N - 1] = 30
    check_grad(recur, x, loss, xv, cv, cv)


def test_sizes_follow_writes_through_a_zero_copy_torch_view(rng):
    """`to_torch(copy=False)` (Quadrants' zero-copy view, which Genesis keeps and writes
    through): the writes move no generation, so the sizing re-observes the array at every
    launch from then on."""
    torch = pytest.importorskip("torch")
    x, loss, recur = make_problem()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cv = rng.integers(0, 3, N).astype(np.int32)
    cnt = jr.ndarray(jr.i32, shape=(N,))
    cnt.from_numpy(cv)
    view = cnt.to_torch(copy=False)
    assert isinstance(view, torch.Tensor) and view.tolist() == cv.tolist()
    check_grad(recur, x, loss, xv, cv, cnt)
    view[7] = 25                                     # behind jitrt's back
    cv[7] = 25
    assert cnt.to_numpy()[7] == 25
    check_grad(recur, x, loss, xv, cv, cnt)


def test_sizes_follow_field_writes_and_scalar_arguments(rng):
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    cf = jr.field(jr.i32, shape=(N,))
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cv = rng.integers(0, 3, N).astype(np.int32)
    cf.from_numpy(cv)

    @jr.kernel
    def recur(extra: jr.i32):
        for i in x:
            v = x[i]
            for _ in range(cf[i] + extra):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    @jr.kernel
    def set_counts(k: jr.i32):
        for i in cf:
            cf[i] = (i * 7) % k

    check_grad(recur, x, loss, xv, cv, 0)
    check_grad(recur, x, loss, xv, cv + 12, 12)      # scalar argument
    cf.fill(4)                                       # host fill
    check_grad(recur, x, loss, xv, np.full(N, 6), 2)
    set_counts(19)                                   # a kernel writes the field
    check_grad(recur, x, loss, xv, (np.arange(N) * 7) % 19 + 1, 1)
    cf[0] = 33                                       # host element write
    expect = (np.arange(N) * 7) % 19 + 1
    expect[0] = 34
    check_grad(recur, x, loss, xv, expect, 1)


def test_sizes_follow_template_fields_of_one_shape(rng):
    """Two count fields of one dtype and shape passed as a template: the kernel names (and
    registry ids) are equal, the sizes must not be."""
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    small, large = jr.field(jr.i32, shape=(N,)), jr.field(jr.i32, shape=(N,))
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    sv, lv = rng.integers(0, 3, N).astype(np.int32), rng.integers(10, 20, N).astype(np.int32)
    small.from_numpy(sv)
    large.from_numpy(lv)

    @jr.kernel
    def recur(cf: jr.template()):
        for i in x:
            v = x[i]
            for _ in range(cf[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    check_grad(recur, x, loss, xv, sv, small)
    check_grad(recur, x, loss, xv, lv, large)
    check_grad(recur, x, loss, xv, sv, small)
    small[3] = 25
    sv[3] = 25
    check_grad(recur, x, loss, xv, sv, small)


# ---- bounds outside the grammar -----------------------------------------------------------------

def float_bound_kernel():
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    t = jr.field(jr.f64, shape=(N,))
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def float_bound():
        for i in x:
            v = x[i]
            for _ in range(int(t[i])):  # float-bound-loop
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    return x, t, loss, float_bound


def carried_bound_kernel():
    x = jr.field(jr.f64, shape=(N,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def carried(c: nd(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            m = c[i]
            for _ in range(3):
                for _ in range(m):  # carried-bound-loop
                    v = jr.sin(v) * 1.1 + 0.1
                m = m + 1
            loss[None] += v

    return x, loss, carried


def assert_names_loop(err: jr.KernelCompileError, marker: str, reason: str) -> None:
    line = line_of(marker)
    assert err.filename == __file__ and err.line == line
    assert f"{Path(__file__).name}:{line}:" in str(err)
    assert "for _ in range(" in str(err) and "ad_stack_size" in str(err)
    assert reason in str(err)
    assert not re.search(r"'\$?(begin|end)\d+'", str(err)), "names a local the user never wrote"


def test_float_bound_is_a_compile_error_at_the_loop(rng):
    _, t, _, k = float_bound_kernel()
    t.from_numpy(rng.uniform(0, 6, N))
    k()                                        # the forward kernel is fine
    with pytest.raises(jr.KernelCompileError) as info:
        k.grad()
    assert_names_loop(info.value, "float-bound-loop", "float value converted to an integer")


def test_loop_carried_bound_is_a_compile_error_at_the_loop(rng):
    _, loss, k = carried_bound_kernel()
    with pytest.raises(jr.KernelCompileError) as info, jr.ad.Tape(loss=loss):
        k(rng.integers(0, 4, N).astype(np.int32))
    assert_names_loop(info.value, "carried-bound-loop", "'m' changes inside an enclosing loop")


def test_ad_stack_size_makes_ungrammatical_bounds_work(rng):
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=64)
    x, t, loss, k = float_bound_kernel()
    xv, tv = rng.uniform(-1, 1, N), rng.uniform(0, 9, N)
    x.from_numpy(xv)
    t.from_numpy(tv)
    jr.debug.reset_max_reducer_dispatch_count()
    with jr.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, tv.astype(np.int32))[1],
                               **CLOSE)
    assert jr.debug.max_reducer_dispatch_count() == 0
    for info in jr.debug.sizing_infos(k):
        assert stack_of(info, "v") == se.Const(64)

    x2, loss2, carried = carried_bound_kernel()
    x2.from_numpy(xv)
    c = rng.integers(0, 4, N).astype(np.int32)
    with jr.ad.Tape(loss=loss2):
        carried(c)
    np.testing.assert_allclose(x2.grad.to_numpy(), sin_recurrence(xv, 3 * c + 3)[1], **CLOSE)


# ---- overflow -----------------------------------------------------------------------------------

def test_overflow_error_names_kernel_task_registry_and_sizes(rng):
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=4)
    x, loss, recur = make_problem()
    xv = rng.uniform(-1, 1, N)
    x.from_numpy(xv)
    cnt = rng.integers(0, 3, N).astype(np.int32)
    cnt[7] = 10
    with pytest.raises(jr.AdStackOverflowError) as info:
        recur.grad(cnt)
    err = info.value
    (sizing,) = jr.debug.sizing_infos(recur)
    assert isinstance(err, jr.JitrtError)
    assert err.kernel_name == sizing.kernel_name and "recur" in err.kernel_name
    assert err.task_id == 0
    assert err.registry_id == sizing.registry_id == jr.debug.registry_id(err.kernel_name, 0)
    msg = str(err)
    assert "adstack overflow" in msg and err.kernel_name in msg
    assert "task 0" in msg and str(err.registry_id) in msg
    assert "capacity 4" in msg and "required 12" in msg          # 1 + 1 + cnt.max()

    # still usable: a launch that fits succeeds and does not re-raise the old overflow
    cnt[7] = 2                                                    # needs 1 + 1 + 2 = 4
    for _ in range(2):
        run_grad(recur, x, loss, cnt)
        np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, cnt)[1], **CLOSE)
    recur(cnt)                                                    # and the primal still runs


def test_overflow_boundary_is_the_exact_capacity(rng):
    """The exact size computed at launch is the smallest capacity that does not overflow."""
    x, _, recur = make_problem()
    x.from_numpy(rng.uniform(-1, 1, N))
    cnt = rng.integers(0, 12, N).astype(np.int32)
    recur.grad(cnt)
    (info,) = jr.debug.sizing_infos(recur)
    need = evaluate(stack_of(info, "v"), {"cnt": cnt})
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=need - 1)
    with pytest.raises(jr.AdStackOverflowError, match=f"capacity {need - 1}, required {need}"):
        recur.grad(cnt)
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=need)
    recur.grad(cnt)


def test_overflow_without_computable_size_still_names_the_task(rng):
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=3)
    _, t, _, k = float_bound_kernel()
    t.from_numpy(np.full(N, 5.5))
    with pytest.raises(jr.AdStackOverflowError) as info:
        k.grad()
    assert "capacity 3" in str(info.value) and info.value.task_id == 0
    assert "float_bound" in info.value.kernel_name


def test_many_threads_overflowing_raise_one_error_per_launch(rng):
    n = 1 << 16
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=4)
    x, loss, recur = make_problem(n, jr.f32)
    xv = rng.uniform(-1, 1, n).astype(np.float32)
    x.from_numpy(xv)
    bad = np.full(n, 9, np.int32)                 # every thread overflows, on every worker
    good = rng.integers(0, 3, n).astype(np.int32)
    for _ in range(3):
        with pytest.raises(jr.AdStackOverflowError) as info:
            recur.grad(bad)
        (sizing,) = jr.debug.sizing_infos(recur)
        assert info.value.registry_id == sizing.registry_id and info.value.task_id == 0
        assert str(info.value).count("adstack overflow") == 1
        run_grad(recur, x, loss, good)            # the slot was cleared: no stale error
    np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(xv, good)[1], rtol=1e-5,
                               atol=1e-6)


def test_overflow_raised_by_tape_exit(rng):
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=3)
    _, loss, recur = make_problem()
    cnt = np.full(N, 4, np.int32)
    with pytest.raises(jr.AdStackOverflowError, match="adstack overflow"), \
            jr.ad.Tape(loss=loss):
        recur(cnt)
    with jr.ad.Tape(loss=loss):                   # a later tape works
        recur(np.ones(N, np.int32))


# ---- large bound arrays -------------------------------------------------------------------------

def test_16m_element_bound_array_is_reduced_by_compiled_code(rng):
    n = 1 << 24
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def big(cnt: nd(dtype=jr.i32, ndim=1)):
        for i in range(cnt.shape[0]):
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    cnt = jr.ndarray(jr.i32, shape=(n,))
    hot = [5, n // 2 + 3, n - 1]
    for k, i in enumerate(hot):
        cnt[i] = 3 + 7 * k
    x.fill(0.25)
    big.grad(cnt)                                 # compiles and sizes once
    cnt[hot[0]] = 40                              # the longest loop moves: sized again
    x.grad.fill(0)
    loss.grad[None] = 1.0
    jr.debug.reset_max_reducer_dispatch_count()
    big.grad(cnt)                                 # resized by one reducer run (time: not asserted)
    assert jr.debug.max_reducer_dispatch_count() == 1
    (info,) = jr.debug.sizing_infos(big)
    assert "cnt.shape[0]" in se.text(info.max_reducer_specs[0])
    g = x.grad.to_numpy()
    counts = np.array([40, 10, 17])
    expect = sin_recurrence(np.full(3, 0.25), counts)[1]
    np.testing.assert_allclose(g[hot], expect, rtol=1e-5)
    assert g[1] == 1.0 and g[n // 3] == 1.0


def test_quadrants_switch_turns_adstacks_off():
    """jr.init(ad_stack_experimental_enabled=False), Quadrants' switch: a gradient that needs
    adstacks is a compile error naming the option; kernels without them are unaffected."""
    jr.init(ad_stack_experimental_enabled=False)
    x = jr.field(jr.f32, shape=(4,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    n = jr.ndarray(jr.i32, shape=(4,))
    n.fill(3)

    @jr.kernel
    def carried(n: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(n[i]):
                v = jr.sin(v)
            loss[None] += v

    @jr.kernel
    def plain():
        for i in x:
            loss[None] += x[i] * x[i]

    x.fill(1.0)
    carried(n)                                   # the forward kernel needs no adstack
    with pytest.raises(jr.KernelCompileError, match="ad_stack_experimental_enabled=False"):
        carried.grad(n)
    with jr.ad.Tape(loss=loss):
        plain()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0)
    with pytest.raises(jr.ConfigError):
        jr.init(ad_stack_experimental_enabled="maybe")
