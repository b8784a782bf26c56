"""`qd.lang`: the few Quadrants internals Genesis reaches (`qd.lang.impl`,
`qd.lang._template_mapper`), with the meaning they have in jitrt, and `qd.lang.ops` (Taichi's
`ti.lang.ops`: the operators as functions, `ops.py`).

Stage: API. `impl.get_runtime()` is the current program's view (`default_fp`, `default_ip`,
`prog.synchronize()`); `impl.get_max_shared_memory_bytes(...)` is 0 on the CPU, as in
Quadrants. `_template_mapper.__builtins__` is the builtins dict (Quadrants' too): Genesis sets
`__debug__` there. docs/porting.md, "Genesis", lists the internals jitrt does not have.
"""
from __future__ import annotations

from . import _template_mapper, impl, ops

__all__ = ["_template_mapper", "impl", "ops"]
