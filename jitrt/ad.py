"""`jr.ad.Tape`: record forward launches, then run their adjoints in reverse; `jr.ad.FwdMode`:
forward mode, every launch inside it computing tangents beside its values.

Stage: runtime (autodiff driver). Also the gradient controls of the peers: `no_grad` kernels
(never recorded), `grad_replaced` functions with a `grad_for` backward (recorded as one step),
`clear_all_gradients()`. On entry the tape clears the gradients of every live field that has one
and registers itself as its thread's tape (`Program.start_recording`), which sets
`program.ACTIVE` to the program's tape token, so that every launcher (bound launches too) looks
up its thread's tape and records (kernel, arguments, handle) there; launches of threads without
a tape run unrecorded, and each thread may record a tape of its own. On exit it checks that no
recorded launch changed data that decides the trip counts of the same or an earlier recorded
launch (the reverse pass re-runs the forward sweeps and would replay other trip counts: a wrong
gradient, so an `AutodiffError` naming both kernels and the data), clears the gradients of
recorded ndarray arguments, seeds `loss.grad = 1` and launches `kernel.grad(*args)` for the
recorded launches in reverse order (on a GPU, a reverse pass that repeats the previous Tape's
is replayed as one device graph: `tape_replay.py`). With `validation=True` (and
`jr.init(debug=True)`) `ACTIVE` is the program's validate token instead: every launch goes to
the slow path, which records it and runs its checked copy (Taichi's global data access rule,
`frontend/gdar.py`).

`FwdMode(loss=..., param=..., seed=...)` on entry zeroes every live dual (unless
`clear_gradients=False`), writes the seed into `param.dual` and sets `program.ACTIVE` to the
program's FwdMode token: every launcher then takes its slow path, where `dispatch` runs the
kernel's forward-mode kernel instead (compiled and cached once per specialization, its
launchers expecting that token). On exit `param.dual` is zeroed again; the tangents stay in the
duals of what the kernels wrote (`loss.dual`).
"""
from __future__ import annotations

import enum
import threading
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import AutodiffError
from .runtime import program as program_mod
from .data import (Field, Ndarray, grad_tensor_view, live_dual_buffers, live_grad_fields,
                   requires_grad)

if TYPE_CHECKING:
    from .ad_check import GradChecker, GradCheckResult   # (loaded by a Tape that checks)
    from .runtime.launcher import LaunchHandle
    from .runtime.program import Program
    from .runtime.seams import KernelLike


class AutodiffMode(enum.Enum):
    """What a kernel object computes (Taichi's names): `k.autodiff_mode` is NONE for a
    kernel, REVERSE for `k.grad`, FORWARD for the forward-mode kernel a launch inside
    `jr.ad.FwdMode` runs, VALIDATION for the checked copy a `jr.ad.Tape(validation=True)`
    runs."""
    NONE = "none"
    VALIDATION = "validation"
    FORWARD = "forward"
    REVERSE = "reverse"


