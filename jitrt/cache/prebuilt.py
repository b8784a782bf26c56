"""The host runtime module, prebuilt: object code shipped with the package, per target.

Stage: cache. The runtime module (the worker pool, the native launcher, the GPU entry:
`native/threadpool.build_runtime_module`) is the same for every program on a target, and
compiling it at O3 took 0.3-0.4 s of CPU at the first `jr.init` with an empty cache, most of
a cold start (docs/performance.md, "Cold start"). So its object code, compiled for the
target's baseline CPU (x86-64 without extensions: the pool and the launcher move integers and
pointers), ships in `jitrt/cache/objects/`, named by the target and a key:

    key = xxh3-64 over the triple, the data layout and the bytes of RUNTIME_SOURCES

A process whose triple, data layout and sources give the key of a shipped file loads that
file and compiles nothing. Any edit of those sources changes the key, and the runtime then
compiles the module as before (and keeps it in the offline cache), so a shipped object is
never used for sources it was not built from. `python -m jitrt.cache.prebuilt` rebuilds the
objects after such an edit; `tests/test_prebuilt_runtime.py` fails until it is run, and fails
too when the module's IR changes while the key does not (a source of the IR missing from
RUNTIME_SOURCES). `objects/MANIFEST` lists each object with the hash of the IR it was
compiled from and the llvmlite that compiled it (read by the tests and the tool only).
"""
from __future__ import annotations

import os
import sys

import xxhash

# the files (under jitrt/) whose code or constants make the runtime module's IR
RUNTIME_SOURCES = ("native/threadpool.py", "native/native_launcher.py",
                   "native/native_gpu_entry.py", "native/launch_table.py", "codegen/abi.py",
                   "codegen/interrupts.py")
# triples an object is built for by the tool: the ones whose baseline CPU is named here
BASELINE_CPUS = {"x86_64-unknown-linux-gnu": "x86-64"}
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBJECTS = os.path.join(PACKAGE, "cache", "objects")
MANIFEST = os.path.join(OBJECTS, "MANIFEST")


def sources_key(triple: str, data_layout: str) -> str | None:
    """The key of the runtime module for this target and these sources (None when a source
    file is missing: a moved file means the list is out of date, and nothing is loaded)."""
    h = xxhash.xxh3_64()
    h.update(f"{triple}\0{data_layout}\0".encode())
    for rel in RUNTIME_SOURCES:
        try:
            with open(os.path.join(PACKAGE, rel), "rb") as f:
                data = f.read()
        except OSError:
            return None
        h.update(rel.encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def object_path(triple: str, key: str) -> str:
    return os.path.join(OBJECTS, f"runtime-{triple}-{key}.o")


def load(triple: str, data_layout: str) -> bytes | None:
    """The shipped object code of the runtime module for this target and today's sources,
    or None (another target, or sources edited since the objects were built)."""
    key = sources_key(triple, data_layout)
    if key is None:
        return None
    try:
        with open(object_path(triple, key), "rb") as f:
            return f.read()
    except OSError:
        return None


def build(triple: str, cpu: str) -> tuple[str, str, bytes]:
    """(key, IR hash, object code) of the runtime module for `triple`'s `cpu`, at O3."""
    import llvmlite.binding as llvm

    from ..backends.llvm_setup import init_all_targets, optimize
    from ..native import threadpool
    init_all_targets()
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features="", opt=3, reloc="static", codemodel="large")
    data_layout = str(tm.target_data)
    key = sources_key(triple, data_layout)
    if key is None:
        raise FileNotFoundError(f"a file of RUNTIME_SOURCES is missing: {RUNTIME_SOURCES}")
    text = str(threadpool.build_runtime_module(triple, data_layout))
    mod = llvm.parse_assembly(text)
    mod.verify()
    optimize(mod, tm)
    return key, ir_hash(text), tm.emit_object(mod)


def ir_hash(text: str) -> str:
    return xxhash.xxh3_64_hexdigest(text.encode())


def read_manifest() -> dict[str, dict[str, str]]:
    """object file name -> its manifest fields (triple, cpu, ir, llvmlite)."""
    out: dict[str, dict[str, str]] = {}
    with open(MANIFEST, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, *fields = line.split()
                out[name] = dict(fld.split("=", 1) for fld in fields)
    return out


def main() -> int:
    """Rebuild every shipped object from today's sources (removing the old ones)."""
    import llvmlite
    os.makedirs(OBJECTS, exist_ok=True)
    for name in os.listdir(OBJECTS):
        if name.endswith(".o"):
            os.remove(os.path.join(OBJECTS, name))
    lines = ["# written by `python -m jitrt.cache.prebuilt`: object, target, baseline CPU, "
             "xxh3-64 of the IR it was compiled from, the llvmlite that compiled it"]
    for triple, cpu in sorted(BASELINE_CPUS.items()):
        key, ir, obj = build(triple, cpu)
        path = object_path(triple, key)
        with open(path, "wb") as f:
            f.write(obj)
        lines.append(f"{os.path.basename(path)} triple={triple} cpu={cpu} ir={ir} "
                     f"llvmlite={llvmlite.__version__}")
        print(f"wrote {os.path.relpath(path)} ({len(obj)} bytes)", file=sys.stderr)
    with open(MANIFEST, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
