"""Start-up: what `import jitrt` and a warm start load, `@frozen` records, source capture.

The time itself is measured by `benchmarks/cold_warm_start.py` (docs/performance.md); these
tests keep what makes it short: the compile pipeline is not imported with the package, a
process whose kernels all come from the offline cache imports no pass, `@frozen` classes
behave as `@dataclass(frozen=True)` ones do, and kernel sources are read without inspect's
tokenizer where the code object tells where they end.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import pathlib
import pickle
import platform
import subprocess
import sys
import textwrap
from typing import ClassVar

import pytest

import jitrt as jr
from jitrt.frontend import source
from jitrt.frozen import frozen, record

pytestmark = pytest.mark.cpu_only
ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_python(code: str, *args: str, script: pathlib.Path | None = None) -> dict:
    """Run `code` in a fresh interpreter (from `script` when given: kernels need a file)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if script is not None:
        script.write_text(code)
    command = [str(script)] if script is not None else ["-c", code]
    proc = subprocess.run([sys.executable, *command, *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- what is imported -----------------------------------------------------------------------

COMPILE_PIPELINE = ("jitrt.frontend.lower", "jitrt.passes.pipeline", "jitrt.passes.autodiff",
                    "jitrt.codegen.sizing", "jitrt.backends.cpu", "llvmlite.binding")


# what a CPU launch does not need: loaded on first use (jitrt/__init__.py, `_LAZY`)
ON_FIRST_USE = ("jitrt.math", "jitrt.math_glsl", "jitrt.profiler", "jitrt.runtime.profile",
                "jitrt.debug", "jitrt.ad_check", "jitrt.runtime.graph", "jitrt.linear_solve",
                "jitrt.quadrants.algorithms", "jitrt.quadrants.perf", "jitrt.dlpack",
                "difflib", "signal", "logging")


def test_import_jitrt_loads_no_compiler_and_no_llvm():
    loaded = run_python("import json, sys, jitrt; print(json.dumps(sorted(sys.modules)))")
    assert not [m for m in COMPILE_PIPELINE if m in loaded]
    assert [m for m in ON_FIRST_USE if m in loaded] == []
    # every public name still resolves
    assert all(getattr(jr, name) is not None for name in jr.__all__)


PRELOAD = textwrap.dedent("""
    import json, sys
    import jitrt
    from jitrt.backends import llvm_preload
    llvm_preload.wait()
    with open("/proc/self/maps") as f:
        mapped = "libllvmlite" in f.read()
    print(json.dumps({"mapped": mapped, "binding": "llvmlite.binding" in sys.modules}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
@pytest.mark.parametrize("setting", ["1", "0"])
def test_import_jitrt_loads_llvms_library_on_a_helper_thread(setting, monkeypatch):
    """`import jitrt` maps llvmlite's library without importing llvmlite (its `dlopen` runs
    on another core; backends/llvm_preload.py); JITRT_PRELOAD_LLVM=0 leaves it to jr.init."""
    monkeypatch.setenv("JITRT_PRELOAD_LLVM", setting)
    got = run_python(PRELOAD)
    assert got == {"mapped": setting == "1", "binding": False}


WARM_UP = textwrap.dedent("""
    import json, sys, threading
    import numpy as np
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=False, tiered_compile=True)
    from jitrt.backends import cpu_tiers, llvm_direct
    names = [t.name for t in threading.enumerate()]
    for t in cpu_tiers._WARMED:
        t.join()
    quick_tm = llvm_direct.host_machine.cache_info().currsize > 1    # -O0 besides -O3

    @jr.kernel
    def twice(x: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = x[i] * 2

    a = np.arange(4, dtype=np.float32)
    twice(a)
    print(json.dumps({"started": "jitrt-llvm-warm-up" in names or bool(cpu_tiers._WARMED),
                      "quick_tm": quick_tm, "result": a.tolist(),
                      "cores": jr.config._cores()}))
""")


@pytest.mark.parametrize("setting", ["1", "0"])
def test_cpu_init_warms_the_quick_tier_on_a_helper_thread(setting, monkeypatch, tmp_path):
    """`jr.init` on the CPU compiles a small function's quick copy on a helper thread
    (backends/cpu_tiers.py, `warm_up`): the quick tier's target machine exists once it is
    done, and the first kernel compiles and runs as before; JITRT_PRELOAD_LLVM=0, or a
    process limited to one core, leaves the work to the first compile."""
    monkeypatch.setenv("JITRT_PRELOAD_LLVM", setting)
    got = run_python(WARM_UP, script=tmp_path / "warm_up.py")
    warmed = got.pop("cores") > 1 and setting == "1"
    assert got == {"started": warmed, "quick_tm": warmed, "result": [0.0, 2.0, 4.0, 6.0]}


LATE_EXTENSIONS = textwrap.dedent("""
    import json, sys
    import numpy
    late = []

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if "jitrt.backends.llvm_preload" in sys.modules:
                for finder in sys.meta_path[1:]:
                    spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
                    if spec is not None:
                        if (spec.origin or "").endswith((".so", ".pyd")):
                            late.append(name)
                        break
            return None
    sys.meta_path.insert(0, Watch())
    import jitrt
    print(json.dumps(late))
""")


def test_no_extension_module_loads_while_llvms_library_does():
    """glibc's dlopen takes one lock for a whole load: an extension module loaded by
    `import jitrt` after the preload starts would wait for LLVM's library (jitrt/__init__.py
    imports them first)."""
    assert run_python(LATE_EXTENSIONS) == []


LOGGING_LATER = textwrap.dedent("""
    import sys
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=False)     # logged before `logging` is loaded: unseen
    assert "logging" not in sys.modules
    assert not jr.is_logging_effective("warn")
    import logging
    logging.basicConfig(level=logging.INFO, format="%(name)s %(module)s:%(levelname)s %(message)s")
    jr.init(arch=jr.cpu, offline_cache=False)
    assert jr.is_logging_effective("info") and not jr.is_logging_effective("debug")
    print('{}')