class Tape:
    """Records the launches of a forward step; on exit runs their adjoints in reverse.

    Args:
        loss: the 0-d field or one-element ndarray whose gradient is seeded with 1; or a
            one-element torch CPU tensor that requires a gradient (its `.grad`, allocated if
            None). Anything larger, or without a gradient, is a `jr.TapeLossError`.
        clear_gradients: zero every gradient on entry (default) or accumulate.
        validation: check Taichi's global data access rule while recording (with
            `jr.init(debug=True)`; without it, a warning): an element of a field with a
            gradient that the tape has read must not be written again; a launch that does
            raises `jr.KernelRuntimeError` at the write (`frontend/gdar.py`).
        grad_check: fields/ndarrays whose gradients are checked against finite differences
            after the reverse pass (jitrt/ad_check.py; an f64 loss; results in
            `tape.grad_check_results`).
    """

    def __init__(self, loss: Any = None, clear_gradients: bool = True,
                 validation: bool = False, grad_check: Any = None) -> None:
        if loss is not None:
            loss = _checked_loss(loss)
        self.validation = bool(validation) and program_mod.current().config.debug
        if validation and not self.validation:
            warnings.warn("jr.ad.Tape(validation=True): the global data access rule is "
                          "checked only with jr.init(debug=True); the tape records without the "
                          "check (Taichi's words, kept for programs that look for them: Debug "
                          "mode is disabled, autodiff valid check will not work. Please "
                          "specify `ti.init(debug=True)` to enable the check.)", stacklevel=2)
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.to_check = None
        if grad_check is not None:
            from .ad_check import check_arguments
            self.to_check = check_arguments(loss, grad_check)
        self.checker: GradChecker | None = None
        self.grad_check_results: list[GradCheckResult] = []
        self.entries: list[tuple[Any, tuple]] = []
        self.handles: list["LaunchHandle | None"] = []   # per entry (None: grad_replaced)
        self._program: "Program | None" = None

    @property
    def calls(self) -> list[tuple[Any, tuple]]:
        """Taichi's `tape.calls`: the launches recorded so far, (kernel, arguments) in order
        (a `@jr.ad.grad_replaced` function's calls among them)."""
        return list(self.entries)

    @property
    def modes(self) -> list[AutodiffMode]:
        """Taichi's `tape.modes`: the autodiff mode of each recorded kernel, NONE for the
        ones a user launches (jitrt never switches a kernel's mode: a validating tape runs a
        separate checked kernel, docs/porting.md)."""
        return [getattr(k, "autodiff_mode", AutodiffMode.NONE) for k, _ in self.entries]

    def record(self, kernel: "KernelLike", values: list[Any] | tuple[Any, ...],
               handle: "LaunchHandle | None") -> None:
        if not kernel.adjoint and not getattr(kernel, "grad_disabled", False):
            if self.checker is not None:
                self.checker.note_all(tuple(values))
            self.entries.append((kernel, tuple(values)))
            self.handles.append(handle)

    def __enter__(self) -> "Tape":
        program = _check_no_mode(self)
        if self.clear_gradients:
            for f in live_grad_fields():
                f.grad.fill(0)
        if self.loss is not None:
            self.loss.fill(0)     # as Taichi: the recorded step computes the loss afresh
        if self.to_check is not None:
            from .ad_check import GradChecker
            self.checker = GradChecker(self.loss, self.to_check)
        if self.validation:
            from .frontend.gdar import clear_bits
            clear_bits()
        # launchers now record themselves on their own thread's tape; with validation they
        # go to `dispatch`, which records them and runs their checked copies
        # (runtime/launcher.py)
        program.start_recording(self)
        self._program = program
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        program = self._program
        assert program is not None, "Tape.__exit__ without __enter__"
        program.stop_recording()
        if exc_type is not None:
            return
        self.grad()

    def grad(self) -> None:
        self.check_trip_counts()
        if self.clear_gradients:
            for _, values in self.entries:
                for v in values:
                    if v.__class__ is Ndarray and v.grad is not None:
                        v.grad.fill(0)
        if self.loss is not None:
            self.loss.grad.fill(1)     # a 0-d loss too: its one element
        from .tape_replay import reverse_pass
        reverse_pass(self)       # on a GPU, a reverse pass seen before is one graph replay
        if self.checker is not None:
            self.grad_check_results = self.checker.run(self.entries)

    def check_trip_counts(self) -> None:
        """Refuse a recording in which launch j >= k writes data that launch k's loop bounds
        read: k's adjoint would run with trip counts its forward launch never saw."""
        entries, handles = self.entries, self.handles
        written: dict[int, int] = {}                 # id of data -> last entry writing it
        any_reads = False
        for j, h in enumerate(handles):
            if h is None:                            # a grad_replaced step: the user's own
                continue
            reads, writes = h.tape_plan or _tape_plan(h)
            any_reads = any_reads or bool(reads)
            values = entries[j][1]
            for ref in writes:
                written[id(values[ref] if ref.__class__ is int else ref[1])] = j
        if not any_reads:
            return                                   # no loop bound reads any data
        for k, h in enumerate(handles):
            if h is None:
                continue
            values = entries[k][1]
            for ref in h.tape_plan[0]:
                j = written.get(id(values[ref] if ref.__class__ is int else ref[1]), -1)
                if j >= k:
                    self.refuse(k, j, ref)

    def refuse(self, k: int, j: int, ref: Any) -> None:
        first, later = self.entries[k][0], self.entries[j][0]
        handle = self.handles[k]
        assert handle is not None           # only kernels' entries are checked
        c = handle.compiled
        name = f"argument '{c.params[ref].name}'" if isinstance(ref, int) else \
            f"field '{c.lowered.tasked.fields[ref[0]].name}'"
        when = "itself" if j == k else f"kernel {later.qualname} (launched later)"
        raise AutodiffError(
            f"jr.ad.Tape: kernel {first.qualname} reads {name} in a loop bound, and {when} "
            "writes it while the tape records; the reverse pass would replay other trip counts "
            "and return a wrong gradient. Keep loop-bound data unchanged while recording (write "
            "new counts to another array).")


