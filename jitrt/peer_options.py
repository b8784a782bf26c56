"""Taichi's `ti.init` options in jitrt: the ones renamed, and the ones jitrt has no use for.

Stage: runtime set-up (read by `config.resolve`). Every option Taichi 1.7 accepts (its
`CompileConfig` fields, the `_SpecialConfig` ones and `require_version`) is either a jitrt
option under the same name (`arch`, `debug`, `kernel_profiler`, `offline_cache_cleaning_factor`,
...), renamed (`PEER_ALIASES`), or accepted and ignored with one `UserWarning` saying why
(`PEER_IGNORED`), so that a ported `ti.init(...)` line runs unchanged; an ignored option
still reads back from the configuration as given (`peer_values`: `jr.lang.impl.current_cfg()
.print_ir`, Taichi's default where none was given). Caches nothing.
"""
from __future__ import annotations

import warnings
from typing import Any

PEER_ALIASES = {"cpu_max_num_threads": "num_threads",
                "offline_cache_file_path": "offline_cache_dir",
                "offline_cache_max_size_of_files": "offline_cache_max_bytes"}

_PASS = "not a jitrt pass (LLVM's O3 pipeline runs on every kernel)"
_MESH = "meshes are not supported"
_QUANT = "quantized types are not supported"
_GPU_MEM = "GPU memory is allocated per array, not preallocated"
_PRINT = "jitrt's IR is printed by its own tools (docs/usage.md, jr.debug)"
PEER_IGNORED = {
    **{k: _GPU_MEM for k in ("device_memory_GB", "device_memory_fraction")},
    **{k: _PASS for k in (
        "advanced_optimization", "opt_level", "cfg_optimization", "flatten_if",
        "make_thread_local", "make_block_local", "make_cpu_multithreading_loop",
        "move_loop_invariant_outside_if", "cache_loop_invariant_global_vars",
        "demote_dense_struct_fors", "detect_read_only", "lower_access",
        "simplify_after_lower_access", "simplify_before_lower_access",
        "real_matrix_scalarize", "force_scalarize_matrix", "half2_vectorization")},
    **{k: _MESH for k in (
        "auto_mesh_local_default_occupacy", "demote_no_access_mesh_fors",
        "experimental_auto_mesh_local", "make_mesh_block_local",
        "mesh_localize_all_attr_mappings", "mesh_localize_from_end_mapping",
        "mesh_localize_to_end_mapping", "optimize_mesh_reordered_mapping")},
    **{k: _QUANT for k in ("quant_opt_atomic_demotion", "quant_opt_store_fusion")},
    **{k: _PRINT for k in (
        "print_ir", "print_accessor_ir", "print_ir_dbg_info", "print_kernel_amdgcn",
        "print_kernel_asm", "print_kernel_llvm_ir", "print_kernel_llvm_ir_optimized",
        "print_preprocessed_ir", "print_struct_llvm_ir")},
    "check_out_of_bound": "bounds are always checked",
    "dynamic_index": "run-time indices into vectors and matrices are always allowed in jitrt "
                     "(a select over the components; x[i][k] of a field indexes memory); an "
                     "index out of range raises KernelRuntimeError",
    "default_cpu_block_dim": "CPU loops are split by jr.init(parallel_grain=...)",
    "cpu_block_dim_adaptive": "CPU loops are split by jr.init(parallel_grain=...)",
    "default_gpu_block_dim": "use jr.loop_config(block_dim=...) per loop",
    "max_block_dim": "use jr.loop_config(block_dim=...) per loop",
    "saturating_grid_dim": "jitrt sizes GPU grids from the loop's extent",
    "gpu_max_reg": "jitrt leaves register allocation to ptxas",
    "cuda_stack_limit": "jitrt's GPU code keeps no deep per-thread stacks (adstacks are sized "
                        "exactly in their own buffers)",
    "allow_nv_shader_extension": "a Vulkan option (jitrt has no Vulkan backend)",
    "vk_api_version": "a Vulkan option (jitrt has no Vulkan backend)",
    "use_llvm": "jitrt always compiles with LLVM",
    "num_compile_threads": "jitrt compiles a kernel on the calling thread (its optimised "
                           "tier on one background thread)",
    "offline_cache_cleaning_policy": "jitrt evicts the least recently used entries past "
                                     "offline_cache_max_bytes",
    "verbose": "use jr.init(log_level=...)",
    "verbose_kernel_launches": "use jr.init(log_level=...)",
    "timeline": "use jr.init(kernel_profiler=True) and jr.profiler",
    "excepthook": "jitrt's errors already omit its internal frames",
    "print_full_traceback": "jitrt's errors already omit its internal frames",
    "gdb_trigger": "jitrt installs no crash handler",
    "short_circuit_operators": "`and`/`or` in kernels always short-circuit and give an "
                               "operand, as in Python",
    "unrolling_limit": "jr.static loops always unroll fully",
    "require_version": "jitrt is not Taichi; no Taichi version to check",
    # Quadrants 1.3.3's (Genesis's gs.init passes it)
    "ad_stack_sparse_threshold_bytes": "adstacks are always sized exactly at each launch",
    "_test_mode": "Taichi's own test-suite switch",
}


