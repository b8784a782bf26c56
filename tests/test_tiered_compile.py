"""Tiered compilation on the CPU (`backends/cpu_tiers.py`): a kernel's first launches run a
quickly compiled copy through per-symbol stubs and cells; the optimised copy, compiled on a
background thread, is swapped in and written to the offline cache; `jr.sync()` waits for it.
The background thread is held back where a test needs the quick copy to be running."""
import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import cpu, cpu_tiers
from test_adstack_sizing import make_problem, sin_recurrence   # the recurrence and its gradient

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def tiered(monkeypatch):
    """The suite turns tiering off by default (conftest.py); these tests are about it (the
    subprocesses they start inherit the variable)."""
    monkeypatch.setenv("JITRT_TIERED_COMPILE", "1")


@pytest.fixture
def held(monkeypatch):
    """The background thread waits before each optimised compile until `release` is set."""
    release = threading.Event()
    real = cpu_tiers._ThreadLLVM.compile

    def compile_when_released(self, text):
        assert release.wait(600)
        return real(self, text)
    monkeypatch.setattr(cpu_tiers._ThreadLLVM, "compile", compile_when_released)
    yield release
    release.set()
    jr.sync()


def compiled_of(kernel):
    (handle,) = kernel.handles.values()
    return handle.compiled


def cell_target(compiled, symbol: str) -> int:
    return ctypes.c_uint64.from_address(compiled.functions[symbol + cpu_tiers.CELL]).value


def address(name: str) -> int:
    return cpu.engine().address(name)


def test_the_quick_copy_runs_until_the_optimised_one_lands(held):
    jr.init(offline_cache=False)
    x = jr.field(jr.f32, shape=(64,))

    @jr.kernel
    def wave(k: jr.f32):
        for i in x:
            x[i] = jr.sin(i * k) + x[i]

    wave(0.1)
    wave(0.1)
    compiled = compiled_of(wave)
    entry = next(s for s in compiled.functions if s.endswith("_entry"))
    assert compiled.entry_addr == compiled.functions[entry] == address(entry + cpu_tiers.STUB)
    assert cell_target(compiled, entry) == address(entry + cpu_tiers.QUICK)
    np.testing.assert_allclose(x.to_numpy(), 2 * np.sin(np.arange(64) * np.float32(0.1)),
                               rtol=1e-5, atol=1e-6)
    held.set()
    jr.sync()
    assert cell_target(compiled, entry) == address(entry) != address(entry + cpu_tiers.QUICK)
    wave(0.1)
    np.testing.assert_allclose(x.to_numpy(), 3 * np.sin(np.arange(64) * np.float32(0.1)),
                               rtol=1e-5, atol=1e-6)


def test_a_fault_in_the_quick_copy_is_reported_as_in_the_optimised_one(held):
    jr.init(offline_cache=False)

    @jr.kernel
    def shifted(a: jr.types.ndarray(dtype=jr.f32, ndim=1), k: jr.i32):
        for i in range(a.shape[0]):
            a[i + k] = 1.0

    a = np.zeros(8, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match=r"index 8 out of bounds on axis 0 of 'a'"):
        shifted(a, 1)
    held.set()
    jr.sync()
    with pytest.raises(jr.KernelRuntimeError, match=r"index 8 out of bounds on axis 0 of 'a'"):
        shifted(a, 1)
    shifted(a, 0)
    assert (a == 1).all()


