"""The content-stable registry of (kernel, task) pairs that own adstacks.

The id is FNV-1a 64 over `kernel_name + ":" + task id as 8 little-endian bytes`, folded to 32
bits, 0 mapped to 1 (DESIGN.md section 3). Checked against the spec's test vectors, against an
independent implementation written here from the spec, for linear probing on collisions, and
across two fresh processes that declare and launch the same kernels in different orders.
"""
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import jitrt as jr
from jitrt.runtime import registry as registry_mod
from jitrt.runtime.registry import Registry, fnv1a64_fold32

VECTORS = [("compute_grad", 3, 3579941712), ("kernel_a", 0, 3392348489), ("", 0, 3647530821)]


def reference_id(name: str, task: int) -> int:
    """The spec, written independently of jitrt."""
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8") + b":" + struct.pack("<Q", task & 0xFFFFFFFF):
        h = ((h ^ byte) * 0x100000001B3) % (1 << 64)
    return ((h ^ (h >> 32)) & 0xFFFFFFFF) or 1


@pytest.mark.parametrize("name,task,expected", VECTORS)
def test_spec_vectors(name, task, expected):
    assert fnv1a64_fold32(name, task) == expected
    assert reference_id(name, task) == expected
    assert jr.debug.registry_id(name, task) == expected


def test_matches_the_spec_on_random_keys(rng):
    alphabet = list("abcXYZ_.[](),:09") + ["é", "λ", "中"]
    for _ in range(200):
        name = "".join(rng.choice(alphabet, rng.integers(0, 40)))
        task = int(rng.choice([rng.integers(0, 8), rng.integers(0, 1 << 32)]))
        assert fnv1a64_fold32(name, task) == reference_id(name, task), (name, task)


def test_task_id_is_part_of_the_hash():
    ids = {fnv1a64_fold32("kernel_a", t) for t in range(64)}
    assert len(ids) == 64


def test_zero_hash_maps_to_one(monkeypatch):
    for h in (0, 0x1234567812345678):            # both fold to 0
        monkeypatch.setattr(registry_mod, "fnv1a64", lambda data, h=h: h)
        assert fnv1a64_fold32("anything", 0) == 1


# ---- probing ---------------------------------------------------------------------------------

def test_collisions_probe_linearly(monkeypatch):
    monkeypatch.setattr(registry_mod, "fnv1a64_fold32", lambda name, task: 12345)
    reg = Registry()
    assert reg.register("first", 0) == 12345
    assert reg.register("second", 0) == 12346
    assert reg.register("third", 7) == 12347
    assert reg.register("second", 0) == 12346          # idempotent
    assert reg.lookup(12346) == ("second", 0) and reg.lookup(12345) == ("first", 0)
    assert reg.lookup(0) is None and len(reg) == 3


def test_probing_wraps_around_and_skips_zero(monkeypatch):
    monkeypatch.setattr(registry_mod, "fnv1a64_fold32", lambda name, task: 0xFFFFFFFE)
    reg = Registry()
    assert [reg.register(f"k{j}", 0) for j in range(4)] == [0xFFFFFFFE, 0xFFFFFFFF, 1, 2]
    assert reg.lookup(0) is None and reg.lookup(1) == ("k2", 0)


def test_registration_is_idempotent_without_collisions():
    reg = Registry()
    a = reg.register("kernel_a", 0)
    assert a == 3392348489 and reg.register("kernel_a", 0) == a and len(reg) == 1
    assert reg.register("kernel_a", 1) != a


