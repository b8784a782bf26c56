"""Offline cache: second processes compile nothing, damage is detected, keys follow every part."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import jitrt as jr
from jitrt.cache import store as store_mod
from jitrt.cache.keys import CacheKeyParts, cache_key

SIM = pathlib.Path(__file__).parent / "cache_programs" / "sim.py"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_sim(cache_dir: pathlib.Path, *args: str, arch: str = "cpu") -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), JITRT_ARCH=arch)
    proc = subprocess.run([sys.executable, str(SIM), str(cache_dir), *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path, arch):
    """Per arch: on a GPU the cached artifact is the cubin and PTX of the task and sizing
    kernels, keyed by compute capability and driver/toolkit versions."""
    first = run_sim(tmp_path, arch=arch)
    assert first["stats"]["compiles"] == 4          # two kernels and their adjoints
    assert first["stats"]["offline_cache_misses"] == 4
    second = run_sim(tmp_path, arch=arch)
    assert second["arch"] == arch
    assert second["stats"]["compiles"] == 0
    assert second["stats"]["offline_cache_hits"] == 4
    assert second["ids"] == first["ids"]
    assert second["grads"] == first["grads"]
    # the registry is seeded from the loaded metadata and max-reducers dispatch as after a compile
    assert second["dispatches"] >= 1
    assert second["dispatches"] == first["dispatches"]


def run_gpu_warm(cache_dir: pathlib.Path) -> tuple[dict, list[str]]:
    """gpu_warm.py (sim.py on the fake GPU vendor with CUDA's compile step) in a fresh
    process: its stats and the kinds of image the driver loaded."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), JITRT_LOG_LEVEL="debug")
    proc = subprocess.run([sys.executable, str(SIM.parent / "gpu_warm.py"), str(cache_dir)],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    *_, out, images = proc.stdout.strip().splitlines()
    return {**json.loads(out), "log": proc.stderr}, json.loads(images)["images"]


@pytest.mark.cpu_only
def test_a_warm_gpu_start_runs_no_ptxas_and_loads_cubins(tmp_path):
    """The offline cache holds the driver-ready image: a second process compiles nothing,
    runs no ptxas and hands the driver cubins only (nothing for its PTX JIT)."""
    from jitrt.backends import nvptx
    if nvptx.ptxas_path() is None:
        pytest.skip("no ptxas on this machine")
    first, images = run_gpu_warm(tmp_path)
    assert first["stats"]["compiles"] == 4 and first["stats"]["ptxas_runs"] == 4
    assert images == ["cubin"] * first["stats"]["module_loads"] and images
    # log_level="debug" names each stage with its time
    assert re.search(r"LLVM -> PTX [\d.]+ ms \(\d+ bytes\), ptxas [\d.]+ ms \(\d+-byte "
                     r"cubin for sm_80\)", first["log"])
    assert re.search(r"driver load [\d.]+ ms \(a ready image\)", first["log"])
    second, images = run_gpu_warm(tmp_path)
    stats = second["stats"]
    assert stats["compiles"] == 0 and stats["offline_cache_hits"] == 4
    assert stats["ptxas_runs"] == 0 and stats["driver_jit_loads"] == 0
    assert images == ["cubin"] * stats["module_loads"] and images
    assert "LLVM -> PTX" not in second["log"]


def test_declaration_order_does_not_change_ids_or_keys(tmp_path):
    first = run_sim(tmp_path, "--order", "ab")
    second = run_sim(tmp_path, "--order", "ba")
    assert second["stats"]["compiles"] == 0
    assert first["ids"] == second["ids"]


def test_concurrent_processes_share_one_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(SIM), str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["grads"] == results[0]["grads"] for r in results)
    assert all(r["ids"] == results[0]["ids"] for r in results)
    assert not list(tmp_path.glob(".tmp-*")), "temporary files left behind"
    after = run_sim(tmp_path)
    assert after["stats"]["compiles"] == 0 and after["grads"] == results[0]["grads"]


def entries(path: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in path.glob("*.jkc") if not p.name.startswith("runtime-"))


DAMAGES = ("truncate", "bitflip", "version", "foreign", "empty")


def damaged(data: bytes, damage: str) -> bytes:
    out = bytearray(data)
    if damage == "truncate":
        out = out[: len(out) // 2]
    elif damage == "bitflip":
        out[-10] ^= 0x40
    elif damage == "version":
        out[8:12] = (store_mod.FORMAT_VERSION - 1).to_bytes(4, "little")
    elif damage == "foreign":
        out = bytearray(b"\x7fELF" + bytes(200))
    else:
        out = bytearray()
    return bytes(out)


def test_damaged_entries_are_rebuilt(tmp_path):
    """Each kind of damage on an entry of its own (the program has four), in two rounds so
    that every kind is seen: each damaged entry is recompiled, the results are the same, and
    the rebuilt entries are written back (one process per round instead of one per kind)."""
    good = run_sim(tmp_path)
    victims = entries(tmp_path)
    assert len(victims) == 4
    for shift in (0, len(victims)):
        kinds = [DAMAGES[(shift + k) % len(DAMAGES)] for k in range(len(victims))]
        bad = {}
        for path, damage in zip(victims, kinds):
            bad[path] = damaged(path.read_bytes(), damage)
            path.write_bytes(bad[path])
        again = run_sim(tmp_path)
        assert again["stats"]["compiles"] == 4, ("damaged entries must be recompiled", kinds)
        assert again["grads"] == good["grads"]
        for path, damage in zip(victims, kinds):
            assert path.read_bytes() != bad[path], f"the entry damaged by {damage} stayed"
    healed = run_sim(tmp_path)
    assert healed["stats"]["compiles"] == 0, "recompiled entries are written back"


def test_damage_warns_once_and_never_raises(tmp_path):
    x = jr.field(jr.f32, shape=(8,))

    @jr.kernel
    def fill(k: jr.f32):
        for i in x:
            x[i] = i * k

    jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))
    fill(2.0)
    jr.sync()       # the entry is written when the optimised copy lands (tiered compile)
    for path in entries(tmp_path):
        path.write_bytes(path.read_bytes()[:-7])
    store_mod._warned.discard("truncated")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))
        fill(3.0)
        jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))
    assert np.allclose(x.to_numpy(), np.arange(8) * 3.0)
    cache_warnings = [w for w in caught if issubclass(w.category, store_mod.CacheWarning)]
    assert len(cache_warnings) == 1 and "truncated" in str(cache_warnings[0].message)


