"""Quadrants' register tiles `qd.simt.Tile16x16`, `Tile32x32` (and `TileNxN(n)`): an n x n
matrix spread over the n lanes of a warp, lane k holding row k in n registers.

Stage: API (a `@jr.func` library; `frontend/lower_tiles.py` turns the tile syntax into
calls of these). A tile in a kernel is a vector local of n components (`tile_value`
makes `zeros`/`eye`); each operation is a func over the warp's shuffles that returns the
tile's new rows:
- `tile[:] = a[r0:r1, c0:c1]` (or `a[b, r0:r1, c0:c1]`): lane k loads row r0 + k,
  columns c0.. of the slice clipped to the array; rows and columns outside it keep their
  value (`load2d`, `load3d`); `a[r0:r1, c0:c1] = tile` stores the same part (`store2d`,
  `store3d`); `a` is a field, an ndarray or a block-shared array;
- `v = a[r0:r1, c]`: lane k's element of that column (0 past the slice's end) (`column2d`,
  `column3d`); `tile -= jr.outer(u, v)`: the rank-1 update tile[k, j] -= u_k * v_j, v_j
  read from lane j (`ger_sub`);
- `tile.cholesky_(eps)`: in place, the lower triangle becomes L with tile = L @ L.T, each
  pivot sqrt(max(pivot, eps)) with `eps` this lane's own (one lane owns each pivot); the
  strict upper triangle keeps what it held (`cholesky`);
- `L.solve_triangular_(B)`: B becomes X with X @ L.T = B, L lower triangular (`trsm`).
Every lane of the warp runs them together (tiles are warp-synchronous: no barrier). The
Cholesky and the solve loop over the columns at run time (a column index into the row is a
chain of selects, `pick`/`put`, so the row stays in registers; the inner dot product is
unrolled, each term guarded by a condition the same on every lane): their code grows as n,
not n*n, which keeps a 32x32 f64 tile's compile (and ptxas) short. Sums run in column
order (Quadrants splits the Cholesky's dot product into two partial sums: results may differ
in the last bits). Caches nothing.
"""
from __future__ import annotations

from typing import Any

from ..frontend.builtins import MATH, cast, select, static
from ..frontend.func import Func
from ..types import template
from . import simt_primitives as _simt   # (simt.py adds simt_funcs' funcs to them)

_sg: Any = _simt.subgroup
sqrt = MATH["sqrt"]


def _load2d(t, arr: template(), r0, r1, c0, c1, size: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    if row < min(r1, arr.shape[0]):
        cols = min(c1, arr.shape[1])
        for j in static(range(size)):
            if c0 + j < cols:
                t[j] = arr[row, c0 + j]
    return t


def _load3d(t, arr: template(), b, r0, r1, c0, c1, size: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    if row < min(r1, arr.shape[1]):
        cols = min(c1, arr.shape[2])
        for j in static(range(size)):
            if c0 + j < cols:
                t[j] = arr[b, row, c0 + j]
    return t


def _store2d(t, arr: template(), r0, r1, c0, c1, size: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    if row < min(r1, arr.shape[0]):
        cols = min(c1, arr.shape[1])
        for j in static(range(size)):
            if c0 + j < cols:
                arr[row, c0 + j] = t[j]


def _store3d(t, arr: template(), b, r0, r1, c0, c1, size: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    if row < min(r1, arr.shape[1]):
        cols = min(c1, arr.shape[2])
        for j in static(range(size)):
            if c0 + j < cols:
                arr[b, row, c0 + j] = t[j]


def _column2d(arr: template(), r0, r1, c, dtype: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    v = cast(0, dtype)
    if row < min(r1, arr.shape[0]):
        v = arr[row, c]
    return v


def _column3d(arr: template(), b, r0, r1, c, dtype: template()):  # type: ignore
    row = r0 + _sg.invocation_id()
    v = cast(0, dtype)
    if row < min(r1, arr.shape[1]):
        v = arr[b, row, c]
    return v


def _ger_sub(t, u, v, size: template()):  # type: ignore
    for j in static(range(size)):
        t[j] = t[j] - u * _sg.shuffle(v, j)
    return t


def _pick(t, k, size: template()):  # type: ignore
    v = t[0]                     # t[k] for a run-time k in 0..size-1, by selects (registers)
    for j in static(range(1, size)):
        v = select(k == j, t[j], v)
    return v


def _put(t, k, x, size: template()):  # type: ignore
    for j in static(range(size)):     # t[k] = x for a run-time k, by selects (registers)
        t[j] = select(k == j, x, t[j])
    return t


def _cholesky(t, eps, size: template(), dtype: template()):  # type: ignore
    lane = _sg.invocation_id()
    for k in range(size):        # run time: one copy of the step, not size of them
        dot = cast(0, dtype)     # this row's entries 0..k-1 against row k's
        for j in static(range(size - 1)):
            if j < k:            # the same on every lane: the shuffle runs converged
                dot += t[j] * _sg.shuffle(t[j], k)
        own = pick(t, k, size)
        pivot = cast(0, dtype)
        if lane == k:
            pivot = sqrt(max(own - dot, eps))
        pivot = _sg.shuffle(pivot, k)
        if lane >= k:
            t = put(t, k, select(lane == k, pivot, (own - dot) / pivot), size)
    return t


def _trsm(x, lower, size: template(), dtype: template()):  # type: ignore
    for c in range(size):        # run time, as in _cholesky
        dot = cast(0, dtype)
        for j in static(range(size - 1)):
            if j < c:
                dot += x[j] * _sg.shuffle(lower[j], c)
        diag = _sg.shuffle(pick(lower, c, size), c)
        x = put(x, c, (pick(x, c, size) - dot) / diag, size)
    return x


pick, put = Func(_pick), Func(_put)


load2d, load3d, store2d, store3d = Func(_load2d), Func(_load3d), Func(_store2d), Func(_store3d)
column2d, column3d, ger_sub = Func(_column2d), Func(_column3d), Func(_ger_sub)
cholesky, trsm = Func(_cholesky), Func(_trsm)


class TileMaker:
    """`TileNxN.zeros(dtype=...)` / `.eye(dtype=...)` in a kernel (frontend/lower_tiles.py
    makes the tile)."""
    jitrt_tile_maker = True

    def __init__(self, size: int, kind: str) -> None:
        self.size, self.kind = size, kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"Tile{self.size}x{self.size}.{self.kind}() makes a register tile "
                           "inside a GPU kernel or func, not outside one")


class TileType:
    """`qd.simt.Tile16x16` and its kin: the n x n tile type a kernel makes tiles of."""

    def __init__(self, size: int) -> None:
        if size not in (16, 32):
            raise ValueError(f"a register tile is 16 x 16 or 32 x 32 (one row per lane of a "
                             f"warp), got {size}")
        self.SIZE = size
        self.zeros = TileMaker(size, "zeros")
        self.eye = TileMaker(size, "eye")

    def __repr__(self) -> str:
        return f"<jitrt simt.Tile{self.SIZE}x{self.SIZE}>"


def tile_type(size: int) -> TileType:
    """`qd.simt.TileNxN(n)`: the tile type of size n (16 or 32)."""
    return TILES[size] if size in TILES else TileType(size)


TILES = {16: TileType(16), 32: TileType(32)}