Plan = tuple[tuple[Any, ...], tuple[Any, ...]]   # (bound reads, writes)


def _tape_plan(handle: "LaunchHandle") -> Plan:
    """What the check needs of a compiled kernel, computed once per handle: for the bound
    reads and the writes, an argument index or a (field slot, field object) pair."""
    plan = handle.tape_plan
    if plan is None:
        c = handle.compiled

        def refs(ws: Any) -> tuple[Any, ...]:
            return tuple((s, c.field_objs[s]) for s, g in ws.fields if not g) + \
                tuple(a for a, g in ws.arrays if not g)
        plan = handle.tape_plan = (refs(c.lowered.bound_reads), refs(c.lowered.writes))
    return plan  # type: ignore[no-any-return]


class FwdMode:
    """Forward-mode autodiff (as Taichi's `ti.ad.FwdMode`): inside the `with` block every
    kernel launch runs its forward-mode version, which computes the same values and, in the
    `.dual` of everything it writes, their derivative along `seed` (a Jacobian-vector
    product). `param` and `loss` (one, or a list) need `needs_dual=True`.

    Args:
        loss: the output(s) whose `.dual` holds the result after the block.
        param: the input the derivatives are taken with respect to.
        seed: one value per element of `param` (row-major): `param.dual` during the block.
            Default `[1.0]` for a param of one element; required for larger ones.
        clear_gradients: zero every dual on entry (default) or keep what they hold.
    """

    def __init__(self, loss: Any, param: Any, seed: Any = None,
                 clear_gradients: bool = True) -> None:
        self.losses = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        for x in self.losses + [param]:
            what = "param" if x is param else "loss"
            if not isinstance(x, (Field, Ndarray)):
                raise TypeError(f"FwdMode({what}=...) needs a field or ndarray, got "
                                f"{type(x).__name__}")
            if not x.needs_dual:
                raise ValueError(f"FwdMode({what}=...): '{x.name}' was created without "
                                 "needs_dual=True" + (" (and its dual was neither placed nor "
                                                      "given by jr.root.lazy_dual())"
                                                      if x.dual is not None else ""))
        self.loss, self.param = loss, param
        size = int(np.prod(param.storage_shape, dtype=np.int64))
        if seed is None:
            if size != 1:
                raise ValueError(
                    f"FwdMode: param '{param.name}' has {size} elements (shape "
                    f"{param.storage_shape}); give seed=[...] with one value per element, e.g. "
                    "a 1 at the element to differentiate with respect to and 0 elsewhere")
            seed = [1.0]
        self.seed = np.asarray(seed, dtype=param.dtype.np).reshape(-1)
        if self.seed.size != size:
            raise ValueError(f"FwdMode: seed has {self.seed.size} values but param "
                             f"'{param.name}' has {size} elements (shape {param.storage_shape})")
        self.clear_gradients = clear_gradients
        self.thread = 0                              # the thread that entered it
        self._program: "Program | None" = None

    def __enter__(self) -> "FwdMode":
        program = _check_no_mode(self)
        if self.clear_gradients:
            clear_all_duals()
        self.param.dual.from_numpy(self.seed.reshape(self.param.storage_shape))
        program.fwd = self
        self.thread = threading.get_ident()
        program_mod.ACTIVE[0] = program.fwd_token   # launches go to their forward kernels
        self._program = program
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        program = self._program
        assert program is not None, "FwdMode.__exit__ without __enter__"
        program.fwd = None
        _leave(program, program.fwd_token)
        self.param.dual.fill(0)                      # the seed is cleared, results stay


