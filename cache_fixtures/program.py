"""The program whose kernels fill the cache fixtures (see README.md).

    python cache_fixtures/program.py CACHE_DIR [--pin META_JSON]

Runs one forward kernel and its adjoint (a data-dependent adstack loop over ndarrays, no
fields) and prints a JSON line with stats, registry ids and the gradient. `--pin` makes the
key's compiler hash and jitrt version those recorded in META_JSON, so that an entry written by
an earlier build of this same format is looked up by the key it was written under.
"""
import json
import sys

import numpy as np


def main() -> None:
    cache_dir = sys.argv[1]
    if "--pin" in sys.argv:
        meta = json.load(open(sys.argv[sys.argv.index("--pin") + 1]))
        from jitrt.cache import keys
        keys.compiler_hash = lambda: meta["compiler_hash"]
        import jitrt.runtime.compiler as compiler
        compiler.__version__ = meta["jitrt_version"]
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=True, offline_cache_dir=cache_dir)

    @jr.kernel
    def fixture_kernel(x: jr.types.ndarray(dtype=jr.f64, ndim=1),
                       cnt: jr.types.ndarray(dtype=jr.i32, ndim=1),
                       out: jr.types.ndarray(dtype=jr.f64, ndim=1)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(cnt[i]):
                v = jr.sin(v) * 1.1 + 0.1
            out[i] = v

    n = 32
    x = jr.ndarray(jr.f64, (n,), needs_grad=True)
    out = jr.ndarray(jr.f64, (n,), needs_grad=True)
    cnt = jr.ndarray(jr.i32, (n,))
    x.from_numpy(np.linspace(0.1, 0.9, n))
    cnt.from_numpy((np.arange(n) % 5 + 1).astype(np.int32))
    fixture_kernel(x, cnt, out)
    out.grad.fill(1.0)
    fixture_kernel.grad(x, cnt, out)
    print(json.dumps({"stats": jr.debug.stats(),
                      "ids": [i.registry_id for i in jr.debug.sizing_infos(fixture_kernel)],
                      "out": out.to_numpy().tolist(), "grad": x.grad.to_numpy().tolist()}))


if __name__ == "__main__":
    main()
