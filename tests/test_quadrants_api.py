"""Quadrants 1.3.3's own Python-side names (what Genesis uses): jr.Tensor and jr.tensor, the
kernel options, the init options gs.init passes, qd._logging, lang.impl, primitive_types,
struct layouts, perf_dispatch, simt and algorithms (jitrt/quadrants/)."""
import logging
import warnings

import numpy as np
import pytest

import jitrt as jr


# ---- jr.Tensor, jr.tensor, jr.Backend ----------------------------------------------------

def test_tensor_allocates_on_the_backend_asked_for():
    f = jr.tensor(jr.f32, (4, 3), backend=jr.Backend.FIELD)
    a = jr.tensor(jr.i32, 5)                          # NDARRAY is the default, as in Quadrants
    assert isinstance(f, jr.ScalarField) and f.shape == (4, 3) and f.dtype is jr.f32
    assert type(a) is jr.Ndarray and a.shape == (5,) and a.dtype is jr.i32
    for x in (f, a):
        assert isinstance(x, jr.Tensor) and jr.Tensor(x) is x and x._unwrap() is x
    assert not isinstance(np.zeros(3), jr.Tensor) and not isinstance(3, jr.Tensor)
    with pytest.raises(TypeError, match=r"Tensor\(impl\) requires a jitrt field or ndarray; "
                                        "got list"):
        jr.Tensor([1, 2])
    g = jr.tensor(jr.f32, 3, backend=jr.Backend.FIELD, needs_grad=True)
    assert g.grad is not None and g.grad.shape == (3,)


def test_tensor_checks_backend_layout_and_options():
    with pytest.raises(ValueError, match="backend=7 is not a valid jr.Backend; expected one "
                                         "of jr.Backend.FIELD, jr.Backend.NDARRAY"):
        jr.tensor(jr.f32, 3, backend=7)
    with pytest.raises(ValueError, match=r"layout=\(0, 0\) is not a permutation of range\(2\)"):
        jr.tensor(jr.f32, (2, 3), layout=(0, 0))
    with pytest.raises(ValueError, match="layout has 1 entries but shape has 2 dimensions"):
        jr.tensor(jr.f32, (2, 3), layout=(0,))
    with pytest.raises(TypeError, match="layout= is not supported with compound dtypes"):
        jr.tensor(jr.math.vec3, 4, layout=(0,))
    with pytest.raises(TypeError, match="does not accept order="):
        jr.Vector.tensor(3, jr.f32, 4, order="ji")


def test_a_laid_out_tensor_keeps_canonical_indices_and_values():
    """layout= is recorded; storage stays row-major, so what a program reads and writes is the
    same as in Quadrants (only the memory order, a GPU choice, differs)."""
    t = jr.tensor(jr.f32, (2, 3), backend=jr.Backend.FIELD, layout=(1, 0))
    assert t.layout == (1, 0) and t.shape == (2, 3)
    assert jr.tensor(jr.f32, (2, 3), layout=(0, 1)).layout is None     # the identity

    @jr.kernel
    def fill(x: jr.Tensor):
        for i, j in jr.ndrange(2, 3):
            x[i, j] = i * 10 + j
    fill(t)
    assert t[1, 2] == 12
    np.testing.assert_array_equal(t.to_numpy(), [[0, 1, 2], [10, 11, 12]])


def test_vector_and_matrix_tensors():
    v = jr.Vector.tensor(3, jr.f32, (4,), backend=jr.Backend.FIELD)
    m = jr.Matrix.tensor(2, 2, jr.f64, 5)
    assert isinstance(v, jr.VectorTensor) and not isinstance(v, jr.MatrixTensor)
    assert isinstance(m, jr.MatrixTensor) and type(m) is jr.Ndarray
    assert v.element_shape == (3,) and m.element_shape == (2, 2) and m.shape[0] == 5
    assert not isinstance(jr.tensor(jr.f32, 3), jr.VectorTensor)