# Taichi 1.7's defaults of the options above (its CompileConfig and _SpecialConfig), so that
# `impl.current_cfg().advanced_optimization` and the like read as in Taichi: the value given to
# `init` (else `TI_<NAME>`, else this default). They change nothing in jitrt.
TAICHI_DEFAULTS: dict[str, Any] = {
    "device_memory_GB": 1, "device_memory_fraction": 0.0, "opt_level": 1,
    **{k: True for k in (
        "advanced_optimization", "cfg_optimization", "make_thread_local", "make_block_local",
        "make_cpu_multithreading_loop", "demote_dense_struct_fors", "detect_read_only",
        "lower_access", "simplify_after_lower_access", "simplify_before_lower_access",
        "real_matrix_scalarize", "cpu_block_dim_adaptive", "use_llvm", "verbose",
        "short_circuit_operators")},
    **{k: False for k in (
        "flatten_if", "move_loop_invariant_outside_if", "force_scalarize_matrix",
        "half2_vectorization", "print_ir", "print_accessor_ir", "print_preprocessed_ir",
        "print_kernel_amdgcn", "print_kernel_asm", "print_kernel_llvm_ir",
        "print_kernel_llvm_ir_optimized", "print_struct_llvm_ir", "check_out_of_bound",
        "dynamic_index", "verbose_kernel_launches", "gdb_trigger", "print_full_traceback",
        "timeline")},
    "default_cpu_block_dim": 32, "default_gpu_block_dim": 128, "max_block_dim": 0,
    "saturating_grid_dim": 0, "gpu_max_reg": 0, "unrolling_limit": 32,
}


def peer_values(explicit: dict[str, Any], environ: Any) -> tuple[tuple[str, Any], ...]:
    """The options of `PEER_IGNORED` as Taichi would read them back: the argument given, else
    Taichi's `TI_<NAME>` variable (parsed as the default's type), else Taichi's default."""
    out = []
    for name in sorted(set(PEER_IGNORED) - {"_test_mode"}):
        default = TAICHI_DEFAULTS.get(name)
        text = environ.get("TI_" + name.upper())
        if name in explicit:
            out.append((name, explicit[name]))
        elif text is not None and default is not None:
            parse = (lambda t: bool(int(t))) if isinstance(default, bool) else type(default)
            try:
                out.append((name, parse(text)))
            except ValueError:
                out.append((name, text))
        elif name in TAICHI_DEFAULTS:
            out.append((name, default))
    # the log level in Taichi's spelling, for `ti.init(_test_mode=True).log_level`
    level = explicit.get("log_level")
    out.append(("taichi_log_level", level if level is not None else
                environ.get("TI_LOG_LEVEL", "info")))
    return tuple(out)


def peer_options(explicit: dict[str, Any]) -> dict[str, Any]:
    """`explicit` with Taichi's option names mapped to jitrt's and the options jitrt has no
    use for dropped, one `UserWarning` each."""
    out = {}
    for name, value in explicit.items():
        if name in PEER_IGNORED:
            warnings.warn(f"jr.init({name}=...) is a Taichi option jitrt ignores: "
                          f"{PEER_IGNORED[name]}", stacklevel=5)
        elif name in PEER_ALIASES and PEER_ALIASES[name] not in explicit:
            out[PEER_ALIASES[name]] = value
        else:
            out[name] = value
    return out