def _checked_loss(loss: Any) -> Field | Ndarray:
    """The loss a Tape seeds: a 0-d field, an ndarray of one element or a torch CPU tensor of
    one element that requires a gradient (an ndarray over it); anything else is refused as
    Taichi refuses it (a `TapeLossError`, which is a `RuntimeError`; Taichi's words kept)."""
    from .errors import TapeLossError
    if hasattr(loss, "requires_grad") and hasattr(loss, "numel"):      # a torch tensor
        if loss.numel() != 1:
            raise TapeLossError(f"Tape(loss=...): a tensor of shape {tuple(loss.shape)}; the "
                                "loss of `Tape` must be a tensor only contains one element")
        if not loss.requires_grad:
            raise TapeLossError("Tape(loss=...): Gradients of loss are not allocated, please set "
                                "requires_grad=True for all tensors that are required by "
                                "autodiff.")
    if requires_grad(loss):                       # a torch CPU tensor: over its .grad
        loss = grad_tensor_view(loss)
    if not isinstance(loss, (Field, Ndarray)):
        raise TypeError(f"Tape(loss=...) needs a field or ndarray, got {type(loss).__name__}")
    if isinstance(loss, Ndarray) and int(np.prod(loss.shape)) != 1:
        raise TapeLossError(f"Tape(loss=...): ndarray of shape {loss.shape}; The loss of `Tape` "
                            "must be an ndarray with only one element")
    if isinstance(loss, Field) and loss.shape != ():
        raise TapeLossError(f"Tape(loss=...): '{loss.name}' has shape {loss.shape}; The loss of "
                            "`Tape` must be a 0-D field, i.e. scalar")
    if not loss.needs_grad:                       # an implicit gradient does not count
        what = ("Gradients of loss are not allocated, please set needs_grad=True for all "
                "ndarrays that are required by autodiff." if isinstance(loss, Ndarray) else
                "Gradients of loss are not allocated, please use ti.field(..., needs_grad=True)")
        raise TapeLossError(f"Tape(loss=...): '{loss.name}' was created without needs_grad=True"
                            + (" (and its gradient was neither placed nor given by "
                               "jr.root.lazy_grad())" if loss.grad is not None else "")
                            + f"; {what}")
    return loss


def _check_no_mode(mode: Any) -> "Program":
    """The current program, if no Tape of this thread and no FwdMode is active in it (they do
    not nest). A FwdMode applies to the launches of every thread, so it does not start while
    another thread's Tape records either; Tapes of different threads are independent."""
    program = program_mod.current()
    active = program.tape if program.tape is not None else program.fwd
    if active is not None:
        where = "" if active is program.tape or active.thread == threading.get_ident() else \
            " of another thread (a FwdMode applies to the launches of every thread)"
        raise RuntimeError(f"jr.ad.{type(mode).__name__} cannot be used inside "
                           f"jr.ad.{type(active).__name__}{where} (they do not nest)")
    if isinstance(mode, FwdMode) and program.recorders:
        raise RuntimeError("jr.ad.FwdMode cannot start while a jr.ad.Tape (or a jr.graph) of "
                           "another thread records: a FwdMode applies to the launches of "
                           "every thread")
    return program