def base_parts() -> CacheKeyParts:
    return CacheKeyParts(
        kernel_source="def k(): pass", func_sources=(("f", "def f(): return 1"),),
        captured_constants=(("N", "16"),), specialization="m.k[nd(i32,1)]",
        field_layouts=(("f32", (16,), False),), frontend_ir="kernel k()",
        compile_options=(("arch", "'cpu'"),), target="x86_64 znver5 +avx",
        llvm_versions="llvmlite 0.50.0, LLVM 22.1.0", jitrt_version="0.1.0",
        compiler_hash="abc")


@pytest.mark.parametrize("part", [f.name for f in dataclasses.fields(CacheKeyParts)])
def test_every_key_part_changes_the_key(part):
    base = base_parts()
    value = getattr(base, part)
    changed = value + ("x",) if isinstance(value, tuple) else value + "x"
    assert cache_key(dataclasses.replace(base, **{part: changed})) != cache_key(base)


def test_key_is_stable():
    assert cache_key(base_parts()) == cache_key(base_parts())


def compile_key(tmp_path, make_kernel, *args) -> str:
    """The key of the entry written when `make_kernel()` is first launched."""
    jr.init(offline_cache=True, offline_cache_dir=str(tmp_path))
    before = {p.name for p in entries(tmp_path)}
    make_kernel()(*args)
    jr.sync()
    new = [p.stem for p in entries(tmp_path) if p.name not in before]
    assert len(new) == 1
    return new[0]


