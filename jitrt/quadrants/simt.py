"""Quadrants' `qd.simt`: GPU block, subgroup, warp and grid primitives, block-shared arrays
and the reductions, scans and register tiles built on them.

Stage: API (kernel builtins and a `@jr.func` library). The primitives (`block.sync()`,
`block.SharedArray`, `subgroup.shuffle(...)`, `grid.mem_fence()`, ...) are kernel builtins
that `frontend/lower_simt.py` lowers to `n.Simt` and `codegen/emit_simt.py` to NVPTX or
AMDGPU code; the higher-level names (`subgroup.reduce_all_add_tiled`, `shuffle_xor`,
`block.reduce_add`, ...) are `@jr.func`s over them (`simt_funcs.py`), and the tiles
(`Tile16x16`, ...) are `simt_tiles.py`. On the CPU each primitive is a `KernelCompileError`
at the call, as Quadrants refuses them there ("qd.block.sync is not supported for arch
x64"): programs reach them only behind a compile-time test of the backend (Genesis:
`if qd.static(...)`), and code behind a false `jr.static(...)` costs nothing. Called outside
a kernel, a primitive is a RuntimeError. docs/gpu.md, "Block-level code (jr.simt)", says
what each does. Caches nothing.
"""
from __future__ import annotations

from . import simt_funcs as _funcs
from .simt_primitives import SharedArray, block, grid, subgroup, warp
from .simt_tiles import TILES, tile_type as TileNxN  # register tiles

for _name, _func in _funcs.SUBGROUP.items():
    setattr(subgroup, _name, _func)
for _name, _func in _funcs.BLOCK.items():
    setattr(block, _name, _func)
subgroup.group_size = _funcs.group_size                    # type: ignore[attr-defined]
subgroup.log2_group_size = _funcs.log2_group_size          # type: ignore[attr-defined]

Tile16x16, Tile32x32 = TILES[16], TILES[32]

__all__ = ["SharedArray", "Tile16x16", "Tile32x32", "TileNxN", "block", "grid", "subgroup",
           "warp"]