""")


def test_jitrt_logs_to_a_logging_module_loaded_after_it(tmp_path):
    """The logger "jitrt" is made when the program loads `logging` (jitrt/logger.py); its
    records name the module that logged them."""
    script = tmp_path / "later.py"
    script.write_text(LOGGING_LATER)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("jitrt ")]
    assert len(lines) == 1 and lines[0].startswith("jitrt program:INFO jitrt "), proc.stderr
    assert "arch=cpu" in lines[0]


def test_names_loaded_on_first_use_resolve_and_are_listed():
    got = run_python(textwrap.dedent("""
        import json, sys, jitrt as jr
        names = {}
        exec("from jitrt import *", names)
        print(json.dumps({"graph": "graph" in names and hasattr(jr.graph, "do_while"),
                          "math": jr.math.vec3 is jr.math.vec3 and "math" in dir(jr),
                          "solve": callable(jr.solve),
                          "lazy_loaded": "jitrt.math" in sys.modules}))
    """))
    assert got["graph"] and got["math"] and got["solve"] and got["lazy_loaded"]
    with pytest.raises(AttributeError, match=r"did you mean jitrt\.graph\?"):
        jr.grap  # noqa: B018


WARM = textwrap.dedent("""
    import json, sys
    before = set(sys.modules)       # what the interpreter's start-up (site hooks) loaded
    import numpy as np
    import jitrt as jr
    jr.init(offline_cache=True, offline_cache_dir=sys.argv[1])
    x = jr.field(jr.f32, shape=(8,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def recurrence(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    x.from_numpy(np.linspace(0.1, 0.8, 8).astype(np.float32))
    with jr.ad.Tape(loss=loss):
        recurrence(np.arange(8, dtype=np.int32) % 3 + 1)
    print(json.dumps({"stats": jr.debug.stats(), "grad": x.grad.to_numpy().tolist(),
                      "modules": sorted(set(sys.modules) - before)}))
""")


def test_a_warm_start_imports_no_pass(tmp_path):
    script = tmp_path / "warm.py"
    cold = run_python(WARM, str(tmp_path / "cache"), script=script)
    warm = run_python(WARM, str(tmp_path / "cache"), script=script)
    assert cold["stats"]["compiles"] == 2 and warm["stats"]["compiles"] == 0
    assert warm["stats"]["offline_cache_hits"] == 2 and warm["grad"] == cold["grad"]
    passes = [m for m in warm["modules"] if m.startswith("jitrt.passes.")]
    # the records the cache stores (lowered kernels, write sets) and nothing else: the IR
    # walkers and SizeExprs are in ir/, and codegen's layout reads no pass
    assert set(passes) <= {"jitrt.passes.lowered", "jitrt.passes.analysis"}, passes
    assert "jitrt.codegen.sizing" not in warm["modules"]


def test_a_cold_compile_loads_neither_simt_nor_jr_math(tmp_path):
    # the frontend loaded Quadrants' SIMT and tile funcs at a kernel's first assignment and
    # jr.math at its first call, though no tile or jr.math function can exist before them
    cold = run_python(WARM, str(tmp_path / "cache"), script=tmp_path / "cold.py")
    assert cold["stats"]["compiles"] == 2
    assert not [m for m in cold["modules"] if m.startswith(("jitrt.quadrants.simt",
                                                            "jitrt.math"))], cold["modules"]
    assert "jitrt.codegen.portable_math" not in cold["modules"]    # AMDGPU's math only
    # the offline cache writes its files without tempfile (and its shutil, bz2, lzma)
    assert "tempfile" not in cold["modules"] and "shutil" not in cold["modules"]
    if sys.platform == "linux" and platform.machine() == "x86_64":
        # the runtime module's object ships for this target: its IR builders are not loaded
        assert not [m for m in cold["modules"] if m in (
            "jitrt.native.threadpool", "jitrt.native.native_launcher",
            "jitrt.native.native_gpu_entry")], cold["modules"]


GENERATED = textwrap.dedent("""
    import dataclasses, json, sys
    made = []
    real = dataclasses._create_fn

    def spy(name, *args, **kwargs):
        made.append(name)
        return real(name, *args, **kwargs)
    dataclasses._create_fn = spy
    import jitrt as jr
    from jitrt.frontend import builtins as bi
    jr.init(arch=jr.cpu, offline_cache=False)
    print(json.dumps({"made": made, "fields": [f.name for f in dataclasses.fields(jr.sin)],
                      "same": jr.sin == bi.Builtin("sin", jr.sin.host)}))
""")


PIPELINE_COMPILES = textwrap.dedent("""
    import builtins, json
    import jitrt as jr
    made = []
    real = builtins.compile

    def spy(source, filename, *args, **kwargs):
        if not str(filename).endswith(".py"):       # a module's source: not a string's
            made.append(str(source)[:40])
        return real(source, filename, *args, **kwargs)
    builtins.compile = spy
    from jitrt.runtime.compiler import prefetch_pipeline
    prefetch_pipeline()
    print(json.dumps(made))
""")


def test_importing_the_compile_pipeline_compiles_no_string():
    """A `NamedTuple` with string annotations compiled each of them (`typing.ForwardRef`) when
    codegen was imported at the first compile; the pipeline's records are `@frozen`."""
    assert run_python(PIPELINE_COMPILES) == []


def test_import_and_init_compile_no_dataclass_method():
    """`@dataclass` compiles its methods from generated source (~0.3 ms each on the
    development VM): nothing on a cold start's path uses it (`@frozen`, `@record`, and
    `frontend/builtins.Builtin` written out), and `jr.sin` is still a dataclass's instance
    compared by identity."""
    got = run_python(GENERATED)
    assert got == {"made": [], "fields": ["name", "host"], "same": False}


UNFROZEN = "import gc\ngc.unfreeze()\n"
COLLECTOR = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    passes = []
    gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(1))
    before = (gc.isenabled(), gc.get_freeze_count())
    import jitrt as jr
    during_import = len(passes)
    jr.init(arch=jr.cpu, offline_cache=False)
    print(json.dumps({"import": during_import, "init": len(passes) - during_import,
                      "before": before, "after": (gc.isenabled(), gc.get_freeze_count())}))
""")


def test_import_and_init_set_off_no_collector_pass(tmp_path, monkeypatch):
    # ~30 young passes walked the modules' new objects and freed almost nothing
    # (jitrt/long_lived.py); they are aged at once instead. Measured with the bytecode written
    # (a process that compiles the sources makes other garbage): a first process writes it
    # under a cache prefix of its own, even where PYTHONDONTWRITEBYTECODE is set
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "pycache"))
    # from a process that froze nothing (some machines' start-up hooks freeze objects: then
    # the block only pauses the collector, long_lived.py)
    run_python(UNFROZEN + COLLECTOR)
    got = run_python(UNFROZEN + COLLECTOR)
    assert got["import"] == 0 and got["init"] == 0, got
    assert got["after"] == got["before"] == [True, 0]


def test_a_program_s_collector_choices_are_kept():
    # a disabled collector stays disabled; objects the program froze stay frozen
    off = run_python(UNFROZEN + "gc.disable()\n" + COLLECTOR)
    assert off["before"] == off["after"] == [False, 0]
    frozen_first = run_python(UNFROZEN + "gc.freeze()\n" + COLLECTOR)
    assert frozen_first["after"][0] is True
    assert frozen_first["after"][1] >= frozen_first["before"][1] > 0


# ---- @frozen --------------------------------------------------------------------------------

def _loc() -> object:
    return dataclasses.field(default="nowhere", compare=False, repr=False)


def make_pair(deco):
    @deco
    class Base:
        name: str

    @deco
    class Node(Base):
        """A node."""
        kids: tuple
        size: int = 1
        loc: str = _loc()

        @property
        def twice(self) -> int:
            return 2 * self.size
    return Base, Node


@pytest.mark.parametrize("deco", [frozen, dataclasses.dataclass(frozen=True)],
                         ids=["frozen", "dataclass"])
def test_frozen_behaves_as_a_frozen_dataclass(deco):
    Base, Node = make_pair(deco)
    a = Node("a", (Base("k"),), 3, loc="here")
    assert repr(a) == "make_pair.<locals>.Node(name='a', kids=(make_pair.<locals>.Base(" \
                      "name='k'),), size=3)"
    assert a == Node("a", (Base("k"),), 3, "elsewhere")     # loc is not compared
    assert hash(a) == hash(Node("a", (Base("k"),), 3)) == hash(("a", (Base("k"),), 3))
    assert a != Node("a", (Base("k"),), 4) and a != Base("a") and Base("a") != Node("a", ())
    assert Node(kids=(), name="b").size == 1 and a.twice == 6
    assert dataclasses.is_dataclass(a) and [f.name for f in dataclasses.fields(a)] == \
        ["name", "kids", "size", "loc"]
    b = dataclasses.replace(a, size=5)
    assert (b.size, b.loc, b.name) == (5, "here", "a") and a.size == 3
    assert Node.__match_args__ == ("name", "kids", "size", "loc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.size = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.name
    with pytest.raises(TypeError):
        Node("a")
    with pytest.raises(TypeError):
        Node("a", (), 1, "x", "extra")


def test_frozen_compiles_a_constructor_only_for_a_class_used_often():
    """The first 64 instantiations of a @frozen class assign its fields in a loop (by
    position, with defaults, by keyword: the same records); the 65th compiles its
    `__init__` (frozen.py, COMPILE_AFTER: a compile costs what ~100-200 loop instantiations
    cost more)."""
    @frozen
    class P:
        a: int
        b: int = 2

    loop = P.__init__
    made = [P(1, 3), P(1), P(b=4, a=1)] + [P(k, k) for k in range(61)]
    assert P.__init__ is loop
    assert (made[0], made[1], made[2], made[-1]) == (P(1, 3), P(1, 2), P(1, 4), P(60, 60))
    assert P.__init__ is not loop and P.__init__.__qualname__.endswith("P.__init__")
    assert P(7) == P(7, 2) and P(7).b == 2


def test_frozen_records_pickle_as_dataclasses_do():
    from jitrt.ir import nodes as n
    expr = n.Binary("+", n.Const(1, jr.i32, n.Loc("f.py", 3, 4)), n.Arg(0, "k", jr.i32),
                    jr.i32)
    back = pickle.loads(pickle.dumps(expr))
    assert back == expr and back.a.loc == n.Loc("f.py", 3, 4) and back.dtype is jr.i32
    assert dataclasses.fields(back)[0].name == "op"


def test_frozen_keeps_methods_the_class_defines_and_refuses_what_it_lacks():
    @frozen
    class Named:
        value: int

        def __repr__(self) -> str:
            return f"<{self.value}>"

    @frozen
    class ByValue:
        value: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, ByValue) and other.value % 10 == self.value % 10

    assert repr(Named(3)) == "<3>"
    assert ByValue(1) == ByValue(11) and hash(ByValue(1)) == hash((1,))
    with pytest.raises(TypeError, match="default_factory"):
        @frozen
        class WithFactory:
            items: list = dataclasses.field(default_factory=list)
    with pytest.raises(TypeError, match="follows default argument"):
        @frozen
        class Misordered:
            a: int = 0
            b: int


def test_frozen_and_record_declare_fields_without_the_dataclass_decorator(monkeypatch):
    """`_declare_fields` records what `dataclass` would (~0.13 ms a class at import), without
    calling it; ClassVars are not fields; bad declarations fail as with `dataclass`."""
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("dataclasses.dataclass called")
    monkeypatch.setattr(dataclasses, "dataclass", refused)
    Base, Node = make_pair(frozen)

    @frozen
    class Counter(Node):
        kinds: ClassVar[int] = 3
        count: int = 0

    c = Counter("c", (), count=2)
    assert [f.name for f in dataclasses.fields(c)] == ["name", "kids", "size", "loc", "count"]
    assert Counter.kinds == 3 and Counter.size == 1 and Counter.__match_args__[-1] == "count"
    assert [f.compare for f in dataclasses.fields(Node)] == [True, True, True, False]
    assert dataclasses.replace(c, count=5).count == 5 and c.loc == "nowhere"
    with pytest.raises(ValueError, match="mutable default <class 'list'> for field items"):
        @frozen
        class Mutable:
            items: list = []   # noqa: RUF012
    with pytest.raises(TypeError, match="'x' is a field but has no type annotation"):
        @record
        class Unannotated:
            x = dataclasses.field(default=0)


@pytest.mark.parametrize("deco", [record, dataclasses.dataclass], ids=["record", "dataclass"])
def test_record_behaves_as_a_mutable_dataclass(deco):
    @deco
    class State:
        name: str
        items: list = dataclasses.field(default_factory=list)
        count: int = 0
        seen: set = dataclasses.field(default=None, repr=False)   # type: ignore[assignment]

        def __post_init__(self) -> None:
            if self.seen is None:
                self.seen = {self.name}

    a, b = State("a"), State("a")
    assert a == b and a.items is not b.items and a.seen == {"a"}
    a.count += 1
    a.items.append(1)
    assert a != b and (a.count, a.items) == (1, [1])
    assert repr(a) == ("test_record_behaves_as_a_mutable_dataclass.<locals>.State(name='a', "
                       "items=[1], count=1)")
    assert State.__hash__ is None and dataclasses.is_dataclass(a)
    assert dataclasses.replace(a, count=5).count == 5 and State(count=2, name="c").count == 2
    for bad, message in (((), "missing 1 required positional argument: 'name'"),
                         (("a", [], 0, set(), "x"), "positional arguments but 6 were given"),):
        with pytest.raises(TypeError, match=message):
            State(*bad)
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        State("a", size=1)
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        State("a", name="b")


# ---- source capture -------------------------------------------------------------------------

@jr.kernel
def captured(a: jr.types.ndarray(dtype=jr.f32, ndim=1),
             k: jr.f32):
    for i in range(a.shape[0]):
        a[i] = (a[i] *
                k)
    # a comment after the last statement


def nested_kernel():
    if True:
        @jr.kernel
        def inner(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
            for i in range(a.shape[0]):
                a[i] = 1.0
        return inner


def trailing_string(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
    for i in range(a.shape[0]):
        a[i] = 2.0
    """a string statement: its line is traced, so the code object reaches it"""


def wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


def test_capture_takes_statements_without_code_and_asks_inspect_for_wrappers():
    info = source.capture(trailing_string)
    assert info.text.rstrip().endswith('so the code object reaches it"""')
    assert info.text == "".join(inspect.getsourcelines(trailing_string)[0])
    assert source._from_code(wrapped(trailing_string)) is None    # inspect unwraps it
    assert source.capture(wrapped(trailing_string)).text == info.text


def test_capture_reads_the_function_from_its_code_object():
    fast = source._from_code(captured.fn)
    assert fast is not None
    filename, start, lines, indent, text, tree = fast
    inspected, first = inspect.getsourcelines(captured.fn)
    assert (filename, start, indent) == (__file__, first, 0)
    assert inspected[:len(lines)] == lines     # inspect may also take the trailing comment
    assert all(line.strip().startswith("#") for line in inspected[len(lines):])
    assert text.startswith("@jr.kernel\ndef captured(") and text.endswith("k)\n")

    inner = nested_kernel()
    filename, start, lines, indent, text, tree = source._from_code(inner.fn)
    assert lines == inspect.getsourcelines(inner.fn)[0] and indent == 8
    assert inner.source().loc(tree.body[0]).line == start + 2
