"""Compatibility: Taichi's profiler functions are missing from `jr.profiler`.

    DIFFSIM_TI=jitrt PYTHONPATH=. python benchmarks/diffsim/repros/profiler_names.py

`ti.profiler.print_kernel_profiler_info()`, `clear_kernel_profiler_info()`,
`query_kernel_profiler_info(name)`, `get_kernel_profiler_total_time()`: jitrt has
`print_info()`, `clear()`, `stats()` (AttributeError on the Taichi names).
"""
import os
if os.environ.get("DIFFSIM_TI") == "jitrt":
    import jitrt as ti
else:
    import taichi as ti
ti.init(arch=ti.cpu, kernel_profiler=True)
x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i] += 1.0

k()
ti.profiler.print_kernel_profiler_info()
ti.profiler.clear_kernel_profiler_info()
print("ok")
