"""What a compile produces: the compiled kernel a launch binds, and the artifact the offline
cache keeps.

Stage: runtime (records of `compiler.py`, which makes them; `launcher.py`, the backends and
the offline cache read them). `Artifact` is stored pickled (its module path is in every
entry: `compiler` imports these names, so entries written before they moved here still load);
`LazyTasks` defers unpickling a stored kernel's task trees to their first use. Caches
nothing itself.
"""
from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

from ..codegen import abi
from ..codegen.abi import AccessSite, LaunchableTask
from ..frozen import frozen
from ..ir import nodes as n
from ..ir import sizeexpr as se
from ..passes.lowered import LoweredKernel
from .adstack import SizingPlan


@frozen
class CompiledKernel:
    name: str
    params: tuple[n.Param, ...]
    lowered: LoweredKernel
    layout: abi.ContextLayout
    sites: tuple[AccessSite, ...]
    entry_addr: int                 # the CPU's fused entry (0 on GPUs)
    field_objs: tuple[Any, ...]
    grad_params: frozenset[int]     # ndarray parameters whose .grad the kernel touches
    ir_text: str
    sizing: SizingPlan | None = None   # grad kernels with adstacks
    tasks: tuple[LaunchableTask, ...] = ()   # the launchable tasks (the CPU runs the fused entry)
    functions: Any = None           # symbol -> address or GPU function handle, as loaded
    # its `prekey.WarmFile` (offline cache): where its launchers' code is kept
    warm: Any = dataclasses.field(default=None, compare=False, repr=False)


class LazyTasks(Sequence[n.Task]):
    """The tasks of a stored kernel's IR (`TaskedKernel.tasks`), unpickled on first use: a CPU
    launch never reads them (a GPU launch reads its tasks' boxes), and unpickling their
    statement trees was most of an entry's load time (0.3-0.5 ms of ~0.5 on the development
    VM, for the adstack benchmark's kernels). Pickles as bytes, made once (on the first
    save of a fresh compile) or kept from the load."""

    def __init__(self, blob: bytes | None, tasks: tuple[n.Task, ...] | None = None) -> None:
        self._blob, self._tasks = blob, tasks

    @classmethod
    def of(cls, tasks: tuple[n.Task, ...]) -> "LazyTasks":
        """Tasks at hand (a fresh compile): pickled only if the entry is saved."""
        return cls(None, tuple(tasks))

    def get(self) -> tuple[n.Task, ...]:
        if self._tasks is None:
            assert self._blob is not None
            self._tasks = pickle.loads(self._blob)
        return self._tasks

    def __getitem__(self, index: Any) -> Any:
        return self.get()[index]

    def __len__(self) -> int:
        return len(self.get())

    def __iter__(self) -> Iterator[n.Task]:
        return iter(self.get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyTasks):
            other = other.get()
        return self.get() == other

    def __hash__(self) -> int:
        return hash(self.get())

    def __repr__(self) -> str:
        return repr(self.get())

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        if self._blob is None:
            self._blob = pickle.dumps(self._tasks, protocol=pickle.HIGHEST_PROTOCOL)
        return LazyTasks, (self._blob,)


@frozen
class Artifact:
    """What the offline cache stores for one compiled kernel: object code and all metadata."""
    name: str
    params: tuple[n.Param, ...]
    lowered: LoweredKernel          # tasks, write set, SizeExprs per adstack
    layout: abi.ContextLayout
    sites: tuple[AccessSite, ...]
    grad_params: frozenset[int]
    ir_text: str
    prefix: str
    symbols: tuple[str, ...]        # CPU: entry, max-reducers, capacities; GPUs: task kernels
    specs: tuple[se.MaxOverRange, ...]
    registry_ids: tuple[tuple[int, int], ...]   # (task_id_in_kernel, registry id) at compile
    obj: bytes
    tasks: tuple[LaunchableTask, ...] = ()      # what a device launches, task by task
    origins: tuple[tuple[str, tuple[str, int, int, int]], ...] = ()   # see `rebind_sources`
    # "quick": `obj` is the CPU's quick copy (`cpu_tiers.quick_object`), kept when the process
    # ended before its optimised copy was compiled (`resume_tiered`); "": the optimised copy
    tier: str = ""
    # a quick copy's: the text of the module its optimised copy compiles, zlib-compressed,
    # where it was built by the exit (b"": `resume_tiered` builds it anew)
    optimised_text: bytes = b""
    # a quick copy's: the target it was compiled for (`cache.keys.host_target()`), so that
    # `python -m jitrt cache finish` compiles the optimised copies of this machine's only
    target: str = ""
    # a quick copy's: how many processes in a row ended before its optimised compile (at
    # FOREGROUND_AFTER_DROPS the next one compiles it before the first launch)
    drops: int = 0

    def optimised(self) -> "Artifact":
        """A quick copy's optimised copy, compiled on this thread from its stored text (the
        entry to store in its place; `optimised_now`, `python -m jitrt cache finish`)."""
        import zlib

        from ..backends import cpu_tiers
        obj = cpu_tiers.optimised_object(zlib.decompress(self.optimised_text).decode())
        return dataclasses.replace(self, obj=obj, tier="", optimised_text=b"", target="",
                                   drops=0)
