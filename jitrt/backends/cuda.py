"""The cuda device behind the device seam (`backends/base.py`), through cuda-bindings (driver API).

Stage: backend. Code generation for this target already works without a GPU
(`jr.debug.gpu_asm`); launching does not exist yet, so `open_device` raises
`BackendUnavailableError` after the runtime probe succeeded. The CUDA backend plugs in here:
compile (LLVM -> PTX/cubin), load, launch and memory, sharing one GPU launch path.
"""
from __future__ import annotations

from ..errors import BackendUnavailableError
from .base import Device


def open_device(device_id: int = 0) -> Device:
    raise BackendUnavailableError(
        f"arch=cuda: the cuda runtime is present (device {device_id}), but launching "
        "kernels on it is not implemented in this version of jitrt yet (code generation only: "
        "jr.debug.gpu_asm); use arch=cpu")
