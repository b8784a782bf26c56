"""Write jitrt's GPU assembly for a few kernels (no GPU needed), for tools/gpu_smoke/run.py.

    python tools/gpu_smoke/gen.py tools/gpu_smoke/out

Kernels: saxpy over ndarrays, a data-dependent loop with a branch and math calls, its adjoint
(adstacks, atomics), and a 2-D field loop with integer floor division and an atomic max. Each
is written as PTX (`<name>.ptx`) and AMDGCN assembly (`<name>.amdgcn.s`).
"""
import pathlib
import sys

import numpy as np

import jitrt as jr

x = jr.field(jr.f32, shape=(64,), needs_grad=True)
s = jr.field(jr.f32, shape=(), needs_grad=True)
f2 = jr.field(jr.i32, shape=(8, 8))
nd = jr.types.ndarray


@jr.kernel
def saxpy(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1), k: jr.f32):
    for i in range(a.shape[0]):
        b[i] = a[i] * k + b[i]


@jr.kernel
def loops(c: nd(dtype=jr.i32, ndim=1)):
    for i in x:
        v = x[i]
        for _ in range(c[i]):
            if v > 0.5:
                v = jr.sin(v) * 1.1
            else:
                v = jr.exp(v) - 1.0
        s[None] += v


@jr.kernel
def grid():
    for i, j in f2:
        f2[i, j] = (i * 8 + j) // 3 - (i % 3)
        jr.atomic_max(f2[0, 0], i + j)


def main(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ints = np.zeros(64, np.int32)
    cases = (("saxpy", saxpy, (np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0)),
             ("loops", loops, (ints,)), ("loops_grad", loops.grad, (ints,)), ("grid", grid, ()))
    for name, kernel, args in cases:
        (out / f"{name}.ptx").write_text(jr.debug.gpu_asm(kernel, *args, arch="cuda"))
        (out / f"{name}.amdgcn.s").write_text(jr.debug.gpu_asm(kernel, *args, arch="amdgpu"))
    print("written", sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tools/gpu_smoke/out"))
