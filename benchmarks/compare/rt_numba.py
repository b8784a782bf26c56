"""numba's side of the comparison: the workloads of worker.py with `numba.njit`.

numba has no autodiff: the adstack workload is a forward kernel and a hand-written adjoint
kernel (it recomputes the chain and accumulates its derivative), both `parallel=True` over
`prange`. The launch workloads are plain `njit` functions (no `prange`: 16 elements). Caching
is `cache=True` into `numba.config.CACHE_DIR`, set by `init` before any kernel is defined.
"""
import numpy as np

NOTES = {"numba": "no autodiff: the adstack rows run a forward kernel and a hand-written "
                  "adjoint kernel (both parallel, prange); no Tape"}
F11, F01, ONE = np.float32(1.1), np.float32(0.1), np.float32(1.0)


def init(numba, cache_dir: str) -> str:
    numba.config.CACHE_DIR = cache_dir
    return numba.__version__


def sync(numba) -> None:
    pass


def launches(numba) -> dict:
    @numba.njit(cache=True)
    def l0(x):
        for i in range(x.shape[0]):
            x[i] += 1

    @numba.njit(cache=True)
    def l1(a, b, c, d, s, t):
        for i in range(a.shape[0]):
            a[i] = b[i] * s + c[i] + d[i] * t

    x, a, b, c, d = (np.zeros(16, np.float32) for _ in range(5))
    return {"L0": (l0, (x,)), "L1": (l1, (a, b, c, d, 2.0, 3))}


def adstack(numba, x0: np.ndarray, counts: np.ndarray):
    @numba.njit(parallel=True, cache=True)
    def forward(x, cnt):
        total = np.float32(0.0)
        for i in numba.prange(x.shape[0]):
            v = x[i]
            for _ in range(cnt[i]):
                v = np.sin(v) * F11 + F01
            total += v
        return total

    @numba.njit(parallel=True, cache=True)
    def adjoint(x, cnt, loss_grad, x_grad):
        for i in numba.prange(x.shape[0]):
            v = x[i]
            dv = ONE
            for _ in range(cnt[i]):
                dv *= np.cos(v) * F11
                v = np.sin(v) * F11 + F01
            x_grad[i] += loss_grad * dv

    x = x0.astype(np.float32)
    cnt = counts.astype(np.int32)
    x_grad = np.zeros_like(x)
    loss = np.zeros(1, np.float32)

    def by_hand() -> None:
        x_grad.fill(0)
        loss[0] = forward(x, cnt)
        adjoint(x, cnt, ONE, x_grad)

    return {"by hand": by_hand}, x_grad.copy
