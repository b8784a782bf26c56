"""Shared test set-up: every test runs against a fresh program without the disk cache, once
per arch under test, and the default cache location is a temporary directory for the whole
session.

Archs: `JITRT_TEST_ARCHS=cpu,cuda` (comma-separated); by default cpu, plus cuda where a CUDA
GPU answers and amdgpu where a ROCm GPU does. Tests of CPU-only machinery carry
`@pytest.mark.cpu_only` and run once, on the CPU; `@pytest.mark.gpu_only` tests skip without a
GPU arch. Every distinct kernel compiled for the CPU is also built for the GPUs (below), except
in tests marked `@pytest.mark.no_gpu_builds` (kernels too large to build three times per run).

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
# The suite compiles each kernel once, optimised (jr.init(tiered_compile=False)): a tiered
# compile also builds and compiles a quick copy, and with interleaved tasks a second module
# (docs/architecture.md), which took the default suite near CI's 10 minutes on a 2-vCPU VM
# (a fresh clone's `make test` at 9132688: 8m14s of pytest, tiered). Tiered compilation has
# its own tests (test_tiered_compile.py, and the tiered case of test_interleave.py), which
# turn it on; JITRT_TIERED_COMPILE=1 runs the whole suite tiered.
os.environ.setdefault("JITRT_TIERED_COMPILE", "0")
# Nor do the processes tests start leave a process finishing their dropped optimised copies
# behind (cache/finishing.py): the tests of that turn it on.
os.environ.setdefault("JITRT_FINISH_AT_EXIT", "0")

import jitrt as jr  # noqa: E402  (after the cache location is set)


def _default_archs() -> list[str]:
    from jitrt.backends import gpu_probe
    return ["cpu"] + (["cuda"] if gpu_probe.cuda_available()[0] else []) + (
        ["amdgpu"] if gpu_probe.hip_available()[0] else [])


ARCHS = [a.strip() for a in os.environ.get("JITRT_TEST_ARCHS", "").split(",") if a.strip()] \
    or _default_archs()


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only: tests of CPU-only machinery (run on cpu)")
    config.addinivalue_line("markers", "gpu_only: tests that need a GPU arch")
    config.addinivalue_line("markers", "no_gpu_builds: kernels too large to also build for the "
                            "GPUs in every run (the GPU suite still runs them on a GPU)")


def pytest_generate_tests(metafunc):
    if "arch" in metafunc.fixturenames:
        node = metafunc.definition
        archs = ARCHS
        if node.get_closest_marker("cpu_only"):
            archs = ["cpu"]
        elif node.get_closest_marker("gpu_only"):
            archs = [a for a in ARCHS if a != "cpu"] or ["none"]
        metafunc.parametrize("arch", archs, scope="function")


# ---- every kernel the CPU suite compiles is also built for the GPUs ----------------------------
# CUDA: PTX made for sm_80, assembled by ptxas for sm_80 or sm_90, the kernels taking turns
# (LLVM's sm_90 output runs in the arch=cuda suite on an H100). AMDGPU: a code object linked
# by ld.lld for gfx942 (wave64) or gfx1100 (wave32), the kernels taking turns
# (JITRT_TEST_AMDGPU=all: both, as `make test-all` does), checked to hold one kernel
# descriptor per GPU symbol with the kernarg size of its parameters. Neither needs a GPU:
# codegen regressions are caught on any machine. JITRT_TEST_PTX=0 / JITRT_TEST_AMDGPU=0 skip
# them. The test process lowers each kernel for the GPUs; LLVM, ptxas and ld.lld run in
# worker processes (gpu_builds.py), whose results the next test module collects at its end.
from gpu_builds import AMDGPU_TARGETS, Worker  # noqa: E402

GPU_WORKER = Worker()
PTX_SMS = (80, 90)
AMDGPU_ALL = os.environ.get("JITRT_TEST_AMDGPU") == "all"


class _TextOnly:
    """The compile half of a GPU device for the suite: keeps the module's text for the
    worker (`gpu_builds.build`)."""

    def __init__(self, arch, codegen_target):
        self.arch, self.codegen_target, self.text = arch, codegen_target, None

    def compile(self, module):
        self.text = str(module)
        return b""


def expected_kernarg_size(artifact, symbol):
    """Bytes of parameters of a GPU kernel: one i64 per context slot, the threads launched,
    and the sizing kernels' result pointers."""
    role = symbol.rsplit("_", 2)[-2]         # jk_<hash>_<role>_kernel
    pointers = {"required": 2}.get(role, 1 if role.startswith("red") else 0)
    return 8 * (artifact.layout.gpu_slots + 1 + pointers)