def test_a_quick_copy_has_the_checked_loop_alone_where_only_a_fault_fails_the_box(
        held, monkeypatch):
    """The check-free copy of a task whose box test fails only in faulting launches is left
    out of the quick copy (half its code); faults name the same access in both copies, the
    unproven one (`b[i * i % m]`, checked in both loops of the optimised copy) too."""
    texts, optimised = [], []
    real, real_optimise = cpu_tiers.quick_object, cpu_tiers._ThreadLLVM.compile

    def quick_object(text, symbols):
        texts.append(text)
        return real(text, symbols)

    def optimise(self, text):
        optimised.append(text)
        return real_optimise(self, text)
    monkeypatch.setattr(cpu_tiers, "quick_object", quick_object)
    monkeypatch.setattr(cpu_tiers._ThreadLLVM, "compile", optimise)
    jr.init(offline_cache=False)

    @jr.kernel
    def spread(a: jr.types.ndarray(dtype=jr.f32, ndim=1),
               b: jr.types.ndarray(dtype=jr.f32, ndim=1), m: jr.i32):
        for i in range(a.shape[0]):
            a[i] = b[i * i % m] + 1.0

    a, b = np.zeros(8, np.float32), np.arange(4, dtype=np.float32)
    for _ in range(2):
        spread(a, b, 4)
        np.testing.assert_array_equal(a, b[np.arange(8) ** 2 % 4] + 1)
        with pytest.raises(jr.KernelRuntimeError, match=r"index 4 out of bounds on axis 0 "
                                                        r"of 'b'"):
            spread(a, b, 5)
        held.set()
        jr.sync()
    (text,), (full,) = texts, optimised
    assert "_task0\"" in text and "_task0_checked" not in text
    assert "_task0_checked" in full


def test_an_adstack_gradient_sizes_and_runs_through_the_quick_copy(held):
    jr.init(offline_cache=False)
    n = 32
    x, loss, chain = make_problem(n, jr.f32)
    rng = np.random.default_rng(1)
    x0, counts = rng.random(n).astype(np.float32), rng.integers(1, 9, n).astype(np.int32)
    x.from_numpy(x0)
    for _ in range(2):         # quick copies (max-reducer and capacity function), then optimised
        x.grad.fill(0)
        loss[None] = 0
        with jr.ad.Tape(loss=loss):
            chain(counts)
        np.testing.assert_allclose(x.grad.to_numpy(), sin_recurrence(x0, counts)[1],
                                   rtol=2e-4, atol=1e-5)
        symbols = compiled_of(chain.grad).functions
        assert any(s.endswith("_red0") for s in symbols)
        held.set()
        jr.sync()