def test_editing_a_called_func_changes_the_key(tmp_path):
    x = jr.field(jr.f32, shape=(4,))
    src_a = "def scale(v):\n    return v * 2.0\n"
    src_b = "def scale(v):\n    return v * 3.0\n"
    keys = []
    for k, src in enumerate((src_a, src_b)):
        path = tmp_path / f"funcs{k}.py"
        path.write_text(src)
        namespace: dict = {}
        exec(compile(src, str(path), "exec"), namespace)
        scale = jr.func(namespace["scale"])

        def make_kernel(scale=scale):
            @jr.kernel
            def apply():
                for i in x:
                    x[i] = scale(1.0 * i)
            return apply

        keys.append(compile_key(tmp_path, make_kernel))
    assert keys[0] != keys[1]
    assert np.allclose(x.to_numpy(), np.arange(4) * 3.0)


def test_changing_a_captured_constant_or_field_layout_changes_the_key(tmp_path):
    keys = []
    for n, scale in ((8, 2.0), (8, 3.0), (16, 2.0)):
        y = jr.field(jr.f32, shape=(n,))

        def make_kernel(y=y, scale=scale):
            @jr.kernel
            def apply():
                for i in y:
                    y[i] = i * scale
            return apply

        keys.append(compile_key(tmp_path, make_kernel))
    assert len(set(keys)) == 3


def test_compile_options_change_the_key(tmp_path):
    z = jr.field(jr.f32, shape=(4,))

    def make_kernel():
        @jr.kernel
        def apply():
            for i in z:
                z[i] = i * 0.5
        return apply

    k1 = compile_key(tmp_path, make_kernel)
    jr.init(offline_cache=True, offline_cache_dir=str(tmp_path), default_fp=jr.f64)
    before = {p.name for p in entries(tmp_path)}
    make_kernel()()
    jr.sync()
    new = [p.stem for p in entries(tmp_path) if p.name not in before]
    assert new and new[0] != k1


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("JITRT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITRT_OFFLINE_CACHE", "0")
    jr.init()
    w = jr.field(jr.f32, shape=(4,))

    @jr.kernel
    def apply():
        for i in w:
            w[i] = 1.0

    apply()
    assert not list(tmp_path.iterdir())


def test_location_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("JITRT_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert store_mod.default_dir(str(tmp_path / "explicit")) == tmp_path / "explicit"
    assert store_mod.default_dir(None) == tmp_path / "env"
    monkeypatch.delenv("JITRT_CACHE_DIR")
    assert store_mod.default_dir(None) == tmp_path / "xdg" / "jitrt"


def test_lru_eviction_keeps_the_cap(tmp_path):
    store = store_mod.CacheStore(tmp_path, max_bytes=3000)
    for k in range(10):
        store.save(f"key{k}", f"kernel{k}", b"x" * 1000)
        os.utime(store.path(f"key{k}"), (1000 + k, 1000 + k))
    assert store.load("key9") == b"x" * 1000
    remaining = store.entries()
    assert sum(e.size for e in remaining) <= 3000
    assert "key9" in {e.key for e in remaining}
    assert "key0" not in {e.key for e in remaining}


def test_verify_reports_damage(tmp_path):
    store = store_mod.CacheStore(tmp_path, max_bytes=1 << 20)
    store.save("good", "k_good", b"payload")
    store.save("bad", "k_bad", b"payload")
    data = bytearray(store.path("bad").read_bytes())
    data[-1] ^= 1
    store.path("bad").write_bytes(bytes(data))
    bad = store.verify()
    assert [p.stem for p, _ in bad] == ["bad"]
    assert "checksum" in bad[0][1]


# ---- damaged environments: no crash, no litter, clear CLI errors -----------------------------

def test_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    store = store_mod.CacheStore(tmp_path, max_bytes=1 << 20)
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fd, mode):
            self.f = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.os, "fdopen", FullDisk)
    store_mod._warned.discard("io-write")
    with pytest.warns(store_mod.CacheWarning, match="No space left"):
        store.save("k1", "kernel", b"payload")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("action", ["info", "list", "verify", "clear"])
