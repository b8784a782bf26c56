"""Backends: turn LLVM IR into loaded native code and run it (CPU; CUDA and HIP import-guarded)."""