def test_the_offline_cache_gets_the_optimised_copy(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import jitrt as jr
        jr.init(offline_cache_dir=sys.argv[1])

        @jr.kernel
        def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = 2 * a[i]

        a = np.ones(4, np.float32)
        twice(a)
        jr.sync()
        print(jr.debug.stats()["compiles"], jr.debug.stats()["offline_cache_hits"], a.sum())
    """))     # (exit waits for the copy only `EXIT_GRACE_S`: jr.sync() makes sure it lands)
    runs = [subprocess.run([sys.executable, str(script), str(tmp_path / "cache")],
                           capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["1", "0", "8.0"], ["0", "1", "8.0"]], runs


def test_reinit_and_sync_leave_nothing_compiling(held):
    jr.init(offline_cache=False)
    x = jr.field(jr.i32, shape=(4,))

    @jr.kernel
    def fill():
        for i in x:
            x[i] = i

    fill()
    assert cpu.tiers()._queued
    held.set()
    jr.init(offline_cache=False)       # the replaced program's copies land first
    assert not cpu.tiers()._queued
    assert cpu.tiers().landed >= 1


def test_a_failed_optimised_compile_warns_and_the_quick_copy_stays(monkeypatch):
    def broken(self, text):
        raise RuntimeError("no memory left (simulated)")
    monkeypatch.setattr(cpu_tiers._ThreadLLVM, "compile", broken)
    jr.init(offline_cache=False)
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def ones():
        for i in x:
            x[i] = 1.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ones()
        jr.sync()
    assert any("optimised compile" in str(w.message) and "simulated" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    ones()
    assert (x.to_numpy() == 1).all()


def test_stub_text_follows_the_signature_and_refuses_varargs():
    text = cpu_tiers.stub_text("f", "i64 (ptr, i64)")
    assert 'define i64 @"f$tier"(ptr %a0, i64 %a1)' in text
    assert "ret i64 %r" in text and 'declare i64 @"f"(ptr, i64)' in text
    assert "ret void" in cpu_tiers.stub_text("g", "void (ptr)")
    with pytest.raises(ValueError, match="variadic"):
        cpu_tiers.stub_text("h", "void (ptr, ...)")


def test_tiered_compile_off_compiles_optimised_code_before_the_first_launch(monkeypatch):
    monkeypatch.delenv("JITRT_TIERED_COMPILE")
    jr.init(offline_cache=False, tiered_compile=False)
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def twos():
        for i in x:
            x[i] = 2.0

    twos()
    compiled = compiled_of(twos)
    assert not any(s.endswith(cpu_tiers.CELL) for s in compiled.functions)
    assert (x.to_numpy() == 2).all()


def test_a_cold_start_imports_the_compile_pipeline_while_the_runtime_module_compiles(tmp_path):
    # no shipped runtime object (another target, or edited sources: cache/prebuilt.py)
    probe = ("import sys, jitrt as jr\n"
             "from jitrt.cache import prebuilt\n"
             "prebuilt.load = lambda triple, layout: None\n"
             "jr.init(offline_cache_dir=sys.argv[1])\n"
             "print('jitrt.frontend.lower' in sys.modules, 'jitrt.passes.pipeline' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", probe, str(tmp_path / "cache")],
                           capture_output=True, text=True, timeout=120) for _ in range(2)]
    # the first process compiles the runtime module (empty cache), the second loads it and
    # imports nothing of the pipeline (a warm start may never need it)
    assert [r.stdout.split() for r in runs] == [["True", "True"], ["False", "False"]], runs
    uncached = subprocess.run([sys.executable, "-c", probe.replace(
        "offline_cache_dir=sys.argv[1]", "offline_cache=False")], capture_output=True,
        text=True, timeout=120)      # no cache: the runtime module compiles every time
    assert uncached.stdout.split() == ["True", "True"], uncached
    shipped = subprocess.run([sys.executable, "-c", probe.replace(
        "prebuilt.load = lambda triple, layout: None", ""), str(tmp_path / "empty")],
        capture_output=True, text=True, timeout=120)
    if sys.platform == "linux" and os.uname().machine == "x86_64":    # its object is shipped
        assert shipped.stdout.split() == ["False", "False"], shipped   # nothing compiled


FORK_PROGRAM = """
import os
import jitrt as jr
jr.init(offline_cache=False)
x = jr.field(jr.f32, shape=(1 << 16,))

@jr.kernel
def fill(k: jr.f32):
    for i in x:
        x[i] = i * k

@jr.kernel
def fill_plus(k: jr.f32):
    for i in x:
        x[i] = i * k + 1

fill(1.0)                      # its optimised copy is (likely) compiling when the fork comes
pid = os.fork()
if pid == 0:
    fill(2.0)
    fill_plus(3.0)             # a compile in the child: its own background thread
    jr.sync()
    print("child", x.to_numpy()[3], flush=True)
    os._exit(0)
os.waitpid(pid, 0)
jr.sync()
print("parent", x.to_numpy()[3], flush=True)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork")
def test_a_forked_child_compiles_and_syncs(tmp_path):
    script = tmp_path / "forked.py"
    script.write_text(FORK_PROGRAM)
    proc = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["child", "10.0", "parent", "3.0"], \
        (proc.stdout, proc.stderr)


def test_a_launch_known_to_be_large_skips_the_quick_copy():
    """A field's shape fixes the box at compile time: past `QUICK_WORK_LIMIT` cost units the
    kernel is compiled optimised before its first launch; a box from an ndarray's shape is
    not known then, so that kernel is tiered."""
    from jitrt.runtime import compiler
    jr.init(offline_cache=False)
    big = jr.field(jr.f32, shape=(1 << 20,))
    small = jr.field(jr.f32, shape=(1024,))

    @jr.kernel
    def scale_big(k: jr.f32):
        for i in big:
            big[i] = big[i] * k + 1.0

    @jr.kernel
    def scale_small(k: jr.f32):
        for i in small:
            small[i] = small[i] * k + 1.0

    @jr.kernel
    def scale_array(a: jr.types.ndarray(dtype=jr.f32, ndim=1), k: jr.f32):
        for i in range(a.shape[0]):
            a[i] = a[i] * k + 1.0

    a = np.zeros(1 << 20, np.float32)
    for kernel, args in ((scale_big, (2.0,)), (scale_small, (2.0,)), (scale_array, (a, 2.0))):
        kernel(*args)
    tasks = compiled_of(scale_big).lowered.tasked.tasks
    assert compiler.known_work(tasks) >= compiler.QUICK_WORK_LIMIT

    def tiered(kernel) -> bool:
        return any(s.endswith(cpu_tiers.CELL) for s in compiled_of(kernel).functions)
    assert [tiered(k) for k in (scale_big, scale_small, scale_array)] == [False, True, True]
    assert jr.debug.stats()["compiles"] == 3 and jr.debug.stats()["quick_compiles"] == 2
    jr.sync()
    assert big.to_numpy()[7] == small.to_numpy()[7] == a[7] == 1.0


FORK_WHILE_COMPILING = """
import os, signal, sys, threading, time
import jitrt as jr
from jitrt.backends import cpu, cpu_tiers, llvm_setup
jr.init(offline_cache=False, tiered_compile=sys.argv[1] == "1")
x = jr.field(jr.f32, shape=(64,))
inside = threading.Event()
real = {"quick": cpu_tiers.quick_object, "full": cpu.compile_object}

def slow(name):
    def compile_slowly(*args):        # a user thread's compile, inside the LLVM lock
        with llvm_setup.LLVM_LOCK:
            inside.set()
            time.sleep(0.5)
            return real[name](*args)
    return compile_slowly
cpu_tiers.quick_object, cpu.compile_object = slow("quick"), slow("full")

@jr.kernel
def on_thread(k: jr.f32):
    for i in x:
        x[i] = i * k

worker = threading.Thread(target=on_thread, args=(2.0,))
worker.start()
assert inside.wait(60)
pid = os.fork()                      # the worker holds the launch and LLVM locks now
if pid == 0:
    cpu_tiers.quick_object, cpu.compile_object = real["quick"], real["full"]

    @jr.kernel
    def in_child(k: jr.f32):
        for i in x:
            x[i] = i * k + 1
    in_child(3.0)
    jr.sync()
    print("child", x.to_numpy()[3], flush=True)
    os._exit(0)
for _ in range(600):                 # 60 s at most: a hung child is killed, not waited for
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
else:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print("child hung", flush=True)
worker.join()
jr.sync()
print("parent", x.to_numpy()[3], flush=True)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork")
@pytest.mark.parametrize("tiered", ["1", "0"])
def test_a_fork_while_another_thread_compiles_leaves_a_usable_child(tmp_path, tiered):
    """The child of a fork taken while a user thread compiled (holding the launch lock and
    the LLVM lock) used to hang at its first compile; now the fork waits for that compile."""
    script = tmp_path / "fork_compiling.py"
    script.write_text(FORK_WHILE_COMPILING)
    proc = subprocess.run([sys.executable, "-W", "ignore", str(script), tiered],
                          capture_output=True, text=True, timeout=180)
    assert proc.stdout.split() == ["child", "10.0", "parent", "6.0"], (proc.stdout,
                                                                        proc.stderr)


EXIT_WHILE_COMPILING = """
import threading
import numpy as np
import jitrt as jr
from jitrt.backends import cpu_tiers
jr.init(offline_cache=False, log_level="info")
never = threading.Event()
cpu_tiers._ThreadLLVM.compile = lambda self, text: never.wait() and b""   # a compile that
                                                                         # never ends
@jr.kernel
def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = 2 * a[i]

a = np.ones(4, np.float32)
twice(a)
print(a.sum(), flush=True)
"""


def test_exit_drops_an_optimised_copy_still_compiling(tmp_path):
    """Interpreter exit used to wait for every queued optimised copy (65 s after a 1,500-sin
    kernel); it now waits `EXIT_GRACE_S`, then drops them and says so at INFO."""
    script = tmp_path / "exit_compiling.py"
    script.write_text(EXIT_WHILE_COMPILING)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["8.0"], (proc.stdout, proc.stderr)
    assert "exit: the optimised compile of" in proc.stderr and "twice" in proc.stderr and \
        "dropped after 0.5 s" in proc.stderr, proc.stderr


def test_a_slow_compile_logs_when_it_starts_and_ends(held, monkeypatch, caplog):
    """A compile running past `SLOW_COMPILE_S` logs one INFO line then and one at its end,
    naming the kernel and the tier (here the background thread's optimised copy)."""
    from jitrt import logger
    monkeypatch.setattr(logger, "SLOW_COMPILE_S", 0.05)
    jr.init(offline_cache=False)
    x = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def slowly():
        for i in x:
            x[i] = 3.0

    with caplog.at_level("INFO", logger="jitrt"):
        slowly()
        deadline = time.monotonic() + 60
        while "background): compiling (started" not in caplog.text and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        held.set()
        jr.sync()
    lines = [r.getMessage() for r in caplog.records if "optimised copy, background" in
             r.getMessage()]
    assert len(lines) == 2 and "slowly" in lines[0], caplog.text
    assert "compiling (started" in lines[0] and "compiled in" in lines[1], lines


def tier_cases(rng):
    """Kernels whose results depend on evaluation order or contraction: each case is a
    function that launches and returns the results as numpy arrays."""
    n = 3000
    a32 = rng.random(n).astype(np.float32)
    a64 = rng.uniform(-3, 3, n)
    total32 = jr.field(jr.f32, shape=())
    grid = jr.field(jr.f64, shape=(37, 23))
    grid.from_numpy(rng.uniform(-1, 1, (37, 23)))
    total64 = jr.field(jr.f64, shape=())
    counts = rng.integers(1, 6, 64).astype(np.int32)
    v3 = jr.Vector.field(3, jr.f32, shape=(200,))
    v3.from_numpy(rng.uniform(-1, 1, (200, 3)).astype(np.float32))

    @jr.kernel
    def sum32(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            total32[None] += a[i]

    @jr.kernel
    def sum_grid():
        for i, j in grid:
            total64[None] += grid[i, j] * 0.5 - 0.25

    @jr.kernel
    def sum_long(a: jr.types.ndarray(dtype=jr.f64, ndim=1)):      # past MAX_UNROLLED_NODES
        for i in range(a.shape[0]):
            v = a[i]
            w = v * v - 0.5 * v + 0.125
            u = jr.sqrt(w * w + 1.0) - w / (1.0 + v * v) + jr.abs(v) * 0.3 - v * w * 0.01
            total64[None] += u * u - w + v * 0.001 + u * w * v - (u - w) * (u + v)

    @jr.kernel
    def sum_inner(a: jr.types.ndarray(dtype=jr.f64, ndim=1),
                  c: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in range(c.shape[0]):                 # an inner loop: an interleave candidate
            v = a[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            total64[None] += v

    @jr.kernel
    def mathy(a: jr.types.ndarray(dtype=jr.f32, ndim=1), out: jr.types.ndarray(dtype=jr.f32,
                                                                              ndim=1)):
        for i in range(a.shape[0]):
            x = a[i]
            out[i] = jr.sin(x * 3.0) * jr.exp(x - 0.5) + jr.log(x + 1.0) * jr.cos(x) + \
                jr.pow(x + 0.5, 1.7) - jr.tan(x * 0.4) + jr.sqrt(x) * x + x * x * 0.3 + 0.7

    @jr.kernel
    def fma_like(a: jr.types.ndarray(dtype=jr.f64, ndim=1), out: jr.types.ndarray(dtype=jr.f64,
                                                                                 ndim=1)):
        for i in range(a.shape[0]):
            x = a[i]
            out[i] = x * 1.1 + 0.3 * x * x - (x * 0.7 + 0.2) * (x * 1.3 - 0.4)

    @jr.kernel
    def vectors(out: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in v3:
            p = v3[i]
            q = jr.math.vec3(p[1], p[2], p[0]) * 1.5 + 0.25
            out[i] = p.cross(q).dot(q.normalized()) + p.norm() * q.dot(p)

    def run():
        total32[None] = 0
        sum32(a32)
        total64[None] = 0
        sum_grid()
        s_grid = total64[None]
        total64[None] = 0
        sum_long(a64)
        s_long = total64[None]
        total64[None] = 0
        sum_inner(a64, counts)
        out32, out64, outv = np.zeros(n, np.float32), np.zeros(n), np.zeros(200, np.float32)
        mathy(a32, out32)
        fma_like(a64, out64)
        vectors(outv)
        return [np.float32(total32[None]), s_grid, s_long, total64[None], out32, out64, outv]
    return run


def test_quick_and_optimised_copies_compute_the_same_bits(held):
    """Issue 30: a float reduction's quick copy (-O0) summed in index order and its optimised
    copy in the loop vectorizer's order, so the first launch and later ones disagreed. Both
    tiers now run one explicit order (codegen/reduction_lanes.py); no fast-math flag lets
    either pipeline change it. One thread: the chunks' totals then add in index order too."""
    jr.init(offline_cache=False, num_threads=1)
    run = tier_cases(np.random.default_rng(7))
    landed = cpu.tiers().landed
    quick = run()
    held.set()
    jr.sync()
    assert cpu.tiers().landed - landed == jr.debug.stats()["quick_compiles"] > 0
    optimised = run()
    for k, (q, o) in enumerate(zip(quick, optimised)):
        assert np.asarray(q).tobytes() == np.asarray(o).tobytes(), (k, q, o)


def ported_run(name):
    """A function that runs a program of tests/programs a few steps (loaded for the program of
    the jr.init that ran last) and returns its state as numpy values."""
    from test_ported import load_program, pbf_block
    program = load_program(name)
    if name == "mls_mpm_fluid":
        x0 = [0.3, 0.08] + 0.4 * np.random.default_rng(0).random((program.num_particles, 2))

        def run():
            program.reset(x0, fall=-2.0, spin=3.0)
            for _ in range(5):
                program.step()
            return [program.pos, program.vel, program.affine_v]
    elif name == "mass_spring_opt":
        pulse0 = np.random.default_rng(1).uniform(-0.05, 0.05, program.num_springs)

        def run():
            program.reset(pulse0)
            with jr.ad.Tape(loss=program.loss):
                program.run()
            return [program.loss, program.rest.grad, program.pulse.grad]
    elif name == "pbf_particles":
        block = pbf_block(program)

        def run():
            program.reset(block)
            for _ in range(3):
                program.step()
            return [program.pos, program.vel, program.neighbor_count]
    else:
        stretched = program.rest_positions * [1.15, 1.0] + np.random.default_rng(4).uniform(
            -0.005, 0.005, (program.num_verts, 2))

        def run():
            program.reset(stretched)
            for _ in range(3):
                program.step()
            return [program.pos, program.vel, program.pos.grad, program.energy]
    return lambda: [f.to_numpy() for f in run()]


# one program in the default suite: the mass-spring truss (atomics on vector elements, a
# gradient through a Tape); the others (make test-all) add scatter/gather, binning and
# neighbor loops, and an energy gradient, which test_quick_and_optimised_copies_compute_the_
# same_bits covers in small kernels
@pytest.mark.parametrize("name", [
    pytest.param("mls_mpm_fluid", marks=pytest.mark.slow), "mass_spring_opt",
    pytest.param("pbf_particles", marks=pytest.mark.slow),
    pytest.param("fem_neohookean", marks=pytest.mark.slow)])
def test_the_ported_programs_compute_the_same_bits_in_both_tiers(held, name):
    """Each program of tests/programs (MLS-MPM's scatter and gather, the mass-spring truss's
    forward run and its gradient through a Tape, position-based fluids' binning, neighbor
    search and Jacobi iterations, the neo-Hookean sheet's energy gradient and integration),
    first on quick copies, then optimised."""
    jr.init(offline_cache=False, num_threads=1, default_fp=jr.f64)
    run = ported_run(name)
    landed = cpu.tiers().landed
    quick = run()
    held.set()
    jr.sync()
    assert cpu.tiers().landed - landed == jr.debug.stats()["quick_compiles"] > 0
    optimised = run()
    for k, (q, o) in enumerate(zip(quick, optimised)):
        assert np.asarray(q).tobytes() == np.asarray(o).tobytes(), (name, k, q, o)


DROPPED_THEN_RESUMED = """
import sys
import threading
import numpy as np
import jitrt as jr
from jitrt.backends import cpu_tiers
if sys.argv[2] == "never":              # this process ends before any optimised copy
    never = threading.Event()
    cpu_tiers._ThreadLLVM.compile = lambda self, text: never.wait() and b""
jr.init(offline_cache_dir=sys.argv[1], tiered_compile=True)

@jr.kernel
def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = 2 * a[i]

a = np.ones(4, np.float32)
twice(a)
stats = jr.debug.stats()
print(stats["compiles"], stats["offline_cache_hits"], stats["offline_cache_quick_hits"],
      a.sum(), flush=True)
if sys.argv[2] == "sync":
    jr.sync()                            # the optimised copy lands and replaces the quick one
"""


def test_a_quick_copy_dropped_at_exit_is_cached_and_its_optimised_copy_resumed(tmp_path):
    """A process that ends before a kernel's optimised copy is compiled stores the quick
    copy (docs/offline_cache.md, "Quick copies"); the next process loads it instead of
    compiling, queues the optimised compile again, and that copy replaces the quick one in
    the cache."""
    import pathlib

    from jitrt.cache.store import CacheStore
    script = tmp_path / "dropped.py"
    script.write_text(DROPPED_THEN_RESUMED)
    cache = str(tmp_path / "cache")

    def stored() -> list[tuple[str, bool]]:
        store = CacheStore(pathlib.Path(cache), 1 << 40)
        found = [store.load(e.key) for e in store.entries()]
        return [(a.tier, bool(a.optimised_text)) for a in found if "twice" in a.name]

    runs = []
    for mode, after in (("never", [("quick", True)]), ("sync", [("", False)]),
                        ("plain", [("", False)])):
        runs.append(subprocess.run([sys.executable, str(script), cache, mode],
                                   capture_output=True, text=True, timeout=120))
        assert stored() == after, (mode, runs[-1].stderr[-2000:])    # (with the module's text)
    assert [r.stdout.split() for r in runs] == [
        ["1", "0", "0", "8.0"],           # compiled; its optimised copy never came
        ["0", "1", "1", "8.0"],           # the quick copy from the cache, no compile
        ["0", "1", "0", "8.0"]], runs     # the optimised copy, stored by the second run


def test_a_quick_copy_kept_without_its_module_text_is_lowered_again(tmp_path):
    """A quick copy stored without the optimised module's text (not built when its process
    ended) has the module lowered anew by the next process, whose optimised copy then
    lands as usual."""
    import dataclasses
    import pathlib

    from jitrt.cache.store import CacheStore
    script = tmp_path / "dropped.py"
    script.write_text(DROPPED_THEN_RESUMED)
    cache = str(tmp_path / "cache")
    first = subprocess.run([sys.executable, str(script), cache, "never"], capture_output=True,
                           text=True, timeout=120)
    store = CacheStore(pathlib.Path(cache), 1 << 40)
    (entry,) = [e for e in store.entries() if "twice" in e.kernel_name]
    kept = store.load(entry.key)
    assert kept.tier == "quick" and kept.optimised_text, first.stderr[-2000:]
    store.save(entry.key, kept.name, dataclasses.replace(kept, optimised_text=b""))
    runs = [subprocess.run([sys.executable, str(script), cache, mode], capture_output=True,
                           text=True, timeout=120) for mode in ("sync", "plain")]
    assert [r.stdout.split() for r in runs] == [["0", "1", "1", "8.0"],
                                                ["0", "1", "0", "8.0"]], runs


def test_queued_texts_compile_shortest_first(monkeypatch):
    # quick copies from the offline cache queue their module texts: the shortest lands first,
    # so a long compile that no process finishes does not hold back the others every time
    # (Genesis's grasp scene: a 16.5 MB collider module ahead of the step's other kernels)
    order = []
    monkeypatch.setattr(cpu_tiers._ThreadLLVM, "compile", lambda self, text: text.encode())
    tiers = cpu_tiers.Tiers(engine=None)
    tiers.pause()
    lazy_built = []
    for name, text in (("long", "x" * 300), ("short", "x" * 10), ("middle", "x" * 100)):
        tiers.optimise_later(name, text, lambda obj, name=name: order.append(name))
    tiers.optimise_later("lazy", lambda: lazy_built.append(1) or "y",
                         lambda obj: order.append("lazy"))
    tiers.resume()
    assert tiers.wait(60)
    assert order == ["lazy", "short", "middle", "long"]   # a text still to build goes first



def test_cache_finish_compiles_the_optimised_copies_short_processes_dropped(tmp_path):
    """A process that ends before a kernel's optimised copy leaves its quick copy and module
    text in the offline cache; `python -m jitrt cache finish` compiles the optimised copy
    into the entry, so the next process loads it and compiles nothing."""
    script, cache = tmp_path / "dropped.py", str(tmp_path / "cache")
    script.write_text(DROPPED_THEN_RESUMED)

    def run(*args: str) -> list[str]:
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout.split("\n")
    assert run(str(script), cache, "never")[0].split() == ["1", "0", "0", "8.0"]
    assert run(str(script), cache, "never")[0].split() == ["0", "1", "1", "8.0"]  # quick hit
    finished = run("-m", "jitrt", "cache", "finish", "--dir", cache)
    assert any("twice" in line and "optimised copy compiled" in line for line in finished)
    assert "1 optimised copies compiled" in finished[-2], finished
    assert run(str(script), cache, "go")[0].split() == ["0", "1", "0", "8.0"]   # a full hit
    assert "0 optimised copies compiled" in run("-m", "jitrt", "cache", "finish", "--dir",
                                                cache)[-2]


def test_an_optimised_compile_dropped_twice_is_made_before_the_next_first_launch(tmp_path):
    """Two processes in a row end before a kernel's optimised compile (each stores the quick
    copy again, counting); the third compiles the optimised copy from the stored text before
    its first launch and stores it, so a program of short runs leaves the quick copies."""
    script, cache = tmp_path / "dropped.py", str(tmp_path / "cache")
    script.write_text(DROPPED_THEN_RESUMED + 'print(jr.debug.stats()["optimised_after_drops"])\n')

    def run(mode: str) -> list[str]:
        proc = subprocess.run([sys.executable, str(script), cache, mode], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout.split()
    assert run("never") == ["1", "0", "0", "8.0", "0"]     # compiled: a quick copy, dropped
    assert run("never") == ["0", "1", "1", "8.0", "0"]     # its quick copy, dropped again
    assert run("go") == ["0", "1", "0", "8.0", "1"]        # optimised before the launch
    assert run("never") == ["0", "1", "0", "8.0", "0"]     # from then on a plain hit


def test_exit_while_compiling_keeps_the_status_and_the_output(tmp_path):
    """With an optimised copy still compiling at exit, the process ends before the C
    library runs the shared libraries' destructors (LLVM's, under the compile: an assertion
    or a segmentation fault at exit in about one run of twelve before); the exit status and
    what the script printed (unflushed) still come out."""
    script = tmp_path / "exit_status.py"
    script.write_text(EXIT_WHILE_COMPILING.replace('print(a.sum(), flush=True)',
                                                   'print(a.sum())\nimport sys\nsys.exit(3)'))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3 and proc.stdout.split() == ["8.0"], (proc.stdout, proc.stderr)
    assert "dropped after 0.5 s" in proc.stderr
