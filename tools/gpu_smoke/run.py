"""On a machine with CUDA: assemble jitrt's PTX with ptxas, then load saxpy and launch it.

    python tools/gpu_smoke/gen.py tools/gpu_smoke/out     # anywhere (no GPU needed)
    python tools/gpu_smoke/run.py                         # on the GPU machine

There is no CUDA launch path in jitrt yet: this fills the launch context by hand (the slots
`codegen/abi.py` gives saxpy's parameters a, b, k) and launches the task's kernel wrapper
through cuda-bindings, to check that the generated code runs and computes the right values.
"""
import ctypes
import glob
import os
import struct
import subprocess

import numpy as np

OUT = "tools/gpu_smoke/out"
PTXAS = "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else "ptxas"
HEADER_SLOTS = 12   # codegen/abi.py: saxpy's a at 12..14, b at 15..17, k at 18


def assemble_all() -> None:
    for path in sorted(glob.glob(f"{OUT}/*.ptx")):
        done = subprocess.run([PTXAS, "-c", "-arch=sm_90", path, "-o", "/tmp/jitrt_smoke.o"],
                              capture_output=True, text=True)
        status = "OK" if done.returncode == 0 else "FAIL " + done.stderr[:300]
        print("ptxas", os.path.basename(path), status)


def check(result):
    """cuda-bindings returns (error, *values): raise on an error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return values[0] if len(values) == 1 else values


def run_saxpy(n: int = 1000, k: float = 2.5) -> None:
    from cuda.bindings import driver as cu
    check(cu.cuInit(0))
    dev = check(cu.cuDeviceGet(0))
    check(cu.cuCtxSetCurrent(check(cu.cuDevicePrimaryCtxRetain(dev))))
    module = check(cu.cuModuleLoadData(open(f"{OUT}/saxpy.ptx", "rb").read() + b"\0"))
    kernel = check(cu.cuModuleGetFunction(module, b"jk_task0_kernel"))

    def to_device(arr: np.ndarray):
        ptr = check(cu.cuMemAlloc(arr.nbytes))
        check(cu.cuMemcpyHtoD(ptr, arr.ctypes.data, arr.nbytes))
        return ptr

    rng = np.random.default_rng(0)
    a, b = rng.random(n).astype(np.float32), rng.random(n).astype(np.float32)
    da, db = to_device(a), to_device(b)
    slots = np.zeros(HEADER_SLOTS + 7, np.int64)
    slots[12], slots[14] = int(da), n                 # a: data, (grad), shape[0]
    slots[15], slots[17] = int(db), n                 # b
    slots[18] = struct.unpack("<q", struct.pack("<d", k))[0]   # k, as double bits
    ctx, caps = to_device(slots), to_device(np.array([0, n], np.int64))  # begin, extent
    args = ((int(ctx), int(caps), n), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64))
    check(cu.cuLaunchKernel(kernel, (n + 127) // 128, 1, 1, 128, 1, 1, 0, 0, args, 0))
    check(cu.cuCtxSynchronize())
    out = np.zeros(n, np.float32)
    check(cu.cuMemcpyDtoH(out.ctypes.data, db, out.nbytes))
    print("saxpy on the GPU: max abs error", float(np.max(np.abs(out - (a * k + b)))))


if __name__ == "__main__":
    assemble_all()
    run_saxpy()