def test_cache_cli_refuses_a_missing_directory_or_a_file(tmp_path, action):
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    afile = tmp_path / "afile"
    afile.write_text("x")
    extra = ["--yes"] if action == "clear" else []
    for target, words in ((tmp_path / "missing", "does not exist"), (afile, "not a directory")):
        proc = subprocess.run([sys.executable, "-m", "jitrt", "cache", action, "--dir",
                               str(target), *extra], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and words in proc.stderr, (proc.stdout, proc.stderr)
    assert afile.read_text() == "x"


def test_saving_does_not_scan_the_directory_until_the_cap(tmp_path, monkeypatch):
    store = store_mod.CacheStore(tmp_path, max_bytes=1 << 30)
    for k in range(300):                       # an existing cache of many entries
        (tmp_path / f"old{k}.jkc").write_bytes(b"x" * 100)
    scans = []
    monkeypatch.setattr(store, "entries", lambda: scans.append(1) or [])
    for k in range(50):
        store.save(f"key{k}", "kernel", b"payload")
    assert scans == []                          # no per-save directory listing
    small = store_mod.CacheStore(tmp_path, max_bytes=20_000)
    for k in range(5):
        small.save(f"new{k}", "kernel", b"y" * 1000)
    total = sum(p.stat().st_size for p in tmp_path.glob("*.jkc"))
    assert total <= 20_000                      # the cap still holds after the scan


MOVED = '''
import json, sys
import numpy as np
import jitrt as jr
jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=sys.argv[1])


@jr.func
def twice(v):
    return v * 2


@jr.kernel
def poke(a: jr.types.ndarray(dtype=jr.f32, ndim=1), k: jr.i32):
    for i in range(a.shape[0]):
        a[i + k] = twice(1.0)


try:
    poke(np.zeros(4, np.float32), 1)
except jr.KernelRuntimeError as exc:
    print(json.dumps({"error": str(exc), "stats": jr.debug.stats()}))
'''


@pytest.mark.cpu_only
def test_a_cached_kernel_reports_faults_where_its_source_is_now(tmp_path):
    """The key covers source texts, not paths: the same kernel in another file, at another line,
    loads from the cache and its faults name the file and line it is at now."""
    first, second = tmp_path / "first.py", tmp_path / "moved" / "second.py"
    second.parent.mkdir()
    first.write_text(MOVED)
    second.write_text("# moved\n# and shifted\n# by three lines\n" + MOVED)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = []
    for script in (first, second):
        proc = subprocess.run([sys.executable, str(script), str(cache)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    line = MOVED.splitlines().index("        a[i + k] = twice(1.0)") + 1
    assert f"first.py:{line}:" in out[0]["error"]
    assert out[1]["stats"]["compiles"] == 0 and out[1]["stats"]["offline_cache_hits"] == 1
    assert f"second.py:{line + 3}:" in out[1]["error"] and "first.py" not in out[1]["error"]
    assert "a[i + k] = twice(1.0)" in out[1]["error"]        # the source line, with its caret


def test_an_entry_stamped_in_the_future_is_evicted_before_a_fresh_one(tmp_path):
    """A junk entry whose mtime lies years ahead used to count as the most recent use: every
    fresh entry was evicted instead and the cache never hit."""
    store = store_mod.CacheStore(tmp_path, max_bytes=2500)
    store.save("junk", "kernel_junk", b"j" * 1000)
    future = time.time() + 10 * 365 * 86400
    os.utime(store.path("junk"), (future, future))
    store.save("old", "kernel_old", b"o" * 1000)
    os.utime(store.path("old"), (time.time() - 3600,) * 2)
    store.save("fresh", "kernel_fresh", b"f" * 1000)      # past the cap: one entry goes
    assert sorted(e.key for e in store.entries()) == ["fresh", "old"]
    assert store.load("fresh") == b"f" * 1000


def test_a_slightly_future_mtime_still_counts_as_recent(tmp_path):
    """Within `FUTURE_SLACK_S` (a file server's clock a little ahead) an mtime is trusted."""
    store = store_mod.CacheStore(tmp_path, max_bytes=2500)
    store.save("ahead", "kernel_ahead", b"a" * 1000)
    soon = time.time() + store_mod.FUTURE_SLACK_S / 2
    os.utime(store.path("ahead"), (soon, soon))
    store.save("old", "kernel_old", b"o" * 1000)
    os.utime(store.path("old"), (time.time() - 3600,) * 2)
    store.save("fresh", "kernel_fresh", b"f" * 1000)
    assert sorted(e.key for e in store.entries()) == ["ahead", "fresh"]


def test_source_hash_follows_stat_not_contents(tmp_path, monkeypatch):
    """jitrt's part of every key (`keys.source_hash`) comes from the .py files' paths, sizes
    and modification times, without reading them (docs/offline_cache.md, "Keys")."""
    import builtins
    from jitrt.cache import keys
    (tmp_path / "sub").mkdir()
    (tmp_path / "__pycache__").mkdir()
    for rel, text in (("a.py", "x = 1\n"), ("sub/b.py", "y = 2\n"), ("notes.txt", "n"),
                      ("__pycache__/c.py", "z")):
        (tmp_path / rel).write_text(text)
        os.utime(tmp_path / rel, ns=(1_000_000_000, 1_000_000_000))

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a source file was opened: {args[0]}")
    monkeypatch.setattr(builtins, "open", refused)
    first = keys.source_hash(str(tmp_path))
    monkeypatch.undo()
    b = tmp_path / "sub" / "b.py"
    os.utime(b, ns=(2_000_000_000, 2_000_000_000))           # touched: a new hash
    assert keys.source_hash(str(tmp_path)) != first
    b.write_text("y = 3\n")                                    # same size, old time: the same
    os.utime(b, ns=(1_000_000_000, 1_000_000_000))
    assert keys.source_hash(str(tmp_path)) == first
    b.write_text("y = 30\n")                                   # another size: a new hash
    os.utime(b, ns=(1_000_000_000, 1_000_000_000))
    assert keys.source_hash(str(tmp_path)) != first
    (tmp_path / "notes.txt").write_text("changed")             # not a .py file: ignored
    (tmp_path / "__pycache__" / "c.py").write_text("ignored")
    b.write_text("y = 3\n")
    os.utime(b, ns=(1_000_000_000, 1_000_000_000))
    assert keys.source_hash(str(tmp_path)) == first


def test_pinned_compiler_hash_is_for_development_only(monkeypatch):
    """`JITRT_DEV_PIN_COMPILER_HASH` replaces jitrt's source hash in every key (development:
    a launch-path edit reuses a long build); without it the hash is the sources' again."""
    from jitrt.cache import keys
    monkeypatch.delenv(keys.PIN_ENV, raising=False)
    keys.compiler_hash.cache_clear()
    try:
        real = keys.compiler_hash()
        assert not real.startswith("pinned:")
        monkeypatch.setenv(keys.PIN_ENV, "dev1")
        keys.compiler_hash.cache_clear()
        assert keys.compiler_hash() == "pinned:dev1"
        monkeypatch.delenv(keys.PIN_ENV)
        keys.compiler_hash.cache_clear()
        assert keys.compiler_hash() == real
    finally:
        keys.compiler_hash.cache_clear()
