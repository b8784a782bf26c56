"""Hostile input: every case ends in the right value or a clear error, never a crash, a write
to memory the user did not hand over, or a silently wrong number.

Cases that could kill the interpreter (a crash before a fix) run in a subprocess (`run_py`),
so that a crash fails one test instead of the run. Cache cases use temporary directories only.
Groups: argument kinds, bounds and indices, numbers, unsupported syntax, program lifecycle,
the offline cache, environment variables, host-side traps.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import jitrt as jr
from jitrt.cache import store as store_mod

ND = jr.types.ndarray
ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_py(code: str, tmp_path: pathlib.Path, env: dict | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` from a file in a fresh interpreter with its own cache directory."""
    script = tmp_path / f"case_{abs(hash(code)) % 10**8}.py"
    script.write_text(textwrap.dedent(code))
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), JITRT_CACHE_DIR=str(tmp_path / "cache"))
    full_env.update(env or {})
    return subprocess.run([sys.executable, str(script)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


# ---- kernels shared by the cases ---------------------------------------------------------------

@jr.kernel
def scale(src: ND(dtype=jr.f32, ndim=1), dst: ND(dtype=jr.f32, ndim=1), k: jr.f32):
    for i in range(src.shape[0]):
        dst[i] = src[i] * k


@jr.kernel
def fill2d(a: ND(dtype=jr.f64, ndim=2)):
    for i, j in jr.ndrange(a.shape[0], a.shape[1]):
        a[i, j] = i * 10 + j


@jr.kernel
def total(a: ND(dtype=jr.f32, ndim=1)) -> jr.f32:
    s = 0.0
    jr.loop_config(serialize=True)
    for i in range(a.shape[0]):
        s += a[i]
    return s


@jr.kernel
def repeat_count(cnt: ND(dtype=jr.i32, ndim=1), out: ND(dtype=jr.i32, ndim=1)):
    for i in range(cnt.shape[0]):
        c = 0
        for _ in range(cnt[i]):
            c += 1
        out[i] = c


@jr.kernel
def gather(src: ND(dtype=jr.f32, ndim=1), idx: ND(dtype=jr.i32, ndim=1),
           dst: ND(dtype=jr.f32, ndim=1)):
    for i in range(idx.shape[0]):
        dst[i] = src[idx[i]]


@jr.kernel
def scatter(idx: ND(dtype=jr.i32, ndim=1), dst: ND(dtype=jr.f32, ndim=1)):
    for i in range(idx.shape[0]):
        dst[idx[i]] = 1.0


@jr.kernel
def int_ops(a: jr.i32, b: jr.i32, out: ND(dtype=jr.i32, ndim=1)):
    for i in range(1):
        out[0] = a // b
        out[1] = a % b
        out[2] = a * b
        out[3] = int(jr.cast(a, jr.f32) * 1e10)


def f32(values) -> np.ndarray:
    return np.asarray(values, np.float32)


# ---- argument kinds --------------------------------------------------------------------------

WRONG_ARGUMENTS = [
    ("float64 array", lambda: (np.ones(4), np.zeros(4, np.float32), 1.0), r"'src'.*f32.*float64"),
    ("2-d array", lambda: (np.ones((2, 2), np.float32), f32([0] * 4), 1.0), r"'src'.*ndim=1"),
    ("strided view", lambda: (np.ones(8, np.float32)[::2], f32([0] * 4), 1.0),
     r"'src'.*C-contiguous"),
    ("list", lambda: ([1.0, 2.0], f32([0, 0]), 1.0), r"'src'.*list"),
    ("None array", lambda: (None, f32([0, 0]), 1.0), r"'src'.*NoneType"),
    ("object array", lambda: (np.array([1, "a"], dtype=object), f32([0, 0]), 1.0), r"'src'"),
    ("0-d array", lambda: (np.float32(1.0) * np.ones(()), f32([0]), 1.0), r"'src'"),
    ("string scalar", lambda: (f32([1]), f32([0]), "2"), r"'k'.*f32 scalar.*str"),
    ("array scalar", lambda: (f32([1]), f32([0]), f32([2])), r"'k'.*f32 scalar"),
    ("huge int scalar", lambda: (f32([1]), f32([0]), 10 ** 400), r"'k'.*too large"),
    ("read-only output", lambda: (f32([1]), np.frombuffer(bytes(4), np.float32), 1.0),
     r"'dst'.*writable"),
    ("jitrt field as ndarray", lambda: (jr.field(jr.f32, shape=(2,)), f32([0, 0]), 1.0),
     r"'src'.*Field"),
]


@pytest.mark.parametrize("what,make,words", WRONG_ARGUMENTS, ids=[w[0] for w in WRONG_ARGUMENTS])
def test_wrong_argument_is_named(what, make, words):
    args = make()
    with pytest.raises(jr.KernelArgError, match=words) as info:
        scale(*args)
    assert "scale" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_strided_array_is_refused_and_fortran_order_is_written_back():
    # a Fortran-ordered array (`a.T`) runs on a C-ordered copy copied back after the launch,
    # as Taichi accepts it; other strides are refused, naming np.ascontiguousarray
    a = np.asfortranarray(np.zeros((3, 4)))
    fill2d(a)
    np.testing.assert_array_equal(a, np.add.outer(np.arange(3) * 10, np.arange(4)))
    with pytest.raises(jr.KernelArgError, match=r"'a'.*C-contiguous.*ascontiguousarray"):
        fill2d(np.zeros((3, 8))[:, ::2])
    c = np.zeros((3, 4))
    fill2d(c)
    np.testing.assert_array_equal(c, np.add.outer(np.arange(3) * 10, np.arange(4)))


@pytest.mark.parametrize("call,words", [
    (lambda: scale(f32([1])), r"Parameter `dst : ndarray` missing"),
    (lambda: scale(f32([1]), f32([0]), 1.0, 2.0), r"Too many arguments: it takes 3 "),
    (lambda: scale(f32([1]), f32([0]), k=1.0, q=2), r"Unexpected argument 'q'"),
    (lambda: scale(f32([1]), f32([0]), 1.0, k=2.0), r"Multiple values for argument 'k'"),
], ids=["missing", "too many", "unknown keyword", "twice"])
def test_wrong_call_shapes(call, words):
    with pytest.raises(jr.KernelArgError, match=words):
        call()


def test_integer_scalar_out_of_range_is_refused():
    # (a 32-bit pattern up to 2**32 - 1 converts as its bits say, as in Taichi)
    out = np.zeros(4, np.int32)
    with pytest.raises(jr.KernelArgError, match=r"'a'.*i32 in \[-2147483648, 4294967295\]"):
        int_ops(2 ** 40, 1, out)
    with pytest.raises(jr.KernelArgError, match=r"'b'.*an integer \(i32\).*float"):
        int_ops(1, 2.5, out)


def test_zero_size_arrays_run_nothing():
    empty = np.zeros(0, np.float32)
    scale(empty, empty.copy(), 2.0)
    assert total(empty) == 0.0
    e2 = np.zeros((0, 5))
    fill2d(e2)
    assert e2.shape == (0, 5)


def test_huge_shapes_are_refused_before_allocating():
    with pytest.raises(ValueError, match="more than 2\\*\\*40 elements"):
        jr.ndarray(jr.f32, (1 << 30, 1 << 30))
    with pytest.raises(ValueError, match="negative extent"):
        jr.ndarray(jr.f32, (4, -1))
    with pytest.raises(TypeError, match="not an integer"):
        jr.field(jr.f32, shape=(3.5,))


def test_nan_and_inf_propagate_like_numpy():
    src = f32([np.nan, np.inf, -np.inf, 1.0, -0.0])
    dst = np.zeros_like(src)
    scale(src, dst, 2.0)
    np.testing.assert_array_equal(dst, src * 2)
    assert np.isnan(total(f32([1.0, np.nan])))


def test_parameter_wrongly_needing_grad():
    @jr.kernel
    def uses_grad(a: ND(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a.grad[i] = 1.0

    with pytest.raises(jr.KernelArgError, match=r"'a'.*needs_grad=True"):
        uses_grad(jr.ndarray(jr.f32, (4,)))


def test_template_with_an_unusable_value():
    @jr.kernel
    def t(x: jr.template()):
        for i in range(2):
            pass

    with pytest.raises(jr.KernelArgError,
                       match=r"'x'.*a field, a Python constant, a dataclass, a hashable "
                             r"object or a @jr.data_oriented object"):
        t([1, 2])


# ---- loop bounds and indices from data -------------------------------------------------------

def test_negative_trip_counts_from_data_run_zero_times():
    cnt = np.array([-5, 0, 3, -2 ** 31], np.int32)
    out = np.full(4, 99, np.int32)
    repeat_count(cnt, out)
    np.testing.assert_array_equal(out, [0, 0, 3, 0])


def test_large_trip_counts_from_data_are_exact():
    cnt = np.array([1 << 20, 7], np.int32)
    out = np.zeros(2, np.int32)
    repeat_count(cnt, out)
    np.testing.assert_array_equal(out, [1 << 20, 7])


def test_huge_adstack_demand_is_a_clear_error_and_the_program_recovers(tmp_path):
    proc = run_py("""
        import numpy as np
        import jitrt as jr
        jr.init(offline_cache=False)
        x = jr.field(jr.f32, shape=(2,), needs_grad=True)
        loss = jr.field(jr.f32, shape=(), needs_grad=True)

        @jr.kernel
        def deep(cnt: jr.types.ndarray(dtype=jr.i64, ndim=1)):
            for i in range(cnt.shape[0]):
                v = x[i]
                for _ in range(cnt[i]):
                    v = jr.sin(v)
                loss[None] += v

        try:
            deep.grad(np.array([1, 1 << 40], np.int64))
        except MemoryError as exc:
            assert "adstacks of kernel" in str(exc) and "deep" in str(exc), exc
            print("refused")
        deep.grad(np.array([1, 2], np.int64))
        print("recovered")
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["refused", "recovered"], proc.stderr


@pytest.mark.parametrize("bad", [-1, 4, 2 ** 31 - 1, -2 ** 31])
def test_out_of_bounds_read_from_data_is_reported(bad):
    src, dst = f32([1, 2, 3, 4]), np.zeros(2, np.float32)
    with pytest.raises(jr.KernelRuntimeError) as info:
        gather(src, np.array([0, bad], np.int32), dst)
    text = str(info.value)
    assert f"index {bad} out of bounds" in text and "'src'" in text and "gather" in text
    assert "test_hostile.py" in text


def test_out_of_bounds_write_is_skipped_and_reported():
    guard = np.zeros(16, np.float32)
    dst = guard[4:8]                  # a view: memory around it belongs to `guard`
    with pytest.raises(jr.KernelRuntimeError, match=r"index 4 out of bounds.*'dst'"):
        scatter(np.array([0, 4, -1, 3], np.int32), dst)
    np.testing.assert_array_equal(guard, [0] * 4 + [1, 0, 0, 1] + [0] * 8)


def test_index_arithmetic_overflow_is_caught_not_written():
    @jr.kernel
    def wrap(dst: ND(dtype=jr.f32, ndim=1), k: jr.i32):
        for i in range(dst.shape[0]):
            dst[i * k] = 1.0              # i32 products wrap: a negative index

    guard = np.zeros(8, np.float32)
    with pytest.raises(jr.KernelRuntimeError, match="out of bounds"):
        wrap(guard[2:4], 2 ** 31 - 1)
    assert guard.sum() == 1.0 and guard[2] == 1.0      # only i = 0 was in bounds


def test_program_stays_usable_after_a_fault():
    with pytest.raises(jr.KernelRuntimeError):
        gather(f32([1]), np.array([5], np.int32), np.zeros(1, np.float32))
    dst = np.zeros(1, np.float32)
    gather(f32([7]), np.array([0], np.int32), dst)
    assert dst[0] == 7


# ---- numbers ---------------------------------------------------------------------------------

def test_integer_edge_cases_do_not_trap():
    out = np.zeros(4, np.int32)
    int_ops(-2 ** 31, -1, out)
    assert list(out[:3]) == [-2 ** 31, 0, -2 ** 31]       # wraps, no SIGFPE
    int_ops(7, 0, out)
    assert list(out[:2]) == [0, 0]                         # x // 0 == x % 0 == 0
    int_ops(5, 1, out)
    assert out[3] == 2 ** 31 - 1                           # float -> int saturates


# ---- syntax that stays unsupported -----------------------------------------------------------

def _try(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        try:
            a[i] = 1.0
        except Exception:
            pass


def _with(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        with open("x"):
            a[i] = 1.0


def _class(a: ND(dtype=jr.f32, ndim=1)):
    class C:
        pass


def _fstring(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        s = f"{i}"  # noqa: F841


def _lambda(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        g = lambda v: v  # noqa: E731, F841


def _yield(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        yield i


def _global(a: ND(dtype=jr.f32, ndim=1)):
    global WRONG_ARGUMENTS
    for i in range(a.shape[0]):
        a[i] = 1.0


def _star_args(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = max(*a[i])     # (a vector, matrix or tuple unpacks: test_taichi_corners.py)


def _del(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        v = 1.0
        del v


def _import(a: ND(dtype=jr.f32, ndim=1)):
    import math
    for i in range(a.shape[0]):
        a[i] = math.pi


def _dict(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        d = {i: 1.0}              # a run-time key, as Taichi's: found by iterating only
        a[i] = d[i]


def _comprehension(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = sum([j for j in range(i)])


def _string_store(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = "text"


def _tuple_of_values(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        t = [jr.Vector([a[i], a[i]]), a[i]]     # a Python list, as in Taichi
        a[i] = jr.Vector(t).sum()                # but neither a vector nor a matrix


def _range_step(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(0, a.shape[0], 0):
        a[i] = 1.0


def _assert(a: ND(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        with open("x"):
            a[i] = 0.0


UNSUPPORTED = [
    (_try, "Try"), (_with, "With"), (_class, "ClassDef"),
    (_fstring, "a formatted string with run-time values"),
    (_lambda, "Lambda"), (_yield, "Yield"), (_global, "Global"), (_star_args, "unpacks a vector"),
    (_del, "Delete"), (_import, "Import"), (_dict, "key known at compile time"),
    (_comprehension, "length known at compile time"), (_string_store, "str"),
    (_tuple_of_values, "neither a vector nor a matrix"), (_range_step, "step must not be zero"),
    (_assert, "With"),
]


@pytest.mark.parametrize("fn,word", UNSUPPORTED, ids=[u[0].__name__ for u in UNSUPPORTED])
def test_unsupported_syntax_is_a_located_compile_error(fn, word):
    kernel = jr.kernel(fn)
    with pytest.raises(jr.KernelCompileError) as info:
        kernel(np.zeros(2, np.float32))
    err = info.value
    assert word in str(err)
    assert err.filename == __file__ and err.line > fn.__code__.co_firstlineno
    assert "^" in str(err)


@jr.func
def recurse(v):
    return recurse(v - 1)


def test_recursion_and_kernel_calls_are_refused():
    @jr.kernel
    def calls_recursive(a: ND(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = recurse(1.0)

    @jr.kernel
    def calls_kernel(a: ND(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            total(a)

    with pytest.raises(jr.KernelCompileError, match="recursion is not supported"):
        calls_recursive(np.zeros(2, np.float32))
    with pytest.raises(jr.KernelCompileError, match="cannot be called from a kernel"):
        calls_kernel(np.zeros(2, np.float32))


def test_unknown_name_and_unsupported_annotations():
    @jr.kernel
    def typo(a: ND(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = undefined_name  # noqa: F821

    with pytest.raises(jr.KernelCompileError, match='Name "undefined_name" is not defined'):
        typo(np.zeros(2, np.float32))
    with pytest.raises(jr.KernelCompileError, match="needs an annotation"):
        @jr.kernel
        def no_annotation(a):
            pass
    with pytest.raises(jr.KernelCompileError, match="keyword-only"):
        @jr.kernel
        def kw_only(*, a: jr.f32):
            pass


# ---- program lifecycle -----------------------------------------------------------------------

def test_launch_before_any_init_creates_the_program(tmp_path):
    proc = run_py("""
        import numpy as np
        import jitrt as jr

        @jr.kernel
        def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = a[i] * 2

        a = np.ones(3, np.float32)
        twice(a)
        print(a.tolist())
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "[2.0, 2.0, 2.0]", proc.stderr


def test_reinit_and_reset_between_launches():
    src, dst = f32([1, 2]), np.zeros(2, np.float32)
    scale(src, dst, 2.0)
    jr.init(offline_cache=False, default_fp=jr.f64)
    scale(src, dst, 3.0)
    np.testing.assert_array_equal(dst, [3, 6])
    jr.reset()
    scale(src, dst, 4.0)
    np.testing.assert_array_equal(dst, [4, 8])
    with pytest.raises(jr.ConfigError):
        jr.init(num_threads=-1)
    scale(src, dst, 5.0)                          # the failed init left the program in place
    np.testing.assert_array_equal(dst, [5, 10])


def test_launches_from_four_threads_with_reinit_in_between():
    arrays = [np.zeros(512, np.float32) for _ in range(4)]
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for _ in range(100):
                scale(np.full(512, t + 1, np.float32), arrays[t], 1.0)
                assert (arrays[t] == t + 1).all()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_keyboard_interrupt_during_a_long_kernel(tmp_path):
    proc = run_py("""
        import os, signal, threading
        import numpy as np
        import jitrt as jr
        # a suite started in the background (`make test &`) ignores SIGINT, and so would this
        # process: take Python's handler back, as an interactive program has it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        jr.init()

        @jr.kernel
        def spin(a: jr.types.ndarray(dtype=jr.i32, ndim=1)):
            for i in range(a.shape[0]):
                k = 1
                while k != 0:
                    k = (k * 3) % 7 + 1
                a[i] = k

        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            spin(np.zeros(4, np.int32))
        except KeyboardInterrupt:
            print("interrupted")
    """, tmp_path, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "interrupted", proc.stderr


# ---- the offline cache -----------------------------------------------------------------------

CACHED_PROGRAM = """
    import sys
    import warnings
    import numpy as np
    import jitrt as jr
    warnings.simplefilter("always")
    jr.init(offline_cache=True, offline_cache_dir=sys.argv[1] if len(sys.argv) > 1 else None,
            offline_cache_max_bytes=int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30)

    @jr.kernel
    def poly(a: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] * a[i] + 1.0

    a = np.arange(5, dtype=np.float64)
    poly(a)
    s = jr.debug.stats()
    print(a.tolist(), s["compiles"], s["offline_cache_hits"])
"""


def run_cached(tmp_path: pathlib.Path, directory: pathlib.Path, *extra: str
               ) -> subprocess.CompletedProcess:
    script = tmp_path / "cached.py"
    script.write_text(textwrap.dedent(CACHED_PROGRAM))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(script), str(directory), *extra], env=env,
                          capture_output=True, text=True, timeout=120)


EXPECTED = "[1.0, 2.0, 5.0, 10.0, 17.0]"


def test_cache_directory_that_is_a_file_warns_and_runs(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("not a directory")
    proc = run_cached(tmp_path, target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0:5] == EXPECTED.split() and "CacheWarning" in proc.stderr
    assert target.read_text() == "not a directory"


def test_cache_directory_under_a_file_is_unwritable_but_harmless(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    proc = run_cached(tmp_path, blocker / "sub" / "cache")
    assert proc.returncode == 0 and proc.stdout.startswith(EXPECTED), proc.stderr
    assert "cannot write" in proc.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root ignores directory permissions")
def test_read_only_cache_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        proc = run_cached(tmp_path, d)
    finally:
        d.chmod(0o700)
    assert proc.returncode == 0 and proc.stdout.startswith(EXPECTED), proc.stderr


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory) -> pathlib.Path:
    """A cache directory the program filled (one process for all the damage cases)."""
    tmp_path = tmp_path_factory.mktemp("filled")
    cache = tmp_path / "cache"
    first = run_cached(tmp_path, cache)
    assert first.returncode == 0 and first.stdout.split()[-2:] == ["1", "0"], first.stderr
    return cache


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_damaged_entries_are_rebuilt_with_a_warning(tmp_path, damage, filled_cache):
    cache = tmp_path / "cache"
    shutil.copytree(filled_cache, cache)
    for path in cache.glob("*.jkc"):
        if path.name.startswith("runtime-"):
            continue
        data = path.read_bytes()
        if damage == "truncate":
            data = data[: len(data) // 2]
        elif damage == "flip":
            data = data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:]
        elif damage == "empty":
            data = b""
        else:
            data = os.urandom(len(data))
        path.write_bytes(data)
    again = run_cached(tmp_path, cache)
    assert again.returncode == 0 and again.stdout.startswith(EXPECTED), again.stderr
    assert again.stdout.split()[-2:] == ["1", "0"] and "CacheWarning" in again.stderr
    third = run_cached(tmp_path, cache)
    assert third.stdout.split()[-2:] == ["0", "1"], third.stdout   # rewritten and used


def test_tiny_size_limit_keeps_working(tmp_path):
    cache = tmp_path / "cache"
    for _ in range(2):
        proc = run_cached(tmp_path, cache, "1000")
        assert proc.returncode == 0 and proc.stdout.startswith(EXPECTED), proc.stderr
    total_size = sum(p.stat().st_size for p in cache.glob("*.jkc"))
    assert total_size <= 1000 or len(list(cache.glob("*.jkc"))) <= 1
    assert not list(cache.glob(".tmp-*"))


def test_two_processes_writing_at_once(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "cached.py"
    script.write_text(textwrap.dedent(CACHED_PROGRAM))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(script), str(cache)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.startswith(EXPECTED), err
    assert store_mod.CacheStore(cache, 1 << 30).verify() == []
    assert not list(cache.glob(".tmp-*"))


# ---- environment variables -------------------------------------------------------------------

@pytest.mark.parametrize("var,value", [
    ("JITRT_NUM_THREADS", "-3"), ("JITRT_NUM_THREADS", "lots"), ("JITRT_AD_STACK_SIZE", "-1"),
    ("JITRT_DEFAULT_IP", "f32"), ("JITRT_OFFLINE_CACHE_MAX_BYTES", "-5"),
    ("JITRT_ARCH", "quantum"), ("JITRT_PARALLEL_GRAIN", "0"),
])
def test_garbage_environment_is_a_clear_error_in_a_fresh_process(tmp_path, var, value):
    proc = run_py("""
        import jitrt as jr
        try:
            jr.init()
        except jr.ConfigError as exc:
            print("ConfigError:", exc)
    """, tmp_path, env={var: value})
    assert proc.returncode == 0 and proc.stdout.startswith("ConfigError:"), proc.stderr
    assert var in proc.stdout


# ---- host-side traps -------------------------------------------------------------------------

def test_host_side_traps_name_the_problem():
    unplaced = jr.field(jr.f32, name="u")         # placed later (jr.root...): not usable yet
    with pytest.raises(RuntimeError, match="'u' has no shape yet"):
        unplaced.to_numpy()
    x = jr.field(jr.f32, shape=(2, 3), name="x")
    with pytest.raises(IndexError, match=r"x has 2 dimension\(s\).*1 index"):
        x[1]
    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        x[1, 3] = 1.0
    s = jr.field(jr.f32, shape=())
    with pytest.raises(IndexError, match=r"x\[None\]"):
        s[0]
    with pytest.raises(ValueError, match="does not match"):
        x.from_numpy(np.zeros(6))


def test_kernel_without_a_source_file(tmp_path):
    namespace: dict = {"jr": jr}
    exec("@jr.kernel\ndef k() -> jr.i32:\n    return 1\n", namespace)  # noqa: S102
    with pytest.raises(jr.KernelCompileError, match="must be defined in a Python file"):
        namespace["k"]()


def test_bytes_object_never_changes():
    data = bytes(16)
    view = np.frombuffer(data, np.float32)
    with pytest.raises(jr.KernelArgError):
        scale(f32([1, 2, 3, 4]), view, 2.0)
    assert data == bytes(16)
    out = np.zeros(4, np.float32)
    scale(view, out, 2.0)                      # read-only input: fine
    assert (out == 0).all()
