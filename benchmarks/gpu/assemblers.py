"""NVIDIA's PTX assemblers side by side, per kernel, on a machine with a CUDA GPU.

    CUDA_CACHE_DISABLE=1 python benchmarks/gpu/assemblers.py [--sm 90]

Makes the PTX of `benchmarks/gpu_compile.py`'s eleven kernels (the billiards-like program) as
jitrt makes it for `sm_<sm>`, then assembles each one, in this process where the assembler
allows, with every assembler jitrt could call: the driver's link (`cuLinkCreate`,
`cuLinkAddData`, `cuLinkComplete`: four in a row at the default level, what
`CudaDriver.link_ptx` calls, and two at `CU_JIT_OPTIMIZATION_LEVEL` 0), `cuModuleLoadDataEx`
of the PTX (two), nvJitLink through `cuda.bindings.nvjitlink` (three; a column of nan where
this cuda-bindings or the library is missing) and ptxas as a process (two). Then all eleven
together: as eleven links, as eleven inputs of one link, and merged into one PTX module
(headers once, the helpers each module defines renamed), which is where a module's own cost
is paid once. Prints ms of wall time. `CUDA_CACHE_DISABLE=1`: the driver keeps the PTX it
compiled in a cache of its own, which would answer every repeat (docs/gpu.md, "Compile time").
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))               # benchmarks/, for gpu_compile
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # the checkout, for jitrt

import gpu_compile  # noqa: E402

import jitrt as jr  # noqa: E402


def kernels_ptx(sm: int) -> dict[str, str]:
    """Each kernel's PTX for `sm_<sm>`, in gpu_compile's order (libdevice linked where used)."""
    from jitrt.backends import nvptx
    from jitrt.runtime import compiler
    from jitrt.runtime.arguments import bind_args, specialize
    jr.init(arch="cpu", offline_cache=False)
    cfg = jr.runtime.program.current().config
    out = {}
    for name, (kernel, args) in gpu_compile.program().items():
        params, _, templates, kname = specialize(kernel, bind_args(kernel, args, {}), cfg)
        ctx, kir = compiler.frontend(kernel, params, templates, kname, cfg)
        module = compiler.lower_artifact(kernel, params, kname, ctx, kir, cfg,
                                         gpu_compile._Target(nvptx.codegen_target()))[0]
        out[name] = nvptx.compile_ptx(str(module), sm, None)
    return out


def merged(texts: list[str]) -> str:
    """One PTX module of several: the first's header, the others' bodies with the names each
    module defines for itself (the fault recorder, libdevice's table) made unique."""
    parts = []
    for i, text in enumerate(texts):
        if i:
            text = "\n".join(line for line in text.splitlines()
                             if not line.startswith((".version", ".target", ".address_size")))
            for name in ("jitrt_record_fault", "__cudart_i2opi_f", "__cudart_i2opi_d"):
                text = re.sub(rf"\b{name}\b", f"{name}_{i}", text)
        parts.append(text)
    return "\n".join(parts)


class Assemblers:
    def __init__(self, sm: int) -> None:
        from cuda.bindings import driver as cu
        self.cu, self.sm = cu, sm
        self.ok(cu.cuInit(0))
        device = self.ok(cu.cuDeviceGet(0))
        self.ok(cu.cuCtxSetCurrent(self.ok(cu.cuDevicePrimaryCtxRetain(device))))
        try:
            from cuda.bindings import nvjitlink
            self.nvjitlink: Any = nvjitlink
        except ImportError:
            self.nvjitlink = None

    @staticmethod
    def ok(result: Any) -> Any:
        err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if int(err) != 0:
            raise RuntimeError(str(err))
        return rest[0] if len(rest) == 1 else rest

    def link(self, texts: list[str], level: int | None = None) -> float:
        cu = self.cu
        opts = [cu.CUjit_option.CU_JIT_OPTIMIZATION_LEVEL] if level is not None else []
        start = time.perf_counter()
        state = self.ok(cu.cuLinkCreate(len(opts), opts, [level] if opts else []))
        try:
            for i, text in enumerate(texts):
                data = text.encode() + b"\0"
                self.ok(cu.cuLinkAddData(state, cu.CUjitInputType.CU_JIT_INPUT_PTX, data,
                                         len(data), f"m{i}".encode(), 0, [], []))
            self.ok(cu.cuLinkComplete(state))
            return (time.perf_counter() - start) * 1e3
        finally:
            cu.cuLinkDestroy(state)

    def load(self, text: str) -> float:
        start = time.perf_counter()
        module = self.ok(self.cu.cuModuleLoadDataEx(text.encode() + b"\0", 0, [], []))
        ms = (time.perf_counter() - start) * 1e3
        self.cu.cuModuleUnload(module)
        return ms

    def jitlink(self, text: str) -> float:
        nj = self.nvjitlink
        if nj is None:
            return float("nan")
        start = time.perf_counter()
        handle = nj.create(2, [f"-arch=sm_{self.sm}".encode(), b"-O3"])
        try:
            data = text.encode()
            nj.add_data(handle, nj.InputType.PTX, data, len(data), "m")
            nj.complete(handle)
            cubin = bytearray(nj.get_linked_cubin_size(handle))
            nj.get_linked_cubin(handle, cubin)
        finally:
            nj.destroy(handle)
        return (time.perf_counter() - start) * 1e3

    def ptxas(self, text: str) -> float:
        from jitrt.backends import nvptx
        tool = nvptx.ptxas_path()
        if tool is None:
            return float("nan")
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
            with open(src, "w") as f:
                f.write(text)
            start = time.perf_counter()
            subprocess.run([tool, f"-arch=sm_{self.sm}", "-O3", src, "-o", out], check=True)
            return (time.perf_counter() - start) * 1e3


def times(fn: Callable[[], float], n: int) -> list[float]:
    return [fn() for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sm", type=int, default=90)
    args = ap.parse_args(argv)
    ptx = kernels_ptx(args.sm)
    asm = Assemblers(args.sm)

    def cells(values: list[float]) -> str:
        return " ".join(f"{v:5.1f}" for v in values)
    print(f"ms of wall time per assembly, sm_{args.sm}, "
          f"CUDA_CACHE_DISABLE={os.environ.get('CUDA_CACHE_DISABLE', '(unset)')}")
    print(f"{'kernel':18s} {'bytes':>6s} {'driver link x4':>24s} {'level 0':>8s} "
          f"{'load':>6s} {'nvJitLink x3':>18s} {'ptxas':>6s}")
    for name, text in ptx.items():
        print(f"{name:18s} {len(text):6d} {cells(times(lambda: asm.link([text]), 4)):>24s} "
              f"{min(times(lambda: asm.link([text], 0), 2)):8.1f} "
              f"{min(times(lambda: asm.load(text), 2)):6.1f} "
              f"{cells(times(lambda: asm.jitlink(text), 3)):>18s} "
              f"{min(times(lambda: asm.ptxas(text), 2)):6.1f}")
    texts = list(ptx.values())
    one = merged(texts)
    print(f"all {len(texts)}: as {len(texts)} links "
          f"{sum(min(times(lambda: asm.link([t]), 2)) for t in texts):.1f}, as {len(texts)} "
          f"inputs of one link {min(times(lambda: asm.link(texts), 2)):.1f}, merged into one "
          f"module ({len(one)} bytes): link {min(times(lambda: asm.link([one]), 2)):.1f}, "
          f"load {min(times(lambda: asm.load(one), 2)):.1f}, nvJitLink "
          f"{min(times(lambda: asm.jitlink(one), 2)):.1f}, ptxas {asm.ptxas(one):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
