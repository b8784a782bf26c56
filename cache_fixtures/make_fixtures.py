"""Regenerate the cache fixtures (run after changing the cache format or the frontend):

    python cache_fixtures/make_fixtures.py

- `current/`: entries written by this version through `program.py`, plus `meta.json` with
  the compiler hash, jitrt version and host target they were written under;
- `old_format/`: the same entries rewritten by hand in format 1 (no header, no checksum:
  magic, version, raw pickle), which this version must reject and rebuild.
"""
import json
import pathlib
import shutil
import struct
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from jitrt import __version__
    from jitrt.cache import keys, store
    current, old = HERE / "current", HERE / "old_format"
    for d in (current, old):
        shutil.rmtree(d, ignore_errors=True)
    subprocess.run([sys.executable, str(HERE / "program.py"), str(current)], check=True,
                   env={"PYTHONPATH": str(ROOT), "PATH": ""})
    meta = {"compiler_hash": keys.compiler_hash(), "jitrt_version": __version__,
            "host_target": keys.host_target(), "llvm_versions": keys.llvm_versions(),
            "format_version": store.FORMAT_VERSION}
    (current / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    old.mkdir()
    for path in current.glob("*.jkc"):
        data = path.read_bytes()
        header, start = store.decode_header(data)
        payload = data[start:]
        (old / path.name).write_bytes(struct.pack("<8sI", store.MAGIC, 1) + payload)
    shutil.copy(current / "meta.json", old / "meta.json")
    print(f"wrote {current} and {old}")


if __name__ == "__main__":
    main()
