"""Taichi's and Quadrants' side of the comparison (Quadrants keeps Taichi's API).

`ti` below is whichever of the two packages worker.py imported. Arrays are ndarrays passed as
kernel arguments (`ti.types.ndarray`); the adstack workload keeps `x` and `loss` in fields, as
Taichi's autodiff examples do, and runs by hand (`kernel`, then `kernel.grad`) and under
`ti.ad.Tape`. `arch=ti.cpu`, with the package's default thread count.
"""
import numpy as np

NOTES = {"quadrants": "init(ad_stack_experimental_enabled=True): without it Quadrants refuses "
                      "the gradient of a loop with a run-time bound"}


def init(ti, cache_dir: str) -> str:
    # Quadrants differentiates loops with run-time bounds only with its adstack switched on
    extra = {"ad_stack_experimental_enabled": True} if ti.__name__ == "quadrants" else {}
    ti.init(arch=ti.cpu, offline_cache=True, offline_cache_file_path=cache_dir,
            log_level=ti.WARN, **extra)
    return ".".join(str(v) for v in ti.__version__)


def sync(ti) -> None:
    ti.sync()


def launches(ti) -> dict:
    nd = ti.types.ndarray

    @ti.kernel
    def l0(x: nd(dtype=ti.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] += 1

    @ti.kernel
    def l1(a: nd(dtype=ti.f32, ndim=1), b: nd(dtype=ti.f32, ndim=1),
           c: nd(dtype=ti.f32, ndim=1), d: nd(dtype=ti.f32, ndim=1), s: ti.f32, t: ti.i32):
        for i in range(a.shape[0]):
            a[i] = b[i] * s + c[i] + d[i] * t

    x, a, b, c, d = (ti.ndarray(ti.f32, shape=16) for _ in range(5))
    return {"L0": (l0, (x,)), "L1": (l1, (a, b, c, d, 2.0, 3))}


def adstack(ti, x0: np.ndarray, counts: np.ndarray):
    n = len(x0)
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    cnt = ti.ndarray(ti.i32, shape=n)

    @ti.kernel
    def chain(cnt: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = ti.sin(v) * 1.1 + 0.1
            loss[None] += v

    x.from_numpy(x0)
    cnt.from_numpy(counts)

    def by_hand() -> None:
        loss[None] = 0
        x.grad.fill(0)
        chain(cnt)
        loss.grad[None] = 1
        chain.grad(cnt)

    def under_tape() -> None:
        loss[None] = 0
        with ti.ad.Tape(loss=loss):
            chain(cnt)

    return {"by hand": by_hand, "Tape": under_tape}, x.grad.to_numpy
