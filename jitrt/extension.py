"""The archs a program can name and the extensions each one has in jitrt (Taichi's `ti.cpu`,
`ti.vulkan`, ..., `ti.extension`, `ti.is_extension_supported`).

Stage: API. Programs and test suites ask these to choose an arch or skip a case, so every arch
Taichi names exists here, also those jitrt does not run on (`jr.init(arch=jr.vulkan)` is a
`ConfigError` saying so). Caches nothing.
"""
from __future__ import annotations

import enum

from .backends import registry


class Arch(str):
    """An arch name (`jr.cpu == "cpu"`), with Taichi's `.name`."""

    @property
    def name(self) -> str:
        return str(self)


cpu, cuda, amdgpu, gpu = Arch("cpu"), Arch("cuda"), Arch("amdgpu"), Arch("gpu")
x64 = x86_64 = arm64 = cpu                 # the peers' names of the host CPU arch
# Taichi's other archs: names only (jr.init refuses them)
vulkan, metal, opengl, gles, dx11, dx12 = (Arch(a) for a in ("vulkan", "metal", "opengl",
                                                             "gles", "dx11", "dx12"))
OTHER_ARCHES = ("vulkan", "metal", "opengl", "gles", "dx11", "dx12")


class extension(enum.Enum):
    """Taichi's optional features of an arch (`ti.extension.adstack`, ...)."""
    sparse = "sparse"            # pointer/bitmasked/dynamic SNodes
    quant = "quant"              # quantized types
    quant_basic = "quant_basic"
    data64 = "data64"            # 64-bit integers and floats
    adstack = "adstack"          # autodiff stacks for loops with data-dependent trip counts
    bls = "bls"                  # block-local storage (jr.block_local is only a hint)
    assertion = "assertion"      # `assert` in kernels (jr.init(debug=True))
    extfunc = "extfunc"          # external C functions
    mesh = "mesh"


# what jitrt has, per arch it runs on
_SUPPORTED = {extension.data64, extension.adstack, extension.assertion}
SUPPORTED: dict[str, frozenset[extension]] = {
    arch: frozenset(_SUPPORTED) for arch in registry.names()}


def is_extension_supported(arch: object, ext: extension) -> bool:
    """Whether jitrt has `ext` on `arch` (False for an arch jitrt does not run on)."""
    if not isinstance(ext, extension):
        raise TypeError(f"is_extension_supported(arch, ext): ext must be a jr.extension "
                        f"member (jr.extension.adstack, ...), got {ext!r}")
    name = str(getattr(arch, "name", arch)).lower()
    return ext in SUPPORTED.get(name, frozenset(_SUPPORTED) if name in registry.names()
                                else frozenset())
