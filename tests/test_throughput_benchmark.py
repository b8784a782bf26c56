"""benchmarks/throughput.py: interleaved rounds, medians and their spread (docs/performance.md,
"Throughput of generated code")."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "benchmarks", "throughput.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("throughput_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratio_is_the_median_of_per_round_ratios_with_quartiles():
    bench = load_bench()
    assert bench.quartiles([5.0, 1.0, 4.0, 2.0, 3.0]) == (2.0, 3.0, 4.0)
    assert bench.quartiles([7.0]) == (7.0, 7.0, 7.0)
    # rounds 2/1, 2/2, 2/4: a ratio per round, not a ratio of two medians (1.0 here too)
    assert bench.ratio_cell([2.0, 2.0, 2.0], [1.0, 2.0, 4.0]) == " 1.00x [0.75-1.50]"
    assert bench.ratio_cell([1.0, 3.0, 9.0], [1.0, 1.0, 1.0]) == " 3.00x [2.00-6.00]"


def test_implementations_take_turns_in_a_rotating_order(monkeypatch):
    bench = load_bench()
    calls = []
    monkeypatch.setattr(bench.time, "sleep", lambda s: calls.append("pause"))
    impls = {k: (lambda k=k: calls.append(k)) for k in ("a", "b", "c")}
    out = bench.interleaved(impls, rounds=3, calls=2, pause=0.1)
    assert [len(v) for v in out.values()] == [3, 3, 3]
    timed = calls[3:]           # after one warm-up call each
    assert timed == ["pause", "a", "a", "pause", "b", "b", "pause", "c", "c",
                     "pause", "b", "b", "pause", "c", "c", "pause", "a", "a",
                     "pause", "c", "c", "pause", "a", "a", "pause", "b", "b"]


@pytest.mark.cpu_only
def test_throughput_benchmark_prints_medians_and_spread():
    proc = subprocess.run([sys.executable, BENCH, "--n", "4096", "--grid", "64", "--threads", "1",
                           "--rounds", "3", "--repeats", "2", "--pause", "0",
                           "--kernels", "saxpy,stencil"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr[-2000:]
    head, columns, *rows = proc.stdout.splitlines()
    assert "3 interleaved rounds of 2 calls" in head
    assert columns.split()[:6] == ["threads", "kernel", "jitrt", "ms", "GB/s", "numpy"]
    cells = [re.match(r"\s*1\s+(saxpy|stencil 64x64)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)",
                      r) for r in rows]
    assert [c.group(1) if c else r for c, r in zip(cells, rows)] == ["saxpy", "stencil 64x64"]
    for c in cells:
        jitrt_ms, gbs, numpy_ms = (float(c.group(i)) for i in (2, 3, 4))
        assert gbs > 0 and min(jitrt_ms, numpy_ms) >= 0, c.string    # (ms: 2 decimals)
        assert (c.group(5) == "nan") == ("numba not installed" in head), c.string