def test_a_tensor_parameter_takes_a_field_or_an_ndarray():
    @jr.kernel
    def scale(x: jr.Tensor, k: jr.f32):
        for i in range(x.shape[0]):
            x[i] = i * k
    f = jr.tensor(jr.f32, 4, backend=jr.Backend.FIELD)
    a = jr.tensor(jr.f32, 4)
    scale(f, 2.0)
    scale(a, 3.0)
    np.testing.assert_array_equal(f.to_numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal(a.to_numpy(), [0, 3, 6, 9])
    with pytest.raises(jr.KernelArgError, match="argument 'x': expected a jitrt field or "
                                                r"ndarray \(jr.Tensor\), got int 3"):
        scale(3, 1.0)


# ---- kernel and init options -------------------------------------------------------------

def test_kernel_options_fastcache_and_graph():
    @jr.kernel(fastcache=True, graph=True)
    def k(a: jr.types.ndarray()):
        for i in range(a.shape[0]):
            a[i] = 1
    a = jr.ndarray(jr.i32, 3)
    k(a)
    assert (k.fastcache, k.graph) == (True, True) and a.to_numpy().tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match=r"@jr.kernel\(fastcache=...\) takes True or False, "
                                        "got 'yes'"):
        jr.kernel(fastcache="yes")


def test_the_init_options_gs_init_passes():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jr.init(arch=jr.cpu, offline_cache=False, log_level=jr.WARN,
                force_scalarize_matrix=True, ad_stack_sparse_threshold_bytes=200_000_000,
                offline_cache_max_size_of_files=2**31 - 1, num_compile_threads=1,
                cpu_max_num_threads=1)
    text = "\n".join(str(w.message) for w in caught)
    assert "force_scalarize_matrix=...) is a Taichi option jitrt ignores" in text
    assert "ad_stack_sparse_threshold_bytes" in text and "num_compile_threads" in text
    from jitrt.runtime.program import current
    cfg = current().config
    assert cfg.offline_cache_max_bytes == 2**31 - 1 and cfg.log_level == "warning"
    assert cfg.num_threads == 1
    jr.init(arch=jr.cpu, offline_cache=False, log_level=jr.TRACE)
    assert current().config.log_level == "debug"
    with pytest.raises(jr.ConfigError, match="warning \\(warn\\)"):
        jr.init(arch=jr.cpu, log_level="loud")
    logging.getLogger("jitrt").setLevel(logging.NOTSET)


# ---- qd._logging, lang.impl, primitive_types ---------------------------------------------

def test_quadrants_logging_goes_to_the_jitrt_logger(caplog):
    assert (jr.TRACE, jr.DEBUG, jr.INFO, jr.WARN, jr.ERROR, jr.CRITICAL) == (
        "trace", "debug", "info", "warn", "error", "critical")
    with caplog.at_level(logging.WARNING, logger="jitrt"):
        jr._logging.warn("cache {} is {size} bytes", "x", size=3)
        jr._logging.info("not shown")
        assert jr._logging.is_logging_effective(jr.ERROR)
        assert not jr._logging.is_logging_effective(jr.INFO)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith("[test_quadrants_api.py:test_quadrants_logging_goes_to_the_"
                                  "jitrt_logger@")
    assert messages[0].endswith("] cache x is 3 bytes")
    assert caplog.records[0].levelno == logging.WARNING
    with pytest.raises(ValueError, match="unknown logging level 'loud'"):
        jr._logging.set_logging_level("loud")


def test_lang_impl_reads_the_current_program():
    jr.init(arch=jr.cpu, offline_cache=False, default_fp=jr.f64)
    runtime = jr.lang.impl.get_runtime()
    assert runtime.default_fp is jr.f64 and runtime.default_ip is jr.i32
    runtime.prog.synchronize()
    assert jr.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=True) == 0   # CPU
    cfg = jr.lang.impl.current_cfg()          # Taichi's tests ask it for the arch
    assert cfg.arch == jr.cpu and cfg.default_fp is jr.f64 and cfg.offline_cache is False
    assert isinstance(jr.lang._template_mapper.__builtins__, dict)
    import importlib
    assert importlib.import_module("jitrt.quadrants.lang").impl is jr.lang.impl


def test_primitive_types_and_spellings():
    pt = jr.types.primitive_types
    assert jr.f32 in pt.real_types and jr.i32 not in pt.real_types and jr.u64 in pt.integer_types
    assert (jr.int32, jr.float32, jr.float64, jr.uint32) == (jr.i32, jr.f32, jr.f64, jr.u32)
    assert jr.u1 is jr.u8


