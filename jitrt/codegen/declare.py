"""Declaring an external function (an intrinsic, libc's printf...) in a module, once.

Stage: codegen helper. `declare(module, name, ret, args)` returns the module's declaration of
`name`, adding it on first use. Caches nothing beyond the module itself.
"""
from __future__ import annotations

from llvmlite import ir


def declare(module: ir.Module, name: str, ret: ir.Type, args: tuple[ir.Type, ...] = (),
            var_arg: bool = False) -> ir.Function:
    found = module.globals.get(name)
    if found is not None:
        return found  # type: ignore[return-value]
    return ir.Function(module, ir.FunctionType(ret, list(args), var_arg=var_arg), name)
