"""Backends: one device per module behind the seam in `base.py` (cpu, cuda, amdgpu).

`create_device(arch, device_id, cfg, store)` is how a program gets its device; GPU packages are
imported only when their arch is chosen.
"""
from __future__ import annotations

from typing import Any

from .base import Device


def create_device(arch: str, device_id: int, cfg: Any, store: Any) -> Device:
    """The device for `arch` ("gpu": the first GPU runtime available)."""
    if arch == "cpu":
        from .cpu import CpuDevice
        return CpuDevice(cfg.num_threads, cfg.parallel_grain, store)
    from . import gpu_probe
    name = gpu_probe.require(arch)      # raises BackendUnavailableError saying what is missing
    if name == "cuda":
        from . import cuda
        device = cuda.open_device(device_id)
    else:
        from . import amdgpu
        device = amdgpu.open_device(device_id)
    device.runtime_store = store      # native launches cache the host runtime module there
    return device
