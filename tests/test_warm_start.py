"""Warm start: a kernel whose pre-key manifest matches loads without the frontend, and never
stale: every value the frontend reads is checked in the new process (runtime/prekey.py).

Each test writes a small program (a module of its own, plus helper modules where the test
changes one), runs it in a fresh process against one cache directory, changes one input
between processes and checks the result against numpy and the cache counters.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import jitrt as jr
from jitrt.cache import store as store_mod
from jitrt.runtime import prekey

ROOT = pathlib.Path(__file__).resolve().parents[1]

MAIN = """
import json, sys
import numpy as np
import jitrt as jr
jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=sys.argv[1])
{body}
jr.sync()
stats = jr.debug.stats()
print(json.dumps({{"out": np.asarray(out()).tolist(), "compiles": stats["compiles"],
                  "skips": stats["offline_cache_frontend_skips"],
                  "hits": stats["offline_cache_hits"],
                  "lowering": "jitrt.frontend.lower" in sys.modules}}))
"""


def run(tmp_path: pathlib.Path, body: str, **modules: str) -> dict:
    """Write the program (and helper modules) into tmp_path/src and run it once."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, text in modules.items():
        path, text = src / f"{name}.py", textwrap.dedent(text)
        if not path.exists() or path.read_text() != text:     # (its stamp is seen)
            path.write_text(text)
    (src / "prog.py").write_text(MAIN.format(body=textwrap.dedent(body)))
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{src}", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, str(src / "prog.py"), str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """`filled(tmp_path, name, *runs)`: tmp_path/cache becomes a copy of a cache directory
    that the `runs` ((body, modules) each, in turn) filled once for this module under `name`;
    returns their results. Tests that start from the same processes share them (a cache
    directory copied elsewhere warm-starts the same)."""
    done: dict[str, tuple[pathlib.Path, list[dict]]] = {}

    def copy_into(tmp_path: pathlib.Path, name: str, *runs: tuple[str, dict]) -> list[dict]:
        if name not in done:
            base = tmp_path_factory.mktemp(name)
            done[name] = (base / "cache", [run(base, body, **modules) for body, modules in runs])
        cache, results = done[name]
        shutil.copytree(cache, tmp_path / "cache")
        return results
    return copy_into


ADSTACK = """
N = 64
x = jr.field(jr.f32, shape=(N,), needs_grad=True)
loss = jr.field(jr.f32, shape=(), needs_grad=True)
cnt = jr.ndarray(jr.i32, shape=(N,))

