"""A user's script type-checks: `mypy --strict` on a program that defines and launches kernels
(two kernels, a func, a Tape, a bound launch) reports nothing, and sees each kernel's
parameters (a wrong argument is an error at the call). The script also runs.

mypy finds jitrt through PYTHONPATH here, as it does through an installed package or an
editable install in compat mode (docs/usage.md, "Type checking")."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''"""Two kernels, a func, a Tape and a bound launch."""
from typing import Annotated

import numpy as np

import jitrt as jr

jr.init(arch=jr.cpu)
N = 8
x = jr.field(jr.f32, shape=(N,), needs_grad=True)
loss = jr.field(jr.f32, shape=(), needs_grad=True)
F32Array = Annotated[jr.Ndarray, jr.types.ndarray(dtype=jr.f32, ndim=1)]


@jr.func
def square(v: float) -> float:
    return v * v


@jr.kernel
def fill(k: jr.f32) -> None:
    for i in x:
        x[i] = i * k


@jr.kernel
def total(out: F32Array, scale: jr.f32) -> jr.f32:
    for i in range(out.shape[0]):
        out[i] = x[i] * scale
        loss[None] += square(x[i])
    return float(loss[None])


fill(0.5)
out = jr.ndarray(jr.f32, shape=(N,))
with jr.ad.Tape(loss=loss):
    total(out, 2.0)
grad: np.ndarray = x.grad.to_numpy()
launch = total.bind(out, 3.0)
value: float = launch()
total.grad(out, 2.0)
print(value, grad.tolist())
'''


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                           "--cache-dir", str(tmp_path / "mypy_cache"), str(script)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.cpu_only
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed "
                    "(the dev extra)")
def test_a_user_script_type_checks_strictly_and_sees_kernel_parameters(tmp_path: Path) -> None:
    clean = _mypy(tmp_path, SCRIPT)
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout + clean.stderr
    wrong = SCRIPT.replace("fill(0.5)", 'fill("fast")').replace("total.bind(out, 3.0)",
                                                                "total.bind(out)")
    found = _mypy(tmp_path, wrong).stdout
    assert ('user_script.py:34: error: Argument 1 to "__call__" of "Kernel" has incompatible '
            'type "str"; expected "float"') in found
    assert ('user_script.py:39: error: Missing positional argument "scale" in call to "bind" '
            'of "Kernel"') in found


@pytest.mark.cpu_only
def test_the_typed_script_runs(tmp_path: Path) -> None:
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JITRT_OFFLINE_CACHE": "0"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # x = 0, 0.5, ... 3.5: the bound launch adds sum(x^2) = 35 to the taped pass's 35
    assert done.stdout.split()[0] == "70.0"
    assert "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]" in done.stdout
