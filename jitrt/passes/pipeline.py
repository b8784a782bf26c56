"""The pass pipeline, in order. Read this file to know what happens between frontend and codegen.

Input: the `KernelIR` the frontend built for one specialization, and the types of its locals.
Output: a `LoweredKernel`: the tasks codegen turns into functions and the kernel's write set.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DataType
from ..ir import nodes as n
from ..ir.verify import verify
from .analysis import WriteSet, write_set
from .offload import offload
from .simplify import simplify


@dataclass(frozen=True)
class LoweredKernel:
    tasked: n.TaskedKernel
    writes: WriteSet
    local_types: dict[str, DataType]


def run_pipeline(kernel: n.KernelIR, local_types: dict[str, DataType]) -> LoweredKernel:
    verify(kernel, local_types)              # 1. the frontend's output is well typed
    kernel = simplify(kernel)                # 2. fold constants (bounds become constants)
    tasked = offload(kernel, local_types)    # 3. outermost loops -> parallel tasks
    writes = write_set(tasked)               # 4. what a launch may modify (generations)
    return LoweredKernel(tasked, writes, dict(local_types))
