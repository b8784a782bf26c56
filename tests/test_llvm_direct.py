"""The CPU backend's LLVM calls without `llvmlite.binding` (jitrt/backends/llvm_direct.py).

A CPU program from `import jitrt` to a gradient never imports llvmlite's Python binding;
what `llvm_direct` reports about the host is what llvmlite reports (the offline cache's keys
and the prebuilt runtime object's key are made from it), and its compile steps give working
code and llvmlite's error messages.
"""
from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from jitrt.backends import llvm_direct as direct
from jitrt.backends.llvm_setup import LLVM_LOCK

pytestmark = pytest.mark.cpu_only
ROOT = pathlib.Path(__file__).resolve().parents[1]

ADD = """
define i64 @add(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  ret i64 %s
}
"""


def test_host_facts_match_llvmlite():
    import llvmlite.binding as llvm

    from jitrt.backends.llvm_setup import host_target_machine
    assert direct.version_info() == llvm.llvm_version_info
    assert direct.process_triple() == llvm.get_process_triple()
    assert direct.host_cpu_name() == llvm.get_host_cpu_name()
    assert direct.host_cpu_features() == llvm.get_host_cpu_features().flatten()
    with LLVM_LOCK:
        assert direct.data_layout(direct.host_machine(3)) == \
            str(host_target_machine().target_data)


def test_compile_load_and_call():
    from jitrt.backends import cpu
    obj = cpu.compile_object(ADD)
    addrs = cpu.engine().load("test_llvm_direct_add", obj, ["add"])
    add = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(addrs["add"])
    assert add(40, 2) == 42


def test_quick_copy_renames_definitions_and_adds_stubs():
    from jitrt.backends import cpu, cpu_tiers
    tiers = cpu.tiers()
    addrs = tiers.quick("test_llvm_direct_quick", ADD.replace("@add", "@addq"), ["addq"])
    assert set(addrs) == {"addq", "addq" + cpu_tiers.CELL}
    add = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(addrs["addq"])
    assert add(1, 2) == 3
    # the cell points at the quick copy, which carries the suffix
    cell = ctypes.c_uint64.from_address(addrs["addq" + cpu_tiers.CELL]).value
    assert cell == cpu.engine().address("addq" + cpu_tiers.QUICK) != 0


NOT_DOMINATED = """
define i32 @f(i32 %a) {
entry:
  br label %exit
exit:
  %x = add i32 %y, 1
  ret i32 %x
other:
  %y = add i32 %a, 1
  br label %exit
}
"""


def test_parse_and_verify_errors_carry_llvms_message():
    with LLVM_LOCK:
        with pytest.raises(RuntimeError, match=r"LLVM IR parsing error\n.*expected"):
            direct.parse("define i64 @f( {", direct.shared_context())
        mod = direct.parse(NOT_DOMINATED, direct.shared_context())
        try:
            with pytest.raises(RuntimeError, match="does not dominate all uses"):
                direct.verify(mod)
            with pytest.raises(NameError, match="missing"):
                direct.function_type(mod, "missing")
            assert direct.function_type(mod, "f") == "i32 (i32)"
        finally:
            direct.dispose_module(mod)


NO_BINDING = textwrap.dedent("""
    import json, sys, tempfile
    import numpy as np
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache_file_path=tempfile.mkdtemp())
    x = jr.field(jr.f32, shape=4, needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def f():
        for i in x:
            loss[None] += jr.sin(x[i])

    x.from_numpy(np.arange(4, dtype=np.float32))
    with jr.ad.Tape(loss):
        f()
    jr.sync()
    print(json.dumps({"grad": x.grad.to_numpy().tolist(),
                      "binding": "llvmlite.binding" in sys.modules}))
""")


def test_a_cpu_program_never_imports_llvmlite_binding(tmp_path):
    script = tmp_path / "no_binding.py"
    script.write_text(NO_BINDING)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["binding"] is False
    assert got["grad"] == pytest.approx([1.0, 0.5403023, -0.4161468, -0.9899925], rel=1e-5)
