"""Taichi/Quadrants names jitrt does not have, and what to use instead.

Stage: API. `jitrt.__getattr__` (and `jitrt.ad`'s) looks a missing name up here, so a program
ported with `import jitrt as ti` fails on its first unsupported name with a message that says
so and what to use instead, rather than a bare AttributeError (in kernels the message appears
in the KernelCompileError). Caches nothing.
"""
from __future__ import annotations

_LAYOUT = ("only dense layouts through jr.root.dense(jr.ij, (n, m)).place(x) are supported "
           "(or create each field with its shape, jr.field(dtype, shape=(n, m)))")
_SPARSE = "sparse SNodes (pointer, bitmasked, dynamic) are not supported"
_ARCH = "jitrt runs on jr.cpu, jr.cuda and jr.amdgpu (jr.gpu picks the first GPU found)"

MISSING: dict[str, str] = {
    **{k: _LAYOUT for k in ("axes", "FieldsBuilder", "SNode", "AOS", "SOA")},
    **{k: _SPARSE for k in ("activate", "deactivate", "is_active", "append", "length",
                            "get_addr", "deactivate_all_snodes", "rescale_index")},
    **{k: _ARCH for k in ("vulkan", "metal", "opengl", "gles", "dx11", "dx12", "cc",
                          "wasm")},
    "f16": "half precision (f16) is not supported: use jr.f32",
    "GUI": "jitrt has no GUI: draw x.to_numpy() with matplotlib or similar",
    "ui": "jitrt has no GUI: draw x.to_numpy() with matplotlib or similar",
    "Mesh": "meshes are not supported",
    "cache_read_only": "not needed: jitrt has no cache hint (remove the call)",
    "no_activate": "not needed: jitrt has no sparse layouts (remove the call)",
    "kernel_profiler_print": "use jr.profiler.print_info() with jr.init(kernel_profiler=True)",
    "print_kernel_profiler_info": "use jr.profiler.print_info() with "
                                  "jr.init(kernel_profiler=True)",
    "real_func": "use @jr.func (always inlined)",
    "dataclass": "use jr.types.struct(...)",
}


class NotInJitrt(AttributeError):
    """A peer's name jitrt does not have; the message says what to use instead."""


def missing(module: str, name: str) -> AttributeError:
    """The error for `module.name`: NotInJitrt with advice for a known peer name."""
    advice = MISSING.get(name)
    if advice is None:
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    return NotInJitrt(f"{module}.{name} is not in jitrt: {advice}")
