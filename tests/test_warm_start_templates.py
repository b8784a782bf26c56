"""Warm start of `fastcache=True` kernels with template parameters (Quadrants' option, which
every Genesis kernel sets): the template arguments are checks of the pre-key's manifest,
fingerprinted whole (a dataclass or other object of the user's by class and every member,
ndarrays and fields by layout and by which members name the same one, enums by class and
name), so a second process skips the frontend and any change is seen (runtime/prekey.py).
Each test runs small programs in fresh processes against one cache directory
(`test_warm_start.run`)."""
from __future__ import annotations

import numpy as np
import pytest

import jitrt as jr
from jitrt.runtime import prekey
from test_warm_start import run

SIM = """
import dataclasses
import enum


class Mode(enum.Enum):
    ADD = 1
    MUL = 2


@dataclasses.dataclass(frozen=True)
class State:
    x: object
    y: object
    scale: float


class Config:
    '''A hashable configuration object, as Genesis's static configs.'''
    offset = 0.0

    def __init__(self, k, mode):
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "mode", mode)

    def __eq__(self, other):
        return type(other) is Config and vars(self) == vars(other)

    def __hash__(self):
        return hash((self.k, self.mode))

    @property
    def twice(self):
        return 2 * self.k
"""

STEP = """
import sim
n = {n}
x = jr.{kind}(jr.f32, shape=(n,))
y = {y}
x.from_numpy(np.arange(n, dtype=np.float32))
s = sim.State(x, y, {scale})
cfg = sim.Config(3, sim.Mode.{mode})
{extra}

@jr.kernel(fastcache={fastcache})
def step(s: jr.template(), cfg: jr.template()):
    for i in range(n):
        if jr.static(cfg.mode == sim.Mode.ADD):
            s.y[i] = s.x[i] + cfg.twice * s.scale + cfg.offset
        else:
            s.y[i] = s.x[i] * cfg.twice * s.scale + cfg.offset

step(s, cfg)
def out():
    return y.to_numpy()
"""


def step(n=4, kind="ndarray", y=None, scale=0.5, mode="MUL", extra="", fastcache=True):
    y = y or f"jr.{kind}(jr.f32, shape=(n,))"
    return STEP.format(n=n, kind=kind, y=y, scale=scale, mode=mode, extra=extra,
                       fastcache=fastcache)


def want(n=4, scale=0.5, mode="MUL", k=3, offset=0.0):
    x = np.arange(n, dtype=np.float32)
    return (x + 2 * k * scale + offset if mode == "ADD" else x * 2 * k * scale + offset).tolist()


@pytest.mark.parametrize("kind", ["ndarray", "field"])
def test_a_second_process_skips_the_frontend(tmp_path, kind):
    first = run(tmp_path, step(kind=kind), sim=SIM)
    second = run(tmp_path, step(kind=kind), sim=SIM)
    assert first["out"] == second["out"] == want()
    assert first["compiles"] == 1 and second["compiles"] == 0
    assert second["skips"] == 1 and not second["lowering"]


def test_without_fastcache_a_template_kernel_runs_the_frontend(tmp_path):
    run(tmp_path, step(fastcache=False), sim=SIM)
    second = run(tmp_path, step(fastcache=False), sim=SIM)
    assert second["out"] == want() and second["compiles"] == 0 and second["skips"] == 0


@pytest.mark.parametrize("change, result", [
    (dict(scale=2.0), want(scale=2.0)),                          # a member's value
    (dict(mode="ADD"), want(mode="ADD")),                        # an enum member
    (dict(n=6), want(n=6)),                                      # an ndarray's shape
    (dict(extra="sim.Config.offset = 1.0"), want(offset=1.0)),   # a class attribute set
], ids=["member", "enum", "shape", "class-attribute"])
def test_a_changed_template_value_is_seen(tmp_path, change, result):
    run(tmp_path, step(), sim=SIM)
    again = run(tmp_path, step(**change), sim=SIM)
    assert again["out"] == result and again["skips"] == 0


def test_members_naming_one_ndarray_are_seen(tmp_path):
    # the first process's x and y are two arrays; the second's y is x itself (x * 3 in place)
    run(tmp_path, step(), sim=SIM)
    again = run(tmp_path, step(y="x"), sim=SIM)
    assert again["skips"] == 0 and again["out"] == want()