def _leave(program: "Program", token: object) -> None:
    """Launches go back to the program's own kernels (unless jr.init replaced it meanwhile)."""
    if program_mod.ACTIVE[0] is token:
        program_mod.ACTIVE[0] = program


def clear_all_duals() -> None:
    """Set the dual of every live field and ndarray to 0 (what a FwdMode does on entry)."""
    for b in live_dual_buffers():
        b.dual.fill(0)


def clear_all_gradients() -> None:
    """Set the gradient of every live field to 0 (what a Tape does on entry)."""
    for f in live_grad_fields():
        f.grad.fill(0)


def no_grad(kernel: Any) -> Any:
    """`@jr.ad.no_grad` above `@jr.kernel`: the kernel runs in the forward pass but a Tape does
    not record it and its `.grad(...)` does nothing (as in Taichi). On a plain Python function
    that launches kernels: the function is one Tape step whose backward does nothing (its own
    launches are not recorded), as Taichi's."""
    if not getattr(type(kernel), "is_jitrt_kernel", False):
        if not callable(kernel):
            raise TypeError("@jr.ad.no_grad goes on a @jr.kernel or a Python function")
        replaced = grad_replaced(kernel)
        grad_for(replaced)(lambda *args, **kwargs: None)
        return replaced
    kernel.grad_disabled = True
    return kernel


class _ReplacedStep:
    """A `grad_replaced` function as a Tape entry: its backward is the user's."""
    adjoint = False

    def __init__(self, fn: Any) -> None:
        self.fn, self.backward, self.qualname = fn, None, fn.__qualname__

    def __call__(self, *values: Any) -> Any:    # a replay (grad_check) runs the function
        return self.fn(*values)

    def grad(self, *values: Any) -> None:
        if self.backward is None:
            raise AutodiffError(f"{self.qualname} is @jr.ad.grad_replaced but has no "
                                "@jr.ad.grad_for(...) backward")
        self.backward(*values)


def grad_replaced(fn: Any) -> Any:
    """`@jr.ad.grad_replaced` on a Python function that launches kernels: inside a Tape its
    launches are not recorded one by one; the function is recorded as one step, and in the
    reverse pass the function given by `@jr.ad.grad_for(fn)` runs instead, with the same
    arguments (how checkpointing recomputes forward steps instead of storing them)."""
    step = _ReplacedStep(fn)

    def replaced(*args: Any) -> Any:
        program = program_mod.current()
        tape = program.tape
        if tape is None:
            return fn(*args)
        program.tape = None      # its own launches: not recorded (nor checked); this thread
        try:
            result = fn(*args)
        finally:
            program.tape = tape
        tape.record(step, args, None)  # type: ignore[arg-type]
        return result
    replaced.__wrapped__ = fn          # type: ignore[attr-defined]
    replaced.__name__ = getattr(fn, "__name__", "replaced")
    replaced.replaced_step = step      # type: ignore[attr-defined]
    replaced.grad = step.grad          # type: ignore[attr-defined]  # f.grad(...): its backward
    return replaced


def grad_for(primal: Any) -> Any:
    """`@jr.ad.grad_for(f)` on the backward of a `@jr.ad.grad_replaced` function `f`."""
    step = getattr(primal, "replaced_step", None)
    if step is None:
        raise AutodiffError("@jr.ad.grad_for(f) needs f decorated with @jr.ad.grad_replaced")

    def register(backward: Any) -> Any:
        step.backward = backward
        return backward
    return register


def __getattr__(name: str) -> object:
    from .peer_names import missing
    raise missing("jitrt.ad", name, globals())
