"""Configuration is range-checked; an oversubscribed pool still runs; Ctrl-C stops a kernel.

Every `jr.init` option and `JITRT_*` variable is validated into a `jr.ConfigError` (a
`ValueError` too) that names the option and the values it accepts.
"""
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


@pytest.mark.parametrize("option,value,words", [
    ("num_threads", -2, "an integer from 1 to"),
    ("num_threads", 0, "an integer from 1 to"),
    ("num_threads", 10 ** 6, "an integer from 1 to"),
    ("num_threads", 2.5, "an integer from 1 to"),
    ("ad_stack_size", -1, "an integer from 0 to"),
    ("offline_cache_max_bytes", -5, "an integer from 0 or more"),
    ("parallel_grain", 0, "an integer from 1 or more"),
    ("default_fp", jr.i32, "a float type: f32, f64"),
    ("default_fp", "float17", "a float type"),
    ("default_ip", jr.f32, "an integer type"),
    ("arch", "tpu", "one of cpu, cuda, amdgpu, gpu"),
    ("debug", "yes", "True or False"),
    ("offline_cache", 2, "True or False"),
    ("offline_cache_dir", "", "a directory path"),
])
def test_invalid_init_options_are_refused_with_the_option_named(option, value, words):
    with pytest.raises(jr.ConfigError) as info:
        jr.init(**{option: value})
    text = str(info.value)
    assert f"jr.init({option}=...)" in text and words in text and repr(value) in text
    assert isinstance(info.value, ValueError) and isinstance(info.value, jr.JitrtError)


@pytest.mark.parametrize("var,text,words", [
    ("JITRT_NUM_THREADS", "0", "an integer from 1"),
    ("JITRT_NUM_THREADS", "-3", "an integer from 1"),
    ("JITRT_NUM_THREADS", "abc", "expected an integer"),
    ("JITRT_PARALLEL_GRAIN", "-1", "an integer from 1"),
    ("JITRT_AD_STACK_SIZE", "-1", "an integer from 0"),
    ("JITRT_OFFLINE_CACHE_MAX_BYTES", "lots", "expected an integer"),
    ("JITRT_DEFAULT_FP", "i32", "a float type"),
    ("JITRT_DEFAULT_IP", "f64", "an integer type"),
    ("JITRT_OFFLINE_CACHE", "maybe", "a boolean"),
    ("JITRT_DEBUG", "2", "a boolean"),
    ("JITRT_ARCH", "x", "one of cpu"),
])
def test_garbage_environment_values_are_refused(monkeypatch, var, text, words):
    monkeypatch.setenv(var, text)
    with pytest.raises(jr.ConfigError) as info:
        jr.init()
    assert f"{var}={text!r}" in str(info.value) and words in str(info.value)


def test_valid_spellings_are_accepted(monkeypatch):
    monkeypatch.setenv("JITRT_NUM_THREADS", "2")
    monkeypatch.setenv("JITRT_PARALLEL_GRAIN", "0x100")
    program = jr.init(default_fp="f64", default_ip=np.int64, arch="CPU", offline_cache=False)
    assert program.config.num_threads == 2 and program.config.parallel_grain == 256
    assert program.config.default_fp is jr.f64 and program.config.default_ip is jr.i64


def test_unknown_option_names_the_closest_one():
    with pytest.raises(TypeError, match=r"'num_thread' \(did you mean 'num_threads'\?\)"):
        jr.init(num_thread=2)
    with pytest.raises(KeyError) as info:      # what Taichi's ti.init raises
        jr.init(debug=True, foo_bar=233)
    assert str(info.value).startswith("jr.init() got unknown option(s) 'foo_bar'")


