"""Warp's side of the comparison: the workloads of worker.py with `warp` on device "cpu".

Launches go through `wp.launch` (and, as the "bound" variant, a command recorded with
`record_cmd=True` and replayed with `cmd.launch()`). The adstack workload runs by hand (forward
launch, then the adjoint launch with `adjoint=True`) and under `wp.Tape`. Warp runs a CPU
kernel's threads one after another on the calling thread. Each kernel is its own module
(`module="unique"`), so a process compiles only the kernels it uses.

The adstack kernel bounds its loop by the largest count (8) and masks the iterations past
`cnt[i]`: Warp unrolls that loop, so every iteration's value is kept for the adjoint. The
direct spelling, `v = float(x[i])` then `for _ in range(cnt[i]):`, compiles and runs, but its
adjoint replays the loop body with the last value of `v` and gets gradients wrong (max relative
error 0.45 against the analytic derivative, measured with this harness).
"""
import functools

import numpy as np

NOTES = {"warp": "adstack kernel written `for k in range(8): if k < cnt[i]: ...` (unrolled, "
                 "masked): Warp's gradient through `range(cnt[i])` with a carried variable is "
                 "wrong (max rel. error 0.45)"}


def init(wp, cache_dir: str) -> str:
    wp.config.quiet = True
    wp.config.kernel_cache_dir = cache_dir
    wp.init()
    return wp.__version__


def sync(wp) -> None:
    wp.synchronize_device("cpu")


def launches(wp) -> dict:
    @wp.kernel(module="unique")
    def l0(x: wp.array(dtype=wp.float32)):
        i = wp.tid()
        x[i] += 1.0

    @wp.kernel(module="unique")
    def l1(a: wp.array(dtype=wp.float32), b: wp.array(dtype=wp.float32),
           c: wp.array(dtype=wp.float32), d: wp.array(dtype=wp.float32),
           s: wp.float32, t: wp.int32):
        i = wp.tid()
        a[i] = b[i] * s + c[i] + d[i] * wp.float32(t)

    x, a, b, c, d = (wp.zeros(16, dtype=wp.float32, device="cpu") for _ in range(5))
    args1 = [a, b, c, d, 2.0, 3]
    launch0 = functools.partial(wp.launch, l0, dim=16, inputs=[x], device="cpu")
    launch1 = functools.partial(wp.launch, l1, dim=16, inputs=args1, device="cpu")
    return {"L0": (launch0, ()), "L0 bound": (launch0(record_cmd=True).launch, ()),
            "L1": (launch1, ()), "L1 bound": (launch1(record_cmd=True).launch, ())}


def adstack(wp, x0: np.ndarray, counts: np.ndarray):
    @wp.kernel(module="unique")
    def chain(x: wp.array(dtype=wp.float32), cnt: wp.array(dtype=wp.int32),
              loss: wp.array(dtype=wp.float32)):
        i = wp.tid()
        v = x[i]
        for k in range(8):      # unrolled; see the module docstring
            if k < cnt[i]:
                v = wp.sin(v) * 1.1 + 0.1
        wp.atomic_add(loss, 0, v)

    n = len(x0)
    x = wp.array(x0, dtype=wp.float32, device="cpu", requires_grad=True)
    cnt = wp.array(counts, dtype=wp.int32, device="cpu")
    loss = wp.zeros(1, dtype=wp.float32, device="cpu", requires_grad=True)
    tape = wp.Tape()

    def by_hand() -> None:
        loss.zero_()
        x.grad.zero_()
        wp.launch(chain, dim=n, inputs=[x, cnt, loss], device="cpu")
        loss.grad.fill_(1.0)
        wp.launch(chain, dim=n, inputs=[x, cnt, loss], adj_inputs=[x.grad, None, loss.grad],
                  adjoint=True, device="cpu")

    def under_tape() -> None:
        loss.zero_()
        tape.reset()            # forgets the last step's launches and zeroes their gradients
        with tape:
            wp.launch(chain, dim=n, inputs=[x, cnt, loss], device="cpu")
        tape.backward(loss=loss)

    return {"by hand": by_hand, "Tape": under_tape}, x.grad.numpy