@jr.kernel
def chain(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
    for i in x:
        v = x[i]
        for _ in range(cnt[i]):
            v = jr.sin(v) * 1.1 + 0.1
        loss[None] += v

x.from_numpy(np.linspace(0, 1, N, dtype=np.float32))
cnt.from_numpy((np.arange(N) % 4 + 1).astype(np.int32))
chain(cnt)
loss.grad[None] = 1
chain.grad(cnt)
def out():
    return [float(loss[None])] + x.grad.to_numpy().tolist()
"""


def adstack_want(n: int = 64) -> list[float]:
    v = np.linspace(0, 1, n, dtype=np.float32).astype(np.float64)
    counts, d = np.arange(n) % 4 + 1, np.ones(n)
    for step in range(4):
        live = step < counts
        d = np.where(live, d * np.cos(v) * 1.1, d)
        v = np.where(live, np.sin(v) * 1.1 + 0.1, v)
    return [float(v.sum())] + d.tolist()


def test_second_process_skips_the_frontend(tmp_path, filled):
    cold, = filled(tmp_path, "adstack", (ADSTACK, {}))
    assert cold["compiles"] == 2 and cold["skips"] == 0
    warm = run(tmp_path, ADSTACK)
    assert warm["compiles"] == 0 and warm["hits"] == 2 and warm["skips"] == 2
    assert not warm["lowering"], "a warm start must not import the frontend's lowering"
    assert np.allclose(warm["out"], adstack_want(), rtol=1e-5, atol=1e-6)
    assert warm["out"] == cold["out"]
    assert {p.suffix for p in (tmp_path / "cache").iterdir()} == {".jkc", ".jkm"}
    before = {p.name: p.read_bytes() for p in (tmp_path / "cache").iterdir()}
    assert run(tmp_path, ADSTACK)["skips"] == 2
    after = {p.name: p.read_bytes() for p in (tmp_path / "cache").iterdir()}
    assert after == before, "a warm start that found everything writes nothing"
    files = list((tmp_path / "cache").glob("*.jkm"))   # one for the kernel and its adjoint
    assert len(files) == 1
    warm = prekey.WarmFile(store_mod.CacheStore(tmp_path / "cache", 1 << 30), files[0].stem, "")
    assert len(warm.manifests) == 2 and len(warm.codes) == 2   # two fast launchers' code


SCALE = """
from config import SCALE, OFFSET
a = jr.ndarray(jr.f32, shape=(8,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = i * SCALE + OFFSET

k(a)
def out():
    return a.to_numpy()
"""


@pytest.mark.parametrize("second", ["SCALE = 3.0\nOFFSET = 1", "SCALE = 2.0\nOFFSET = 1.0",
                                    "SCALE = 2\nOFFSET = 1"])
def test_a_changed_global_constant_is_seen(tmp_path, second, filled):
    """Also int -> float of the same value, and float -> int: another type is another value."""
    config = {"config": "SCALE = 2.0\nOFFSET = 1\n"}
    first, warm = filled(tmp_path, "scale", (SCALE, config), (SCALE, config))
    assert first["out"] == [i * 2.0 + 1 for i in range(8)]
    assert warm["skips"] == 1
    ns: dict = {}
    exec(second, ns)
    again = run(tmp_path, SCALE, config=second + "\n")
    assert again["out"] == [i * ns["SCALE"] + ns["OFFSET"] for i in range(8)]
    assert again["skips"] == 0


MODULE_ATTR = """
import config
a = jr.ndarray(jr.f32, shape=(4,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = config.SCALE * i

k(a)
def out():
    return a.to_numpy()
"""


def test_a_module_attribute_is_checked(tmp_path):
    assert run(tmp_path, MODULE_ATTR, config="SCALE = 2.0\n")["out"] == [0, 2, 4, 6]
    assert run(tmp_path, MODULE_ATTR, config="SCALE = 2.0\n")["skips"] == 1
    again = run(tmp_path, MODULE_ATTR, config="SCALE = 5.0\n")
    assert again["out"] == [0, 5, 10, 15] and again["skips"] == 0
    back = run(tmp_path, MODULE_ATTR, config="SCALE = 2.0\n")   # the older alternative
    assert back["out"] == [0, 2, 4, 6] and back["skips"] == 1 and back["compiles"] == 0


FUNC = """
from helpers import f
a = jr.ndarray(jr.f32, shape=(4,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = f(i)

k(a)
def out():
    return a.to_numpy()
"""

HELPERS = """
import jitrt as jr
K = 3

@jr.func
def g(v):
    return v * K

@jr.func
def f(v):
    return g(v) + {plus}
"""


def test_a_changed_func_source_is_seen(tmp_path, filled):
    first, = filled(tmp_path, "func", (FUNC, {"helpers": HELPERS.format(plus=1)}))
    assert first["out"] == [1, 4, 7, 10]
    assert run(tmp_path, FUNC, helpers=HELPERS.format(plus=1))["skips"] == 1
    again = run(tmp_path, FUNC, helpers=HELPERS.format(plus=10))
    assert again["out"] == [10, 13, 16, 19] and again["skips"] == 0 and again["compiles"] == 1


def test_a_global_of_an_inlined_func_is_seen(tmp_path, filled):
    """`K` is read by `g`, which `f` calls: a global of a func two levels down."""
    filled(tmp_path, "func", (FUNC, {"helpers": HELPERS.format(plus=1)}))
    again = run(tmp_path, FUNC, helpers=HELPERS.format(plus=1).replace("K = 3", "K = 5"))
    assert again["out"] == [1, 6, 11, 16] and again["skips"] == 0


FIELDS = """
from config import SHAPE, DTYPE, SAME
src = jr.field(DTYPE, shape=SHAPE)
dst = src if SAME else jr.field(DTYPE, shape=SHAPE)

@jr.kernel
def k():
    for i in src:
        dst[i] = src[i] + 1

src.from_numpy(np.arange(SHAPE[0]).astype(src.to_numpy().dtype))
k()
def out():
    return dst.to_numpy()
"""


@pytest.mark.parametrize("second, want", [
    ("SHAPE = (6,)\nDTYPE = jr.f32\nSAME = False", [1, 2, 3, 4, 5, 6]),
    ("SHAPE = (4,)\nDTYPE = jr.i32\nSAME = False", [1, 2, 3, 4]),
    ("SHAPE = (4,)\nDTYPE = jr.f32\nSAME = True", [1, 2, 3, 4]),
], ids=["shape", "dtype", "aliased"])
def test_a_changed_field_is_seen(tmp_path, second, want, filled):
    config = {"config": "import jitrt as jr\nSHAPE = (4,)\nDTYPE = jr.f32\nSAME = False\n"}
    first, warm = filled(tmp_path, "fields", (FIELDS, config), (FIELDS, config))
    assert first["out"] == [1, 2, 3, 4]
    assert warm["skips"] == 1
    again = run(tmp_path, FIELDS, config="import jitrt as jr\n" + second + "\n")
    assert again["out"] == want and again["skips"] == 0


CLOSURE = """
import sys
from config import C
a = jr.ndarray(jr.f32, shape=(3,))

def make(c):
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = c + i
    return k

make(C)(a)
def out():
    return a.to_numpy()
"""


def test_a_changed_closure_value_is_seen(tmp_path):
    assert run(tmp_path, CLOSURE, config="C = 1.5\n")["out"] == [1.5, 2.5, 3.5]
    assert run(tmp_path, CLOSURE, config="C = 1.5\n")["skips"] == 1
    again = run(tmp_path, CLOSURE, config="C = -4.0\n")
    assert again["out"] == [-4, -3, -2] and again["skips"] == 0


BUILTIN = """
from config import op
a = jr.ndarray(jr.f32, shape=(3,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = op(i * 0.5)

k(a)
def out():
    return a.to_numpy()
"""


def test_a_rebound_builtin_is_seen(tmp_path):
    assert np.allclose(run(tmp_path, BUILTIN, config="import jitrt as jr\nop = jr.sin\n")["out"],
                       np.sin([0, 0.5, 1.0]))
    again = run(tmp_path, BUILTIN, config="import jitrt as jr\nop = jr.cos\n")
    assert np.allclose(again["out"], np.cos([0, 0.5, 1.0])) and again["skips"] == 0


ARRAY = """
from config import TABLE
a = jr.ndarray(jr.f32, shape=(3,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = TABLE[i]

k(a)
def out():
    return a.to_numpy()
"""


@pytest.mark.parametrize("table, skips", [("(1.0, 2.0, 3.0)", 0),
                                          ("np.array([1.0, 2.0, 3.0])", 1)])
def test_a_changed_constant_table_is_seen(tmp_path, table, skips):
    """A tuple indexed at run time becomes a field the frontend makes itself: such a kernel
    has no manifest (its warm start runs the frontend); a numpy table is a vector value."""
    config = f"import numpy as np\nTABLE = {table}\n"
    assert run(tmp_path, ARRAY, config=config)["out"] == [1, 2, 3]
    assert run(tmp_path, ARRAY, config=config)["skips"] == skips
    again = run(tmp_path, ARRAY, config=config.replace("2.0", "7.0"))
    assert again["out"] == [1, 7, 3] and again["skips"] == 0


OPAQUE = """
class Box:
    scale = 3.0

box = Box()
a = jr.ndarray(jr.f32, shape=(3,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = box.scale * i

k(a)
def out():
    return a.to_numpy()
"""


def test_a_value_without_fingerprint_takes_the_full_path(tmp_path):
    """An object of the user's own class: no manifest, the frontend runs (and the full key
    still finds the entry)."""
    assert run(tmp_path, OPAQUE)["out"] == [0, 3, 6]
    again = run(tmp_path, OPAQUE)
    assert again["out"] == [0, 3, 6] and again["skips"] == 0 and again["compiles"] == 0
    store = store_mod.CacheStore(tmp_path / "cache", 1 << 30)
    files = [prekey.WarmFile(store, p.stem, "") for p in (tmp_path / "cache").glob("*.jkm")]
    assert len(files) == 1 and files[0].manifests == () and files[0].codes


def test_a_damaged_manifest_is_ignored(tmp_path, filled):
    filled(tmp_path, "adstack", (ADSTACK, {}))
    for path in (tmp_path / "cache").glob("*.jkm"):
        path.write_bytes(path.read_bytes()[:-5])
    again = run(tmp_path, ADSTACK)
    assert again["skips"] == 0 and again["compiles"] == 0
    assert np.allclose(again["out"], adstack_want(), rtol=1e-5, atol=1e-6)
    assert run(tmp_path, ADSTACK)["skips"] == 2, "the manifests are written again"


def test_a_manifest_of_another_version_is_ignored(tmp_path, filled):
    filled(tmp_path, "adstack", (ADSTACK, {}))
    for path in (tmp_path / "cache").glob("*.jkm"):
        data = path.read_bytes()
        header, start = store_mod.decode_header(data)
        payload = data[start:].replace(prekey.MANIFEST_VERSION.encode(), b"jitrt pre-key 0")
        path.write_bytes(store_mod.encode(header["key"], header["kernel_name"], payload,
                                          raw=True))
    again = run(tmp_path, ADSTACK)
    assert again["skips"] == 0 and again["compiles"] == 0
    assert run(tmp_path, ADSTACK)["skips"] == 2


MODULE_ARG = """
import config
a = jr.ndarray(jr.f32, shape=(4,))

@jr.func
def scaled(m: jr.template(), v):
    return m.SCALE * v

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = scaled(config, i)

k(a)
def out():
    return a.to_numpy()
"""


def test_a_module_passed_to_a_func_takes_the_full_path(tmp_path):
    """`config` used whole: the func reads `m.SCALE`, which no chain of the source names, so
    the kernel has no manifest and a changed `config.SCALE` is seen."""
    assert run(tmp_path, MODULE_ARG, config="SCALE = 2.0\n")["out"] == [0, 2, 4, 6]
    again = run(tmp_path, MODULE_ARG, config="SCALE = 3.0\n")
    assert again["out"] == [0, 3, 6, 9] and again["skips"] == 0


FUNC_TABLE = """
from helpers import f, g
OPS = (f, g)
a = jr.ndarray(jr.f32, shape=(2,))

@jr.kernel
def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for j in jr.static(range(2)):
        a[j] = OPS[j](1.0)

k(a)
def out():
    return a.to_numpy()
"""


def test_funcs_in_a_tuple_take_the_full_path(tmp_path):
    """A func reached through a container: its own globals are not walked, so no manifest;
    `K`, a global of `g`, changes and is seen."""
    assert run(tmp_path, FUNC_TABLE, helpers=HELPERS.format(plus=1))["out"] == [4, 3]
    again = run(tmp_path, FUNC_TABLE, helpers=HELPERS.format(plus=1).replace("K = 3", "K = 5"))
    assert again["out"] == [6, 5] and again["skips"] == 0


# ---- in process --------------------------------------------------------------------------

def test_chains_list_names_and_attributes_but_not_parameters():
    import ast
    tree = ast.parse(textwrap.dedent("""
        def k(a, b):
            for i in range(a.shape[0]):
                a[i] = jr.math.sin(b) + cfg.N + x.grad[i]
    """)).body[0]
    chains, whole = prekey.chains(tree, frozenset({"a", "b"}))
    assert ("jr", "math", "sin") in chains and ("jr", "math") in chains and ("jr",) in chains
    assert ("cfg", "N") in chains and ("x", "grad") in chains and ("range",) in chains
    assert ("i",) in chains                      # a local: looked up, found missing
    assert not any(c[0] in ("a", "b") for c in chains)
    assert ("cfg", "N") in whole and ("cfg",) not in whole and ("jr", "math") not in whole


def test_fingerprints_follow_values_and_refuse_unknown_objects():
    walk = prekey._Walk()
    assert walk.fingerprint(2) != walk.fingerprint(2.0) != walk.fingerprint(True)
    assert walk.fingerprint((1, "a")) == prekey._Walk().fingerprint((1, "a"))
    assert walk.fingerprint(np.float32(1.5)) != walk.fingerprint(np.float64(1.5))
    assert walk.fingerprint(jr.f32) != walk.fingerprint(jr.f64)
    assert walk.fingerprint(jr.sin) != walk.fingerprint(jr.cos)
    assert walk.fingerprint(np) == ("module", "numpy")

    class Mine:
        pass

    for opaque in (Mine(), lambda: 1, np.zeros(1 << 20), [Mine()]):
        with pytest.raises(prekey.Unsupported):
            prekey._Walk().fingerprint(opaque)


def test_fingerprints_number_fields_by_first_sight():
    a = jr.field(jr.f32, shape=(4,))
    b = jr.field(jr.f32, shape=(4,))
    w1, w2 = prekey._Walk(), prekey._Walk()
    assert [w1.fingerprint(o) for o in (a, b, a)] != [w2.fingerprint(o) for o in (a, a, a)]
    w3 = prekey._Walk()
    assert [prekey._Walk().fingerprint(o) for o in (a,)] == [w3.fingerprint(b)]


def test_in_process_cache_hits_still_read_current_values(tmp_path):
    """Two programs in one process (jr.init twice): the second finds the first's manifest
    and must still see a global changed in between."""
    out = jr.ndarray(jr.f32, shape=(2,))
    consts = {"S": 2.0}

    def make():
        s = consts["S"]

        @jr.kernel
        def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = s * (i + 1)
        return k

    with warnings.catch_warnings():
        warnings.simplefilter("error", store_mod.CacheWarning)
        jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=str(tmp_path))
        make()(out)
        assert out.to_numpy().tolist() == [2, 4]
        jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=str(tmp_path))
        make()(out)
        assert jr.debug.stats()["offline_cache_frontend_skips"] == 1
        consts["S"] = 7.0
        jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=str(tmp_path))
        make()(out)
        assert out.to_numpy().tolist() == [7, 14]
        assert jr.debug.stats()["offline_cache_frontend_skips"] == 0


def test_clear_removes_the_warm_start_files(tmp_path):
    jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=str(tmp_path))
    a = jr.ndarray(jr.f32, shape=(2,))

    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = 1

    k(a)
    jr.sync()                      # the entry is written when the optimised copy lands
    assert list(tmp_path.glob("*.jkm"))
    store_mod.CacheStore(tmp_path, 1 << 30).clear()
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith("runtime-")]


def test_eviction_removes_side_files_unused_since_the_last_evicted_entry(tmp_path):
    store = store_mod.CacheStore(tmp_path, 1 << 30)
    for k, when in enumerate((100.0, 200.0, 300.0)):
        store.save(f"e{k}", f"k{k}", b"x" * 1000)
        store.save(f"m{k}", f"k{k}", b"manifest", store_mod.MANIFEST_SUFFIX)
        for suffix in (store_mod.SUFFIX, store_mod.MANIFEST_SUFFIX):
            os.utime(tmp_path / f"{'e' if suffix == store_mod.SUFFIX else 'm'}{k}{suffix}",
                     (when, when))
    store.max_bytes = 2500          # two entries fit: the oldest goes
    assert store.evict() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e1.jkc", "e2.jkc", "m1.jkm",
                                                          "m2.jkm"]
    assert store.load("m1", store_mod.MANIFEST_SUFFIX) == b"manifest"


def test_cast_warnings_come_with_the_compile_not_with_a_cache_hit(tmp_path):
    """A kernel that stores an f64 into an f32 field warns when it compiles; a later
    process that finds it in the offline cache says nothing, also where a global object of
    the user's class (no fingerprint) makes it run the frontend to find the key (as Taichi
    and Quadrants, which warn when they compile)."""
    body = """
    import warnings
    y = jr.field(jr.f32, shape=(4,))

    class Config:
        pass
    cfg = Config()
    cfg.scale = 1.0

    @jr.kernel
    def narrow(t: jr.template()):
        for i in y:
            y[i] = jr.f64(i) * t * cfg.scale       # f32 <- f64

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        narrow(2)
    casts = [str(w.message) for w in caught if issubclass(w.category, jr.CastWarning)]
    def out():
        return [len(casts)] + y.to_numpy().tolist()
    """
    first, second = run(tmp_path, body), run(tmp_path, body)
    assert first["out"] == [1, 0.0, 2.0, 4.0, 6.0] and first["compiles"] == 1
    assert second["out"] == [0, 0.0, 2.0, 4.0, 6.0]
    assert second["compiles"] == 0 and second["hits"] == 1 and second["skips"] == 0


def test_concurrent_writers_keep_each_others_manifests(tmp_path):
    """Two processes warming one cache read a kernel's file before either writes it (Genesis
    run at several batch sizes at once): the second writer keeps the first one's manifests
    and launchers after its own (was: the last writer's view replaced the file)."""
    store = store_mod.CacheStore(tmp_path / "cache", 1 << 30)

    def manifest(key: str, variant: str = "v") -> prekey.Manifest:
        return prekey.Manifest(variant, key, ((0, ("n",), ("int", 1)),), (), ())

    first, second = (prekey.WarmFile(store, "f" * 32, "k") for _ in range(2))
    first.add(manifest("a"))
    first.code("x = 1", "<a>")
    first.flush()
    second.add(manifest("b"))
    second.add(manifest("c", "other"))
    second.flush()
    again = prekey.WarmFile(store, "f" * 32, "k")
    assert [m.key for m in again.of("v")] == ["b", "a"]      # the newest writer's first
    assert [m.key for m in again.of("other")] == ["c"]
    assert len(again.codes) == 1
    for k in "defgh":                                          # ALTERNATIVES a variant
        second.add(manifest(k))
    second.flush()
    assert len(prekey.WarmFile(store, "f" * 32, "k").of("v")) == prekey.ALTERNATIVES
