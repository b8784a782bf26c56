"""GPU code generation without a GPU, and GPU backends that are absent.

`jr.debug.gpu_asm` runs the same frontend, passes and lowering as the CPU with the NVPTX or
AMDGPU target hooks and returns the assembly; it needs no GPU and no GPU runtime. Choosing a GPU
arch on a machine without its runtime must fail with `BackendUnavailableError` saying what is
missing, and `import jitrt` must never need a GPU package.
"""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jitrt as jr
from jitrt.backends import gpu_probe, nvptx

pytestmark = pytest.mark.cpu_only      # code generation does not depend on the program's arch
nd = jr.types.ndarray
acc = jr.field(jr.f32, shape=(16,))
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@jr.kernel
def trig(a: nd(dtype=jr.f32, ndim=1), s: jr.f32):
    for i in range(a.shape[0]):
        v = jr.sin(a[i]) * s
        if i > 2 and a[i] > 0:
            v += jr.sqrt(a[i])
        acc[i % 16] += v


@jr.kernel
def two_tasks(a: nd(dtype=jr.f64, ndim=2), b: nd(dtype=jr.i32, ndim=1)) -> jr.i32:
    for i, j in jr.ndrange(a.shape[0], a.shape[1]):
        a[i, j] = jr.exp(a[i, j]) // 2
    total = b[0] - b[0]        # a load: a serial task (a constant would be inlined)
    for i in range(b.shape[0]):
        jr.atomic_max(b[0], b[i] % 7)
        k = 0
        while k < b[i]:
            k += 3
    return total


@jr.func
def sq(v):
    return v * v


