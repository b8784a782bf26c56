"""`jr.solve(A, b)`: the solution x of A x = b for a 2x2 or 3x3 matrix in a kernel (Taichi's
`ti.solve`), by Gaussian elimination with partial pivoting (the row with the largest entry
of the column leads; on a tie the upper row), unrolled into selects, so it is branch-free and
differentiable like any kernel code.

Stage: API (kernel library), written in the kernel language. A singular matrix gives inf or
nan, as a division by its zero pivot. Caches nothing.
"""
from __future__ import annotations

from .frontend.builtins import select, static, static_assert
from .frontend.func import Func
from .linalg import Vector


def _lead(r0, r1, col):
    """(r0, r1) with the row whose |entry| in `col` is larger first (r0 on a tie)."""
    swap = abs(r1[col]) > abs(r0[col])
    return select(swap, r1, r0), select(swap, r0, r1)


def _solve2(A, b):
    r0, r1 = lead(Vector([A[0, 0], A[0, 1], b[0]]), Vector([A[1, 0], A[1, 1], b[1]]), 0)
    r1 = r1 - (r1[0] / r0[0]) * r0
    x1 = r1[2] / r1[1]
    return Vector([(r0[2] - r0[1] * x1) / r0[0], x1])


def _solve3(A, b):
    r0 = Vector([A[0, 0], A[0, 1], A[0, 2], b[0]])
    r1 = Vector([A[1, 0], A[1, 1], A[1, 2], b[1]])
    r2 = Vector([A[2, 0], A[2, 1], A[2, 2], b[2]])
    r0, r1 = lead(r0, r1, 0)
    r0, r2 = lead(r0, r2, 0)
    r1 = r1 - (r1[0] / r0[0]) * r0
    r2 = r2 - (r2[0] / r0[0]) * r0
    r1, r2 = lead(r1, r2, 1)
    r2 = r2 - (r2[1] / r1[1]) * r1
    x2 = r2[3] / r2[2]
    x1 = (r1[3] - r1[2] * x2) / r1[1]
    return Vector([(r0[3] - r0[1] * x1 - r0[2] * x2) / r0[0], x1, x2])


def _solve(A, b, dt=None):
    static_assert(A.n == A.m and A.n == b.n and 2 <= A.n <= 3,
                  "jr.solve(A, b) takes a 2x2 or 3x3 matrix A and a vector b of its size")
    x = b
    if static(A.n == 2):
        x = solve2(A, b)
    else:
        x = solve3(A, b)
    return x


lead, solve2, solve3, solve = Func(_lead), Func(_solve2), Func(_solve3), Func(_solve)
