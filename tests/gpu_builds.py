"""The suite's GPU builds of CPU test kernels, in a process of their own (conftest.py).

Each distinct kernel the CPU suite compiles is also built for the GPUs: its CUDA module to PTX
(sm_80) assembled by ptxas, for sm_80 and sm_90 in turn, and its AMDGPU module to a code
object linked by ld.lld, for gfx942 (wave64) and gfx1100 (wave32) in turn, with its kernel
descriptors checked. Every kernel is checked once per GPU vendor and both of each vendor's
targets across the suite: the module text is the same for both targets of a vendor, so a
second build checked LLVM's backends more than jitrt, and it cost as much as the first
(building each AMDGPU module for both targets was a sixth of the suite's CPU time on a
2-core machine). `JITRT_TEST_AMDGPU=all` builds every kernel for both gfx targets again
(`make test-all`). Those builds were about three quarters of the CPU time of a test file,
run on the test's own thread; here they run in WORKERS worker processes, on the core the
test process leaves idle, while the tests go on.
The test process still lowers each kernel for each GPU (passes, codegen: the parts that need
its objects) and sends the LLVM module's text with what its descriptors must say. A test
module's builds are collected at the end of the next module (so that the workers' backlog
overlaps with that module's tests) and at the end of the session; a failure is an error
there, naming the test and kernel that failed.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
from typing import Any

AMDGPU_TARGETS = ("gfx942", "gfx1100")
# two processes: the builds cost about twice the CPU of the tests themselves, so one worker
# was the critical path on a 2-core machine; with two, the three processes share both cores
WORKERS = 2


def build(kind: str, text: str, expected: Any) -> None:
    """In the worker: one GPU build; raises what ptxas, ld.lld, LLVM or the check said.
    `expected`: for CUDA, the sm ptxas assembles the PTX for; for AMDGPU, the gfx targets
    and each kernel symbol's kernarg size in bytes."""
    if kind == "ptx":
        from jitrt.backends import nvptx
        nvptx.assemble(nvptx.compile_ptx(text, 80), expected)   # sm_80 PTX runs on sm_90 too
        return
    from jitrt.backends import amdgcn
    targets, sizes = expected
    for gfx in targets:
        found = amdgcn.kernel_descriptors(amdgcn.link(amdgcn.compile_object(text, gfx)))
        assert sorted(found) == sorted(sizes), (gfx, sorted(found), sorted(sizes))
        for symbol, size in sizes.items():
            assert found[symbol].kernarg_size == size, (gfx, symbol, found[symbol], size)
            assert found[symbol].wave32 == (gfx == "gfx1100"), (gfx, symbol)


class Worker:
    """The build processes (started on first use, spawned: they share no LLVM state or
    threads with the tests) and the builds sent to them that no one has collected yet."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pending: list[tuple[str, str, str, concurrent.futures.Future]] = []
        self.done = {"ptx": 0, "amdgpu": 0}

    def submit(self, test: str, kernel: str, kind: str, text: str,
               expected: Any = None) -> None:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=WORKERS, mp_context=multiprocessing.get_context("spawn"))
        self._pending.append((test, kernel, kind, self._pool.submit(build, kind, text,
                                                                    expected)))

    @property
    def sent(self) -> int:
        """How many builds were sent and not yet collected."""
        return len(self._pending)

    def collect(self, first: int | None = None) -> list[str]:
        """Wait for the first `first` builds not yet collected (all: None); what failed, one
        line each."""
        failures: list[str] = []
        upto = len(self._pending) if first is None else first
        pending, self._pending = self._pending[:upto], self._pending[upto:]
        for test, kernel, kind, future in pending:
            try:
                future.result()
            except concurrent.futures.process.BrokenProcessPool as exc:
                self._pool = None                   # LLVM crashed the worker: a new one
                failures.append(f"{test}: {kind} build of {kernel}: worker died ({exc})")
            except Exception as exc:  # noqa: BLE001 (reported, with the test that built it)
                failures.append(f"{test}: {kind} build of {kernel}: "
                                f"{type(exc).__name__}: {exc}")
            else:
                self.done[kind] += 1
        return failures

    def close(self) -> Any:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
