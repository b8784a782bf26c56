"""Backends: one device per module behind the seam in `base.py`, listed in `registry.py`.

`create_device(arch, device_id, host)` (`registry.py`) is how a program gets its device; a
backend's module (and its GPU package) is imported only when its arch is chosen. This package
imports nothing else on import: `jitrt.config` reads the registry to check `arch=`.
"""
from __future__ import annotations

from .registry import create_device

__all__ = ["create_device"]
