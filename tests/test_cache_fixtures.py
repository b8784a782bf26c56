"""Cache fixtures: entries written by this format are used; an older format is rebuilt.

If `test_current_fixture_is_used` fails after a change to the frontend or the artifact
classes, regenerate the fixtures (`python cache_fixtures/make_fixtures.py`) and, when the
stored classes changed, bump `jitrt.cache.store.FORMAT_VERSION` too.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from jitrt.cache import keys, store

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "cache_fixtures"
PROGRAM = FIXTURES / "program.py"


def run_program(cache_dir: pathlib.Path, meta: pathlib.Path) -> tuple[dict, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-W", "always", str(PROGRAM), str(cache_dir),
                           "--pin", str(meta)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def copy(name: str, tmp_path: pathlib.Path) -> pathlib.Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / name, dst)
    return dst


def test_current_fixture_decodes_with_this_format():
    meta = json.loads((FIXTURES / "current" / "meta.json").read_text())
    assert meta["format_version"] == store.FORMAT_VERSION
    artifacts = [store.decode(p.read_bytes(), p.stem)
                 for p in (FIXTURES / "current").glob("*.jkc")]
    assert len(artifacts) == 3
    kernels = [a for a in artifacts if not isinstance(a, bytes)]
    names = sorted(a.name for a in kernels)
    assert names[0].endswith("fixture_kernel.grad[nd(f64,1),nd(i32,1),nd(f64,1)]")
    grad = next(a for a in kernels if ".grad[" in a.name)
    assert grad.lowered.stacks and grad.specs, "sizing metadata is stored with the code"
    assert grad.registry_ids


def test_current_fixture_is_used(tmp_path):
    meta = json.loads((FIXTURES / "current" / "meta.json").read_text())
    if meta["host_target"] != keys.host_target():
        pytest.skip("fixture object code was written for another CPU; only decoding is checked")
    if meta["llvm_versions"] != keys.llvm_versions():
        pytest.skip(f"fixture written with {meta['llvm_versions']}, this is "
                    f"{keys.llvm_versions()}: a different key by design")
    cache = copy("current", tmp_path)
    result, _ = run_program(cache, cache / "meta.json")
    assert result["stats"]["compiles"] == 0, (
        "the fixture was not used: regenerate it with python cache_fixtures/make_fixtures.py")
    assert result["stats"]["offline_cache_hits"] == 2
    fresh, _ = run_program(tmp_path / "fresh", cache / "meta.json")
    assert fresh["grad"] == result["grad"] and fresh["ids"] == result["ids"]


def test_old_format_fixture_is_rejected_and_rebuilt(tmp_path):
    cache = copy("old_format", tmp_path)
    result, stderr = run_program(cache, cache / "meta.json")
    assert result["stats"]["compiles"] == 2
    assert result["stats"]["offline_cache_hits"] == 0
    assert "format 1" in stderr and "CacheWarning" in stderr
    for path in cache.glob("*.jkc"):
        if not path.name.startswith("runtime-"):
            header, _ = store.decode_header(path.read_bytes())   # rewritten in this format
    again, _ = run_program(cache, cache / "meta.json")
    assert again["stats"]["compiles"] == 0
    assert again["grad"] == result["grad"]