def _build_for_gpus_too(real, checks):
    seen = set()       # the same kernel code (its symbol prefix hashes it) is built once

    def build_artifact(kernel, params, name, ctx, kir, cfg, device):
        artifact = real(kernel, params, name, ctx, kir, cfg, device)
        build_for_gpus(artifact, kernel, params, name, ctx, kir, cfg, device)
        return artifact

    def build_for_gpus(artifact, kernel, params, name, ctx, kir, cfg, device):
        if device.arch == "cpu" and artifact.prefix not in seen and not NO_GPU_BUILDS[0]:
            seen.add(artifact.prefix)
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
            if "ptx" in checks:
                from jitrt.backends import nvptx
                ptx = _TextOnly("cuda", nvptx.codegen_target())
                real(kernel, params, name, ctx, kir, cfg, ptx)
                GPU_WORKER.submit(test, name, "ptx", ptx.text, PTX_SMS[len(seen) % 2])
            if "amdgpu" in checks:
                from jitrt.backends import amdgcn
                amd = _TextOnly("amdgpu", amdgcn.codegen_target())
                try:
                    amd_artifact = real(kernel, params, name, ctx, kir, cfg, amd)
                except jr.KernelCompileError as exc:    # print(): CPU and CUDA only
                    if "not supported on amdgpu" not in str(exc):
                        raise
                else:
                    targets = AMDGPU_TARGETS if AMDGPU_ALL else \
                        (AMDGPU_TARGETS[len(seen) % 2],)
                    GPU_WORKER.submit(test, name, "amdgpu", amd.text, (targets, {
                        s: expected_kernarg_size(amd_artifact, s) for s in amd_artifact.symbols}))
    return build_artifact, build_for_gpus


def _lower_for_gpus_too(real, build_for_gpus):
    """A tiered CPU compile (`compile_tiered`) lowers without `build_artifact`: the same GPU
    builds from here."""
    def lower_artifact(kernel, params, name, ctx, kir, cfg, device):
        lowered = real(kernel, params, name, ctx, kir, cfg, device)
        build_for_gpus(lowered[1], kernel, params, name, ctx, kir, cfg, device)
        return lowered
    return lower_artifact


NO_GPU_BUILDS = [False]     # the running test carries @pytest.mark.no_gpu_builds


def _install_gpu_builds():
    from jitrt.backends import amdgcn, nvptx
    from jitrt.runtime import compiler
    checks = set()
    if os.environ.get("JITRT_TEST_PTX", "1") != "0" and nvptx.ptxas_path() is not None:
        checks.add("ptx")
    if os.environ.get("JITRT_TEST_AMDGPU", "1") != "0" and amdgcn.linker() is not None:
        checks.add("amdgpu")
    if checks:
        compiler.build_artifact, build_for_gpus = _build_for_gpus_too(compiler.build_artifact,
                                                                      checks)
        compiler.lower_artifact = _lower_for_gpus_too(compiler.lower_artifact, build_for_gpus)


_install_gpu_builds()


@pytest.fixture(autouse=True, scope="module")
def _gpu_builds_of_earlier_modules():
    """The GPU builds earlier modules' tests sent (this module's are collected at the end of
    the next one, so that the workers keep building meanwhile): a failure is an error at
    this module's end naming the test that compiled the kernel."""
    earlier = GPU_WORKER.sent
    yield
    failures = GPU_WORKER.collect(earlier)
    if failures:
        pytest.fail("GPU builds failed:\n" + "\n".join(failures), pytrace=False)


def pytest_sessionfinish(session):
    failures = GPU_WORKER.collect()
    GPU_WORKER.close()
    if failures:
        print("\nGPU builds failed:\n" + "\n".join(failures))
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if GPU_WORKER.done["ptx"]:
        terminalreporter.write_line(f"PTX of {GPU_WORKER.done['ptx']} distinct kernels "
                                    "assembled by ptxas for sm_80 or sm_90 in turn")
    if GPU_WORKER.done["amdgpu"]:
        terminalreporter.write_line(
            f"AMDGPU code objects of {GPU_WORKER.done['amdgpu']} distinct kernels linked for "
            f"{' and '.join(AMDGPU_TARGETS) if AMDGPU_ALL else ' or '.join(AMDGPU_TARGETS)}"
            f"{'' if AMDGPU_ALL else ' in turn'}, kernel descriptors checked")


@pytest.fixture(autouse=True)
def _gpu_builds_for_this_test(request):
    NO_GPU_BUILDS[0] = request.node.get_closest_marker("no_gpu_builds") is not None
    yield
    NO_GPU_BUILDS[0] = False


@pytest.fixture(autouse=True)
def fresh_program(arch):
    if arch == "none":
        pytest.skip("needs a GPU arch (JITRT_TEST_ARCHS=cuda on a machine with a GPU)")
    program = jr.init(arch=arch, offline_cache=False, enable_fallback=False)  # never the CPU
    yield program
    jr.reset()


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded by the test's name: random inputs that are stable between runs."""
    seed = sum(ord(c) * (k + 1) for k, c in enumerate(request.node.name))
    return np.random.default_rng(seed)


@pytest.fixture
def fakegpu_program():
    """(binding, program) on the fake third GPU vendor (tests/fakegpu_backend.py over
    fakegpu_lib.py): a fresh binding, the vendor plugged in with its one registry line, a
    program opened with `jr.init(arch="fakegpu")`; all undone afterwards."""
    import fakegpu_backend
    import fakegpu_lib
    from jitrt.backends import registry
    fakegpu_backend.LIB[0] = fake = fakegpu_lib.FakeGpuLib()
    registry.register(registry.Backend("fakegpu", "fakegpu_backend", stream_gpu=True,
                                       host_memory=False))
    try:
        yield fake, jr.init(arch="fakegpu", offline_cache=False, enable_fallback=False)
        jr.reset()
    finally:
        registry.unregister("fakegpu")
