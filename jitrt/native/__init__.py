"""The host runtime, written in LLVM IR: what runs launches rather than kernels.

Stage: native (below the runtime and the backends, above codegen's ABI). The CPU worker pool
and SIGINT handler (`threadpool.py`, which builds the runtime module), the CPython-callable
native launcher (`native_launcher.py`) over launch tables (`launch_table.py`: their layout,
constants only) and the native GPU entry (`native_gpu_entry.py`). Built and cached once per
machine by `backends/cpu.py`; kernels themselves are built by `codegen/`.
"""
