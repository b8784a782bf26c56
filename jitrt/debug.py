"""`jr.debug`: introspection with stable names (tests rely on them)."""
from __future__ import annotations

from .runtime import program as _program


def stats() -> dict[str, int]:
    """Counters since the last reset: compiles, launches, cache hits and misses, ..."""
    return _program.current().stats()


def reset_stats() -> None:
    _program.current().reset_stats()


def optimized_ir(kernel, *args, **kwargs) -> str:
    """The host's optimised LLVM IR of `kernel` specialised to these arguments (what the CPU
    runs: look for vector types such as `<8 x float>` in its task functions)."""
    from .backends.cpu import cpu_target, optimized_ir as optimize
    from .runtime.arguments import bind_args, specialize
    from .runtime.compiler import lower_module
    program = _program.current()
    params, _, templates, name = specialize(kernel, bind_args(kernel, args, kwargs),
                                            program.config)
    return optimize(lower_module(kernel, params, templates, name, program, cpu_target()))


def gpu_asm(kernel, *args, arch: str | None = None, sm: int = 80, gfx: str = "gfx942",
            **kwargs) -> str:
    """The GPU assembly (PTX for arch="cuda" and compute capability `sm`, AMDGCN for
    arch="amdgpu" and the gfx target `gfx`; None: the backend registry's first arch that
    prints assembly, cuda) that jitrt generates for `kernel` specialised to these arguments.
    Needs no GPU: it stops after code generation."""
    from .backends import registry
    from .runtime.compiler import lower_for_target
    from .runtime.arguments import bind_args, specialize
    # ValueError naming the archs; None: the registry's first that prints assembly (PTX)
    printer = registry.assembler(getattr(arch, "name", arch))
    program = _program.current()
    values = bind_args(kernel, args, kwargs)
    params, _, templates, name = specialize(kernel, values, program.config)
    # each backend reads its own chip option (`sm` for PTX, `gfx` for AMDGCN)
    return lower_for_target(kernel, params, templates, name, program, printer,
                            {"sm": sm, "gfx": gfx})


def max_reducer_dispatch_count() -> int:
    """Max-reducer runs not served from a cache since the last reset."""
    return _program.current().counters["max_reducer_dispatches"]


def reset_max_reducer_dispatch_count() -> None:
    _program.current().counters["max_reducer_dispatches"] = 0


def sizing_infos(kernel, grad: bool = True) -> tuple:
    """The AdStackSizingInfo records of the compiled instance(s) of `kernel` (its adjoint when
    `grad`): registry_id, kernel_name, task_id_in_kernel, size_exprs, max_reducer_specs."""
    target = kernel.grad if grad and not kernel.adjoint else kernel
    program = _program.current()
    out = []
    for handle in target.handles.values():
        if handle.program is program:
            out.extend(handle.sizing_infos)
    return tuple(out)


def registry_id(kernel_name: str, task_id: int) -> int:
    """The registry id of (kernel_name, task_id): the one registered in this program (after
    collision probing), else the content hash of DESIGN.md section 3."""
    from .runtime.registry import fnv1a64_fold32
    registry = _program.current().registry
    found = registry._by_key.get((kernel_name, task_id))
    return found if found is not None else fnv1a64_fold32(kernel_name, task_id)


def kernel_ir(kernel, grad: bool = False) -> tuple[str, ...]:
    """The printed IR (tasks, adstack operations for adjoints) of the compiled instance(s) of
    `kernel`, or of its adjoint when `grad`: a tuple with one text per specialization compiled
    so far (empty before the first launch); `print(*jr.debug.kernel_ir(k))` shows them."""
    target = kernel.grad if grad and not kernel.adjoint else kernel
    program = _program.current()
    return tuple(h.compiled.ir_text for h in target.handles.values() if h.program is program)
