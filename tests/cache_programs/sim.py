"""A small program used by the offline-cache tests, run in fresh processes.

    python sim.py CACHE_DIR [--order ab|ba] [--bound N]

Declares kernels (in the given order), runs a Tape with a data-dependent adstack loop, and
prints one JSON line: stats, registry ids, gradient, dispatch count.
"""
import json
import sys

import numpy as np

import jitrt as jr


def declare_a(x, loss):
    @jr.kernel
    def kernel_a(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            loss[None] += v
    return kernel_a


def declare_b(x, loss):
    @jr.kernel
    def kernel_b(cnt: jr.types.ndarray(dtype=jr.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(cnt[i] + 1):
                v = v * v * 0.5 + 0.3
            loss[None] += v
    return kernel_b


def main() -> None:
    cache_dir = sys.argv[1]
    order = sys.argv[sys.argv.index("--order") + 1] if "--order" in sys.argv else "ab"
    # JITRT_ARCH, when set, overrides the arch
    program = jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=cache_dir)
    n = 64
    x = jr.field(jr.f64, shape=(n,), needs_grad=True)
    loss = jr.field(jr.f64, shape=(), needs_grad=True)
    x.from_numpy(np.linspace(0.1, 0.9, n))
    cnt = jr.ndarray(jr.i32, (n,))
    cnt.from_numpy((np.arange(n) % 7 + 1).astype(np.int32))
    kernels = {}
    for name in order:
        kernels[name] = (declare_a if name == "a" else declare_b)(x, loss)
    out = {"grads": {}, "ids": {}}
    for name in "ab":
        with jr.ad.Tape(loss=loss):
            kernels[name](cnt)
        out["grads"][name] = x.grad.to_numpy().tolist()
        out["ids"][name] = [info.registry_id for info in jr.debug.sizing_infos(kernels[name])]
    out["stats"] = jr.debug.stats()
    out["arch"] = program.arch
    out["dispatches"] = jr.debug.max_reducer_dispatch_count()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