def test_struct_field_layout():
    s = jr.types.struct(a=jr.f32, b=jr.math.vec3).field(shape=4, layout=jr.Layout.SOA)
    t = jr.types.struct(a=jr.f32).field(shape=2, layout=jr.Layout.AOS)
    assert s.a.shape == (4,) and s.b.element_shape == (3,) and t.a.shape == (2,)
    with pytest.raises(TypeError, match="layout must be jr.Layout.SOA or jr.Layout.AOS"):
        jr.types.struct(a=jr.f32).field(shape=2, layout="soa")


# ---- perf_dispatch -----------------------------------------------------------------------

def test_perf_dispatch_measures_each_then_keeps_the_fastest(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("jitrt.quadrants.perf.time.perf_counter", lambda: clock[0])
    calls = []

    @jr.perf_dispatch(get_geometry_hash=lambda n: n, first_warmup=1, active=1)
    def work(n): ...

    @work.register
    def slow(n):
        calls.append("slow")
        clock[0] += 5.0

    @work.register(is_compatible=lambda n: n < 100)
    def fast(n):
        calls.append("fast")
        clock[0] += 1.0

    for _ in range(6):
        work(3)
    assert sorted(calls[:4]) == ["fast", "fast", "slow", "slow"]   # warm-up + one timed each
    assert calls[4:] == ["fast", "fast"]
    calls.clear()
    work(500)                                 # only `slow` is compatible
    work(500)
    assert calls == ["slow", "slow"]


def test_perf_dispatch_one_compatible_is_never_measured(monkeypatch):
    """One compatible implementation: chosen at once, never synchronised or timed (also when
    measuring would restart), and the very same arguments again skip the geometry hash, as
    in Quadrants 1.3.3 (Genesis's constraint solver calls its one arm so every step)."""
    syncs, hashes, calls = [], [], []
    monkeypatch.setattr("jitrt.runtime.program.sync", lambda: syncs.append(1))

    def geometry(a, b, flag=False):
        hashes.append(1)
        return (a, b, flag)

    @jr.perf_dispatch(get_geometry_hash=geometry, active=2, repeat_after_count=3)
    def solve(a, b, flag=False): ...

    @solve.register(is_compatible=lambda a, b, flag=False: a != "never")
    def only(a, b, flag=False):
        calls.append((a, b, flag))

    @solve.register(is_compatible=lambda a, b, flag=False: a == "never")
    def other(a, b, flag=False):
        calls.append("other")

    state = object()
    for _ in range(5):
        solve(state, 2, flag=True)
    assert calls == [(state, 2, True)] * 5 and syncs == [] and len(hashes) == 1
    fresh = [object() for _ in range(4)]
    for x in fresh:                     # new objects: hashed each call, still unmeasured
        solve(x, 2)
    assert syncs == [] and len(hashes) == 5 and calls[-1] == (fresh[-1], 2, False)


def test_perf_dispatch_hashes_its_key_once_a_call(monkeypatch):
    monkeypatch.setattr("jitrt.runtime.program.sync", lambda: None)
    hashed = []

    class Key:
        def __hash__(self):
            hashed.append(1)
            return 7

    key = Key()

    @jr.perf_dispatch(get_geometry_hash=lambda n: key, first_warmup=0, active=1)
    def work(n): ...

    work.register(lambda n: None)
    work.register(lambda n: None)
    work(1), work(2)                    # one timed run each: the choice is made
    hashed.clear()
    for n in range(3, 13):
        work(n)
    assert len(hashed) == 10


def test_perf_dispatch_warmup_runs_are_not_synchronised(monkeypatch):
    syncs = []
    monkeypatch.setattr("jitrt.runtime.program.sync", lambda: syncs.append(1))

    @jr.perf_dispatch(get_geometry_hash=lambda n: n, first_warmup=2, active=1)
    def work(n): ...

    work.register(lambda n: None)
    work.register(lambda n: None)
    for _ in range(4):                  # two warm-up runs each: no synchronisation
        work(1)
    assert syncs == []
    work(1), work(1)                    # the timed runs: before and after each
    assert len(syncs) == 4


def test_perf_dispatch_parameters_must_match():
    @jr.perf_dispatch(get_geometry_hash=lambda n: n)
    def proto(n): ...

    def other(m): ...
    with pytest.raises(TypeError, match=r"the parameters of 'other' \['m'\] differ from the "
                                        r"prototype's \['n'\]"):
        proto.register(other)


# ---- simt: refused on the CPU, as Quadrants refuses it there (tests/test_simt.py: GPUs) ---

@pytest.mark.cpu_only
def test_simt_is_refused_in_kernels_and_free_behind_a_static_branch():
    @jr.kernel
    def uses(a: jr.types.ndarray()):
        for i in range(a.shape[0]):
            jr.simt.block.sync()
            a[i] = 1

    @jr.kernel
    def guarded(a: jr.types.ndarray(), gpu: jr.template()):
        for i in range(a.shape[0]):
            if jr.static(gpu):
                jr.simt.block.sync()
            a[i] = 2
    a = jr.ndarray(jr.i32, 2)
    with pytest.raises(jr.KernelCompileError, match=r"jr.simt.block.sync\(\) is GPU block-level "
                       "code: not supported on cpu"):
        uses(a)
    guarded(a, False)
    assert a.to_numpy().tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="can only be used inside a jitrt kernel"):
        jr.simt.subgroup.shuffle(1, 0)
    with pytest.raises(RuntimeError, match="declares block-shared memory inside a GPU kernel"):
        jr.simt.block.SharedArray((32,), jr.f32)