@jr.kernel
def with_func(x: nd(dtype=jr.f32, ndim=1), flag: jr.template()):
    for i in range(x.shape[0]):
        if jr.static(flag):
            x[i] = sq(x[i]) + jr.tanh(x[i])
        else:
            x[i] = jr.cast(int(x[i]) // 3, jr.f32)


CASES = {  # name: (kernel, args, ids of its parallel tasks; task 1 of two_tasks is serial)
    "trig": (trig, (np.ones(8, np.float32), 1.5), [0]),
    "two_tasks": (two_tasks, (np.ones((3, 4)), np.arange(5, dtype=np.int32)), [0, 2]),
    "func_true": (with_func, (np.ones(4, np.float32), True), [0]),
    "func_false": (with_func, (np.ones(4, np.float32), False), [0]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ptx_for_kernels(case):
    kernel, args, tasks = CASES[case]
    before = [np.copy(a) for a in args if isinstance(a, np.ndarray)]
    ptx = jr.debug.gpu_asm(kernel, *args, arch="cuda")
    assert re.search(r"^\.target sm_\d+", ptx, re.MULTILINE), ptx[:400]
    assert ".address_size 64" in ptx
    for k in tasks:   # a grid-stride kernel per parallel task, its body inlined
        assert re.search(rf"\.visible \.entry jk_task{k}_kernel\(", ptx)
    assert "%tid.x" in ptx and "%ctaid.x" in ptx
    serial = re.findall(r"\.visible \.entry jk_serial(\d+)_kernel\(", ptx)  # one thread each
    assert len(re.findall(r"\.visible \.entry ", ptx)) == len(tasks) + len(serial)
    assert not {int(k) for k in serial} & set(tasks)
    if case == "two_tasks":
        assert "1" in serial
    assert ".extern" not in ptx            # libdevice is linked in: nothing left unresolved
    after = [a for a in args if isinstance(a, np.ndarray)]
    for b, a in zip(before, after):                                       # nothing ran
        np.testing.assert_array_equal(a, b)
    assert jr.debug.stats()["launches"] == 0


def test_ptx_uses_libdevice_math_and_atomics():
    ptx = jr.debug.gpu_asm(trig, np.ones(8, np.float32), 1.0, arch="cuda")
    assert "sin.approx" not in ptx and "sqrt" in ptx    # libdevice's accurate sinf, inlined
    assert re.search(r"atom\.(global\.)?add\.f32", ptx)
    ptx64 = jr.debug.gpu_asm(two_tasks, np.ones((2, 2)), np.ones(3, np.int32), arch="cuda")
    assert re.search(r"atom\.(global\.)?max\.s32", ptx64)


@pytest.mark.skipif(nvptx.libdevice_path() is None, reason="no libdevice (jitrt[cuda])")
def test_libdevice_parsed_once_for_many_math_sets(monkeypatch):
    """Kernels with different math functions do not each parse all of libdevice (~60 ms a
    set): it is parsed once per process, and each set is cut from the part codegen calls."""
    import llvmlite.binding as llvm
    from jitrt.backends.llvm_setup import LLVM_LOCK
    full = len(nvptx._libdevice_bitcode())
    parse, sizes = llvm.parse_bitcode, []
    monkeypatch.setattr(llvm, "parse_bitcode", lambda bc: (sizes.append(len(bc)), parse(bc))[1])
    nvptx._subset_of.cache_clear()
    nvptx._CUTS.clear()
    sets = [{"__nv_sinf"}, {"__nv_sinf", "__nv_cosf"}, {"__nv_tanh", "__nv_pow"},
            {"__nv_erff"}]           # erf: no codegen calls it, cut from all of libdevice
    with LLVM_LOCK:
        subsets = [nvptx.libdevice_subset(frozenset(names)) for names in sets]
        exported = [{f.name for f in parse(bc).functions if not f.is_declaration
                     and f.linkage != llvm.Linkage.internal} for bc in subsets]
    assert exported == sets
    assert sizes.count(full) == 2           # once for codegen's part, once for erf
    assert {"__nv_sinf", "__nv_tanh", "__nv_atan2f"} <= nvptx.codegen_math_names()
    assert "__nv_erff" not in nvptx.codegen_math_names()


@pytest.mark.skipif(nvptx.libdevice_path() is None, reason="no libdevice (jitrt[cuda])")
def test_libdevice_cut_kept_in_the_offline_cache(tmp_path, monkeypatch, caplog):
    """The part of libdevice codegen calls is cut once per machine: a later process reads it
    from the offline cache instead of parsing all of libdevice; a damaged entry is cut again
    and rewritten, and another LLVM or jitrt (the runtime key) does not take it; the debug log
    says which happened."""
    from jitrt.backends.base import HostServices
    from jitrt.backends.llvm_setup import LLVM_LOCK
    from jitrt.cache.store import CacheStore
    store = CacheStore(tmp_path, 1 << 30, 0.5)
    host = HostServices(None, 1, store, lambda: "llvm 20; jitrt abc")
    sets = [frozenset({"__nv_sinf"}), frozenset({"__nv_expf", "__nv_log"})]

    def fresh_process() -> list[set[str]]:
        """The functions each set's subset defines (its bytes depend on what the process's
        LLVM context has seen: type names)."""
        nvptx._subset_of.cache_clear()
        nvptx._CUTS.clear()
        with LLVM_LOCK:
            return [{f.name for f in parse(nvptx.libdevice_subset(names, host)).functions
                     if not f.is_declaration} for names in sets]
    import llvmlite.binding as llvm
    parse = llvm.parse_bitcode
    with caplog.at_level("DEBUG", logger="jitrt"):
        first = fresh_process()
    assert [names <= defined for names, defined in zip(sets, first)] == [True, True]
    entries = list(tmp_path.iterdir())
    assert len(entries) == 1
    assert "libdevice: all of it parsed for the part codegen calls" in caplog.text
    assert "(kept in the offline cache)" in caplog.text
    caplog.clear()
    full = nvptx._libdevice_bitcode()

    def no_full_parse(bitcode: bytes):
        assert bitcode is not full, "all of libdevice parsed again"
        return parse(bitcode)
    monkeypatch.setattr(llvm, "parse_bitcode", no_full_parse)
    with caplog.at_level("DEBUG", logger="jitrt"):
        assert fresh_process() == first
    assert "libdevice: the part codegen calls read from the offline cache" in caplog.text
    assert "parsed" not in caplog.text
    monkeypatch.setattr(llvm, "parse_bitcode", parse)
    entries[0].write_bytes(entries[0].read_bytes()[:-200] + b"\0" * 200)      # damaged
    with pytest.warns(Warning, match="offline cache: ignoring .*libdevice-"):
        assert fresh_process() == first
    assert fresh_process() == first and len(list(tmp_path.iterdir())) == 1
    host = HostServices(None, 1, store, lambda: "llvm 21; jitrt abc")
    assert fresh_process() == first and len(list(tmp_path.iterdir())) == 2


@pytest.mark.skipif(nvptx.libdevice_path() is None, reason="no libdevice (jitrt[cuda])")
def test_libdevice_functions_optimised_once_per_machine_and_sm(tmp_path, caplog):
    """Each libdevice function a kernel calls is optimised for its compute capability once
    per machine (libdevice's `__nvvm_reflect` queries answered), not again in each kernel
    that inlines it: a later process reads it from the offline cache; another sm, or another
    function, is optimised when first needed and kept beside it."""
    import llvmlite.binding as llvm
    from jitrt.backends import nvptx_math
    from jitrt.backends.base import HostServices
    from jitrt.backends.llvm_setup import LLVM_LOCK
    from jitrt.cache.store import CacheStore
    host = HostServices(None, 1, CacheStore(tmp_path, 1 << 30, 0.5), lambda: "llvm; jitrt")

    def fresh_process(name: str, sm: int) -> bytes:
        nvptx_math._PIECES.clear()
        nvptx._CUTS.clear()
        nvptx._subset_of.cache_clear()
        with LLVM_LOCK:
            return nvptx_math.math_pieces(frozenset({name}), sm, host)[name]
    with caplog.at_level("DEBUG", logger="jitrt"):
        first = fresh_process("__nv_sinf", 80)
    assert "libdevice: __nv_sinf optimised for sm_80" in caplog.text
    piece = llvm.parse_bitcode(first)
    assert {f.name for f in piece.functions if not f.is_declaration} == {"__nv_sinf"}
    assert "__nvvm_reflect(" not in str(piece)
    entries = len(list(tmp_path.iterdir()))         # the part codegen calls, and sinf
    caplog.clear()
    with caplog.at_level("DEBUG", logger="jitrt"):
        assert fresh_process("__nv_sinf", 80) == first
    assert "optimised" not in caplog.text and "parsed" not in caplog.text
    with caplog.at_level("DEBUG", logger="jitrt"):
        fresh_process("__nv_sinf", 90)
        fresh_process("__nv_sin", 80)   # f64: its slow path is a helper (kept, linkonce_odr)
    assert "libdevice: __nv_sinf optimised for sm_90" in caplog.text
    assert "libdevice: __nv_sin optimised for sm_80" in caplog.text
    assert "parsed" not in caplog.text     # the part codegen calls: read, not made again
    assert len(list(tmp_path.iterdir())) == entries + 2
    with LLVM_LOCK:
        pieces = nvptx_math.math_pieces(frozenset({"__nv_sin", "__nv_cos", "__nv_expf"}), 80,
                                        host)
    assert pieces["__nv_cos"] is pieces["__nv_expf"]     # made together: one cut, one O3
    defined = {f.name: f.linkage for f in llvm.parse_bitcode(pieces["__nv_cos"]).functions
               if not f.is_declaration}
    assert {"__nv_cos", "__nv_expf"} < defined.keys()    # and sin's slow path, a helper
    assert set(defined.values()) == {llvm.Linkage.linkonce_odr}


@jr.kernel
def sin_cos(a: nd(dtype=jr.f32, ndim=1), s: jr.f32, again: jr.template()):
    for i in range(a.shape[0]):
        x = a[i] * s
        a[i] = jr.sin(x) * jr.cos(x)
        if jr.static(again):
            a[i] += jr.sin(x)


@jr.kernel
def sin_loop(a: nd(dtype=jr.f32, ndim=1), times: jr.template()):
    for i in range(a.shape[0]):
        total = 0.0
        for k in range(times):
            total += jr.sin(a[i] * k)
        a[i] = total


@pytest.mark.skipif(nvptx.libdevice_path() is None, reason="no libdevice (jitrt[cuda])")
def test_libdevice_calls_optimised_as_calls_then_inlined():
    """A kernel is optimised before libdevice's bodies are inlined (`nvptx.compile_ptx`):
    two sin of the same value are one call, so one copy of sinf's body in the PTX (counted
    by the references to sinf's table of 2/pi, which each copy of its slow path reads); and
    a short loop around sin is not unrolled into one copy of the body per iteration (as it
    was not when the body was inlined first): counted by the slow path's funnel shifts
    (`shf.l.wrap`, six a copy), at most the two versions of the loop the one-call kernel
    has once (the table's address may be materialised once per copy or shared)."""
    from jitrt.backends import nvptx_math
    from jitrt.backends.llvm_setup import LLVM_LOCK
    a = np.ones(8, np.float32)

    def copies(ptx: str) -> int:
        return ptx.count("__cudart_i2opi_f")
    nvptx_math._PIECES.clear()
    with LLVM_LOCK:                  # sinf's piece, then cosf's alone: each has the table
        nvptx_math.math_pieces(frozenset({"__nv_sinf"}), 80)
    once = jr.debug.gpu_asm(sin_cos, a, 1.0, False, arch="cuda")
    assert len(re.findall(r"\.global .*__cudart_i2opi_f\w*\[", once)) == 1    # one copy
    assert copies(jr.debug.gpu_asm(sin_cos, a, 1.0, True, arch="cuda")) == copies(once)
    def bodies(ptx: str) -> int:
        return ptx.count("shf.l.wrap")
    one = bodies(jr.debug.gpu_asm(sin_loop, a, 1, arch="cuda"))
    assert 0 < bodies(jr.debug.gpu_asm(sin_loop, a, 8, arch="cuda")) <= 2 * one


needs_ptxas = pytest.mark.skipif(nvptx.ptxas_path() is None,
                                 reason="ptxas not installed (pip install 'jitrt[cuda]')")


@needs_ptxas
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sm", [80, 90])
def test_ptx_assembles(case, sm):
    kernel, args, _ = CASES[case]
    ptx = jr.debug.gpu_asm(kernel, *args, arch="cuda", sm=sm)
    assert f".target sm_{sm}" in ptx
    cubin = nvptx.assemble(ptx, sm)
    assert cubin is not None and cubin[:4] == b"\x7fELF"


def test_ptxas_runs_on_every_core_unless_it_does_not_know_how(tmp_path, monkeypatch):
    # `-split-compile=0`: ptxas compiles a module's functions (a kernel's tasks) in parallel,
    # the same code; a ptxas that refuses the option gets the command without it from then on
    tool = tmp_path / "ptxas"
    tool.write_text('#!/bin/sh\necho "$@" >> "$0.log"\n'
                    'case "$*" in *-split-compile*) '
                    'echo "ptxas fatal   : Unknown option \'-split-compile\'" >&2; exit 1;; esac\n'
                    'for a; do out=$a; done\nprintf "\\177ELF" > "$out"\n')
    tool.chmod(0o755)
    monkeypatch.setattr(nvptx, "ptxas_path", lambda: str(tool))
    monkeypatch.setattr(nvptx, "SPLIT_COMPILE", ["-split-compile=0"])
    assert nvptx.assemble(".version 8.0", 90) == b"\x7fELF"
    assert nvptx.assemble(".version 8.0", 90) == b"\x7fELF"
    runs = (tmp_path / "ptxas.log").read_text().splitlines()
    assert ["-split-compile=0" in r for r in runs] == [True, False, False]
    monkeypatch.setattr(nvptx, "SPLIT_COMPILE", ["-split-compile=0"])
    tool.write_text('#!/bin/sh\necho "ptxas error: bad PTX" >&2; exit 1\n')
    with pytest.raises(RuntimeError, match="bad PTX"):   # another failure is not swallowed
        nvptx.assemble(".version 8.0", 90)
    assert nvptx.SPLIT_COMPILE == ["-split-compile=0"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_amdgcn_for_kernels(case):
    kernel, args, tasks = CASES[case]
    asm = jr.debug.gpu_asm(kernel, *args, arch="amdgpu")
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx' in asm
    for k in tasks:
        assert re.search(rf"^\s*\.amdhsa_kernel jk_task{k}_kernel$", asm, re.MULTILINE)
    assert "s_endpgm" in asm
    assert "v_" in asm                                                    # vector instructions


def test_amdgcn_math_needs_no_device_library():
    asm = jr.debug.gpu_asm(trig, np.ones(8, np.float32), 1.0, arch="amdgpu")
    assert "__ocml" not in asm and "jitrt_sin" not in asm    # portable math, inlined
    assert "v_" in asm


def test_gpu_asm_validates_like_a_launch():
    with pytest.raises(ValueError, match="arch must be"):
        jr.debug.gpu_asm(trig, np.ones(8, np.float32), 1.0, arch="metal")
    with pytest.raises(jr.KernelArgError, match="'a'"):
        jr.debug.gpu_asm(trig, np.ones(8, np.float64), 1.0, arch="cuda")

    @jr.kernel
    def bad():
        print(1)

    with pytest.raises(jr.KernelCompileError, match="print"):
        jr.debug.gpu_asm(bad, arch="amdgpu")


def test_gpu_asm_depends_on_the_specialization():
    on = jr.debug.gpu_asm(with_func, np.ones(4, np.float32), True, arch="cuda")
    off = jr.debug.gpu_asm(with_func, np.ones(4, np.float32), False, arch="cuda")
    assert on != off and len(on) > len(off)        # tanh (libdevice, inlined) only when on


# ---- absent GPU backends ---------------------------------------------------------------------

@pytest.mark.skipif(gpu_probe.cuda_available()[0], reason="a CUDA GPU is present here")
def test_init_cuda_without_runtime_is_a_clear_error():
    a = np.ones(4, np.float32)
    trig(a, 1.0)
    with pytest.raises(jr.BackendUnavailableError) as info:
        jr.init(arch=jr.cuda, enable_fallback=False)
    text = str(info.value)
    assert "arch=cuda" in text
    if importlib.util.find_spec("cuda") is None:
        assert "cuda-bindings" in text
    assert isinstance(info.value, jr.JitrtError)
    with pytest.raises(jr.BackendUnavailableError, match="arch=cuda"):
        jr.init(arch="cuda", enable_fallback=False)
    with pytest.raises(jr.BackendUnavailableError, match="arch=gpu"):
        jr.init(arch=jr.gpu, enable_fallback=False)
    with pytest.raises(jr.ConfigError, match=r"arch=.*expected one of cpu, cuda, amdgpu, gpu"):
        jr.init(arch="tpu")
    trig(a, 1.0)                                   # the CPU program is still the current one
    assert jr.debug.stats()["launches"] == 2


@pytest.mark.skipif(gpu_probe.cuda_available()[0], reason="a CUDA GPU is present here")
@pytest.mark.parametrize("wanted", ["cuda", "gpu"])
def test_init_gpu_without_runtime_falls_back_to_the_cpu_with_one_warning(wanted, monkeypatch):
    monkeypatch.delenv("JITRT_ENABLE_FALLBACK", raising=False)
    with pytest.warns(UserWarning) as record:
        program = jr.init(arch=wanted, offline_cache=False)
    lines = [str(w.message) for w in record]
    assert len(lines) == 1, lines
    assert f"arch={wanted} is not available" in lines[0] and "falling back to arch=cpu" in lines[0]
    assert record[0].filename == __file__          # the warning points at the caller's jr.init
    assert program.arch == "cpu" and program.config.arch == "cpu"
    y = np.ones(4, np.float32)
    saxpy_kernel(2.0, np.arange(4, dtype=np.float32), y)     # kernels run on the CPU program
    assert y.tolist() == [1, 3, 5, 7] and jr.debug.stats()["launches"] == 1
    monkeypatch.setenv("JITRT_ENABLE_FALLBACK", "0")
    with pytest.raises(jr.BackendUnavailableError, match=f"arch={wanted}"):
        jr.init(arch=wanted)


BLOCKED_GPU_SCRIPT = r"""
import sys
for name in ("cuda", "cuda.bindings", "hip", "pycuda", "cupy"):
    sys.modules[name] = None        # an import of these now fails, as on a machine without them
import numpy as np
import jitrt as jr
assert not any(m.split(".")[0] in ("cuda", "hip") and sys.modules[m] is not None
               for m in sys.modules), "import jitrt imported a GPU package"
for arch, words in (("cuda", ("arch=cuda", "cuda-bindings")),
                    ("amdgpu", ("arch=amdgpu", "hip-python")),
                    ("gpu", ("cuda-bindings", "hip-python"))):
    try:
        jr.init(arch=arch, enable_fallback=False)
    except jr.BackendUnavailableError as exc:
        assert all(w in str(exc) for w in words), str(exc)
    else:
        raise AssertionError(f"init(arch={arch}) did not fail")
jr.init(arch=jr.cpu, offline_cache=False)
x = jr.field(jr.i32, shape=(5,))

@jr.kernel
def fill():
    for i in x:
        x[i] = i * i

fill()
assert x.to_numpy().tolist() == [0, 1, 4, 9, 16]
print("ok")
"""


def test_import_and_cpu_work_without_gpu_packages(tmp_path):
    script = tmp_path / "no_gpu.py"
    script.write_text(BLOCKED_GPU_SCRIPT)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env = {k: v for k, v in env.items() if not k.startswith("JITRT_")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"


@jr.kernel
def saxpy_kernel(a: jr.f32, x: nd(dtype=jr.f32, ndim=1), y: nd(dtype=jr.f32, ndim=1)):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


def ptx_loops(ptx: str, entry: str) -> list[list[str]]:
    """The instructions of each loop of one entry's PTX: from a label to the last branch back
    to it (structure only, no exact LLVM output)."""
    body = ptx[ptx.index(f".entry {entry}("):]
    body = body[:body.index("\n}")]
    lines = [line.strip() for line in body.splitlines()]
    loops = []
    for k, line in enumerate(lines):
        label = re.match(r"^(\$L\w+):$", line)
        if label:
            back = [j for j in range(k + 1, len(lines))
                    if re.search(rf"\bbra(\.uni)?\s+{re.escape(label.group(1))};", lines[j])]
            if back:
                loops.append(lines[k:back[-1] + 1])
    return loops


def test_unchecked_gpu_loop_hoists_the_context_and_skips_fault_traffic():
    """The PTX of saxpy has a loop (the copy the bounds pre-check allows) whose body loads and
    stores the arrays but reads no kernel parameter or context slot and has no atomic or call
    (the fault record): the invariants were hoisted and the checks are gone."""
    x = np.ones(64, np.float32)
    ptx = jr.debug.gpu_asm(saxpy_kernel, 2.0, x, x.copy(), arch="cuda")
    loops = ptx_loops(ptx, "jk_task0_kernel")
    assert loops, "no loop in the task kernel"
    def leaves(body: list[str]) -> int:       # branches to a label outside the loop
        inside = {line[:-1] for line in body if line.endswith(":")}
        targets = [m.group(1) for line in body for m in [re.search(r"\bbra(?:\.uni)?\s+"
                                                                     r"(\$L\w+);", line)] if m]
        return sum(t not in inside for t in targets)

    clean = [body for body in loops
             if any(s.startswith("ld.global") for s in body)
             and any(s.startswith("st.global") for s in body)
             and not any(s.startswith(("ld.param", "atom", "call")) for s in body)
             and leaves(body) <= 1]
    assert clean, "\n\n".join("\n".join(b) for b in loops)
    checked = [body for body in loops if body not in clean]
    assert checked or "jitrt_record_fault" in ptx     # the checked copy is still there


@jr.kernel
def spin(a: nd(dtype=jr.f32, ndim=1), n: jr.i32):
    for i in range(a.shape[0]):
        k = 0
        while k < n:
            a[i] = jr.sin(a[i]) + 1.0
            k += 1


def module_text_with_traits(**traits) -> str:
    """The LLVM IR of `spin` for the CPU's codegen target with some `TargetTraits` changed."""
    import dataclasses

    from jitrt.backends import cpu
    from jitrt.runtime import program as _program
    from jitrt.runtime.arguments import bind_args, specialize
    from jitrt.runtime.compiler import lower_module
    target = cpu.cpu_target()
    target = dataclasses.replace(target, traits=dataclasses.replace(target.traits, **traits))
    program = _program.current()
    args = bind_args(spin, (jr.ndarray(jr.f32, 4), 3), {})
    params, _, templates, name = specialize(spin, args, program.config)
    return str(lower_module(spin, params, templates, name, program, target))


def test_codegen_asks_the_targets_traits_not_the_kind_of_device():
    """The same CPU target, stating no Ctrl-C polling, data in address space 1 and no unroll
    hints, gets code without each of them: codegen follows the capability record the backend
    declares (`codegen.targets.TargetTraits`), whatever the device."""
    host = module_text_with_traits()
    other = module_text_with_traits(host_interrupts=False, data_address_space=1,
                                    unroll_hints=False)
    assert "load atomic" in host and "load atomic" not in other     # the interrupt counter
    assert "addrspace(1)" not in host and "addrspace(1)" in other
    assert "llvm.loop.unroll.runtime.disable" in host
    assert "llvm.loop.unroll.runtime.disable" not in other


def test_every_backend_states_every_trait():
    from jitrt.backends import amdgcn, cpu
    from jitrt.codegen.targets import TargetTraits
    assert cpu.CPU_TRAITS.grid_launch is False and cpu.CPU_TRAITS.host_interrupts
    assert nvptx.TRAITS.grid_launch and nvptx.TRAITS.status_block
    assert amdgcn.codegen_target().traits == amdgcn.TRAITS
    with pytest.raises(TypeError):
        TargetTraits(grid_launch=True)     # no defaults: a vendor states each capability


def adstack_kernel(trips):
    """A grad kernel whose one adstack has `trips(c, i)` pushes per thread."""
    @jr.kernel
    def chain(x: nd(dtype=jr.f32, ndim=1), c: nd(dtype=jr.i32, ndim=1),
              loss: nd(dtype=jr.f32, ndim=0)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(trips(c, i)):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v
    return chain


@jr.func
def six(c, i):
    return 6


@jr.func
def many(c, i):
    return 200


@jr.func
def data(c, i):
    return c[i]


@pytest.mark.parametrize("trips, local", [(six, True), (many, False), (data, False)],
                         ids=["6 trips", "200 trips", "data-dependent"])
def test_small_constant_adstacks_live_in_local_memory_on_gpus(trips, local):
    # docs/gpu.md, "Autodiff on the GPU": 7 f32 entries (28 bytes) go in the thread's local
    # memory and the kernel never reads the heap's address (its context slot, a parameter);
    # 201 entries (804 bytes, over 256) or a data-dependent count stay in the heap
    from jitrt.codegen import abi
    kernel = adstack_kernel(trips)
    args = (jr.ndarray(jr.f32, (8,), needs_grad=True), jr.ndarray(jr.i32, (8,)),
            jr.ndarray(jr.f32, (), needs_grad=True))
    ptx = jr.debug.gpu_asm(kernel.grad, *args, arch="cuda", sm=90)
    heap = re.findall(rf"ld\.param\.\w+\s+%\w+, \[\w+_param_{abi.SLOT_ADSTACK_HEAP}\]", ptx)
    assert (heap == []) == local
    assert re.search(r"\.local .*__local_depot", ptx)
    if local:
        assert re.search(r"st\.local\.(b32|f32)", ptx)   # the pushes
    code = jr.debug.gpu_asm(kernel.grad, *args, arch="amdgpu", gfx="gfx942")
    assert code            # AMDGPU builds it too (private memory, address space 5)


@pytest.mark.parametrize("libdevice", ["cold", "kept"])
def test_gpu_compile_benchmark_prints_both_targets(libdevice):
    """benchmarks/gpu_compile.py (docs/gpu.md, "Compile time") runs without a GPU and prints
    each stage of a kernel and its gradient for the CPU and for CUDA, with libdevice's cut
    made in each process or read from an offline cache."""
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "gpu_compile.py"),
                           "--repeats", "1", "--clock", "cpu", "--libdevice", libdevice,
                           "--kernels", "compute_loss,compute_loss.grad"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[3:]}
    assert sorted(rows) == ["all", "compute_loss", "compute_loss.grad"], proc.stdout
    for name, cells in rows.items():
        assert len(cells) == 8 and cells[-1].endswith("x"), (name, cells)
        lower, quick, o3, lower_cuda, ptx = (float(c) for c in cells[:5])
        assert min(lower, quick, o3, lower_cuda, ptx) > 0, (name, cells)
        assert (cells[5] == "nan") == (nvptx.ptxas_path() is None), (name, cells)


def nvptx_module_text(kernel, *args) -> str:
    """The LLVM IR (before optimisation) of `kernel` for CUDA's codegen target."""
    from jitrt.backends import nvptx
    return module_text_for(kernel, nvptx.codegen_target(), *args)


def module_text_for(kernel, target, *args) -> str:
    """The LLVM IR (before optimisation) of `kernel` for a codegen target."""
    from jitrt.runtime import program as _program
    from jitrt.runtime.arguments import bind_args, specialize
    from jitrt.runtime.compiler import lower_module
    program = _program.current()
    params, _, templates, name = specialize(kernel, bind_args(kernel, args, {}),
                                            program.config)
    return str(lower_module(kernel, params, templates, name, program, target))


def test_gpu_field_accesses_test_and_combine_indices_in_32_bits():
    """`TargetTraits.narrow_offsets`: on GPUs a field of fewer than 2**31 elements indexed by
    32-bit values is tested and addressed in 32 bits (one sign extension for the address, as
    Taichi's `mul.wide.s32`); a larger field, an ndarray (its extents known only at launch)
    and every access on the CPU stay in 64 bits."""
    small = jr.field(jr.f32, shape=(64, 32))
    big = jr.field(jr.u8, shape=(1 << 16, 1 << 15))      # 2**31 elements (pages never touched)

    @jr.kernel
    def bump(idx: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in range(idx.shape[0]):
            small[idx[i], 3] += 1.0
            big[idx[i], 5] += 1

    def checks(text: str) -> set[str]:
        return set(re.findall(r"icmp ult (i\d+) %[\w.\"$]+, (\d+)", text))

    gpu = checks(nvptx_module_text(bump, np.zeros(4, np.int32)))
    assert ("i32", "64") in gpu and ("i64", "64") not in gpu          # the small field
    assert ("i64", "65536") in gpu and ("i32", "65536") not in gpu    # the large one
    from jitrt.backends import cpu
    host = checks(module_text_for(bump, cpu.cpu_target(), np.zeros(4, np.int32)))
    assert ("i64", "64") in host and ("i32", "64") not in host


def test_gpu_ndarray_accesses_are_32_bit_unless_specialized_for_a_large_array():
    """An ndarray's extents are known at launch only: its accesses are 32-bit on GPUs in a
    specialization for arrays of fewer than 2**31 elements (`Param.large` false), 64-bit in
    one for a larger array, which a launch with such an array gets (packing refuses it for
    the other: tests/test_ndarray.py)."""
    @jr.kernel
    def poke(a: jr.types.ndarray(dtype=jr.u8, ndim=2), row: jr.i32):
        for i in range(1):
            a[row, 5] = 7

    small = np.zeros((4, 8), np.uint8)
    big = np.zeros((1 << 16, 1 << 15), np.uint8)     # 2**31 elements (pages never touched)
    widths = lambda text: set(re.findall(r"icmp ult (i\d+) ", text))  # noqa: E731
    assert widths(nvptx_module_text(poke, small, 1)) == {"i32"}
    assert widths(nvptx_module_text(poke, big, 1)) == {"i64"}


def test_gpu_checks_a_repeated_access_once():
    """On GPUs an access repeating a check an earlier access of the thread made (same
    extents, same index values) runs unchecked: had the earlier check failed, the thread
    would have ended there (`TargetTraits.fault_ends_thread`). Each check made has its own
    failing arm: one recorder call each. (Reads whose checks wait, `deferred_reads`, make
    no fact until tested: tests/test_deferred_reads.py; here they are off.)"""
    from test_deferred_reads import without_deferred_reads
    a = jr.field(jr.f32, shape=(4, 3))
    b = jr.field(jr.f32, shape=(4, 3))

    @jr.kernel
    def repeats(i: jr.i32, j: jr.i32):
        jr.loop_config(serialize=True)
        for _ in range(1):
            t = i
            a[t, j] = 1.0                               # checked (1)
            b[t, j] = a[t, j] + 2.0                     # same checks: not again
            t = t + 1
            a[t, j] = 3.0                               # t changed: checked (2)
            x = a[t, j] if j > 0 else 0.0               # the same as (2): not again
            c = j > 0 and a[j, t] > 0.0                 # checked (3), conditionally
            a[j, t] = x + c                             # so checked again here (4)
            for k in range(2):
                b[t, j] = 5.0                           # t changes in the loop: (5)
                a[t, j] = 5.5                           # not again
                b[k, t] = 6.0                           # checked (6)
                t = t + k
            b[t, j] = 7.0                               # checked (7)

    text = module_text_for(repeats, without_deferred_reads(), 1, 2)
    assert text.count('call void @"jitrt_record_fault"') == 7      # of 11 checked accesses


def _stop_arms(text: str) -> list[list[str]]:
    """The lines of each failing arm (`out_of_bounds` blocks) of an LLVM module's text."""
    arms, lines = [], text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("out_of_bounds"):
            end = next(j for j in range(k + 1, len(lines)) if not lines[j].startswith(" "))
            arms.append([x.strip() for x in lines[k + 1:end]])
    return arms


@pytest.mark.parametrize("serial", [True, False])
def test_a_failing_gpu_check_ends_its_thread(serial):
    """A checked GPU access branches to an arm that records the failure, ends the thread
    (PTX `exit`) and never rejoins: no phi merges a fallback value into the access's result.
    The CPU's form (`fault_ends_thread=False`) merges one per checked load. (A read of CUDA's
    whose check waits, `deferred_reads`, is tested later: tests/test_deferred_reads.py; off
    here.)"""
    import dataclasses

    from test_deferred_reads import without_deferred_reads
    a = jr.field(jr.f32, shape=(5,))
    idx = jr.field(jr.i32, shape=(5,))
    out = jr.field(jr.f32, shape=(5,))

    @jr.kernel
    def gather(n: jr.i32):
        jr.loop_config(serialize=serial)
        for k in range(n):
            out[k] = a[idx[k]] * 2.0

    target = without_deferred_reads()
    text = module_text_for(gather, target, 3)
    arms = _stop_arms(text)
    assert arms                                        # a[idx[k]] at least
    for arm in arms:
        assert any('call void @"jitrt_record_fault"' in x for x in arm)
        assert arm[-2:] == ['call void asm sideeffect "exit;", ""()', "unreachable"]
    assert " = phi " not in text
    skipping = dataclasses.replace(
        target, traits=dataclasses.replace(target.traits, fault_ends_thread=False))
    assert " = phi  float " in module_text_for(gather, skipping, 3)


def test_gpu_loads_of_data_a_task_only_reads_are_invariant():
    """On GPUs a task's loads of a field it does not write are `!invariant.load` (PTX
    `ld.global.nc`, the read-only data path); a field it writes is read as usual, and so is
    everything when it writes an ndarray (an argument may view a field's memory). Field
    accesses carry their field's alias scope and the others' as `!noalias`; ndarray
    accesses carry none."""
    from jitrt.backends import nvptx
    a = jr.field(jr.f32, shape=(5,))
    idx = jr.field(jr.i32, shape=(5,))
    out = jr.field(jr.f32, shape=(5,))

    @jr.kernel
    def gather():
        for k in range(5):
            out[k] = a[idx[k]] * 2.0 + out[k]

    @jr.kernel
    def gather_into(dst: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for k in range(5):
            dst[k] = a[idx[k]]

    def data_loads(text: str) -> list[str]:
        return [line for line in text.splitlines()
                if " = load " in line and " addrspace(1)* " in line]

    target = nvptx.codegen_target()
    loads = data_loads(module_text_for(gather, target))
    plain = sum("!invariant.load" not in line for line in loads)     # out[k]
    assert plain >= 1                     # (once per copy of the loop: checked, unchecked)
    assert sum("!invariant.load" in line for line in loads) == 2 * plain   # idx[k], a[...]
    assert all("!alias.scope" in line and "!noalias" in line for line in loads)
    dst = jr.ndarray(jr.f32, shape=(5,))
    text = module_text_for(gather_into, target, dst)
    loads = data_loads(text)
    assert loads and not any("!invariant.load" in line for line in loads)
    stores = [line for line in text.splitlines() if line.strip().startswith("store float")
              and " addrspace(1)* " in line]
    assert stores and not any("!alias.scope" in line for line in stores)   # dst[k]


def test_gpu_fast_math_fuses_and_approximates_as_the_peers_do():
    """On GPUs `fast_math` (the default) lets a multiply and an add fuse into one FMA
    (`contract`: nvcc's and clang's CUDA default, Taichi's and Quadrants' fast math) and
    makes f32 division and square root the hardware's approximations (`afn`); f64 division
    and square root stay IEEE. `fast_math=False`, and the CPU always, round each operation."""
    from jitrt.backends import cpu
    x = jr.field(jr.f32, shape=(8,))
    y = jr.field(jr.f64, shape=(8,))

    @jr.kernel
    def arith(a: jr.f32, c: jr.f32):
        for i in range(8):
            x[i] = jr.sqrt(x[i] * a + c) / (x[i] + 1.0)
            y[i] = jr.sqrt(y[i] * a + c) / (y[i] + 1.0)

    text = nvptx_module_text(arith, 2.0, 3.0)
    assert re.search(r"= fmul contract float ", text) and re.search(r"= fadd contract float ",
                                                                   text)
    assert re.search(r"= fdiv afn float ", text) and 'call afn float @"llvm.sqrt.f32"' in text
    assert re.search(r"= fdiv double ", text) and 'call double @"llvm.sqrt.f64"' in text
    assert re.search(r"= fmul contract double ", text)
    flagged = re.compile(r"= (fadd|fsub|fmul|fdiv|call) (contract|afn) ")
    assert not flagged.search(module_text_for(arith, cpu.codegen_target(), 2.0, 3.0))
    jr.init(fast_math=False)
    assert not flagged.search(nvptx_module_text(arith, 2.0, 3.0))



@pytest.mark.cpu_only
def test_small_ptx_is_assembled_in_process_when_a_device_offers_it(monkeypatch):
    """An open CUDA device hands `compile_artifact` its driver's PTX compiler
    (`CudaDriver.link_ptx`, no process to start): PTX up to IN_PROCESS_PTX_BYTES goes there,
    larger PTX and PTX the driver refuses go to ptxas (the H200 ran the arch=cuda suite with
    every cubin made in process)."""
    from jitrt.backends import cuda
    monkeypatch.setattr(nvptx, "compile_ptx", lambda module, sm, host=None: module)
    monkeypatch.setattr(nvptx, "assemble", lambda ptx, sm: b"ptxas")
    linked: list[str] = []

    def link(ptx):
        linked.append(ptx)
        return None if "refused" in ptx else b"driver"
    counters: dict[str, int] = {}
    small, big = ".version 8.0 small", "x" * (cuda.IN_PROCESS_PTX_BYTES + 1)
    assert cuda.unpack_artifact(cuda.compile_artifact(small, 90, counters, None, link))[0] \
        == b"driver"
    assert cuda.unpack_artifact(cuda.compile_artifact(big, 90, counters, None, link))[0] \
        == b"ptxas"
    assert cuda.unpack_artifact(cuda.compile_artifact("refused", 90, counters, None, link))[0] \
        == b"ptxas"
    assert cuda.unpack_artifact(cuda.compile_artifact(small, 90, counters))[0] == b"ptxas"
    assert linked == [small, "refused"]
    assert counters == {"driver_links": 1, "ptxas_runs": 3}
