"""The architecture holds: layers import downward only, every backend goes through the device
seam, and the autodiff rule table covers every differentiable op.

The import graph counts imports inside functions too (a lazy import is still a dependency),
but not `if TYPE_CHECKING:` blocks (except where a rule says so: the launch modules form a chain
even through them), and not the implicit import of a module's parent packages.
"""
from __future__ import annotations

import ast
import functools
import pathlib
import textwrap

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import base
from jitrt.backends.cpu import CpuDevice
from jitrt.ir import nodes as n
from jitrt.passes import adjoint_rules

PACKAGE = pathlib.Path(jr.__file__).resolve().parent


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def parsed(path: pathlib.Path) -> ast.Module:
    """The syntax tree of one source file of the package, parsed once per session (parsing
    all of them took ~2 s, and two dozen tests read the graph)."""
    return ast.parse(path.read_text())


def imports_of(path: pathlib.Path, modules: set[str], type_checking: bool = False) -> set[str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = parsed(path)
    skip: set[int] = set()
    for node in ast.walk(tree):   # `if TYPE_CHECKING:` blocks are not imports at run time
        if not type_checking and isinstance(node, ast.If) and \
                "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(x) for x in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base_parts = package.split(".")
            if node.level:
                base_parts = base_parts[:len(base_parts) - node.level + 1]
            target = ".".join(base_parts + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in modules else target)
    return {m for m in found if m in modules and m != name}


def source_paths() -> list[pathlib.Path]:
    return [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]


@functools.lru_cache(maxsize=None)
def import_graph(type_checking: bool = False) -> dict[str, frozenset[str]]:
    """{module: the package modules it imports}, built once per session for each flag (the
    tests only read it)."""
    paths = source_paths()
    modules = {module_name(p) for p in paths}
    return {module_name(p): frozenset(imports_of(p, modules, type_checking)) for p in paths}


def reachable(graph: dict[str, frozenset[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph[m]
    return seen


# the launch modules, in the order they may import each other: the plan, its builder, the
# context, the native tables, the generated sources, the launchers, the bound launches
LAUNCH_CHAIN = ("jitrt.launch_plan", "jitrt.runtime.plan_builder", "jitrt.runtime.context",
                "jitrt.runtime.native_launch", "jitrt.runtime.launch_source",
                "jitrt.runtime.launcher", "jitrt.runtime.bound")


def test_the_launch_modules_form_a_chain_even_for_type_checkers():
    graph = import_graph(type_checking=True)
    for k, m in enumerate(LAUNCH_CHAIN):
        later = set(LAUNCH_CHAIN[k + 1:])
        assert not graph[m] & later, f"{m} imports a later launch module: {graph[m] & later}"
        back = {d for d in graph[m] if m in reachable(graph, d)}
        assert not back, f"{m} is in an import cycle (type-checking imports too) through {back}"


def test_the_runtime_has_no_cycle_even_for_type_checkers():
    """`program.py` imports the compiler and the adstack sizing, which see a program through
    `seams.ProgramLike` instead of naming `Program`."""
    graph = import_graph(type_checking=True)
    runtime = {m: {d for d in deps if d.startswith("jitrt.runtime.")}
               for m, deps in graph.items() if m.startswith("jitrt.runtime.")}
    looped = sorted(m for m in runtime if m in reachable(runtime, m))
    assert not looped, f"runtime modules in an import cycle (type-checking imports too): {looped}"


def test_the_launch_plan_is_neutral():
    """Backends can import the plan: it depends on the IR and the dtypes only."""
    deps = reachable(import_graph(type_checking=True), "jitrt.launch_plan")
    assert deps <= {"jitrt.ir", "jitrt.ir.nodes", "jitrt.dtypes", "jitrt.frozen"}, deps


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle = path[path.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("lower,upper", [
    ("jitrt.passes", "jitrt.frontend"), ("jitrt.codegen", "jitrt.frontend"),
    ("jitrt.passes", "jitrt.runtime"), ("jitrt.codegen", "jitrt.runtime"),
    ("jitrt.frontend", "jitrt.runtime"), ("jitrt.ir", "jitrt.passes"),
    ("jitrt.codegen", "jitrt.backends"), ("jitrt.frontend", "jitrt.kernel"),
    # codegen runs no pass (the passes hand it facts: ir/facts.py); the host runtime's IR
    # (native/) is built on codegen's ABI and reads neither passes nor the runtime
    ("jitrt.codegen", "jitrt.passes"), ("jitrt.frontend", "jitrt.passes"),
    ("jitrt.codegen", "jitrt.native"), ("jitrt.native", "jitrt.passes"),
    ("jitrt.native", "jitrt.runtime"), ("jitrt.native", "jitrt.backends"),
    ("jitrt.ir", "jitrt.codegen"),
])
def test_lower_layers_do_not_import_upper_ones(lower, upper):
    graph = import_graph()
    bad = [(m, d) for m, deps in graph.items() if m.startswith(lower)
           for d in deps if d.startswith(upper)]
    assert not bad, bad


def test_backends_import_no_runtime_cache_or_frontend():
    """Backends sit below the runtime: what they need from it (the offline cache, the keys of
    the host runtime module, fault raising) comes down through `HostServices` and
    `jitrt/faults.py`, never by importing upward (lazy imports count)."""
    graph = import_graph()
    bad = [(m, d) for m, deps in graph.items() if m.startswith("jitrt.backends")
           for d in deps if d.startswith(("jitrt.runtime", "jitrt.cache", "jitrt.frontend"))]
    assert not bad, bad


class RecordingStore:
    """The offline cache as a backend sees it (`base.ObjectStore`): every key asked for."""

    def __init__(self):
        self.asked = []

    def load(self, key):
        self.asked.append(key)
        return b"object code"          # a hit: nothing is compiled

    def save(self, key, what, obj):
        raise AssertionError("a hit saves nothing")


def test_the_host_runtime_module_is_keyed_by_what_the_runtime_hands_down():
    """backends/cpu.py computes no cache key part of the runtime's (compiler hash, host
    target, LLVM versions): they come through `HostServices.runtime_key`, and each changes
    the key."""
    from jitrt.backends import cpu
    from jitrt.backends.base import HostServices
    store = RecordingStore()
    for part in ("jitrt a", "jitrt b"):
        host = HostServices(1, 1, store, lambda part=part: part)
        assert cpu.runtime_object(host) == b"object code"
    first, second = store.asked
    assert first.startswith("runtime-") and second.startswith("runtime-") and first != second


VENDOR_NAMES = {"cuda", "hip", "amdgpu", "nvptx", "amdgcn", "rocm"}
VENDOR_MODULES = {"jitrt.backends.cuda", "jitrt.backends.amdgpu", "jitrt.backends.nvptx",
                  "jitrt.backends.amdgcn", "jitrt.backends.stream_driver"}
# the public arch constants (jr.cuda, jr.amdgpu) are the only vendor names of the API surface
PUBLIC_ARCH_NAMES = {"jitrt", "jitrt.extension"}


def test_generic_modules_name_no_gpu_vendor():
    """Outside backends/ (and the registry there), no code branches on a vendor's name or
    imports a vendor's module: generic code asks the registry (`get(arch).stream_gpu`) or the
    codegen target (`printer`, `max_param_slots`)."""
    graph = import_graph()
    found = []
    for path in source_paths():
        name = module_name(path)
        if name.startswith("jitrt.backends") or name in PUBLIC_ARCH_NAMES:
            continue
        found += [(name, d) for d in graph.get(name, ()) if d in VENDOR_MODULES]
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.lower() in VENDOR_NAMES:
                found.append((name, f"line {node.lineno}: {node.value!r}"))
    assert not found, found


# where the kind of device may be asked: the backends, and the plan builder (launch facts)
IS_GPU_READERS = ("jitrt.backends", "jitrt.runtime.plan_builder")


def is_gpu_reads(source: str) -> list[int]:
    """The lines of `source` that read an attribute named `is_gpu` (or getattr it by name)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "is_gpu" or \
                isinstance(node, ast.Constant) and node.value == "is_gpu":
            found.append(node.lineno)
    return found


def test_is_gpu_is_read_only_in_the_backends_and_the_plan_builder():
    """Codegen and the runtime ask the target for a capability (`codegen.targets.TargetTraits`:
    `grid_launch`, `status_block`, ...) that the backend declares, not for the kind of device."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if not name.startswith(IS_GPU_READERS):
            found += [f"{name}:{line}" for line in is_gpu_reads(path.read_text())]
    assert not found, f"is_gpu read outside backends/ and plan_builder.py: {found}"


def test_the_is_gpu_scan_sees_reads_and_getattr():
    assert is_gpu_reads("if target.is_gpu:\n    pass\nx = getattr(t, 'is_gpu')\n") == [1, 3]
    assert is_gpu_reads("grid = target.traits.grid_launch\n") == []


MAX_FUNCTION_LINES = 60


def long_functions(source: str, name: str) -> list[str]:
    """The functions of `source` longer than MAX_FUNCTION_LINES (from `def` to their last line,
    decorators not counted), as "module.function (lines)"."""
    return [f"{name}.{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_in_jitrt_is_over_60_lines():
    """Split along a real seam (a named helper that says what it does) instead."""
    found = [f for path in sorted(PACKAGE.rglob("*.py"))
             for f in long_functions(path.read_text(), module_name(path))]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines: {found}"


def test_the_length_scan_counts_from_def_to_the_last_line():
    body = "".join(f"    x{k} = {k}\n" for k in range(59))
    assert long_functions(f"@dec\ndef ok():\n{body}", "m") == []
    assert long_functions(f"def f():\n{body}    return 1\n", "m") == ["m.f (61 lines)"]
    method = textwrap.indent(f"def g(self):\n{body}    y = 0\n    return 1\n", "    ")
    assert long_functions(f"class C:\n{method}", "m") == ["m.g (62 lines)"]


def test_compiler_reaches_hardware_only_through_the_device():
    graph = import_graph()
    assert "jitrt.backends.cpu" not in graph["jitrt.runtime.compiler"]
    assert "jitrt.backends.cpu" not in graph["jitrt.runtime.launcher"]
    program = jr.init(offline_cache=False)
    assert isinstance(program.device, base.Device) and program.device.arch == "cpu"
    assert program.device.target.cache_key().startswith("cpu ")


class CountingCpu(CpuDevice):
    """A 'new backend' in a few lines: the CPU with every compile and load counted."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = {"compile": 0, "load": 0, "entry": 0, "tiers": 0}

    def tiers(self):
        self.calls["tiers"] += 1
        return super().tiers()

    def compile(self, module):
        self.calls["compile"] += 1
        return super().compile(module)

    def _load(self, key, artifact, symbols):
        self.calls["load"] += 1
        return super()._load(key, artifact, symbols)

    def entry(self, address):
        self.calls["entry"] += 1
        return super().entry(address)


@pytest.mark.parametrize("tiered", [False, True])
def test_a_device_subclass_carries_every_compile_load_and_launch(monkeypatch, tiered):
    import jitrt.backends as backends
    monkeypatch.setattr(backends, "create_device",
                        lambda arch, device_id, host: CountingCpu(host))
    monkeypatch.delenv("JITRT_TIERED_COMPILE")        # (the suite sets it: conftest.py)
    program = jr.init(offline_cache=False, tiered_compile=tiered)
    assert isinstance(program.device, CountingCpu)

    @jr.kernel
    def axpy(x: jr.types.ndarray(dtype=jr.f32, ndim=1), y: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = 2 * x[i] + y[i]

    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    axpy(x, y)
    axpy(x, y)
    jr.sync()       # (tiered: the optimised copy has landed, loaded through the device)
    assert (y == 4).all()
    # tiered: the quick copy is compiled and loaded by the device's `tiers()` object, the
    # optimised copy by its background thread, then loaded through `load`
    # (and jr.init asks for `tiers()` once more to warm LLVM up where there are two cores)
    from jitrt import config
    warm = 1 if tiered and config._cores() > 1 else 0
    assert program.device.calls == {"compile": 0 if tiered else 1, "load": 1, "entry": 1,
                                    "tiers": (1 if tiered else 0) + warm}


def test_compiled_kernel_lists_its_launchable_tasks():
    @jr.kernel
    def mixed(a: jr.types.ndarray(dtype=jr.f32, ndim=1), s: jr.f32) -> jr.f32:
        t = s * 2.0
        for i in range(a.shape[0]):
            a[i] = a[i] * t
        r = 0.0
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            r += a[i]
        return r

    a = np.ones(4, np.float32)
    assert mixed(a, 1.0) == 8.0
    (handle,) = mixed.handles.values()
    kinds = [(t.kind, t.ndim) for t in handle.compiled.tasks]
    assert kinds == [("serial", 0), ("parallel", 1), ("serial", 0)]
    ptx = jr.debug.gpu_asm(mixed, a, 1.0, arch="cuda")
    for symbol in ("jk_serial0_kernel", "jk_task1_kernel", "jk_serial2_kernel"):
        assert f".entry {symbol}(" in ptx
    amd = jr.debug.gpu_asm(mixed, a, 1.0, arch="amdgpu")
    assert "jk_serial2_kernel:" in amd


def test_only_locals_handed_between_tasks_take_context_slots():
    """On GPUs a serial task's locals reach later tasks through context slots: `t` (read by
    the parallel loop) takes one; `w` (used only where it is assigned) and the loops'
    variables do not (each slot is a load and a store around every serial task's kernel)."""
    @jr.kernel
    def mixed(a: jr.types.ndarray(dtype=jr.f32, ndim=1), s: jr.f32) -> jr.f32:
        t = s * 2.0
        w = s + 1.0
        a[0] = w
        for i in range(a.shape[0]):
            a[i] = a[i] * t
        r = 0.0
        jr.loop_config(serialize=True)
        for i in range(a.shape[0]):
            r += a[i]
        return r

    a = np.ones(4, np.float32)
    assert mixed(a, 1.0) == 2.0 * 2.0 + 3 * 2.0
    (handle,) = mixed.handles.values()
    assert [name for name, _ in handle.compiled.layout.local_slots] == ["t"]


# ---- the launch path's corners --------------------------------------------------------------

@jr.kernel
def iota_any(out: jr.types.ndarray(ndim=1)):
    for i in range(out.shape[0]):
        out[i] = i * 2


def test_alternating_specializations_share_one_router():
    a32, a64 = np.zeros(4, np.float32), np.zeros(4, np.float64)
    for _ in range(3):
        iota_any(a32)
        iota_any(a64)
    # natives of both specializations in a chain ("launch"), ending in the Python router
    assert type(iota_any).__call__.__name__ in ("route", "launch")
    stats = jr.debug.stats()
    assert stats["compiles"] == 2 and stats["launches"] == 6
    np.testing.assert_array_equal(a32, [0, 2, 4, 6])
    np.testing.assert_array_equal(a64, [0, 2, 4, 6])
    with pytest.raises(jr.KernelArgError, match="'out'"):
        iota_any(np.zeros(4, np.complex64))


def test_reinit_sends_old_fast_paths_to_the_new_program():
    a = np.zeros(4, np.float32)
    iota_any(a)
    program = jr.init(offline_cache=False)
    a[:] = 0
    iota_any(a)
    assert program.stats()["launches"] == 1 and program.stats()["compiles"] == 1
    np.testing.assert_array_equal(a, [0, 2, 4, 6])


def test_tape_records_launches_on_the_fast_path_and_through_routers():
    x = jr.field(jr.f64, shape=(3,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)

    @jr.kernel
    def square(k: jr.template()):
        for i in x:
            loss[None] += x[i] * x[i] * k

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    square(1.0)
    square(2.0)                        # two specializations: a router
    with jr.ad.Tape(loss=loss):
        square(1.0)
        square(3.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.array([1.0, 2.0, 3.0]) * 4.0)


# ---- autodiff rule coverage -------------------------------------------------------------------

def test_every_differentiable_op_has_an_adjoint_rule_or_is_listed_as_zero():
    from jitrt.frontend.builtins import MATH
    math_ops = set(MATH) | {"pow", "abs"}
    binary_ops = {"+", "-", "*", "/", "//", "%", "min", "max", "**"} | set(n.COMPARE_OPS) | {
        "and", "or", "<<", ">>", "&", "|", "^"}
    covered = set(adjoint_rules.BINARY_RULES) | set(adjoint_rules.ZERO_DERIVATIVE)
    missing_binary = binary_ops - covered - {"**"}   # ** lowers to multiplications or pow
    assert not missing_binary, f"binary ops without an adjoint rule: {missing_binary}"
    missing_math = math_ops - set(adjoint_rules.MATH_RULES) - set(adjoint_rules.ZERO_DERIVATIVE)
    assert not missing_math, f"math functions without an adjoint rule: {missing_math}"
    assert not set(adjoint_rules.MATH_RULES) & set(adjoint_rules.ZERO_DERIVATIVE)
