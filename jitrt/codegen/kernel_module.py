"""Build the LLVM module of one compiled kernel: an entry function and one function per task.

Stage: codegen. Input: a `TaskedKernel`, a `Target`, the context layout and a symbol prefix.
Output: an llvmlite `ir.Module` plus the table of access sites (for fault messages).
On the CPU, `<prefix>_entry(ctx)` runs serial tasks inline and hands each parallel task to the
runtime's `parallel_for` (reached through the context, so no address is embedded); each
`<prefix>_task<k>(ctx, caps, lo, hi, tid)` runs its body for linear indices lo..hi. On GPU
targets every parallel task also gets a kernel wrapper that maps one thread to one index, and
every serial task a one-thread kernel (`<prefix>_serial<k>_kernel`). The `LaunchableTask`
list says, per task, what a device launches.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .. import dtypes
from ..ir import nodes as n
from . import abi
from .emit_expr import I32, I64, ExprEmitter
from .emit_adstack import AdStackEmitter
from .emit_stmt import StmtEmitter
from .targets import Target

I8P = ir.IntType(8).as_pointer()
I64P = I64.as_pointer()
TASK_TYPE = ir.FunctionType(ir.VoidType(), [I64P, I64P, I64, I64, I64])
PARALLEL_FOR_TYPE = ir.FunctionType(ir.VoidType(), [I8P, TASK_TYPE.as_pointer(), I64P, I64P, I64,
                                                    I64])


@dataclass(frozen=True)
class AccessSite:
    name: str
    loc: n.Loc
    kind: str


class FunctionEmitter(ExprEmitter, StmtEmitter, AdStackEmitter):
    def __init__(self, module: ir.Module, target: Target, layout: abi.ContextLayout,
                 fn: ir.Function, ctx_ptr: ir.Value, sites: list[AccessSite]) -> None:
        self.module, self.target, self.layout, self.fn = module, target, layout, fn
        self.ctx_ptr = ctx_ptr
        self.sites = sites
        self.alloca_block = fn.append_basic_block("allocas")
        self.start_block = fn.append_basic_block("start")
        self.builder = ir.IRBuilder(self.start_block)
        self.locals: dict[str, ir.Value] = {}
        self.loop_targets: list[tuple[ir.Block, ir.Block]] = []
        self._ids = 0
        self.stacks: dict[tuple[int, int], tuple[ir.Value, ir.Value, ir.Value]] = {}
        self.task_index = 0
        self.tid: ir.Value = ir.Constant(I64, 0)
        self.reductions: dict = {}   # reduction key -> accumulator alloca (parallel tasks)
        self.invariants: dict[int, ir.Value] = {}   # context slot -> its load at entry
        self.interrupt_epoch: ir.Value | None = None     # see codegen/interrupts.py
        self.interrupt_counter: ir.Value | None = None

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def add_site(self, ref: n.Ref, loc: n.Loc, kind: str) -> int:
        from ..ir.printer import ref_text
        self.sites.append(AccessSite(ref_text(ref).split(":", 1)[1], loc, kind))
        return len(self.sites) - 1

    def finish(self) -> None:
        if not self.builder.block.is_terminated:
            self.builder.ret_void()
        with self.builder.goto_block(self.alloca_block):
            self.builder.branch(self.start_block)


def task_signature_caps(task: n.Task) -> int:
    return 2 * len(task.vars) + len(task.captures)


def emit_task(module: ir.Module, target: Target, layout: abi.ContextLayout, task: n.Task,
              index: int, name: str, local_types: dict[str, dtypes.DataType],
              sites: list[AccessSite]) -> ir.Function:
    fn = ir.Function(module, TASK_TYPE, name)
    ctx, caps, lo, hi, tid = fn.args
    em = FunctionEmitter(module, target, layout, fn, ctx, sites)
    em.task_index, em.tid = index, tid
    b = em.builder
    d = len(task.vars)
    begins = [b.load(b.gep(caps, [ir.Constant(I64, k)])) for k in range(d)]
    exts = [b.load(b.gep(caps, [ir.Constant(I64, d + k)])) for k in range(d)]
    for k, (cname, cdt) in enumerate(task.captures):
        raw = b.load(b.gep(caps, [ir.Constant(I64, 2 * d + k)]))
        b.store(em.from_slot(raw, cdt), em.local_ptr(cname, cdt))
    for k, key in enumerate(task.reductions):
        acc = em.local_ptr(f"$partial{k}", key[0].dtype)
        em.reductions[key] = acc
    counter = em.local_ptr("$index", dtypes.i64)
    b.store(lo, counter)
    cond_bb, body_bb, exit_bb = (fn.append_basic_block(x) for x in ("cond", "body", "exit"))
    b.branch(cond_bb)
    b.position_at_end(cond_bb)
    idx = b.load(counter)
    b.cbranch(b.icmp_signed("<", idx, hi), body_bb, exit_bb)
    b.position_at_end(body_bb)
    rest = idx
    for k in reversed(range(d)):
        var_dt = local_types[task.vars[k]]
        if d == 1:
            coord = rest
        else:
            coord = b.srem(rest, exts[k])
            rest = b.sdiv(rest, exts[k])
        value = b.add(coord, begins[k])
        if var_dt.bits == 32:
            value = b.trunc(value, I32)
        b.store(value, em.local_ptr(task.vars[k], var_dt))
    em.body(task.body)
    b.store(b.add(b.load(counter), ir.Constant(I64, 1)), counter)
    b.branch(cond_bb)
    b.position_at_end(exit_bb)
    flush = em.reductions
    em.reductions = {}
    for k, (ref, idx) in enumerate(flush):
        consts = tuple(n.Const(i, dtypes.i64) for i in idx)
        em.stmt_Eval(n.Eval(n.Atomic("add", ref, consts, n.Local(f"$partial{k}", ref.dtype),
                                     ref.dtype, task.loc), task.loc))
    em.finish()
    return fn


def emit_entry(module: ir.Module, target: Target, layout: abi.ContextLayout,
               kernel: n.TaskedKernel, name: str, task_fns: dict[int, ir.Function],
               sites: list[AccessSite]) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P]), name)
    em = FunctionEmitter(module, target, layout, fn, fn.args[0], sites)
    em.begin_launch()
    b = em.builder
    ncaps = max([task_signature_caps(t) for t in kernel.tasks] + [1])
    with b.goto_block(em.alloca_block):
        caps_arr = target.alloca(b, ir.ArrayType(I64, ncaps), "caps")
    caps = b.bitcast(caps_arr, I64P)
    for k, task in enumerate(kernel.tasks):
        em.task_index = k
        if task.kind == "serial":
            em.body(task.body)
            continue
        d = len(task.vars)
        total: ir.Value = ir.Constant(I64, 1)
        for axis, (be, ee) in enumerate(zip(task.begins, task.ends)):
            begin = em.to_slot(em.expr(be), be.dtype)
            end = em.to_slot(em.expr(ee), ee.dtype)
            ext = b.sub(end, begin)
            ext = b.select(b.icmp_signed("<", ext, ir.Constant(I64, 0)), ir.Constant(I64, 0), ext)
            b.store(begin, b.gep(caps, [ir.Constant(I64, axis)]))
            b.store(ext, b.gep(caps, [ir.Constant(I64, d + axis)]))
            total = b.mul(total, ext)
        for c, (cname, cdt) in enumerate(task.captures):
            v = b.load(em.local_ptr(cname, cdt))
            b.store(em.to_slot(v, cdt), b.gep(caps, [ir.Constant(I64, 2 * d + c)]))
        pf = b.inttoptr(em.load_slot(abi.SLOT_PARALLEL_FOR), PARALLEL_FOR_TYPE.as_pointer())
        pool = b.inttoptr(em.load_slot(abi.SLOT_POOL), I8P)
        b.call(pf, [pool, task_fns[k], em.ctx_ptr, caps, total,
                    ir.Constant(I64, task.cost)])
    em.finish()
    return fn


def emit_gpu_wrapper(module: ir.Module, target: Target, task_fn: ir.Function,
                     name: str) -> ir.Function:
    """A GPU kernel running `task_fn` for one linear index per thread (index < n)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64P, I64]), name)
    fn.calling_convention = "ptx_kernel" if target.name == "cuda" else "amdgpu_kernel"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if target.name == "cuda":
        def sreg(reg: str) -> ir.Value:
            f = module.globals.get(f"llvm.nvvm.read.ptx.sreg.{reg}") or ir.Function(
                module, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{reg}")
            return b.zext(b.call(f, []), I64)
        block, dim, thread = sreg("ctaid.x"), sreg("ntid.x"), sreg("tid.x")
    else:
        def amd(reg: str) -> ir.Value:
            f = module.globals.get(f"llvm.amdgcn.{reg}") or ir.Function(
                module, ir.FunctionType(I32, []), f"llvm.amdgcn.{reg}")
            return b.zext(b.call(f, []), I64)
        block, thread = amd("workgroup.id.x"), amd("workitem.id.x")
        dim = ir.Constant(I64, 256)
    index = b.add(b.mul(block, dim), thread)
    ctx, caps, count = fn.args
    with b.if_then(b.icmp_signed("<", index, count)):
        b.call(task_fn, [ctx, caps, index, b.add(index, ir.Constant(I64, 1)), index])
    b.ret_void()
    return fn


def emit_gpu_serial(module: ir.Module, target: Target, layout: abi.ContextLayout,
                    task: n.Task, index: int, name: str, sites: list[AccessSite]) -> ir.Function:
    """A GPU kernel running a serial task's body once (thread 0 of block 0 of a one-thread
    launch), with the same `(ctx, caps, n)` signature as a parallel task's kernel."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64P, I64]), name)
    fn.calling_convention = "ptx_kernel" if target.name == "cuda" else "amdgpu_kernel"
    em = FunctionEmitter(module, target, layout, fn, fn.args[0], sites)
    em.task_index = index
    em.body(task.body)
    em.finish()
    return fn


@dataclass(frozen=True)
class LaunchableTask:
    """One task as a launch sees it. The CPU fuses every task into `<prefix>_entry`; a GPU
    launches `symbol` once per task, in order (a serial task as a one-thread grid)."""
    index: int
    kind: str              # "parallel" | "serial"
    symbol: str            # the function a device launches for this task ("" if fused only)
    ndim: int              # parallel: dimensions of the box (grid size = product of extents)
    cost: int              # estimated work of one iteration
    reductions: int        # `+=` accumulated per chunk (or per block) before one atomic
    stacks: int            # adstacks (their capacities come from the sizing plan)


def build_module(kernel: n.TaskedKernel, target: Target, layout: abi.ContextLayout,
                 prefix: str, local_types: dict[str, dtypes.DataType]
                 ) -> tuple[ir.Module, list[AccessSite], tuple[LaunchableTask, ...]]:
    """The module of one kernel: per parallel task a chunk function (and a GPU kernel around
    it), per serial task a GPU kernel on GPU targets, and on the CPU the fused entry."""
    module = ir.Module(name=prefix)
    module.triple = target.triple
    module.data_layout = target.data_layout
    sites: list[AccessSite] = []
    task_fns: dict[int, ir.Function] = {}
    tasks = []
    for k, task in enumerate(kernel.tasks):
        symbol = ""
        if task.kind == "parallel":
            task_fns[k] = emit_task(module, target, layout, task, k, f"{prefix}_task{k}",
                                    local_types, sites)
            symbol = f"{prefix}_task{k}"
            if target.is_gpu:
                symbol = f"{prefix}_task{k}_kernel"
                emit_gpu_wrapper(module, target, task_fns[k], symbol)
        elif target.is_gpu:
            symbol = f"{prefix}_serial{k}_kernel"
            emit_gpu_serial(module, target, layout, task, k, symbol, sites)
        tasks.append(LaunchableTask(k, task.kind, symbol, len(task.vars), task.cost,
                                    len(task.reductions), len(task.stacks)))
    if not target.is_gpu:
        emit_entry(module, target, layout, kernel, f"{prefix}_entry", task_fns, sites)
    return module, sites, tuple(tasks)
