"""Compile one kernel specialization end to end: frontend -> passes -> codegen -> device code.

Stage: runtime (the driver of the pipeline). Input: a kernel, its concrete parameters and
template values, and the program (whose `device` compiles and loads, and whose target is part of
the offline-cache key). Output: a `CompiledKernel`: the launchable tasks, entry address,
context layout, access sites, write set and field table. The caller (the launcher) caches it in
the LaunchHandle; the offline cache stores the `Artifact` it was instantiated from. A
forward-mode kernel (`kernel.dual_args` set) also gets the duals of its fields appended to its
field table right after the frontend (`with_dual_fields`), and the pass pipeline a `Duals` map.
On a device with tiered compilation (the CPU, `jr.init(tiered_compile=True)`) a miss is
compiled by `compile_tiered`: the `CompiledKernel` is bound to a quick copy at once, and the
optimised object lands later on the device's background thread, which also saves the artifact
in the offline cache.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .. import data_placement
from .. import logger as log
from ..codegen import abi
from ..errors import KernelCompileError
from ..ir import nodes as n
from ..ir.printer import kernel_text
from ..ir import sizeexpr as se
from ..passes.lowered import LoweredKernel
from .._version import __version__
from ..cache import keys
from ..cache.keys import CacheKeyParts, cache_key
from . import prekey
from .adstack import SizingPlan
# (stored entries name `jitrt.runtime.compiler.Artifact` and `.LazyTasks`: these names load them)
from .artifact import Artifact, CompiledKernel, LazyTasks
from .registry import fnv1a64_fold32

# The frontend's lowering, the passes and codegen (llvmlite's IR builder) are imported by the
# functions that run them, not with this module: `import jitrt` does not load them, and a
# process whose kernels all come from the offline cache loads the frontend only.
if TYPE_CHECKING:
    from ..backends.base import Device
    from ..backends.registry import AssemblyModule
    from ..backends.cpu_tiers import Tiers
    from ..frontend.context import CompileContext
    from ..passes.forward_ad import Duals
    from .seams import KernelLike, ProgramLike


def used_refs(kernel: n.TaskedKernel) -> list[n.Ref]:
    from ..ir.walk import all_exprs, walk_stmts
    refs: list[n.Ref] = []
    for body in [t.body for t in kernel.tasks] + [f.body for f in kernel.funcs]:
        for e in all_exprs(body):
            if isinstance(e, (n.Load, n.Atomic, n.Shape)):
                refs.append(e.ref)
        for s in walk_stmts(body):
            if isinstance(s, n.Store):
                refs.append(s.ref)
    return refs


# a kernel whose optimised compile this many processes in a row dropped at exit gets it
# compiled before its first launch in the next process, from the text stored with its quick
# copy, unless a finishing process holds it (`cache/finishing.py`, which a dropping process
# starts unless JITRT_FINISH_AT_EXIT=0): a program of short runs (Genesis's examples, 100
# steps) otherwise never leaves the quick copies of its largest kernels
FOREGROUND_AFTER_DROPS = 2


def compile_kernel(kernel: "KernelLike", params: tuple[n.Param, ...],
                   template_values: dict[str, Any],
                   name: str, program: "ProgramLike") -> CompiledKernel:
    """The offline cache through the pre-key (no frontend), else the frontend, then the
    offline cache by the full key or a full compile."""
    tiers = program.device.tiers() if program.config.tiered_compile else None
    if tiers is None:
        return compile_now(kernel, params, template_values, name, program, None)
    with tiers.foreground():        # the background thread builds no text meanwhile
        return compile_now(kernel, params, template_values, name, program, tiers)


def compile_now(kernel: "KernelLike", params: tuple[n.Param, ...],
                template_values: dict[str, Any], name: str, program: "ProgramLike",
                tiers: "Tiers | None") -> CompiledKernel:
    """`compile_kernel`'s work (`tiers`: the device's tiered compilation, where on)."""
    start = time.perf_counter()
    cfg = program.config
    src = kernel.source()
    store = program.cache_store
    warm, variant = None, ""
    if store is not None:
        keys_ = prekey.pre_key(kernel, params, name, cfg, program.device.target.cache_key())
        if keys_ is not None:
            warm, variant = prekey.warm_file(program, keys_[0], name), keys_[1]
        compiled = early_hit(kernel, name, warm, variant, program, template_values) \
            if warm is not None else None
        if compiled is not None:
            data_placement.check()
            log.logger.info("%s: loaded from the offline cache in %.1f ms (frontend skipped)",
                            name, (time.perf_counter() - start) * 1e3)
            return compiled
    load_pipeline("frontend")
    ctx, kir = frontend(kernel, params, template_values, name, cfg, warn=False)
    data_placement.check()       # every field placed (Taichi's materialization checks)
    key = None
    if store is not None:
        key = cache_key(key_parts(src.text, ctx, kir, cfg, program.device.target.cache_key()))
        log.logger.debug("%s: offline-cache key %s in %s", name, key, store.dir)
        hit = stored(kernel, params, name, ctx, kir, program, tiers, key, warm, variant, start,
                     template_values)
        if hit is not None:
            return hit           # (its CastWarnings were issued when it compiled)
        program.count("offline_cache_misses")
    issue_cast_warnings(ctx)
    program.count("compiles")
    load_pipeline("passes")
    with log.slow_compile(name, "lowering") as tier:
        module, artifact, times, later = lower_artifact(kernel, params, name, ctx, kir, cfg,
                                                        program.device)
        if tiers is not None and quick_first(cfg, program.device,
                                             artifact.lowered.tasked.tasks):
            tier("quick copy")
            program.count("quick_compiles")
            compiled = compile_tiered(tiers, module, later, artifact, times, ctx, program, key,
                                      warm)
        else:
            tier("optimised copy")
            artifact = with_object(program.device, module, artifact, times, later)
            if store is not None and key is not None:
                store.save(key, name, artifact)
            compiled = instantiate(artifact, tuple(ctx.field_objs), program, warm)
    if store is not None and key is not None:
        record_manifest(kernel, name, warm, variant, key, ctx, template_values)
    log.logger.info("%s: compiled in %.1f ms", name, (time.perf_counter() - start) * 1e3)
    return compiled


def stored(kernel: "KernelLike", params: tuple[n.Param, ...], name: str, ctx: CompileContext,
           kir: n.KernelIR, program: "ProgramLike", tiers: "Tiers | None", key: str,
           warm: prekey.WarmFile | None, variant: str, start: float,
           template_values: dict[str, Any]) -> CompiledKernel | None:
    """The kernel from the offline cache by its full key (a quick copy only where this
    process compiles in tiers: `resume_tiered`), or None."""
    assert program.cache_store is not None
    artifact = program.cache_store.load(key)
    if not isinstance(artifact, Artifact) or artifact.name != name or \
            (artifact.tier and tiers is None):
        return None
    program.count("offline_cache_hits")
    record_manifest(kernel, name, warm, variant, key, ctx, template_values)
    artifact = rebind_sources(artifact, source_origins(kernel, ctx))
    if artifact.tier and tiers is not None:
        from ..cache import finishing    # (a finisher compiling it: run the quick copy)
        if artifact.drops < FOREGROUND_AFTER_DROPS or not artifact.optimised_text or \
                finishing.busy(program.cache_store.dir, key):
            return resume_tiered(tiers, kernel, params, ctx, kir, artifact, program, key,
                                 warm, start)
        artifact = optimised_now(artifact, program, key)
    compiled = instantiate(artifact, tuple(ctx.field_objs), program, warm)
    log.logger.info("%s: loaded from the offline cache in %.1f ms", name,
                    (time.perf_counter() - start) * 1e3)
    return compiled


# a launch whose known work (`known_work`) reaches this many cost units (passes/cost.py: ~1
# per simple operation) skips the quick copy: at -O0 such a loop runs ~10x slower (saxpy over
# 2^20 f32: 2.2 ms against 0.18, docs/performance.md), which a few launches before the
# optimised copy lands cost more than its compile saves
QUICK_WORK_LIMIT = 1 << 22


def quick_first(cfg: Any, device: "Device", tasks: Sequence[n.Task]) -> bool:
    """Whether a compile for `device` runs a quick copy first (tiered compilation)."""
    return bool(cfg.tiered_compile) and device.tiered and known_work(tasks) < QUICK_WORK_LIMIT


def known_work(tasks: Sequence[n.Task]) -> int:
    """The estimated work of one launch from the tasks whose box is constant (a field's
    shape, a literal range); a box from arguments (an ndarray's shape) counts as nothing."""
    total = 0
    for task in tasks:
        points = 1
        for lo, hi in zip(task.begins, task.ends):
            if not (isinstance(lo, n.Const) and isinstance(hi, n.Const)):
                points = 0
                break
            points *= max(0, int(hi.value) - int(lo.value))
        total += points * task.cost
    return total


def compile_tiered(tiers: "Tiers", module: Any, later: "Later", artifact: "Artifact",
                   times: tuple[float, float, int], ctx: CompileContext, program: "ProgramLike",
                   key: str | None, warm: prekey.WarmFile | None) -> CompiledKernel:
    """The kernel's quick copy, loaded and bound now (`backends/cpu_tiers.py`); its optimised
    copy is compiled on the background thread (from `later()`'s module where the quick one
    was built without interleaved tasks), then swapped in and saved in the offline cache (if
    any) under `key`."""
    t0 = time.perf_counter()
    text, symbols, store = str(module), list(artifact.symbols), program.cache_store
    quick_obj = tiers.compile_quick(artifact.prefix, text, symbols)
    quick = tiers.load_quick(artifact.prefix, quick_obj, symbols)
    log_compile(artifact.name, times, time.perf_counter() - t0,
                " (a quick copy; the optimised one follows)")

    def dropped(full_text: str | None) -> None:    # at exit, before the optimised copy
        if store is not None and key is not None and quick_obj is not None:
            keep_quick(store, key, artifact.name, quick_artifact(artifact, quick_obj,
                                                                 full_text))
    optimise_in_background(tiers, artifact, quick, text if later is None else later,
                           program, key, t0, dropped)
    return instantiate(artifact, tuple(ctx.field_objs), program, warm, quick)


def quick_artifact(artifact: "Artifact", obj: bytes, full_text: str | None,
                   drops: int = 1) -> "Artifact":
    """What the offline cache keeps of a kernel whose optimised copy was not compiled."""
    import zlib

    from ..cache import keys
    packed = zlib.compress(full_text.encode(), 1) if full_text else b""
    return dataclasses.replace(artifact, obj=obj, tier="quick", optimised_text=packed,
                               target=keys.host_target(), drops=drops)


def keep_quick(store: Any, key: str, name: str, artifact: "Artifact") -> None:
    """At exit: store a kernel's quick copy (its optimised compile dropped), unless the entry
    holds an optimised copy by now (a finishing process or another program stored it), and
    note it for the process that finishes it (`cache/finishing.py`)."""
    from ..cache import finishing
    current = store.load(key)
    if isinstance(current, Artifact) and not current.tier:
        return
    store.save(key, name, artifact)
    if artifact.optimised_text:
        finishing.note_dropped(store.dir, key)


def start_finishers() -> None:
    """At exit, after the dropped kernels' quick copies are stored (`Tiers.exit_hooks`): a
    process of their own compiles their optimised copies (`cache/finishing.py`)."""
    from ..cache import finishing
    pids = finishing.start_finishers()
    if pids:
        log.logger.info("exit: the optimised copies dropped are compiled by process %s "
                        "(python -m jitrt cache finish; %s=0 turns this off)",
                        ", ".join(map(str, pids)), finishing.ENV)


def optimised_now(artifact: "Artifact", program: "ProgramLike", key: str) -> "Artifact":
    """A quick copy's optimised copy compiled on this thread from its stored text (its
    compile was dropped FOREGROUND_AFTER_DROPS times), stored in the entry's place."""
    program.count("optimised_after_drops")
    with log.slow_compile(artifact.name, f"optimised copy, after {artifact.drops} processes "
                          "ended before it"):
        full = artifact.optimised()
    if program.cache_store is not None:
        program.cache_store.save(key, full.name, full)
    return full


def optimise_in_background(tiers: "Tiers", artifact: "Artifact", quick: dict[str, int],
                           text: str | Callable[[], str], program: "ProgramLike",
                           key: str | None, t0: float,
                           dropped: Callable[[str | None], None] | None = None) -> None:
    """Queue the optimised copy's compile of `text`; when it lands, the quick copy's cells
    point at it and the offline cache (if any) keeps it under `key`."""
    symbols, device, store = list(artifact.symbols), program.device, program.cache_store

    def landed(obj: bytes) -> None:      # on the background thread
        full = dataclasses.replace(artifact, obj=obj, tier="", optimised_text=b"")
        tiers.retarget(quick, device.load(full.prefix, obj, symbols))
        log.logger.debug("%s: the optimised copy runs from now on (%.1f ms after the quick "
                         "one)", full.name, (time.perf_counter() - t0) * 1e3)
        if store is not None and key is not None:
            store.save(key, full.name, full)
    if dropped is not None and start_finishers not in tiers.exit_hooks:
        tiers.exit_hooks.append(start_finishers)
    tiers.optimise_later(artifact.prefix, text, landed, artifact.name, dropped)


def resume_tiered(tiers: "Tiers", kernel: "KernelLike", params: tuple[n.Param, ...],
                  ctx: CompileContext, kir: n.KernelIR, artifact: "Artifact",
                  program: "ProgramLike", key: str, warm: prekey.WarmFile | None,
                  start: float) -> CompiledKernel:
    """A quick copy from the offline cache (an earlier process ended before its optimised
    copy was compiled): loaded and bound now, its optimised copy queued again from the
    module text stored with it, else from the module built anew now, on this thread, and
    stored with the quick copy if this process ends first too. (Built on the background
    thread instead, Python's lowering of Genesis's `kernel_detection` shared the interpreter
    with the program for seconds: its first steps took 6-11 ms instead of 0.2, and a short
    process ended before the text was there to store.)"""
    import zlib
    program.count("offline_cache_quick_hits")
    symbols = list(artifact.symbols)
    quick = tiers.load_quick(artifact.prefix, artifact.obj, symbols)
    name, store = artifact.name, program.cache_store

    def dropped(full_text: str | None) -> None:    # at exit, again before the optimised copy
        if store is None:
            return
        if artifact.optimised_text:        # the same entry, one more drop counted
            keep_quick(store, key, name, dataclasses.replace(artifact,
                                                             drops=artifact.drops + 1))
        elif full_text:
            keep_quick(store, key, name, quick_artifact(artifact, artifact.obj, full_text,
                                                        artifact.drops + 1))
    if artifact.optimised_text:
        text = zlib.decompress(artifact.optimised_text).decode()
    else:
        module, _, _, later = lower_artifact(kernel, params, name, ctx, kir, program.config,
                                             program.device)
        text = str(module) if later is None else later()
    optimise_in_background(tiers, artifact, quick, text, program, key, start, dropped)
    log.logger.info("%s: its quick copy loaded from the offline cache in %.1f ms (the "
                    "optimised one follows)", name, (time.perf_counter() - start) * 1e3)
    return instantiate(artifact, tuple(ctx.field_objs), program, warm, quick)


def early_hit(kernel: "KernelLike", name: str, warm: prekey.WarmFile, variant: str,
              program: "ProgramLike", template_values: dict[str, Any]
              ) -> CompiledKernel | None:
    """The kernel from the offline cache through its pre-key's manifest, without the
    frontend (`prekey.py`); None when no manifest matches this process's values."""
    store = program.cache_store
    assert store is not None
    found = prekey.resolve(kernel, warm.of(variant), template_values)
    if found is None:
        return None
    key, field_objs, origins = found
    artifact = store.load(key)
    if not isinstance(artifact, Artifact) or artifact.name != name or artifact.tier:
        return None         # (a quick copy needs the frontend's output: `resume_tiered`)
    log.logger.debug("%s: offline-cache pre-key %s -> key %s in %s", name, variant, key,
                     store.dir)
    program.count("offline_cache_hits")
    program.count("offline_cache_frontend_skips")
    artifact = rebind_sources(artifact, (("", kernel.source().place),) + origins)
    return instantiate(artifact, field_objs, program, warm)


def record_manifest(kernel: "KernelLike", name: str, warm: prekey.WarmFile | None,
                    variant: str, key: str, ctx: CompileContext,
                    template_values: dict[str, Any]) -> None:
    """Record how the frontend reached this key, so that the next process can skip it (the
    file is written once the launcher exists: `WarmFile.flush`)."""
    if warm is None:
        return
    manifest = prekey.record(kernel, variant, key, tuple(ctx.field_objs), ctx.used_funcs,
                             ctx.origins, template_values)
    if manifest is None:
        log.logger.debug("%s: no pre-key manifest (a value without a fingerprint)", name)
        return
    warm.add(manifest)


def source_origins(kernel: "KernelLike", ctx: CompileContext
                   ) -> tuple[tuple[str, tuple[str, int, int, int]], ...]:
    """Where the kernel's and its funcs' sources are in this process (file, first line,
    number of lines, indent), kernel first."""
    return (("", kernel.source().place),) + tuple(sorted(ctx.origins.items()))


def rebind_sources(a: Artifact, now: tuple[tuple[str, tuple[str, int, int, int]], ...]
                   ) -> Artifact:
    """An artifact whose access sites point at the sources as they are in this process. The
    cache key covers source texts, not paths: a kernel compiled from another file (a copied
    script, a moved project) would otherwise report faults at the first compiler's path."""
    then = dict(a.origins)
    moves = []
    for qualname, (file, first, lines, indent) in now:
        old = then.get(qualname)
        if old is not None and (old[0], old[1], old[3]) != (file, first, indent):
            moves.append((old, (file, first, indent)))
    if not moves:
        return a
    sites = []
    for site in a.sites:
        loc = site.loc
        for (old_file, old_first, lines, old_indent), (file, first, indent) in moves:
            if loc.file == old_file and old_first <= loc.line < old_first + lines:
                loc = n.Loc(file, loc.line - old_first + first, loc.col - old_indent + indent)
                break
        sites.append(dataclasses.replace(site, loc=loc))
    return dataclasses.replace(a, sites=tuple(sites), origins=now)


def key_parts(source: str, ctx: CompileContext, kir: n.KernelIR, cfg: Any,
              target_key: str) -> CacheKeyParts:
    return CacheKeyParts(
        kernel_source=source,
        func_sources=tuple(sorted(ctx.used_funcs.items())),
        captured_constants=tuple(sorted(ctx.captured.items())),
        specialization=ctx.kernel_name,
        field_layouts=tuple((f.dtype.name, f.storage_shape, f.grad is not None)
                            for f in ctx.field_objs),
        frontend_ir=kernel_text(kir),
        compile_options=cfg.codegen_items(),
        target=target_key,
        llvm_versions=keys.llvm_versions(),
        jitrt_version=__version__,
        compiler_hash=keys.compiler_hash())


def source_place(kernel: "KernelLike") -> tuple[str, int, int]:
    src = kernel.source()
    return src.filename, src.first_line, 0


def prefetch_pipeline() -> None:
    """Import the modules a kernel compile needs (the frontend's lowering, the passes, codegen),
    which `import jitrt` leaves out; run on a helper thread while LLVM compiles the runtime
    module of a cold start (`backends/cpu.WHILE_RUNTIME_COMPILES`), else by the first compile
    (`load_pipeline`)."""
    from ..codegen import kernel_module, sizing  # noqa: F401
    from ..frontend import lower  # noqa: F401
    from ..passes import interleave, pipeline  # noqa: F401


def load_pipeline(stage: str) -> None:
    """Import the frontend's modules (`stage` "frontend") or the rest of the pipeline
    ("passes") where not yet loaded, aged at once (`long_lived.settled`): imported during the
    first compile, they were walked by the collector's passes over the compile's garbage."""
    module = "jitrt.frontend.lower" if stage == "frontend" else "jitrt.passes.pipeline"
    if module not in sys.modules:
        from ..long_lived import settled
        with settled():
            if stage == "frontend":
                from ..frontend import lower  # noqa: F401
            else:
                prefetch_pipeline()


def frontend(kernel: "KernelLike", params: tuple[n.Param, ...], template_values: dict[str, Any],
             name: str, cfg: Any, warn: bool = True) -> tuple[CompileContext, n.KernelIR]:
    """The kernel lowered to jitrt's IR; its CastWarnings issued now, or with `warn` False
    left in `ctx.narrowing` for the caller (`compile_now`: only if it compiles)."""
    from ..frontend.context import CompileContext
    from ..frontend.lower import lower_kernel
    ctx = CompileContext(name, cfg.default_fp, cfg.default_ip, params, debug=cfg.debug,
                         validate=kernel.validate)
    kir = lower_kernel(kernel.source(), kernel.fn, params, template_values, ctx, kernel.ret)
    if warn:
        issue_cast_warnings(ctx)
    if kernel.dual_args is not None:
        kir = with_dual_fields(ctx, kir)
    if cfg.loop_guard:                        # a debugging aid (config option loop_guard)
        from ..passes.loop_guard import guard_loops
        kir = guard_loops(kir, ctx.local_types, cfg.loop_guard)
    return ctx, kir


def issue_cast_warnings(ctx: CompileContext) -> None:
    """The CastWarnings the frontend recorded for this kernel (`CompileContext.narrowing`)."""
    if ctx.narrowing:
        from ..frontend.lower_stmt import warn_narrowings
        warn_narrowings(ctx.narrowing)


def with_dual_fields(ctx: CompileContext, kir: n.KernelIR) -> n.KernelIR:
    """Forward mode: the dual of every field the kernel reaches joins its field table, after
    the fields of the frontend (before the offline-cache lookup, so the key's field layouts
    cover them and a kernel loaded from the cache finds them in the same slots)."""
    for fld, ref in zip(list(ctx.field_objs), kir.fields):
        if getattr(fld, "dual", None) is not None:
            ctx.field_ref(fld.dual, f"{ref.name}.dual")
    return dataclasses.replace(kir, fields=tuple(ctx.field_refs.values()))


def dual_refs(kernel: "KernelLike", params: tuple[n.Param, ...], ctx: CompileContext
              ) -> Duals | None:
    """Where the forward pass finds each dual: the dual fields `with_dual_fields` added, and
    the hidden parameters (after the kernel's own) holding the duals of ndarray arguments."""
    if kernel.dual_args is None:
        return None
    from ..passes.forward_ad import Duals
    fields = tuple((slot, ctx.field_refs[id(fld.dual)])
                   for slot, fld in enumerate(ctx.field_objs)
                   if getattr(fld, "dual", None) is not None and id(fld.dual) in ctx.field_refs)
    first = len(params) - len(kernel.dual_args)
    arrays = []
    for k, arg in enumerate(kernel.dual_args):
        p = params[first + k]
        assert p.dtype is not None          # concrete parameters of a specialization
        arrays.append((arg, n.ArrayRef(first + k, p.name, p.dtype, p.ndim, large=p.large)))
    return Duals(fields, tuple(arrays))


def passes(kernel: "KernelLike", params: tuple[n.Param, ...], ctx: CompileContext, kir: n.KernelIR,
           cfg: Any, target: Any) -> tuple[LoweredKernel, abi.ContextLayout]:
    """The pass pipeline for one specialization for a codegen target, and the launch-context
    layout it implies."""
    from ..passes.pipeline import run_pipeline
    def has_grad(ref: n.Ref) -> bool:
        if isinstance(ref, n.FieldRef):
            return ref.slot < len(ctx.field_objs) and ctx.field_objs[ref.slot].grad is not None
        return params[ref.arg].needs_grad

    lowered = run_pipeline(kir, ctx.local_types, grad=kernel.adjoint, has_grad=has_grad,
                           ad_stack_size=cfg.ad_stack_size,
                           duals=dual_refs(kernel, params, ctx), tape_partials=target.tape)
    if lowered.stacks and not cfg.ad_stack_experimental_enabled:
        names = ", ".join(sorted({s.stack.name for s in lowered.stacks}))
        raise KernelCompileError(
            f"kernel {kernel.qualname}: its gradient needs adstacks (loop-carried {names} in a "
            "loop whose values the reverse pass must replay), and "
            "jr.init(ad_stack_experimental_enabled=False) turns them off; leave it at its "
            "default (True) to size them exactly", *source_place(kernel))
    return lowered, abi.layout_for(params, lowered.tasked.fields, lowered.tasked.tasks)


def codegen_facts(lowered: LoweredKernel, target: Any, forced: int) -> tuple[Any, ...]:
    """What the passes tell codegen about each task for `target` (`ir/facts.py`): run for
    each module built (a tiered compile's quick copy, without lanes, interleaves nothing).
    Where the target allows it (`TargetTraits.local_stacks`: GPUs), which adstacks live in
    local memory (`forced`: the `ad_stack_size` option); on GPUs, the data each task only
    reads."""
    from ..passes.lowered import local_capacity
    from ..passes.pipeline import codegen_facts as facts
    out = facts(lowered.tasked, target.lanes, target.traits.grid_launch)
    local: dict[int, list[tuple[int, int]]] = {}
    for s in lowered.stacks if target.traits.local_stacks else ():
        cap = local_capacity(s, forced)
        if cap is not None:
            local.setdefault(s.task, []).append((s.stack.id, cap))
    return tuple(dataclasses.replace(f, local_stacks=tuple(local[t])) if t in local else f
                 for t, f in enumerate(out))


def build_artifact(kernel: "KernelLike", params: tuple[n.Param, ...], name: str,
                   ctx: CompileContext,
                   kir: n.KernelIR, cfg: Any, device: "Device") -> Artifact:
    """Passes, codegen and LLVM: everything the offline cache lets a warm start skip."""
    return with_object(device, *lower_artifact(kernel, params, name, ctx, kir, cfg, device))


def with_object(device: "Device", module: Any, artifact: Artifact,
                times: tuple[float, float, int], later: "Later" = None) -> Artifact:
    """`artifact` with the object code the device compiles `module` (or `later()`'s module,
    where given) to (optimised)."""
    t0 = time.perf_counter()
    obj = device.compile(module if later is None else later())
    log_compile(artifact.name, times, time.perf_counter() - t0, f", module {artifact.prefix}")
    return dataclasses.replace(artifact, obj=obj)


def log_compile(name: str, times: tuple[float, float, int], llvm_s: float,
                what: str = "") -> None:
    passes_ms, codegen_ms, tasks = times
    log.logger.debug("%s: passes %.1f ms, codegen %.1f ms, LLVM %.1f ms (%d tasks)%s", name,
                     passes_ms, codegen_ms, llvm_s * 1e3, tasks, what)


# where a kernel's quick copy is built from a lighter module (`quick_target`: no interleaved
# tasks, passes/interleave.py, which cost its codegen and LLVM about twice the time; no
# check-free loop copies), what builds the text of the module its optimised copy compiles, on
# the background thread; None: the module given is that one
Later = Callable[[], str] | None


def quick_target(tasks: Sequence[n.Task], full: Any) -> Any:
    """The codegen target of a tiered compile's quick copy: no interleaved tasks, and a task
    whose check-free loop copy is for speed only gets its checked loop alone (`full` itself
    where that changes nothing: the optimised copy then compiles the same module)."""
    from ..codegen.kernel_module import fault_only_task
    from ..passes.interleave import candidate
    if any(candidate(t) or fault_only_task(t, full) for t in tasks):
        return dataclasses.replace(full, lanes=1, one_copy=True)
    return full


def configured_target(target: Any, cfg: Any) -> Any:
    """A device's codegen target as `jr.init`'s `fast_math` makes it: False takes libm's math
    everywhere on the CPU (`Target.own_math`); True, the default, lets a GPU's arithmetic
    fuse and approximate as Taichi's and Quadrants' fast math (`Target.fast_arith`)."""
    if not cfg.fast_math and target.own_math:
        return dataclasses.replace(target, own_math=False)
    if cfg.fast_math and target.traits.grid_launch and not target.fast_arith:
        return dataclasses.replace(target, fast_arith=True)
    return target


def lower_artifact(kernel: "KernelLike", params: tuple[n.Param, ...], name: str,
                   ctx: CompileContext, kir: n.KernelIR, cfg: Any, device: "Device"
                   ) -> tuple[Any, Artifact, tuple[float, float, int], Later]:
    """Passes and codegen: the kernel's LLVM module, its artifact without object code (`obj`
    empty; `build_artifact` and `compile_tiered` add it), (passes ms, codegen ms, tasks) for
    the debug log (`log_compile`) and `Later`."""
    import xxhash          # (hashlib's import, OpenSSL's, costs a cold start ~2 ms)
    from ..codegen.kernel_module import build_module
    t0 = time.perf_counter()
    lowered, layout = passes(kernel, params, ctx, kir, cfg, device.codegen_target)
    t1 = time.perf_counter()
    text = kernel_text(lowered.tasked)
    prefix = "jk_" + xxhash.xxh3_64_hexdigest((text + repr(cfg.codegen_items())).encode())
    target = configured_target(device.codegen_target, cfg)
    full = target
    if target.lanes > 1 and quick_first(cfg, device, lowered.tasked.tasks):
        target = quick_target(lowered.tasked.tasks, target)
    forced = cfg.ad_stack_size
    module, sites, tasks = build_module(lowered.tasked, target, layout, prefix,
                                        lowered.local_types,
                                        codegen_facts(lowered, target, forced))
    check_param_slots(name, layout, target)
    specs = add_sizing_functions(module, prefix, lowered, layout, params, target)
    later: Later = None
    if target is not full:
        plain = lowered

        def later() -> str:
            module, full_sites, _ = build_module(plain.tasked, full, layout, prefix,
                                                 plain.local_types,
                                                 codegen_facts(plain, full, forced))
            if full_sites != sites:     # (the interleaved body can fault nowhere: no sites)
                raise RuntimeError("the interleaved module's access sites differ")
            add_sizing_functions(module, prefix, plain, layout, params, full)
            return str(module)
    sizable = lowered.stacks and all(s.capacity is not None for s in lowered.stacks)
    from ..codegen.sizing import entry_symbols
    symbols = entry_symbols(target, prefix, [t.symbol for t in tasks], len(specs),
                            bool(sizable))
    times = ((t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3, len(tasks))
    refs = used_refs(lowered.tasked)
    grad_params = frozenset(r.arg for r in refs if isinstance(r, n.ArrayRef) and r.grad)
    check_grad_fields(kernel, name, refs,
                      with_hidden_fields(lowered.tasked.fields, tuple(ctx.field_objs)))
    rids = tuple((t, fnv1a64_fold32(name, t)) for t, _, _ in layout.task_slots)
    lowered = dataclasses.replace(lowered, tasked=dataclasses.replace(   # a Sequence stands in
        lowered.tasked, tasks=LazyTasks.of(lowered.tasked.tasks)))  # type: ignore[arg-type]
    return module, Artifact(name, params, lowered, layout, tuple(sites), grad_params, text,
                            prefix, tuple(symbols), tuple(specs), rids, b"", tasks,
                            source_origins(kernel, ctx)), times, later


def check_param_slots(name: str, layout: Any, target: Any) -> None:
    """A GPU kernel takes its launch context as parameters: at most the target's count."""
    if target.max_param_slots and layout.gpu_slots > target.max_param_slots:
        raise KernelCompileError(
            f"kernel {name}: its launch context has {layout.gpu_slots} slots (fields, "
            f"arguments, shapes), more than the {target.max_param_slots} a GPU kernel takes "
            "as parameters; pass fewer ndarrays or fields to one kernel")


def check_grad_fields(kernel: "KernelLike", name: str, refs: Any, all_fields: Any) -> None:
    """Every field whose gradient the kernel uses was made with one."""
    for r in refs:
        if isinstance(r, n.FieldRef) and r.grad and all_fields[r.slot].grad is None:
            raise kernel.source().error(None, f"kernel {name} uses the gradient of field "
                                        f"'{r.name}', which was created without needs_grad=True")


def with_hidden_fields(refs: tuple[n.FieldRef, ...], field_objs: tuple[Any, ...]
                       ) -> tuple[Any, ...]:
    """Fields the passes appended to the table (grad kernels: `$scope_adjoints`) get their
    own storage, private to this compiled kernel."""
    from ..data import Field
    extra = tuple(Field(r.dtype, r.shape, False, r.name, "field") for r in refs[len(field_objs):])
    return tuple(field_objs) + extra


def instantiate(a: Artifact, field_objs: tuple[Any, ...], program: "ProgramLike",
                warm: prekey.WarmFile | None = None, addrs: dict[str, Any] | None = None
                ) -> CompiledKernel:
    """Load an artifact's object code into the process (unless `addrs` has its symbols
    already: a quick copy) and bind its sizing functions."""
    field_objs = with_hidden_fields(a.lowered.tasked.fields, field_objs)
    if addrs is None:
        addrs = program.device.load(a.prefix, a.obj, list(a.symbols))
    plan = None
    if a.lowered.stacks:
        plan = SizingPlan(list(a.lowered.stacks), list(a.specs), a.layout,
                          program.config.ad_stack_size, addrs, a.prefix, a.name,
                          program.device)
    entry = addrs.get(f"{a.prefix}_entry")         # the CPU's fused entry (none on GPUs)
    return CompiledKernel(a.name, a.params, a.lowered, a.layout, a.sites,
                          entry if isinstance(entry, int) else 0, field_objs, a.grad_params,
                          a.ir_text, plan, a.tasks, addrs, warm)


def add_sizing_functions(module: Any, prefix: str, lowered: LoweredKernel,
                         layout: abi.ContextLayout, params: tuple[n.Param, ...],
                         target: Any = None) -> list[se.MaxOverRange]:
    """Max-reducers for every distinct closed MaxOverRange, and the capacity function."""
    from ..codegen import sizing
    if not lowered.stacks or any(s.capacity is None for s in lowered.stacks):
        return []
    specs: list[se.MaxOverRange] = []
    for s in lowered.stacks:
        for spec in se.closed_reductions(s.capacity):  # type: ignore[arg-type]
            if spec not in specs:
                specs.append(spec)
    fields = lowered.tasked.fields
    for k, spec in enumerate(specs):
        sizing.emit_max_reducer(module, target, prefix, k, spec, layout, params, fields)
    sizing.emit_required(module, prefix, [s.capacity for s in lowered.stacks
                                          if s.capacity is not None], specs, layout,
                         params, fields, target)
    return specs


def lower_module(kernel: "KernelLike", params: tuple[n.Param, ...],
                 template_values: dict[str, Any], name: str, program: "ProgramLike",
                 target: Any) -> Any:
    """The LLVM module (before optimisation) of a kernel specialization for a codegen target."""
    from ..codegen.kernel_module import build_module
    cfg = program.config
    ctx, kir = frontend(kernel, params, template_values, name, cfg)
    target = configured_target(target, cfg)
    lowered, layout = passes(kernel, params, ctx, kir, cfg, target)
    module, _, _ = build_module(lowered.tasked, target, layout, "jk", lowered.local_types,
                                codegen_facts(lowered, target, cfg.ad_stack_size))
    return module


def lower_for_target(kernel: "KernelLike", params: tuple[n.Param, ...],
                     template_values: dict[str, Any], name: str, program: "ProgramLike",
                     printer: "AssemblyModule", options: Mapping[str, object]) -> str:
    """GPU assembly of a kernel specialization (`printer`: a backend module of the registry,
    `options`: its chip, e.g. sm=80 or gfx="gfx942"): the same frontend, passes and lowering
    as any launch, with that backend's codegen target and its own compile step (libdevice
    linked for PTX). No GPU or GPU runtime is needed."""
    from ..codegen.kernel_module import build_module
    cfg = program.config
    ctx, kir = frontend(kernel, params, template_values, name, cfg)
    target = configured_target(printer.codegen_target(), cfg)
    lowered, layout = passes(kernel, params, ctx, kir, cfg, target)
    module, _, _ = build_module(lowered.tasked, target, layout, "jk", lowered.local_types,
                                codegen_facts(lowered, target, cfg.ad_stack_size))
    return printer.assembly(module, options)