def test_an_edited_class_is_seen(tmp_path):
    run(tmp_path, step(), sim=SIM)
    again = run(tmp_path, step(), sim=SIM.replace("return 2 * self.k", "return 5 * self.k"))
    assert again["skips"] == 0 and again["out"] == (np.arange(4) * 15 * 0.5).tolist()


def test_template_fingerprints():
    walk = prekey._Walk(users=True)
    a, b = jr.ndarray(jr.f32, shape=(4,)), jr.ndarray(jr.f32, shape=(4,))
    assert walk.fingerprint((a, b, a))[1:] == (walk.fingerprint(a), ("ndarray", 1, walk._layout(b)),
                                               ("ndarray", 0, walk._layout(a)))
    assert walk.field_list == [a, b]

    class Opaque:
        __slots__ = ("v",)

    with pytest.raises(prekey.Unsupported):
        prekey._Walk(users=True).fingerprint(Opaque())
    with pytest.raises(prekey.Unsupported):                  # only a fastcache kernel's walk
        prekey._Walk().fingerprint(a)
    assert prekey._Walk(users=True).fingerprint(jr.simt.block) == ("jitrt", "jitrt.simt.block")

    class Sized:                        # a tuple constant on a class, beside a property
        SIZES = (16, 32)

        @property
        def largest(self):
            return self.SIZES[-1]

    import typing
    for users in (False, True):       # annotations: a builtin generic, a union, typing's
        fp = prekey._Walk(users=users).fingerprint
        assert fp(tuple[jr.f32, jr.f32]) != fp(tuple[jr.f32, jr.i32])
        assert fp(int | None) == fp(int | None) != fp(float | None)
        assert fp(typing.Tuple[int, int]) != fp(tuple[int, int])

    before = prekey._Walk(users=True).fingerprint(Sized())
    Sized.SIZES = (16, 64)
    assert prekey._Walk(users=True).fingerprint(Sized()) != before


HELPER = """
import jitrt as jr


@jr.func
def helper(v: jr.f32) -> tuple[jr.f32, jr.f32]:
    return v * {factor}, v
"""

TWO_HELPERS = """
import ma, mb
x = jr.ndarray(jr.f32, shape=(4,))
x.from_numpy(np.arange(4, dtype=np.float32))

@jr.kernel(fastcache=True)
def k(x: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(4):
        a, _ = mb.helper(ma.helper(x[i])[0])   # mb read first, ma inlined first
        x[i] = a

k(x)
def out():
    return x.to_numpy()
"""


def test_funcs_of_one_name_in_two_modules(tmp_path):
    """Two modules' funcs with one qualified name (Genesis has two `support_driver`s), with a
    `tuple[...]` return annotation: each is a source of its own in the key and the manifest,
    so a second process skips the frontend and an edit of either is seen."""
    helpers = dict(ma=HELPER.format(factor=2), mb=HELPER.format(factor=3))
    first = run(tmp_path, TWO_HELPERS, **helpers)
    second = run(tmp_path, TWO_HELPERS, **helpers)
    assert first["out"] == second["out"] == (np.arange(4) * 6).tolist()
    assert second["compiles"] == 0 and second["skips"] == 1
    edited = run(tmp_path, TWO_HELPERS, **dict(helpers, ma=HELPER.format(factor=4)))
    assert edited["out"] == (np.arange(4) * 12).tolist() and edited["skips"] == 0


def test_jitrt_funcs_inlined_need_no_check():
    """The frontend inlines jitrt's own funcs for some builtins (`qd.simt` tiles' methods):
    the pre-key's hash of jitrt's sources fixes them, so a manifest is recorded without
    them among the walk's funcs; any other func the walk did not find still stops it."""
    @jr.kernel
    def k(x: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = 1.0

    place = ("/somewhere/jitrt/quadrants/simt_tiles.py", 40, 9, 0)
    inlined = {"jitrt.quadrants.simt_tiles._load2d": "def _load2d(...): ..."}
    manifest = prekey.record(k, "v", "key", (), inlined, {next(iter(inlined)): place}, {})
    assert manifest is not None and manifest.key == "key"
    assert prekey.record(k, "v", "key", (), {"user.helper": "def helper(): ..."},
                         {"user.helper": place}, {}) is None
