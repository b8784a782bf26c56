"""Which GPU runtimes this process can use; import-guarded so `import jitrt` never needs them.

Stage: backend selection. Each probe says whether its runtime imports and a device answers,
and if not, what is missing (the registry's `available()` of `cuda.py` and `amdgpu.py`;
`registry.resolve` raises `BackendUnavailableError` with the reasons). The probes import the
GPU packages only when called.
"""
from __future__ import annotations

from typing import Any


def cuda_available() -> tuple[bool, str]:
    try:
        from cuda.bindings import driver
    except ImportError:
        return False, "the CUDA runtime needs cuda-bindings (pip install 'jitrt[cuda]')"
    try:
        err, = driver.cuInit(0)
    except Exception as exc:    # cuda-bindings raises when libcuda itself cannot be loaded
        return False, f"no NVIDIA driver (libcuda) could be loaded ({type(exc).__name__})"
    if int(err) != 0:
        return False, f"cuInit failed ({err}); no usable NVIDIA driver or device"
    err, count = driver.cuDeviceGetCount()
    if int(err) != 0 or count == 0:
        return False, "no NVIDIA GPU found"
    return True, ""


def hip_available() -> tuple[bool, str]:
    try:
        from hip import hip as hip_module
    except ImportError:
        return False, "the AMDGPU runtime needs hip-python and ROCm (pip install 'jitrt[hip]')"
    hip: Any = hip_module       # hip-python's functions are untyped
    try:
        result = hip.hipInit(0)
    except Exception as exc:    # hip-python raises when libamdhip64.so cannot be loaded
        return False, (f"hip-python could not load the HIP runtime, libamdhip64.so "
                       f"(ROCm is not installed, or not on the library path): {exc}")
    err = result[0] if isinstance(result, tuple) else result
    if err != hip.hipError_t.hipSuccess:
        return False, f"hipInit failed ({err}); no usable AMD GPU driver"
    err, count = hip.hipGetDeviceCount()
    if err != hip.hipError_t.hipSuccess or count == 0:
        return False, "no AMD GPU found"
    return True, ""
