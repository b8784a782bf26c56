"""Data-parallel training on the CPU: benchmarks/scaling/ddp_mass_spring.py run as one plain
process and as two processes that all-reduce their gradients through torch.distributed's gloo
backend (started here as torchrun would start them: RANK, WORLD_SIZE, LOCAL_RANK and the
rendezvous address in the environment). The averaged gradient of the two processes must equal
the plain process's gradient over the same four environments. The two-process test needs
torch (the `test` extra installs its CPU build) and skips without it; the plain run does not.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "scaling" / "ddp_mass_spring.py"
SIZES = ["--steps", "12", "--iters", "1"]
TIMEOUT = 240


def environment(**extra: str) -> dict[str, str]:
    """The children's environment: this checkout first on the path, one jitrt thread each (two
    processes share a 2-core machine), the test session's cache directory (conftest.py)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), JITRT_NUM_THREADS="1", **extra)
    env.pop("JITRT_ARCH", None)
    return env


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One process over environments 0..3 (it also fills the offline cache that the two
    processes of the next test then load from)."""
    out = tmp_path_factory.mktemp("plain")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--envs", "4", *SIZES, "--save",
                           str(out)], env=environment(), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc.stdout


@pytest.mark.cpu_only
def test_a_plain_run_trains_without_torch(plain):
    out, stdout = plain
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["devices"] == 1 and result["envs_per_device"] == 4
    assert [(r["devices"], r["envs"]) for r in result["rows"]] == [(1, 4)]
    grad = np.load(out / "grad.npy")
    assert grad.shape == (83, 9) and np.abs(grad).max() > 0
    assert "| weak | 1 | 4 | 4 |" in stdout and stdout.rstrip().endswith("OK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.cpu_only
def test_two_gloo_processes_average_to_the_single_process_gradient(plain, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "ddp"
    rendezvous = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    rendezvous.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), "--envs", "2", *SIZES, "--save",
                               str(out)],
                              env=environment(RANK=str(r), LOCAL_RANK=str(r), **rendezvous),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    try:
        logs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], "\n---\n".join(logs)
    result = json.loads((out / "result.json").read_text())
    assert result["devices"] == 2 and result["shares_memory"] and result["params_in_sync"]
    assert result["gradient_ok"] and result["max_rel_diff"] <= 1e-5
    assert [(r["devices"], r["envs"]) for r in result["rows"]] == [(1, 2), (1, 4), (2, 4)]
    assert result["rows"][2]["allreduce_share"] > 0
    assert result["compiles"][1] == 0        # process 1 loads what process 0 compiled
    averaged, single = np.load(out / "grad.npy"), np.load(plain[0] / "grad.npy")
    assert np.abs(averaged - single).max() <= 1e-5 * np.abs(single).max()
    assert "| strong | 2 | 2 | 4 |" in logs[0] and "| weak | 2 | 2 | 4 |" in logs[0]
    assert "averaged gradient vs one process over all 4 environments" in logs[0]


@pytest.mark.gpu_only
def test_two_nccl_processes_on_two_gpus(arch, tmp_path):
    """The same on a host with two GPUs or more (the GPU suite): torchrun, NCCL, one
    process per GPU, NVLink multicast off."""
    torch = pytest.importorskip("torch")
    if arch != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    out = tmp_path / "nccl"
    env = environment(NCCL_NVLS_ENABLE="0")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", str(SCRIPT), "--arch", "cuda", "--envs", "64",
                           *SIZES, "--save", str(out)], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["shares_memory"] and result["gradient_ok"] and result["params_in_sync"]
    assert result["max_rel_diff"] <= 1e-5
