"""Codegen: kernel IR -> LLVM IR through llvmlite, with target hooks for CPU, NVPTX and AMDGPU."""
