"""The content-stable registry of (kernel, task) pairs that own adstacks.

Stage: runtime. `fnv1a64_fold32(kernel_name, task_id)` is the id of DESIGN.md section 3: FNV-1a
64 over the UTF-8 bytes of the kernel name, b":", and the task id as 8 little-endian bytes,
folded to 32 bits as lo32(h ^ (h >> 32)), with 0 mapped to 1. The `Registry` keeps id ->
(kernel_name, task_id); a collision probes linearly (id + 1, skipping 0). Registration is
idempotent, so a kernel loaded from disk and a freshly compiled one get the same id.
"""
from __future__ import annotations

import threading

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    h = FNV_OFFSET
    for byte in data:
        h ^= byte
        h = (h * FNV_PRIME) & MASK64
    return h


def fnv1a64_fold32(kernel_name: str, task_id: int) -> int:
    data = kernel_name.encode("utf-8") + b":" + (task_id & 0xFFFFFFFF).to_bytes(8, "little")
    h = fnv1a64(data)
    folded = (h ^ (h >> 32)) & 0xFFFFFFFF
    return folded or 1


class Registry:
    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str, int]] = {}
        self._by_key: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def register(self, kernel_name: str, task_id: int) -> int:
        key = (kernel_name, task_id)
        with self._lock:
            found = self._by_key.get(key)
            if found is not None:
                return found
            rid = fnv1a64_fold32(kernel_name, task_id)
            while rid in self._by_id:
                rid = (rid + 1) & 0xFFFFFFFF or 1
            self._by_id[rid] = key
            self._by_key[key] = rid
            return rid

    def lookup(self, registry_id: int) -> tuple[str, int] | None:
        return self._by_id.get(registry_id)

    def __len__(self) -> int:
        return len(self._by_id)
