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
import struct
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


def old_format_under_this_machines_keys(tmp_path: pathlib.Path) -> pathlib.Path:
    """The old-format entries, renamed to the keys this machine computes for the same kernels.

    Keys include the host CPU and LLVM version, so on another machine the checked-in names are
    never looked up; a fresh run tells which key each kernel gets here, and each old entry is
    put under the key of the kernel whose name its payload holds."""
    fresh = tmp_path / "keys"
    run_program(fresh, FIXTURES / "old_format" / "meta.json")
    cache = tmp_path / "old_format"
    cache.mkdir()
    shutil.copy(FIXTURES / "old_format" / "meta.json", cache / "meta.json")
    olds = {p: p.read_bytes() for p in (FIXTURES / "old_format").glob("*.jkc")}
    for path in fresh.glob("*.jkc"):
        header, _ = store.decode_header(path.read_bytes())
        name = header["kernel_name"]
        if path.name.startswith("runtime-"):
            match = [p for p in olds if p.name.startswith("runtime-")]
        else:
            match = [p for p, data in olds.items()
                     if not p.name.startswith("runtime-") and pickle_holds(data, name)]
        assert len(match) == 1, f"no single old-format entry for {name}"
        (cache / path.name).write_bytes(olds[match[0]])
    return cache


def pickle_holds(data: bytes, name: str) -> bool:
    """Whether a pickle holds the string `name` itself (its length-prefixed encoding), not as
    a prefix of a longer string."""
    raw = name.encode()
    short = b"\x8c" + bytes([len(raw)]) + raw if len(raw) < 256 else None
    return (short is not None and short in data) or \
        (b"X" + struct.pack("<I", len(raw)) + raw) in data


def test_old_format_fixture_is_rejected_and_rebuilt(tmp_path):
    cache = old_format_under_this_machines_keys(tmp_path)
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
