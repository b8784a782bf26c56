"""Quadrants 1.3.3's own API on jitrt: what a program written for Quadrants (Genesis) uses
beyond the Taichi language jitrt already speaks.

Stage: API. `tensor` (`jr.Tensor`, `jr.tensor`, `jr.Backend`, `jr.Layout`), `qd_logging`
(`jr._logging`, `jr.WARN`...), `lang` (`jr.lang.impl`, the internals with a meaning in jitrt),
`simt` (GPU block primitives, refused as Quadrants refuses them on the CPU), `algorithms`
(`jr.algorithms.sort`). Kernel-side builtins (`jr.atomic_or`, `jr.raw_mod`, `jr.math.popcnt`,
...) live with the other builtins (`frontend/builtins.py`, `frontend/lower_quadrants.py`).
docs/porting.md, "Genesis", has the table and what is still missing.
"""
from __future__ import annotations

# The modules are imported by jitrt/__init__.py (not here: `jitrt.types` reaches
# `quadrants.primitive_types` while the frontend is still loading).
