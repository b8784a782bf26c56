"""Stable text form of the IR: used for golden tests, debugging and cache keys.

The text depends only on node contents (never on object ids or source locations), so equal IR
prints equal text in every process.
"""
from __future__ import annotations

from . import nodes as n


def ref_text(ref: n.Ref) -> str:
    kind = f"field{ref.slot}" if isinstance(ref, n.FieldRef) else f"arg{ref.arg}"
    return f"{kind}:{ref.name}{'.grad' if ref.grad else ''}"


def expr_text(e: n.Expr) -> str:
    if isinstance(e, n.Const):
        return f"{e.value!r}:{e.dtype.name}"
    if isinstance(e, n.Arg):
        return f"${e.name}:{e.dtype.name}"
    if isinstance(e, n.Local):
        return e.name
    if isinstance(e, n.Unary):
        return f"{e.op}({expr_text(e.x)})" + (f":{e.dtype.name}" if e.op == "bitcast" else "")
    if isinstance(e, n.Binary):
        # an overflow-checked op (debug builds) with its message, whose place (file:line)
        # thus reaches the offline-cache key: a moved kernel never prints a stale line
        checked = f"!{e.overflow!r}" if e.overflow else ""
        return f"({expr_text(e.a)} {e.op}{checked} {expr_text(e.b)}):{e.dtype.name}"
    if isinstance(e, n.Select):
        return f"select({expr_text(e.cond)}, {expr_text(e.a)}, {expr_text(e.b)})"
    if isinstance(e, n.Cast):
        return f"cast<{e.dtype.name}>({expr_text(e.x)})"
    if isinstance(e, n.Math):
        return f"{e.fn}<{e.dtype.name}>({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, n.Load):
        return f"{ref_text(e.ref)}[{', '.join(expr_text(i) for i in e.indices)}]"
    if isinstance(e, n.Shape):
        return f"{ref_text(e.ref)}.shape[{e.axis}]"
    if isinstance(e, n.Atomic):
        idx = ", ".join(expr_text(i) for i in e.indices)
        return f"atomic_{e.op}({ref_text(e.ref)}[{idx}], {expr_text(e.value)})"
    if isinstance(e, n.Assertion):
        values = "".join(f", {expr_text(a)}" for a in e.args) + (
            f", formats={e.formats!r}" if e.args else "")
        return f"assert({expr_text(e.cond)}, {e.message!r}{values})"
    if isinstance(e, n.Print):
        fmt = f", formats={e.formats!r}" if e.formats else ""
        return f"print({e.pieces!r}, {', '.join(expr_text(a) for a in e.args)}{fmt})"
    if isinstance(e, n.Simt):
        decl = e.shared
        arr = "" if decl is None else \
            f"shared{decl.id}:{decl.name}<{decl.dtype.name}{list(decl.shape)}>, "
        return f"simt.{e.op}<{e.dtype.name}>({arr}{', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, n.StackTop):
        return f"top(stack{e.stack.id}:{e.stack.name})"
    if isinstance(e, n.StackTopAdj):
        return f"top_adj(stack{e.stack.id}:{e.stack.name})"
    raise TypeError(f"unknown expression {e!r}")


def body_lines(body: n.Body, depth: int = 0) -> list[str]:
    pad = "  " * depth
    out: list[str] = []
    for s in body:
        if isinstance(s, n.Assign):
            out.append(f"{pad}{s.name} = {expr_text(s.value)}")
        elif isinstance(s, n.Store):
            idx = ", ".join(expr_text(i) for i in s.indices)
            out.append(f"{pad}{ref_text(s.ref)}[{idx}] = {expr_text(s.value)}")
        elif isinstance(s, n.Eval):
            out.append(f"{pad}{expr_text(s.expr)}")
        elif isinstance(s, n.If):
            out.append(f"{pad}if {expr_text(s.cond)}:")
            out += body_lines(s.body, depth + 1)
            if s.orelse:
                out.append(f"{pad}else:")
                out += body_lines(s.orelse, depth + 1)
        elif isinstance(s, n.For):
            out.append(f"{pad}for {s.var} in range({expr_text(s.begin)}, {expr_text(s.end)}):")
            out += body_lines(s.body, depth + 1)
        elif isinstance(s, n.ParFor):
            box = ", ".join(f"{expr_text(b)}..{expr_text(e)}" for b, e in zip(s.begins, s.ends))
            out.append(f"{pad}parallel for {', '.join(s.vars)} in [{box}]:")
            out += body_lines(s.body, depth + 1)
        elif isinstance(s, n.While):
            out.append(f"{pad}while {expr_text(s.cond)}:")
            out += body_lines(s.body, depth + 1)
        elif isinstance(s, n.Break):
            out.append(f"{pad}break")
        elif isinstance(s, n.Continue):
            out.append(f"{pad}continue")
        elif isinstance(s, n.Return):
            out.append(f"{pad}return {expr_text(s.value)}")
        elif isinstance(s, n.Call):
            outs = ", ".join(s.outs)
            out.append(f"{pad}({outs}) = call {s.func}({', '.join(map(expr_text, s.args))})")
        elif isinstance(s, n.FuncRet):
            out.append(f"{pad}func_return({', '.join(expr_text(v) for v in s.values)})")
        elif isinstance(s, n.ReverseFor):
            out.append(f"{pad}for {s.var} in reversed(range({expr_text(s.begin)}, "
                       f"{expr_text(s.end)})):")
            out += body_lines(s.body, depth + 1)
        elif isinstance(s, (n.StackInit, n.StackPush, n.StackAccAdj)):
            verb = {n.StackInit: "init", n.StackPush: "push", n.StackAccAdj: "acc_adj"}[type(s)]
            out.append(f"{pad}{verb}(stack{s.stack.id}:{s.stack.name}:{s.stack.dtype.name}, "
                       f"{expr_text(s.value)})")
        elif isinstance(s, n.StackPop):
            out.append(f"{pad}pop(stack{s.stack.id}:{s.stack.name})")
        else:
            raise TypeError(f"unknown statement {s!r}")
    return out


def kernel_text(k: n.TaskedKernel | n.KernelIR) -> str:
    params = ", ".join(f"{p.name}:{p.kind}:{p.dtype.name if p.dtype else '-'}:{p.ndim}"
                       for p in k.params)
    fields = ", ".join(f"{f.name}:{f.dtype.name}{list(f.shape)}" for f in k.fields)
    lines = [f"kernel {k.name}({params}) fields[{fields}] -> {k.ret.name if k.ret else 'None'}"]
    for f in k.funcs:
        args = ", ".join(f"{name}:{dt.name}" for name, dt in f.params)
        lines.append(f"  real_func {f.name}({args}) -> ({', '.join(d.name for d in f.rets)}):")
        lines += body_lines(f.body, 2)
    if isinstance(k, n.KernelIR):
        lines += body_lines(k.body, 1)
        return "\n".join(lines)
    for i, t in enumerate(k.tasks):
        caps = ", ".join(name for name, _ in t.captures)
        if t.kind == "parallel":
            box = ", ".join(f"{expr_text(b)}..{expr_text(e)}" for b, e in zip(t.begins, t.ends))
            lines.append(f"  task {i} parallel {', '.join(t.vars)} in [{box}] captures({caps}):")
        else:
            lines.append(f"  task {i} serial:")
        lines += body_lines(t.body, 2)
    return "\n".join(lines)
