"""Compatibility: `ti.cast(vector, dtype)` is element-wise in Taichi; jitrt refuses it.

    DIFFSIM_TI=jitrt PYTHONPATH=. python benchmarks/diffsim/repros/cast_vector.py

Taichi prints 4; jitrt raises KernelCompileError "expected a number, got a vector/matrix of
shape (2,)". (`v.cast(ti.i32)` works in both: mpm2d.py uses that spelling.)
"""
import os
if os.environ.get("DIFFSIM_TI") == "jitrt":
    import jitrt as ti
else:
    import taichi as ti
ti.init(arch=ti.cpu)
x = ti.Vector.field(2, ti.f32, shape=4)

@ti.kernel
def k() -> ti.i32:
    b = ti.cast(x[0] * 10.0 + 2.5, ti.i32)   # ti.cast of a vector: element-wise in Taichi
    return b[0] + b[1]

print(k())