# ---- algorithms.sort ---------------------------------------------------------------------

def test_sort_scratch_slots_is_quadrants_formula():
    slots = jr.algorithms.sort_scratch_slots
    assert slots(0, 1) == 1 and slots(1, 1) == 256 and slots(1000, 2) == 4 * 256 + 4
    assert slots(70000) == 274 * 256 + 274 + 2        # depth 3 by default
    with pytest.raises(ValueError, match="log256_max_n must be an int from 1 to 4"):
        slots(10, 9)


@pytest.mark.parametrize("dtype", [jr.u32, jr.i32, jr.i64])
def test_sort_orders_keys_and_moves_values(dtype):
    rng = np.random.default_rng(7)
    n_max, count = 300, 257
    info = np.iinfo(dtype.np)
    keys = rng.integers(info.min, info.max, size=n_max, dtype=dtype.np)
    keys[:40] = keys[40:80]                                # ties: the sort is stable
    width = 64 if dtype is jr.i64 else 32

    @jr.kernel
    def run(k: jr.types.ndarray(), tk: jr.types.ndarray(), v: jr.types.ndarray(),
            tv: jr.types.ndarray(), s: jr.types.ndarray(), n: jr.types.ndarray(),
            kd: jr.template(), end: jr.template()):
        jr.algorithms.sort(k, tk, v, tv, s, n, kd, True, end, 2)
    k, v = jr.ndarray(dtype, n_max), jr.ndarray(jr.i32, n_max)
    k.from_numpy(keys)
    v.from_numpy(np.arange(n_max, dtype=np.int32))
    n = jr.ndarray(jr.i32, ())
    n[None] = count
    scratch = jr.ndarray(jr.u32, jr.algorithms.sort_scratch_slots(n_max, 2))
    run(k, jr.ndarray(dtype, n_max), v, jr.ndarray(jr.i32, n_max), scratch, n, dtype, width)
    order = np.argsort(keys[:count], kind="stable")
    np.testing.assert_array_equal(k.to_numpy()[:count], keys[:count][order])
    np.testing.assert_array_equal(v.to_numpy()[:count], order)
    np.testing.assert_array_equal(k.to_numpy()[count:], keys[count:])     # past n: untouched


def test_sort_refuses_float_keys_and_odd_bit_counts():
    @jr.kernel
    def run(k: jr.types.ndarray(), s: jr.types.ndarray(), n: jr.types.ndarray(),
            kd: jr.template(), end: jr.template()):
        jr.algorithms.sort(k, k, k, k, s, n, kd, False, end, 1)
    n, s = jr.ndarray(jr.i32, ()), jr.ndarray(jr.u32, 256)
    with pytest.raises(jr.KernelCompileError, match="sorting f32 keys needs a bit cast"):
        run(jr.ndarray(jr.f32, 4), s, n, jr.f32, 32)
    with pytest.raises(jr.KernelCompileError, match="end_bit must be a positive multiple of "
                                                    "16 up to 32, got 24"):
        run(jr.ndarray(jr.u32, 4), s, n, jr.u32, 24)


# ---- struct (dataclass) arguments and configuration templates ----------------------------

