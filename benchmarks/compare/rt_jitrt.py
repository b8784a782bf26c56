"""jitrt's side of the comparison: the workloads of worker.py written with jitrt's API.

Every rt_*.py module has the same four functions (see worker.py): `init`, `launches`,
`adstack` and `sync`. Kernels are defined inside the functions, so that a cold-start
measurement includes their definition.
"""
import numpy as np

NOTES: dict[str, str] = {}      # package -> a deviation from the common workloads


def init(jr, cache_dir: str) -> str:
    jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=cache_dir)
    return jr.__version__


def sync(jr) -> None:
    jr.sync()


def launches(jr) -> dict:
    nd = jr.types.ndarray

    @jr.kernel
    def l0(x: nd(dtype=jr.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] += 1

    @jr.kernel
    def l1(a: nd(dtype=jr.f32, ndim=1), b: nd(dtype=jr.f32, ndim=1),
           c: nd(dtype=jr.f32, ndim=1), d: nd(dtype=jr.f32, ndim=1), s: jr.f32, t: jr.i32):
        for i in range(a.shape[0]):
            a[i] = b[i] * s + c[i] + d[i] * t

    x = jr.ndarray(jr.f32, shape=(16,))
    a, b, c, d = (jr.ndarray(jr.f32, shape=(16,)) for _ in range(4))
    args1 = (a, b, c, d, 2.0, 3)
    return {"L0": (l0, (x,)), "L0 bound": (l0.bind(x), ()),
            "L1": (l1, args1), "L1 bound": (l1.bind(*args1), ())}


def adstack(jr, x0: np.ndarray, counts: np.ndarray):
    n = len(x0)
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    cnt = jr.ndarray(jr.i32, shape=(n,))

    @jr.kernel
    def chain(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
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
        with jr.ad.Tape(loss=loss):
            chain(cnt)

    return {"by hand": by_hand, "Tape": under_tape}, x.grad.to_numpy
