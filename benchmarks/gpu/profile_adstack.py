"""The adstack step's kernels under Nsight Compute (occupancy, registers, throughput).

    ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
        python benchmarks/gpu/profile_adstack.py

Runs the N = 1M adstack step of benchmarks/gpu/bench.py a few times (forward, its grad).
"""
from __future__ import annotations

import numpy as np

import jitrt as jr


def main() -> None:
    jr.init(arch=jr.cuda, offline_cache=False, enable_fallback=False)
    n = 1 << 20
    x = jr.field(jr.f32, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)
    cnt = jr.ndarray(jr.i32, shape=(n,))
    rng = np.random.default_rng(0)
    x.from_numpy(rng.uniform(-1, 1, n).astype(np.float32))
    cnt.from_numpy(rng.integers(1, 9, n).astype(np.int32))

    @jr.kernel
    def forward(c: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(c[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v

    loss.grad[None] = 1.0
    for _ in range(3):
        forward(cnt)
        forward.grad(cnt)
    jr.sync()


if __name__ == "__main__":
    main()
