"""`jr.ad.Tape`: record forward launches, then run their adjoints in reverse.

Stage: runtime (autodiff driver). On entry the tape clears the gradients of every live field
that has one and makes launches go through the slow dispatch path, which records (kernel,
arguments). On exit it clears the gradients of recorded ndarray arguments, seeds
`loss.grad = 1` and launches `kernel.grad(*args)` for the recorded launches in reverse order.
"""
from __future__ import annotations

from typing import Any

from .runtime import program as program_mod
from .runtime.data import Field, Ndarray, live_grad_fields


class Tape:
    def __init__(self, loss: Any = None, clear_gradients: bool = True) -> None:
        if loss is not None and not isinstance(loss, (Field, Ndarray)):
            raise TypeError(f"Tape(loss=...) needs a field or ndarray, got {type(loss).__name__}")
        if loss is not None and loss.grad is None:
            raise ValueError(f"Tape(loss=...): '{loss.name}' was created without needs_grad=True")
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.entries: list[tuple[Any, tuple]] = []
        self._program: Any = None

    def record(self, kernel: Any, values: list[Any]) -> None:
        if not kernel.adjoint:
            self.entries.append((kernel, tuple(values)))

    def __enter__(self) -> "Tape":
        program = program_mod.current()
        if program.tape is not None:
            raise RuntimeError("jr.ad.Tape cannot be nested")
        from .frontend.decorators import all_kernels
        for k in all_kernels():
            k.disable_fast_path()
        if self.clear_gradients:
            for f in live_grad_fields():
                f.grad.fill(0)
        program.tape = self
        self._program = program
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._program.tape = None
        if exc_type is not None:
            return
        self.grad()

    def grad(self) -> None:
        if self.clear_gradients:
            for _, values in self.entries:
                for v in values:
                    if isinstance(v, Ndarray) and v.grad is not None:
                        v.grad.fill(0)
        if self.loss is not None:
            if self.loss.shape == ():
                self.loss.grad[None] = 1
            else:
                self.loss.grad.fill(1)
        for kernel, values in reversed(self.entries):
            kernel.grad(*values)
