"""Dropped optimised compiles finished after the process (`jitrt/cache/finishing.py`): the
detached `jitrt cache finish` an exit starts, its per-entry locks, and an exit that leaves an
optimised copy stored meanwhile alone. The processes run test_tiered_compile.py's
DROPPED_THEN_RESUMED script (a kernel whose optimised copy never comes in mode "never")."""
import subprocess
import sys

import pytest

from test_tiered_compile import DROPPED_THEN_RESUMED

pytestmark = pytest.mark.cpu_only


def quick_entries(cache: str) -> list[tuple[str, int]]:
    """(tier, drops) of the cache's entries of DROPPED_THEN_RESUMED's kernel."""
    import pathlib

    from jitrt.cache.store import CacheStore
    store = CacheStore(pathlib.Path(cache), 1 << 40)
    found = [store.load(e.key) for e in store.entries()]
    return [(a.tier, a.drops) for a in found if "twice" in a.name]


def run_dropped(script, cache: str, mode: str, finish: str = "0") -> list[str]:
    import os
    proc = subprocess.run([sys.executable, str(script), cache, mode], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "JITRT_FINISH_AT_EXIT":
                                                       finish})
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc.stdout.split()


def test_a_process_of_their_own_finishes_the_optimised_copies_dropped_at_exit(tmp_path):
    """A process that ends before a kernel's optimised copy stores its quick copy and starts
    `python -m jitrt cache finish --keys ... --background` (cache/finishing.py), which
    compiles the optimised copy into the entry; the next process then loads it and compiles
    nothing."""
    import pathlib
    import time

    from jitrt.cache import finishing
    script, cache = tmp_path / "dropped.py", str(tmp_path / "cache")
    script.write_text(DROPPED_THEN_RESUMED)
    assert run_dropped(script, cache, "never", finish="1") == ["1", "0", "0", "8.0"]
    deadline = time.monotonic() + 120
    while quick_entries(cache) != [("", 0)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert quick_entries(cache) == [("", 0)]                 # finished by the other process
    deadline = time.monotonic() + 30                          # (its lock goes just after)
    while list(pathlib.Path(cache).glob(f"*{finishing.LOCK_SUFFIX}")) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(pathlib.Path(cache).glob(f"*{finishing.LOCK_SUFFIX}"))
    assert run_dropped(script, cache, "never") == ["0", "1", "0", "8.0"]   # a plain hit


def test_exit_keeps_an_optimised_copy_stored_while_the_process_ran(tmp_path):
    """A process runs a kernel's quick copy from the cache; meanwhile a finishing process
    stores its optimised copy; at exit the process, whose own optimised compile never came,
    leaves that entry alone instead of storing its quick copy over it."""
    script, cache = tmp_path / "dropped.py", str(tmp_path / "cache")
    script.write_text(DROPPED_THEN_RESUMED + """
if sys.argv[2] == "never" and len(sys.argv) > 3:     # the cache is finished meanwhile
    import subprocess
    subprocess.run([sys.executable, "-m", "jitrt", "cache", "finish", "--dir", sys.argv[1]],
                   check=True, capture_output=True)
""")
    assert run_dropped(script, cache, "never") == ["1", "0", "0", "8.0"]
    assert quick_entries(cache) == [("quick", 1)]
    import os
    proc = subprocess.run([sys.executable, str(script), cache, "never", "finish"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JITRT_FINISH_AT_EXIT": "0"})
    assert proc.stdout.split()[:4] == ["0", "1", "1", "8.0"], proc.stderr[-2000:]
    assert quick_entries(cache) == [("", 0)]


def test_a_kernel_a_finisher_holds_is_not_compiled_in_the_foreground_too(tmp_path):
    from jitrt.cache import finishing
    script, cache = tmp_path / "dropped.py", str(tmp_path / "cache")
    script.write_text(DROPPED_THEN_RESUMED + 'print(jr.debug.stats()["optimised_after_drops"])\n')
    assert run_dropped(script, cache, "never") == ["1", "0", "0", "8.0", "0"]
    assert run_dropped(script, cache, "never") == ["0", "1", "1", "8.0", "0"]
    import pathlib

    from jitrt.cache.store import CacheStore
    (entry,) = CacheStore(pathlib.Path(cache), 1 << 40).entries()
    with finishing.holding(cache, entry.key) as held:
        assert held
        with finishing.holding(cache, entry.key) as again:
            assert not again                                 # one holder at a time
        assert run_dropped(script, cache, "never") == ["0", "1", "1", "8.0", "0"]
    assert run_dropped(script, cache, "go") == ["0", "1", "0", "8.0", "1"]   # now foreground


def test_a_stale_finishing_lock_is_taken_over(tmp_path):
    import os

    from jitrt.cache import finishing
    lock = finishing.lock_path(tmp_path, "k")
    lock.write_text("")
    assert finishing.busy(tmp_path, "k")
    old = lock.stat().st_mtime - finishing.STALE_S - 1
    os.utime(lock, (old, old))
    assert not finishing.busy(tmp_path, "k")
    with finishing.holding(tmp_path, "k") as held:
        assert held and finishing.busy(tmp_path, "k")
    assert not lock.exists()
