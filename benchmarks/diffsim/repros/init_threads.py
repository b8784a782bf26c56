"""Compatibility: `ti.init(cpu_max_num_threads=N)` (Taichi's name) is a TypeError in jitrt.

    DIFFSIM_TI=jitrt PYTHONPATH=. python benchmarks/diffsim/repros/init_threads.py

jitrt: "jr.init() got unknown option(s) 'cpu_max_num_threads' (did you mean 'num_threads'?)".
"""
import os
if os.environ.get("DIFFSIM_TI") == "jitrt":
    import jitrt as ti
else:
    import taichi as ti
ti.init(arch=ti.cpu, cpu_max_num_threads=2)
print("ok")