def test_a_dataclass_argument_reaches_its_tensors():
    """Genesis passes dataclasses of tensors (`dyn_state: DynState`); the kernel reads and
    writes their members, ndarrays included, by reference."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Links:
        pos: jr.Tensor
        mass: jr.Tensor

    @dataclasses.dataclass(frozen=True)
    class State:
        links: Links
        scale: float

    @jr.kernel
    def step(s: State):
        for i in range(s.links.pos.shape[0]):
            s.links.pos[i] = s.links.mass[i] * s.scale
    a = State(Links(jr.tensor(jr.f32, 3), jr.tensor(jr.f32, 3, backend=jr.Backend.FIELD)),
              2.0)
    b = State(Links(jr.tensor(jr.f32, 3), jr.tensor(jr.f32, 3)), 3.0)
    a.links.mass.from_numpy(np.array([1, 2, 3], np.float32))
    b.links.mass.fill(1.0)
    step(a)
    step(b)
    np.testing.assert_array_equal(a.links.pos.to_numpy(), [2, 4, 6])
    np.testing.assert_array_equal(b.links.pos.to_numpy(), [3, 3, 3])
    a.links.mass.fill(5.0)                 # the data is read at each launch, not compiled in
    step(a)
    np.testing.assert_array_equal(a.links.pos.to_numpy(), [10, 10, 10])


def test_a_graph_kernel_computes_what_its_launches_do(arch):
    """`@qd.kernel(graph=True)`: on a GPU program the kernel's launches are recorded as a
    graph and replayed at later calls with the same arguments (a dataclass by its members);
    the results are those of launching it as usual, host writes between calls and a changed
    number included. On the CPU it launches as usual."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class State:
        pos: jr.Tensor
        vel: jr.Tensor

    @jr.kernel(graph=True)
    def step(s: State, dt: jr.f32):
        for i in range(s.pos.shape[0]):
            s.vel[i] += dt
        for i in range(s.pos.shape[0]):
            s.pos[i] += s.vel[i] * dt

    s = State(jr.tensor(jr.f32, 4), jr.tensor(jr.f32, 4, backend=jr.Backend.FIELD))
    pos, vel = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
    s.vel.from_numpy(vel)

    def expect(dt):
        vel[:] += np.float32(dt)
        pos[:] += vel * np.float32(dt)

    replays = jr.debug.stats().get("graph_replays", 0)
    for _ in range(5):
        step(s, 0.5)
        expect(0.5)
    np.testing.assert_allclose(s.pos.to_numpy(), pos, rtol=1e-6)
    s.vel[2] = 10.0                                 # a host write between two calls
    vel[2] = 10.0
    step(s, 0.5)
    expect(0.5)
    step(s, 0.25)                                   # another dt: recorded again
    expect(0.25)
    step(s, 0.25)
    expect(0.25)
    np.testing.assert_allclose(s.pos.to_numpy(), pos, rtol=1e-6)
    np.testing.assert_allclose(s.vel.to_numpy(), vel, rtol=1e-6)
    # GPUs: the first call launches, the second records, the next four and the last replay
    assert jr.debug.stats().get("graph_replays", 0) - replays == (5 if arch != "cpu" else 0)
    # the CPU never asks for a graph: the kernel keeps the launcher a plain kernel has
    assert ("graph_launch" in step.__dict__) == (arch != "cpu")


def test_a_hashable_configuration_is_a_template_by_value():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Config:                          # no tensors: keyed by identity as a dataclass
        n: int

    class Mode:                            # Genesis's AutoInitMeta configs: eq and hash
        def __init__(self, k):
            self.k = k

        def __eq__(self, other):
            return isinstance(other, Mode) and other.k == self.k

        def __hash__(self):
            return hash(self.k)

    @jr.kernel
    def k(a: jr.types.ndarray(), m: jr.template(), c: Config):
        for i in range(c.n):
            a[i] = m.k
    a = np.zeros(3, np.int32)
    c2, c3 = Config(2), Config(3)
    k(a, Mode(4), c2)
    k(a, Mode(5), c3)
    assert a.tolist() == [5, 5, 5]
    before = jr.debug.stats()["compiles"]
    k(a, Mode(4), c2)                              # an equal Mode: no new compile
    assert jr.debug.stats()["compiles"] == before and a.tolist() == [4, 4, 5]


