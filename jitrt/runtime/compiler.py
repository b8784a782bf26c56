"""Compile one kernel specialization end to end: frontend -> passes -> codegen -> native code.

Stage: runtime (the driver of the pipeline). Input: a kernel, its concrete parameters and
template values, and the program. Output: a `CompiledKernel` (entry address, context layout,
access sites, write set, field table). The caller (the launcher) caches it in the LaunchHandle.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..backends import cpu
from ..codegen import abi, sizing
from ..codegen.kernel_module import AccessSite, build_module
from ..codegen.targets import cpu_target
from ..frontend.context import CompileContext
from ..frontend.lower import lower_kernel
from ..ir import nodes as n
from ..ir.printer import kernel_text
from ..passes.pipeline import LoweredKernel, run_pipeline
from ..passes import sizeexpr as se
from ..passes.walk import all_exprs, walk_stmts
from .adstack import SizingPlan


@dataclass(frozen=True)
class CompiledKernel:
    name: str
    params: tuple[n.Param, ...]
    lowered: LoweredKernel
    layout: abi.ContextLayout
    sites: tuple[AccessSite, ...]
    entry_addr: int
    field_objs: tuple[Any, ...]
    grad_params: frozenset[int]     # ndarray parameters whose .grad the kernel touches
    ir_text: str
    sizing: SizingPlan | None = None   # grad kernels with adstacks


def used_refs(kernel: n.TaskedKernel) -> list[n.Ref]:
    refs: list[n.Ref] = []
    for task in kernel.tasks:
        for e in all_exprs(task.body):
            if isinstance(e, (n.Load, n.Atomic, n.Shape)):
                refs.append(e.ref)
        for s in walk_stmts(task.body):
            if isinstance(s, n.Store):
                refs.append(s.ref)
    return refs


def compile_kernel(kernel: Any, params: tuple[n.Param, ...], template_values: dict[str, Any],
                   name: str, program: Any) -> CompiledKernel:
    cfg = program.config
    src = kernel.source()
    ctx = CompileContext(name, cfg.default_fp, cfg.default_ip, params)
    kir = lower_kernel(src, kernel.fn, params, template_values, ctx, kernel.ret)

    def has_grad(ref: n.Ref) -> bool:
        if isinstance(ref, n.FieldRef):
            return ctx.field_objs[ref.slot].grad is not None
        return params[ref.arg].needs_grad

    lowered = run_pipeline(kir, ctx.local_types, grad=kernel.adjoint, has_grad=has_grad,
                           ad_stack_size=cfg.ad_stack_size)
    text = kernel_text(lowered.tasked)
    layout = abi.layout_for(params, lowered.tasked.fields, lowered.tasked.tasks)
    prefix = "jk_" + hashlib.sha1((text + repr(cfg.codegen_items())).encode()).hexdigest()[:16]
    module, sites = build_module(lowered.tasked, cpu_target(), layout, prefix, ctx.local_types)
    specs = add_sizing_functions(module, prefix, lowered, layout, params)
    obj = cpu.compile_object(module)
    program.count("compiles")
    names = [f"{prefix}_entry"] + [f"{prefix}_red{k}" for k in range(len(specs))]
    if lowered.stacks and all(s.capacity is not None for s in lowered.stacks):
        names.append(f"{prefix}_required")
    addrs = cpu.engine().load(prefix, obj, names)
    refs = used_refs(lowered.tasked)
    grad_params = frozenset(r.arg for r in refs if isinstance(r, n.ArrayRef) and r.grad)
    for r in refs:
        if isinstance(r, n.FieldRef) and r.grad and ctx.field_objs[r.slot].grad is None:
            raise src.error(None, f"kernel {name} uses the gradient of field "
                            f"'{r.name}', which was created without needs_grad=True")
    plan = None
    if lowered.stacks:
        plan = SizingPlan(list(lowered.stacks), specs, layout, cfg.ad_stack_size, addrs, prefix)
    return CompiledKernel(name, params, lowered, layout, tuple(sites), addrs[names[0]],
                          tuple(ctx.field_objs), grad_params, text, plan)


def add_sizing_functions(module: Any, prefix: str, lowered: LoweredKernel,
                         layout: abi.ContextLayout, params: tuple[n.Param, ...]
                         ) -> list[se.MaxOverRange]:
    """Max-reducers for every distinct closed MaxOverRange, and the capacity function."""
    if not lowered.stacks or any(s.capacity is None for s in lowered.stacks):
        return []
    specs: list[se.MaxOverRange] = []
    for s in lowered.stacks:
        for spec in se.closed_reductions(s.capacity):  # type: ignore[arg-type]
            if spec not in specs:
                specs.append(spec)
    fields = lowered.tasked.fields
    for k, spec in enumerate(specs):
        sizing.emit_reducer(module, prefix, k, spec, layout, params, fields)
    sizing.emit_required(module, prefix, [s.capacity for s in lowered.stacks], specs, layout,
                         params, fields)
    return specs


GPU_CPUS = {"cuda": ("nvptx64-nvidia-cuda", "sm_80"), "amdgpu": ("amdgcn-amd-amdhsa", "gfx90a")}


def lower_for_target(kernel: Any, params: tuple[n.Param, ...], template_values: dict[str, Any],
                     name: str, program: Any, arch: str) -> str:
    """GPU assembly (PTX or AMDGCN) of a kernel specialization: the same frontend, passes and
    lowering as the CPU, with the GPU target hooks. No GPU or GPU runtime is needed."""
    import llvmlite.binding as llvm

    from ..backends.llvm_setup import init_llvm
    from ..codegen.targets import AMDGPU, NVPTX
    init_llvm()
    cfg = program.config
    ctx = CompileContext(name, cfg.default_fp, cfg.default_ip, params)
    kir = lower_kernel(kernel.source(), kernel.fn, params, template_values, ctx, kernel.ret)
    lowered = run_pipeline(kir, ctx.local_types, grad=kernel.adjoint,
                           has_grad=lambda r: True, ad_stack_size=cfg.ad_stack_size)
    layout = abi.layout_for(params, lowered.tasked.fields, lowered.tasked.tasks)
    target = NVPTX if arch == "cuda" else AMDGPU
    module, _ = build_module(lowered.tasked, target, layout, "jk", ctx.local_types)
    triple, cpu_name = GPU_CPUS[arch]
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu_name, opt=3)
    return tm.emit_assembly(mod)
