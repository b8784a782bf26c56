"""Shared test set-up: every test runs against a fresh program without the disk cache, once
per arch under test, and the default cache location is a temporary directory for the whole
session.

Archs: `JITRT_TEST_ARCHS=cpu,cuda` (comma-separated); by default cpu, plus cuda where a CUDA
GPU answers. Tests of CPU-only machinery carry `@pytest.mark.cpu_only` and run once, on the
CPU; `@pytest.mark.gpu_only` tests skip without a GPU arch.

`jr.init` is cheap (the worker pool and the loaded native code are kept process-wide), so it
runs before every test: kernels defined at module level recompile in each test that uses them,
and counters from one test never leak into another.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

# Never touch the user's real cache: every default location (this process and the subprocesses
# tests start, which inherit the environment) points into a directory of this session.
_SESSION_CACHE = tempfile.mkdtemp(prefix="jitrt-tests-")
os.environ["JITRT_CACHE_DIR"] = os.path.join(_SESSION_CACHE, "jitrt")
os.environ["XDG_CACHE_HOME"] = os.path.join(_SESSION_CACHE, "xdg")

import jitrt as jr  # noqa: E402  (after the cache location is set)


def _default_archs() -> list[str]:
    from jitrt.backends import gpu_probe
    return ["cpu"] + (["cuda"] if gpu_probe.cuda_available()[0] else [])


ARCHS = [a.strip() for a in os.environ.get("JITRT_TEST_ARCHS", "").split(",") if a.strip()] \
    or _default_archs()


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only: tests of CPU-only machinery (run on cpu)")
    config.addinivalue_line("markers", "gpu_only: tests that need a GPU arch")


def pytest_generate_tests(metafunc):
    if "arch" in metafunc.fixturenames:
        node = metafunc.definition
        archs = ARCHS
        if node.get_closest_marker("cpu_only"):
            archs = ["cpu"]
        elif node.get_closest_marker("gpu_only"):
            archs = [a for a in ARCHS if a != "cpu"] or ["none"]
        metafunc.parametrize("arch", archs, scope="function")


# ---- every kernel the CPU suite compiles is also assembled for sm_80 and sm_90 ----------------
# (ptxas runs without a GPU: codegen regressions for CUDA are caught on any machine; set
# JITRT_TEST_PTX=0 to skip)
class _PtxOnly:
    """The compile half of a CUDA device: the GPU build of a kernel (task kernels, sizing
    kernels) assembled for sm_80 and sm_90; ptxas raises on bad PTX."""
    arch = "cuda"

    def __init__(self):
        from jitrt.backends import nvptx
        self.nvptx, self.codegen_target = nvptx, nvptx.codegen_target()

    def compile(self, module):
        text = str(module)
        for sm in (80, 90):
            self.nvptx.assemble(self.nvptx.compile_ptx(text, sm), sm)
        return b""


def _assemble_ptx_too(real):
    def build_artifact(kernel, params, name, ctx, kir, cfg, device):
        artifact = real(kernel, params, name, ctx, kir, cfg, device)
        if device.arch == "cpu":
            real(kernel, params, name, ctx, kir, cfg, _PtxOnly())
            PTX_CHECKED[0] += 1
        return artifact
    return build_artifact


PTX_CHECKED = [0]


def _install_ptx_check():
    from jitrt.backends import nvptx
    from jitrt.runtime import compiler
    if os.environ.get("JITRT_TEST_PTX", "1") != "0" and nvptx.ptxas_path() is not None:
        compiler.build_artifact = _assemble_ptx_too(compiler.build_artifact)


_install_ptx_check()


def pytest_terminal_summary(terminalreporter):
    if PTX_CHECKED[0]:
        terminalreporter.write_line(f"PTX of {PTX_CHECKED[0]} kernels assembled by ptxas for "
                                    "sm_80 and sm_90")


@pytest.fixture(autouse=True)
def fresh_program(arch):
    if arch == "none":
        pytest.skip("needs a GPU arch (JITRT_TEST_ARCHS=cuda on a machine with a GPU)")
    program = jr.init(arch=arch, offline_cache=False)
    yield program
    jr.reset()


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded by the test's name: random inputs that are stable between runs."""
    seed = sum(ord(c) * (k + 1) for k, c in enumerate(request.node.name))
    return np.random.default_rng(seed)