def test_to_torch_copies_and_zero_copy_views():
    a = jr.tensor(jr.f32, 3)
    a.fill(2.0)
    a._tc = "Genesis caches its views on the object"   # Quadrants' objects take attributes
    torch = pytest.importorskip("torch")
    view = a.to_torch(copy=False)                   # shares the memory, both ways
    view[1] = 5.0
    assert a.to_numpy().tolist() == [2.0, 5.0, 2.0] and a.escaped
    a.fill(3.0)
    assert view.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="a zero-copy view cannot move it"):
        a.to_torch(device="meta", copy=False)
    t = a.to_torch()                                # a copy
    t[0] = 9.0
    assert isinstance(t, torch.Tensor) and a.to_numpy().tolist() == [3.0, 3.0, 3.0]
    a.from_torch(torch.ones(3))
    assert a.to_numpy().tolist() == [1.0, 1.0, 1.0]


def deferred_fills(monkeypatch) -> list:
    """Genesis's `V_SCALAR_FROM` in FIELD mode: fills appended to the list returned run in a
    wrapper of `PyQuadrants.materialize` (jr.init on the CPU first)."""
    from jitrt.quadrants.lang import impl
    jr.init(arch=jr.cpu, offline_cache=False)
    pending: list = []
    plain = impl.PyQuadrants.materialize

    def fill_then_materialize(self):
        plain(self)
        todo = pending.copy()
        pending.clear()
        for field, value in todo:
            field.fill(value)
    monkeypatch.setattr(impl.PyQuadrants, "materialize", fill_then_materialize)
    return pending


def test_a_wrapped_materialize_runs_before_the_next_launch(monkeypatch):
    # Genesis defers its fields' first fills to a wrapper of PyQuadrants.materialize, which
    # Quadrants runs before a launch; jitrt never ran it, so Genesis's `substep_dt` stayed 0.0
    # with performance_mode=True and its bodies never moved (tools/genesis/README.md)
    from jitrt.quadrants.lang import impl
    pending = deferred_fills(monkeypatch)
    dt = jr.field(jr.f32, shape=())
    pending.append((dt, 0.01))
    out = jr.field(jr.f32, shape=(2,))

    @jr.kernel
    def step():
        for i in out:
            out[i] = dt[None] * (i + 1)

    step()
    assert not pending
    np.testing.assert_allclose(out.to_numpy(), [0.01, 0.02], rtol=1e-6)
    step()                       # no new field: the wrapper does not run again
    calls = []
    monkeypatch.setattr(impl.PyQuadrants, "materialize", lambda self: calls.append(1))
    step()
    assert calls == []
    jr.field(jr.f32, shape=(3,))    # a new field: the next launch's slow path runs it

    @jr.kernel
    def clear():
        for i in out:
            out[i] = 0.0

    clear()
    assert calls == [1]


@pytest.mark.parametrize("access", ["element", "to_numpy", "element write", "fill",
                                    "from_numpy", "copy_from"])
def test_a_wrapped_materialize_runs_before_a_python_scope_access(monkeypatch, access):
    # Quadrants materializes before a Python-scope access to a field too: Genesis reads its
    # deferred-filled `n_valid_link_pairs[None]` to size `broad_link_pairs` before any launch.
    # Without it the read gave 0, the array was one row long, and Franka's broad phase wrote
    # past it (caught by jitrt's checks; silent on Quadrants only because it materialized)
    pending = deferred_fills(monkeypatch)
    count = jr.field(jr.i32, shape=())
    pending.append((count, 7))
    other = jr.field(jr.i32, shape=(2,))
    if access == "element":
        assert count[None] == 7
    elif access == "to_numpy":
        assert other.to_numpy().tolist() == [0, 0] and count.to_numpy() == 7
    elif access == "element write":
        other[0] = 5                           # materializes first: count's fill has run
        assert count.to_numpy() == 7 and other.to_numpy().tolist() == [5, 0]
    elif access == "fill":
        other.fill(2)
        assert count.to_numpy() == 7 and other.to_numpy().tolist() == [2, 2]
    elif access == "from_numpy":
        other.from_numpy(np.array([3, 4], np.int32))
        assert count.to_numpy() == 7 and other.to_numpy().tolist() == [3, 4]
    else:
        source = jr.field(jr.i32, shape=())
        source[None] = 9                        # runs the pending fill first ...
        count.copy_from(source)                 # ... so this copy is not overwritten by it
        assert count[None] == 9
    assert not pending
