"""Versions of kernel-scope locals that several serial tasks assign (grad kernels only).

Stage: pass, run by the pipeline on the primal `TaskedKernel` before `differentiate`. Input and
output: a `TaskedKernel`; caches nothing. A float local defined in serial code and read by a
later task gets one adjoint slot across task boundaries (`autodiff.scope_adjoint_slots`), and
the serial task that defines it seeds its own adjoint from that slot. When two serial tasks
assign the same name (`s = x[0]`, a loop reads `s`, then `s = x[1]` and another loop reads
it; or the `s = $reduce.s[]` that offload writes after a loop reducing into `s`), each
definition would be seeded with the adjoints of the readers of the other one too: a wrong
gradient. So every serial task after the first that assigns such a name assigns a version of
its own, `s$v<task>`, and the later tasks read that version, as in SSA form. A task whose
first use of the name is not a plain top-level assignment (it reads the old value, or assigns
it in a branch only) starts with a copy `s$v<task> = s`, through which the old definition
receives its share of the adjoint.
"""
from __future__ import annotations

from dataclasses import replace

from ..dtypes import DataType
from ..ir import nodes as n
from ..ir.walk import assigned_names
from ..ir.walk import all_exprs, map_expr, map_stmt, walk_expr


def version_scope_locals(kernel: n.TaskedKernel, local_types: dict[str, DataType]
                         ) -> n.TaskedKernel:
    """`kernel` with every float kernel-scope local that two serial tasks assign renamed per
    defining task (see the module docstring); `local_types` gains the new names."""
    names = reassigned_floats(kernel, local_types)
    if not names:
        return kernel
    current: dict[str, str] = {}        # name -> the version later tasks read
    seen: set[str] = set()              # names some earlier serial task assigned
    tasks: list[n.Task] = []
    for k, task in enumerate(kernel.tasks):
        task = renamed_reads(task, current)
        if task.kind == "serial":
            for name in sorted(assigned_names(task.body) & names):
                if name not in seen:
                    seen.add(name)
                    continue
                old = n.Local(current.get(name, name), local_types[name], task.loc)
                new = current[name] = f"{name}$v{k}"
                local_types[new] = local_types[name]
                task = replace(task, body=versioned(task.body, name, new, old))
        tasks.append(task)
    return replace(kernel, tasks=tuple(tasks))


def reassigned_floats(kernel: n.TaskedKernel, local_types: dict[str, DataType]) -> set[str]:
    """Float locals assigned in two or more serial tasks."""
    count: dict[str, int] = {}
    for task in kernel.tasks:
        if task.kind == "serial":
            for name in assigned_names(task.body):
                count[name] = count.get(name, 0) + 1
    return {name for name, c in count.items()
            if c > 1 and name in local_types and local_types[name].is_float}


def renamed_reads(task: n.Task, current: dict[str, str]) -> n.Task:
    """`task` reading the current version of each renamed name (body, bounds, captures)."""
    if not current:
        return task

    def read(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Local) and x.name in current:
            return replace(x, name=current[x.name])
        return x
    return replace(task, body=tuple(map_stmt(s, read) for s in task.body),
                   begins=tuple(map_expr(b, read) for b in task.begins),
                   ends=tuple(map_expr(e, read) for e in task.ends),
                   captures=tuple((current.get(c, c), dt) for c, dt in task.captures))


def versioned(body: n.Body, name: str, new: str, old: n.Local) -> n.Body:
    """A serial body assigning and reading `new` instead of `name` (whose reads were already
    renamed to `old`'s name), starting with `new = old` unless it first assigns it plainly."""
    def rename(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Local) and x.name == old.name:
            return replace(x, name=new)
        return x

    def stmt(s: n.Stmt) -> n.Stmt:
        s = map_stmt(s, rename)
        if isinstance(s, n.Assign) and s.name == name:
            s = replace(s, name=new)
        changes = {k: tuple(stmt(x) for x in getattr(s, k)) for k in ("body", "orelse")
                   if isinstance(getattr(s, k, None), tuple)}
        return replace(s, **changes) if changes else s
    first = next(s for s in body if name in assigned_names((s,)) or reads(s, old.name))
    plain = isinstance(first, n.Assign) and first.name == name and not reads(first, old.name)
    copy: tuple[n.Stmt, ...] = () if plain else (n.Assign(new, old, first.loc),)
    return copy + tuple(stmt(s) for s in body)


def reads(s: n.Stmt, name: str) -> bool:
    return any(isinstance(x, n.Local) and x.name == name
               for e in all_exprs((s,)) for x in walk_expr(e))