def recur_kernel(x, loss):
    @jr.kernel
    def recur(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = v * 0.5 + 0.25
            loss[None] += v
    return recur


def test_colliding_kernels_are_told_apart_by_overflow_diagnosis(monkeypatch):
    """Two kernels whose ids collide: the second gets id + 1 in the program's registry, and an
    overflow in it is reported under its own name."""
    monkeypatch.setattr(registry_mod, "fnv1a64_fold32", lambda name, task: 777)
    jr.init(arch=jr.cpu, offline_cache=False, ad_stack_size=3)
    x = jr.field(jr.f64, shape=(8,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    first, second = recur_kernel(x, loss), recur_kernel(x, loss)
    first.grad(np.zeros(8, np.int32))
    second.grad(np.zeros(8, np.int32))
    (a,), (b,) = jr.debug.sizing_infos(first), jr.debug.sizing_infos(second)
    # same qualname and specialization: one content-stable name, one registration
    assert a.kernel_name == b.kernel_name and a.registry_id == b.registry_id == 777

    @jr.kernel
    def other(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            u = x[i]
            for _ in range(cnt[i]):
                u = u * u
            loss[None] += u

    with pytest.raises(jr.AdStackOverflowError) as err:
        other.grad(np.full(8, 5, np.int32))
    (c,) = jr.debug.sizing_infos(other)
    assert c.registry_id == 778 == jr.debug.registry_id(c.kernel_name, 0)
    assert err.value.registry_id == 778 and err.value.kernel_name == c.kernel_name
    assert "other" in str(err.value) and "778" in str(err.value)


# ---- content-stable names across processes -----------------------------------------------------

KERNELS = {
    "alpha": '''
        @jr.kernel
        def alpha(c: nd(dtype=jr.i32, ndim=1)):
            for i in x:
                v = x[i]
                for _ in range(c[i]):
                    v = jr.sin(v) * 1.1 + 0.1
                loss_a[None] += v
    ''',
    "beta": '''
        @jr.kernel
        def beta(c: nd(dtype=jr.i32, ndim=1), s: jr.f64):
            for i in x:
                v = x[i]
                for _ in range(c[i] + 1):
                    v = v * s + 0.1
                loss_b[None] += v
            for i in x:
                u = x[i]
                for _ in range(max(c[i] - 3, 1)):
                    u = jr.cos(u)
                loss_b[None] += u
    ''',
    "gamma": '''
        @jr.kernel
        def gamma(c: nd(dtype=jr.i32, ndim=1), flag: jr.template()):
            for i in x:
                v = x[i]
                for _ in range(c[i]):
                    if jr.static(flag):
                        v = jr.tanh(v) * 2.0
                    else:
                        v = v * 0.5
                loss_c[None] += v
    ''',
}

HEADER = '''
    import jitrt as jr
    nd = jr.types.ndarray
    x = jr.field(jr.f64, shape=(16,), needs_grad=True)
    loss_a = jr.field(jr.f64, shape=(), needs_grad=True)
    loss_b = jr.field(jr.f64, shape=(), needs_grad=True)
    loss_c = jr.field(jr.f64, shape=(), needs_grad=True)
'''

SCRIPT = '''
    import json, sys
    import numpy as np
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=False)
    import simkernels as m

    rng = np.random.default_rng(7)
    cnt = rng.integers(0, 9, 16).astype(np.int32)
    m.x.from_numpy(rng.uniform(-1, 1, 16))
    launches = {"alpha": lambda: m.alpha(cnt), "beta": lambda: m.beta(cnt, 0.9),
                "gamma": lambda: m.gamma(cnt, True)}
    losses = {"alpha": m.loss_a, "beta": m.loss_b, "gamma": m.loss_c}
    out = {"ids": {}, "grads": {}}
    for name in sys.argv[1].split(","):
        with jr.ad.Tape(loss=losses[name]):
            launches[name]()
        out["grads"][name] = m.x.grad.to_numpy().tolist()
        kernel = getattr(m, name)
        out["ids"][name] = sorted((i.kernel_name, i.task_id_in_kernel, i.registry_id)
                                  for i in jr.debug.sizing_infos(kernel))
    print(json.dumps(out))
'''


def run_process(tmp_path: Path, tag: str, declare: list[str], launch: list[str]) -> dict:
    pkg = tmp_path / tag
    pkg.mkdir()
    module = textwrap.dedent(HEADER) + "".join(textwrap.dedent(KERNELS[k]) for k in declare)
    (pkg / "simkernels.py").write_text(module)
    (pkg / "main.py").write_text(textwrap.dedent(SCRIPT))
    repo = str(Path(jr.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg), repo]),
           "JITRT_OFFLINE_CACHE": "0"}
    proc = subprocess.run([sys.executable, str(pkg / "main.py"), ",".join(launch)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=pkg,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ids_and_gradients_agree_across_processes_and_orders(tmp_path):
    first = run_process(tmp_path, "p1", ["alpha", "beta", "gamma"], ["alpha", "beta", "gamma"])
    second = run_process(tmp_path, "p2", ["gamma", "alpha", "beta"], ["beta", "gamma", "alpha"])
    assert first["ids"] == second["ids"]
    for name in KERNELS:
        np.testing.assert_allclose(first["grads"][name], second["grads"][name], rtol=1e-13)
        assert np.any(np.asarray(first["grads"][name]) != 0)
    entries = [tuple(e) for name in KERNELS for e in first["ids"][name]]
    assert len(entries) == 4                          # beta has two tasks with stacks
    for kernel_name, task, rid in entries:
        assert rid == reference_id(kernel_name, task)
        assert kernel_name.startswith("simkernels.")  # module-qualified, not a counter
    assert len({rid for _, _, rid in entries}) == 4
    gamma_name = first["ids"]["gamma"][0][0]
    assert "True" in gamma_name                       # template values are part of the name
