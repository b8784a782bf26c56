"""Taichi/Quadrants names jitrt does not have, and what to use instead.

Stage: API. `jitrt.__getattr__` (and `jitrt.ad`'s) looks a missing name up here, so a program
ported with `import jitrt as ti` fails on its first unsupported name with a message that says
so and what to use instead, rather than a bare AttributeError (in kernels the message appears
in the KernelCompileError). Caches nothing.
"""
from __future__ import annotations

from collections.abc import Iterable

_LAYOUT = ("only dense layouts through jr.root.dense(jr.ij, (n, m)).place(x) are supported "
           "(or create each field with its shape, jr.field(dtype, shape=(n, m)))")
_SPARSE = "sparse SNodes (pointer, bitmasked, dynamic) are not supported"
_MODULE = "Taichi's {} module has no jitrt counterpart"
_MESH = "meshes are not supported"
_QUANT = "quantized types are not supported: use jr.i8/i16/i32/u8/... fields"
_HALF = "half precision (f16) is not supported: use jr.f32"
_GPU = "GPU thread/warp intrinsics are not exposed by jitrt"
_BITS = "not in jitrt yet: write it with integer arithmetic ({})"
_SPARSE_MATRIX = ("sparse matrices (ti.linalg.SparseMatrix and its builders and solvers) are "
                  "not supported: write the operator as a kernel and solve with "
                  "jr.linalg.MatrixFreeCG")
_LOGGER = "logging goes through Python's logging module (logger 'jitrt')"

# name -> advice (names of Taichi's top level, ti.math, ti.types and ti.profiler)
MISSING: dict[str, str] = {
    **{k: _LAYOUT for k in ("axes", "SNode")},
    **{k: _SPARSE for k in ("activate", "deactivate", "is_active", "append", "length",
                            "get_addr", "deactivate_all_snodes", "rescale_index")},
    # ti.types.sparse_matrix_builder and ti.linalg's sparse matrices and solvers
    **{k: _SPARSE_MATRIX for k in ("sparse_matrix_builder", "SparseMatrix",
                                   "SparseMatrixBuilder", "SparseSolver", "SparseCG")},
    "cc": "jitrt runs on jr.cpu, jr.cuda and jr.amdgpu (jr.gpu picks the first GPU found)",
    "wasm": "jitrt runs on jr.cpu, jr.cuda and jr.amdgpu (jr.gpu picks the first GPU found)",
    **{k: _HALF for k in ("f16", "float16")},
    **{k: _QUANT for k in ("u1", "uint1", "BitpackedFields", "quant")},
    **{k: _MESH for k in ("Mesh", "MeshInstance", "mesh_local", "mesh_patch_idx")},
    **{k: _MODULE.format(k) for k in ("algorithms", "experimental", "sparse", "tools", "aot",
                                      "lang", "simt")},
    **{k: _GPU for k in ("global_thread_idx",)},
    "GUI": "jitrt has no GUI: draw x.to_numpy() with matplotlib or similar",
    "ui": "jitrt has no GUI: draw x.to_numpy() with matplotlib or similar",
    "_lib": "Taichi's C++ core (taichi._lib.core) is Taichi's internals: jitrt has none; "
            "jitrt runs on jr.cpu, jr.cuda and jr.amdgpu; ask jr.is_extension_supported(arch, ext)",
    "Texture": "textures are not supported: use a field or an ndarray",
    "texture": "textures are not supported: use a field or an ndarray",
    "rw_texture": "textures are not supported: use a field or an ndarray",
    "ArgPack": "an argument pack value is made by calling its type, jr.types.argpack(...)",
    "argpack": "use jr.types.argpack(...) (Taichi's module of that name is internal)",
    "DeviceCapability": "Vulkan device capabilities are not part of jitrt",
    "Format": "texture formats are not part of jitrt",
    "raw_mod": _BITS.format("% follows Python's rules"),
    "frexp": _BITS.format("jr.log2 and jr.floor give the exponent"),
    "clz": _BITS.format("count leading zeros with a loop"),
    "popcnt": _BITS.format("count bits with a loop"),
    "eye": "use jr.Matrix.identity(jr.f32, n) (n known at compile time)",
    "csqrt": "not in jitrt yet: use jr.math.cexp(jr.math.clog(z) / 2)",
    "cpow": "not in jitrt yet: use jr.math.cexp(n * jr.math.clog(z))",
    "clear_all_gradients": "it is jr.ad.clear_all_gradients() (Taichi 1.x has it only "
                           "there too)",
    "cache_read_only": "not needed: jitrt has no cache hint (remove the call)",
    "no_activate": "not needed: jitrt has no sparse layouts (remove the call)",
    "kernel_profiler_print": "use jr.profiler.print_info() with jr.init(kernel_profiler=True)",
    "print_kernel_profiler_info": "use jr.profiler.print_info() with "
                                  "jr.init(kernel_profiler=True)",
    # ti.profiler: Taichi's CUDA and scoped profilers
    **{k: "only the kernel profiler is in jitrt (jr.profiler.print_info)" for k in (
        "CuptiMetric", "collect_kernel_profiler_metrics", "get_predefined_cupti_metrics",
        "set_kernel_profiler_metrics", "set_kernel_profiler_toolkit", "kernel_metrics",
        "kernel_profiler", "memory_profiler", "print_memory_profiler_info",
        "scoped_profiler", "print_scoped_profiler_info", "clear_scoped_profiler_info")},
    # ti.types: Taichi's own submodules
    **{k: "a module of Taichi's type system: the types are under jr.types" for k in (
        "compound_types", "ndarray_type", "texture_type", "utils")},
}


class NotInJitrt(AttributeError):
    """A peer's name jitrt does not have; the message says what to use instead."""


def missing(module: str, name: str, names: Iterable[str] = ()) -> AttributeError:
    """The error for `module.name`: NotInJitrt with advice for a known peer name, else an
    AttributeError suggesting the closest of `names` (the module's public names), as Python's
    own "did you mean" does for a misspelt local (`jr.sinn` -> `jr.sin`)."""
    if name.startswith("__") and name.endswith("__"):
        # Python's own probes (`from jitrt.types import X` asks the module for `__path__`):
        # no advice, and no search for close names, which every such import would pay for
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    advice = MISSING.get(name)
    if advice is not None:
        return NotInJitrt(f"{module}.{name} is not in jitrt: {advice}")
    public = sorted({k for k in names if not k.startswith("_")})
    import difflib
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.7)
    hint = f"; did you mean {' or '.join(f'{module}.{c}' for c in close)}?" if close else ""
    return AttributeError(f"module {module!r} has no attribute {name!r}{hint}")
