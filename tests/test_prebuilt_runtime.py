"""The runtime module's shipped object code (jitrt/cache/prebuilt.py): current with the sources,
built from every source of its IR, loaded by a cold start instead of compiling."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import llvmlite.binding as llvm
import pytest

from jitrt.backends.llvm_setup import init_all_targets
from jitrt.cache import prebuilt
from jitrt.native import threadpool

REGENERATE = "run `python -m jitrt.cache.prebuilt` and commit jitrt/cache/objects/"


def target_data_layout(triple: str, cpu: str) -> str:
    init_all_targets()
    tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features="")
    return str(tm.target_data)


@pytest.mark.parametrize("triple", sorted(prebuilt.BASELINE_CPUS))
def test_shipped_object_is_built_from_todays_sources(triple):
    layout = target_data_layout(triple, prebuilt.BASELINE_CPUS[triple])
    key = prebuilt.sources_key(triple, layout)
    assert key is not None, f"a file of RUNTIME_SOURCES is missing: {prebuilt.RUNTIME_SOURCES}"
    path = prebuilt.object_path(triple, key)
    assert os.path.exists(path), f"no runtime object for today's sources ({triple}): {REGENERATE}"
    shipped = [name for name in os.listdir(prebuilt.OBJECTS)
               if name.startswith(f"runtime-{triple}-") and name.endswith(".o")]
    assert shipped == [os.path.basename(path)], \
        f"stale objects beside the current one: {shipped}: {REGENERATE}"
    manifest = prebuilt.read_manifest()[os.path.basename(path)]
    text = str(threadpool.build_runtime_module(triple, layout))
    assert prebuilt.ir_hash(text) == manifest["ir"], (
        "the runtime module's IR changed but not the key of its sources: a file that makes "
        "the IR is missing from prebuilt.RUNTIME_SOURCES (add it, then "
        f"{REGENERATE.removeprefix('run ')})")


def test_every_source_of_the_runtime_ir_is_in_the_key():
    """Every jitrt file whose code runs while the module is built is one of RUNTIME_SOURCES
    (a file holding only constants is caught by the IR check above)."""
    ran: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            ran.add(os.path.realpath(frame.f_code.co_filename))

    sys.setprofile(profile)
    try:
        threadpool.build_runtime_module("x86_64-unknown-linux-gnu",
                                        target_data_layout("x86_64-unknown-linux-gnu",
                                                           "x86-64"))
    finally:
        sys.setprofile(None)
    package = os.path.realpath(prebuilt.PACKAGE) + os.sep
    ours = {os.path.relpath(f, package).replace(os.sep, "/") for f in ran
            if f.startswith(package)}
    assert ours and ours <= set(prebuilt.RUNTIME_SOURCES), sorted(ours)


def test_a_missing_source_loads_nothing(monkeypatch):
    monkeypatch.setattr(prebuilt, "RUNTIME_SOURCES",
                        prebuilt.RUNTIME_SOURCES + ("codegen/no_such_file.py",))
    triple = "x86_64-unknown-linux-gnu"
    assert prebuilt.load(triple, target_data_layout(triple, "x86-64")) is None


CHILD = r"""
import json, logging, sys
import numpy as np
import jitrt as jr
messages = []
class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())
logging.getLogger("jitrt").addHandler(Keep())
jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=sys.argv[1], log_level="debug")
x = jr.ndarray(jr.f32, shape=(8,))

@jr.kernel
def fill(x: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        x[i] = i * 0.5

fill(x)
fill(x)   # the second launch goes through the native launcher (the runtime module's)
print(json.dumps({"x": x.to_numpy().tolist(),
                  "runtime": [m for m in messages if m.startswith("runtime module")]}))
"""


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                    reason="objects are shipped for x86_64 Linux")
def test_cold_start_loads_the_shipped_runtime_and_caches_no_runtime_entry(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(prebuilt.PACKAGE) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    env.pop("JITRT_LOG_LEVEL", None)
    proc = subprocess.run([sys.executable, str(script), str(cache)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["x"] == [i * 0.5 for i in range(8)]
    assert out["runtime"] == ["runtime module: the shipped object for x86_64-unknown-linux-gnu"]
    assert not [p.name for p in cache.iterdir() if p.name.startswith("runtime-")]
