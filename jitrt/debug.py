"""`jr.debug`: introspection with stable names (tests rely on them)."""
from __future__ import annotations

from .runtime import program as _program


def stats() -> dict[str, int]:
    """Counters since the last reset: compiles, launches, cache hits and misses, ..."""
    return _program.current().stats()


def reset_stats() -> None:
    _program.current().reset_stats()


def gpu_asm(kernel, *args, arch: str = "cuda", **kwargs) -> str:
    """The GPU assembly (PTX for arch="cuda", AMDGCN for arch="amdgpu") that jitrt generates for
    `kernel` specialised to these arguments. Needs no GPU: it stops after code generation."""
    from .runtime.compiler import lower_for_target
    from .runtime.launcher import bind_args, specialize
    if arch not in ("cuda", "amdgpu"):
        raise ValueError(f"arch must be 'cuda' or 'amdgpu', got {arch!r}")
    program = _program.current()
    values = bind_args(kernel, args, kwargs)
    params, _, templates, name = specialize(kernel, values, program.config)
    return lower_for_target(kernel, params, templates, name, program, arch)