def run_script(code: str, tmp_path: pathlib.Path,
               timeout: float = 120) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=str(ROOT), JITRT_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_more_threads_than_cores_run_without_spinning(tmp_path):
    proc = run_script("""
        import numpy as np
        import jitrt as jr
        from jitrt.config import MAX_THREADS, _cores
        program = jr.init(num_threads=MAX_THREADS, parallel_grain=1)
        assert program.pool.num_threads == MAX_THREADS > _cores()
        assert program.pool.spin_limit == 0      # idle workers sleep instead of spinning

        @jr.kernel
        def saxpy(x: jr.types.ndarray(dtype=jr.f32, ndim=1),
                  y: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(x.shape[0]):
                y[i] = 2.0 * x[i] + y[i]

        x, y = np.ones(1 << 16, np.float32), np.zeros(1 << 16, np.float32)
        for _ in range(200):
            saxpy(x, y)
        assert (y == 400).all()
        print("ok")
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


CTRL_C = """
    import os, signal, threading
    import numpy as np
    import jitrt as jr
    # a suite started in the background (`make test &`) ignores SIGINT, and so would this
    # process: take Python's handler back, as an interactive program has it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    jr.init()

    @jr.kernel
    def forever(a: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            k = 0
            while k >= 0:                  # never ends
                k = (k + 1) % 1000
            a[i] = k

    @jr.kernel
    def nested(a: jr.types.ndarray(dtype=jr.f32, ndim=1), n: jr.i32):
        for i in range(a.shape[0]):
            v = 0.0
            for j in range(n):             # hours of work
                for k in range(1000):
                    v = v * 0.5 + 1.0
            a[i] = v

    @jr.kernel
    def iota(a: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = i

    for kernel, args in ((forever, (np.zeros(64, np.int32),)),
                         (nested, (np.zeros(8, np.float32), 1 << 30)),
                         (forever.bind(np.zeros(4, np.int32)), ())):
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            kernel(*args)
        except KeyboardInterrupt:
            print("interrupted")
        b = np.zeros(64, np.int32)
        iota(b)
        assert (b == np.arange(64)).all()
    print("usable")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Ctrl-C chaining is Linux-only")
def test_ctrl_c_stops_a_running_kernel_and_the_program_stays_usable(tmp_path):
    proc = run_script(CTRL_C, tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["interrupted"] * 3 + ["usable"], proc.stdout + proc.stderr


# ---- logging, explicit arguments against variables, clear_cache --------------------------------

LOGGED = """
    import numpy as np
    import jitrt as jr
    jr.init()

    @jr.kernel
    def twice(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] * 2

    twice(np.ones(4, np.float32))
    twice(np.ones(4, np.float32))      # a launch logs nothing
"""


def test_log_level_info_prints_one_line_per_compile_then_per_cache_load(tmp_path):
    (tmp_path / "script.py").write_text(textwrap.dedent(LOGGED))
    env_run = dict(JITRT_LOG_LEVEL="info")
    first = subprocess.run([sys.executable, str(tmp_path / "script.py")],
                           env=dict(os.environ, PYTHONPATH=str(ROOT), **env_run,
                                    JITRT_CACHE_DIR=str(tmp_path / "cache")),
                           capture_output=True, text=True, timeout=120)
    lines = [x for x in first.stderr.splitlines() if x.startswith("[jitrt]")]
    assert first.returncode == 0 and len(lines) == 2, first.stderr
    assert "offline cache " + str(tmp_path / "cache") in lines[0]
    assert "twice[nd(f32,1)]: compiled in" in lines[1] and lines[1].endswith("ms")
    second = subprocess.run([sys.executable, str(tmp_path / "script.py")],
                            env=dict(os.environ, PYTHONPATH=str(ROOT), **env_run,
                                     JITRT_CACHE_DIR=str(tmp_path / "cache")),
                            capture_output=True, text=True, timeout=120)
    assert "twice[nd(f32,1)]: loaded from the offline cache in" in second.stderr
    quiet = run_script(LOGGED, tmp_path)
    assert quiet.returncode == 0 and "[jitrt]" not in quiet.stderr


def test_jitrt_arch_overrides_the_argument_and_other_arguments_win(monkeypatch):
    monkeypatch.setenv("JITRT_ARCH", "cpu")
    with pytest.warns(UserWarning, match=r"JITRT_ARCH=cpu overrides jr.init\(arch='cuda'\)"):
        program = jr.init(arch="cuda", offline_cache=False)
    assert program.arch == "cpu"
    monkeypatch.setenv("JITRT_PARALLEL_GRAIN", "99")
    with pytest.warns(UserWarning, match=r"jr.init\(parallel_grain=7\) overrides "
                                         r"JITRT_PARALLEL_GRAIN=99"):
        program = jr.init(parallel_grain=7, offline_cache=False)
    assert program.config.parallel_grain == 7


def test_clear_cache_empties_the_configured_directory(tmp_path):
    jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))

    @jr.kernel
    def one(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = 1.0

    one(np.zeros(2, np.float32))
    assert jr.clear_cache() >= 1        # (it waits for the optimised copy's entry first)
    assert not list(tmp_path.glob("*.jkc"))


def test_kernel_profiler_counts_and_times_forward_and_grad_separately(capsys):
    jr.init(offline_cache=False, kernel_profiler=True)
    x = jr.field(jr.f32, shape=(8,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def energy():
        for i in x:
            loss[None] += x[i] * x[i]

    for _ in range(3):
        energy()
    energy.grad()
    launch = energy.bind()
    launch()
    stats = jr.profiler.stats()
    (fwd,) = [v for k, v in stats.items() if k.endswith("energy[]")]
    (grad,) = [v for k, v in stats.items() if k.endswith("energy.grad[]")]
    assert fwd["count"] == 4 and grad["count"] == 1
    assert 0 < fwd["min_ms"] <= fwd["mean_ms"] <= fwd["max_ms"] and fwd["total_ms"] > 0
    jr.profiler.print_info()
    out = capsys.readouterr().out
    assert "energy.grad[]" in out and "launches" in out
    jr.profiler.clear()
    assert jr.profiler.stats() == {}


def test_kernel_profiler_with_template_arguments_under_a_tape():
    # the launcher's timing variable once shared its name with the first template argument's
    # (`t0`): a kernel with a template parameter, profiled and recorded on a Tape, raised
    # UnboundLocalError (DiffTaichi's smoke_taichi.py with kernel_profiler=True)
    jr.init(offline_cache=False, kernel_profiler=True)
    a = jr.field(jr.f32, shape=(4,), needs_grad=True)
    b = jr.field(jr.f32, shape=(4,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def scaled(src: jr.template(), dst: jr.template(), k: jr.f32):
        for i in src:
            dst[i] = k * src[i]

    @jr.kernel
    def total():
        for i in b:
            loss[None] += b[i]

    a.from_numpy(np.arange(4, dtype=np.float32))
    with jr.ad.Tape(loss):
        scaled(a, b, 3.0)
        total()
    assert loss[None] == 18.0
    assert a.grad.to_numpy().tolist() == [3.0] * 4
    scaled(a, b, 2.0)
    assert jr.profiler.query_kernel_profiler_info("scaled").counter == 2


def test_taichi_profiler_names_and_init_options(capsys):
    with pytest.warns(UserWarning, match=r"device_memory_GB=\.\.\.\) is a Taichi option jitrt "
                                         r"ignores"):
        program = jr.init(offline_cache=False, kernel_profiler=True, cpu_max_num_threads=1,
                          device_memory_GB=2)
    assert program.config.num_threads == 1          # Taichi's name for num_threads
    x = jr.field(jr.f32, shape=(8,), needs_grad=True)

    @jr.kernel
    def twice():
        for i in x:
            x[i] *= 2.0

    for _ in range(3):
        twice()
    twice.grad()
    q = jr.profiler.query_kernel_profiler_info("twice")
    assert q.counter == 3 and 0 < q.min <= q.avg <= q.max
    assert jr.profiler.query_kernel_profiler_info("twice.grad").counter == 1
    assert jr.profiler.query_kernel_profiler_info("other").counter == 0
    assert 0 < jr.profiler.get_kernel_profiler_total_time() < 60
    jr.profiler.print_kernel_profiler_info()
    assert "twice[]" in capsys.readouterr().out
    jr.profiler.clear_kernel_profiler_info()
    assert jr.profiler.stats() == {}


def test_profiler_off_generates_no_timing_code():
    jr.init(offline_cache=False)

    @jr.kernel
    def plain(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = 1.0

    plain(np.zeros(2, np.float32))
    (handle,) = plain.handles.values()
    assert "clock" not in handle.launcher.source
    with pytest.raises(RuntimeError, match="kernel_profiler=True"):
        jr.profiler.stats()
