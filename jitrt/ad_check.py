"""`jr.ad.Tape(loss, grad_check=[x, ...])`: the tape's gradients checked against finite
differences, as Taichi's grad checker does.

Stage: runtime (autodiff driver, debugging aid). Input: the state of every live field and of
each recorded ndarray argument when the tape started recording, the recorded launches, and the
gradients the reverse pass computed. For each checked input x and a random direction t, the
recorded launches are replayed from that state with x + eps t and x - eps t, and the central
difference of sum(loss) is compared with <x.grad, t>, for eps = 2^-3, 2^-5, ... 2^-29 until one
agrees within 1%. A check that never agrees gives a `GradCheckWarning` naming the input and the
smallest relative error (Taichi prints a line; a warning can be turned into an error with
`warnings.simplefilter("error", jr.GradCheckWarning)`). Afterwards every field and recorded
ndarray holds what it held after the reverse pass again. Caches nothing.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import Field, Ndarray, live_user_fields
from .errors import GradCheckWarning

EPS_RANGE = 2.0 ** np.arange(-3, -30, -2).astype(np.float64)
TOLERANCE = 0.01               # as Taichi's: |numerical - autodiff| <= 1% of |autodiff|


@dataclass(frozen=True)
class GradCheckResult:
    name: str                  # the checked field or ndarray
    passed: bool
    relative_error: float      # the smallest over the step sizes tried


def check_arguments(loss: Any, to_check: Any) -> list[Any]:
    """The list of inputs to check, or a clear error before anything is recorded."""
    if loss is None:
        raise ValueError("jr.ad.Tape(grad_check=...) needs loss=...")
    if not isinstance(to_check, (list, tuple)):
        raise TypeError("jr.ad.Tape(grad_check=...) takes a list of fields or ndarrays, got "
                        f"{type(to_check).__name__}")
    if loss.dtype.name != "f64":
        raise ValueError(f"jr.ad.Tape(grad_check=...): the loss '{loss.name}' is "
                         f"{loss.dtype!r}; finite differences need an f64 loss (as in Taichi)")
    for x in to_check:
        if not isinstance(x, (Field, Ndarray)):
            raise TypeError("jr.ad.Tape(grad_check=...) takes fields and ndarrays, got "
                            f"{type(x).__name__}")
        if x.grad is None:
            raise ValueError(f"jr.ad.Tape(grad_check=...): '{x.name}' has no gradient "
                             "(needs_grad=True)")
    return list(to_check)


class GradChecker:
    """Snapshots taken while the tape records; `run` after the reverse pass."""

    def __init__(self, loss: Any, to_check: list[Any]) -> None:
        self.loss, self.to_check = loss, to_check
        self.start: dict[int, tuple[Any, np.ndarray]] = {}   # id -> (buffer, data at start)
        for b in live_user_fields() + to_check:
            self.note(b)

    def note(self, b: Any) -> None:
        """Remember `b`'s data before the recorded launches change it (first sight only)."""
        if isinstance(b, (Field, Ndarray)) and id(b) not in self.start:
            self.start[id(b)] = (b, b.to_numpy())

    def note_all(self, values: tuple[Any, ...]) -> None:
        for v in values:
            self.note(v)

    def run(self, entries: list[tuple[Any, tuple]]) -> list[GradCheckResult]:
        buffers = [b for b, _ in self.start.values()]
        after = [(b, b.to_numpy(), None if b.grad is None else b.grad.to_numpy())
                 for b in buffers]
        rng = np.random.default_rng(0)      # the user's numpy random state is left alone
        try:
            return [self.check(x, entries, rng) for x in self.to_check]
        finally:
            for b, data, grad in after:
                b.from_numpy(data)
                if grad is not None:
                    b.grad.from_numpy(grad)

    def check(self, x: Any, entries: list[tuple[Any, tuple]],
              rng: np.random.Generator) -> GradCheckResult:
        if x is self.loss:
            return GradCheckResult(x.name, True, 0.0)
        base = self.start[id(x)][1].astype(np.float64)
        grad = x.grad.to_numpy().astype(np.float64)
        errors = []
        for eps in EPS_RANGE:
            tangent = rng.random(base.shape)
            ip_numerical = (self.loss_at(x, base + eps * tangent, entries)
                            - self.loss_at(x, base - eps * tangent, entries)) * 0.5 / eps
            ip_autodiff = float(np.sum(grad * tangent))
            err = abs(ip_autodiff - ip_numerical)
            floor = 1e-20 if ip_numerical == 0 else 0.0
            errors.append(float(err / (abs(ip_autodiff) + floor)))
            if err <= TOLERANCE * abs(ip_autodiff):
                return GradCheckResult(x.name, True, errors[-1])
        result = GradCheckResult(x.name, False, min(errors))
        warnings.warn(f"jr.ad.Tape(grad_check=...): the gradient of '{x.name}' disagrees with "
                      f"finite differences: smallest relative error {result.relative_error:.3g}"
                      f" over step sizes 2^-3 ... 2^-29 (expected <= {TOLERANCE})",
                      GradCheckWarning, stacklevel=4)
        return result

    def loss_at(self, x: Any, value: np.ndarray, entries: list[tuple[Any, tuple]]) -> float:
        """sum(loss) after replaying the recorded launches from the start state, x = value."""
        for b, data in self.start.values():
            b.from_numpy(data)
        x.from_numpy(value.astype(x.dtype.np))
        for step, values in entries:          # kernels, and grad_replaced functions
            step(*values)
        return float(np.sum(self.loss.to_numpy(), dtype=np.float64))
