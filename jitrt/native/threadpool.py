"""The CPU runtime module: a spinning thread pool written in LLVM IR.

Stage: native (built once per process by `backends/cpu.py`). Functions:
- `jitrt_parallel_for(pool, task, ctx, caps, n, cost)`: runs `task` over [0, n), where `cost`
  is the compile-time estimate of one iteration's work. Little work (n * cost <= grain), no
  workers, or a pool already busy with another launch: inline on the calling thread.
  Otherwise it publishes a job and works on it too. Workers claim chunks with compare-and-swap
  on a ticket that holds (epoch << 32 | next chunk). Before writing a job's parameters the
  caller *closes* the ticket (next chunk = 0xFFFFFFFF, nothing claimable) with an atomic
  exchange; a worker reads the parameters between an acquire load of the ticket and its
  compare-and-swap on that same value, so a successful claim proves the parameters it read
  belong to the claimed job: a late worker never runs a chunk of a job it did not read.
- `jitrt_on_sigint(sig)`: a SIGINT handler that counts the signal in the interrupt counter
  and then calls the handler it replaced (CPython's, which raises KeyboardInterrupt once the
  launch returns). Kernels compare the counter with the value their launch started with on
  loop back edges, and `jitrt_run_chunks` before each chunk, so a Ctrl-C stops a running
  kernel. `jitrt_interrupt_state()` returns the address of {counter, previous handler}.
- `jitrt_worker(pool, tid)`: a worker's loop. It polls for `spin_limit` polls after its last
  job (the first `PAUSE_POLLS` with x86 `pause`, then with `sched_yield`, so that on a busy
  machine it lets the launching thread run), then every 200 us with `usleep`: no per-launch
  wake-up through the OS, and an idle process uses almost no CPU.
Pool layout (i64 slots, one cache line per group): the POOL_* constants of `codegen/abi.py`
(where the CPU backend reads them without loading this module).
"""
from __future__ import annotations

from llvmlite import ir

from ..codegen.abi import (ERROR_INTERRUPTED, POOL_BUSY, POOL_CAPS, POOL_CHUNK, POOL_CTX,
                           POOL_DONE, POOL_FN, POOL_GRAIN, POOL_INTERRUPTS, POOL_N,
                           POOL_NCHUNKS, POOL_NWORKERS, POOL_SHUTDOWN, POOL_SPIN, POOL_TICKET,
                           SLOT_ERROR, SLOT_INTERRUPT_EPOCH)
from . import native_gpu_entry, native_launcher
from ..codegen.kernel_module import I8P, I64P, TASK_TYPE

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class _Pool:
    def __init__(self, b: ir.IRBuilder, pool: ir.Value) -> None:
        self.b, self.pool = b, pool

    def ptr(self, slot: int) -> ir.Value:
        return self.b.gep(self.pool, [c64(slot)])

    def load(self, slot: int, order: str = "monotonic") -> ir.Value:
        return self.b.load_atomic(self.ptr(slot), order, 8)

    def store(self, slot: int, value: ir.Value, order: str = "monotonic") -> None:
        self.b.store_atomic(value, self.ptr(slot), order, 8)


PAUSE_POLLS = 2000     # a worker's idle polls with `pause` before it polls with sched_yield


def _sched_yield(module: ir.Module) -> ir.Function:
    found = module.globals.get("sched_yield")
    if isinstance(found, ir.Function):
        return found
    return ir.Function(module, ir.FunctionType(I32, []), "sched_yield")


def _pause(module: ir.Module, b: ir.IRBuilder, triple: str) -> None:
    if triple.startswith(("x86_64", "i686", "i386")):
        b.asm(ir.FunctionType(ir.VoidType(), []), "pause", "~{memory}", [], True)
    elif triple.startswith(("aarch64", "arm")):
        b.asm(ir.FunctionType(ir.VoidType(), []), "yield", "~{memory}", [], True)


def _run_chunks(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64, I64]),
                     "jitrt_run_chunks")
    pool_arg, epoch, tid = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    p = _Pool(b, pool_arg)
    loop = fn.append_basic_block("claim")
    done = fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    t = p.load(POOL_TICKET, "acquire")
    c = b.and_(t, c64(0xFFFFFFFF))
    # parameters read after the acquire load and validated by the CAS on the same ticket value
    task = b.inttoptr(p.load(POOL_FN), TASK_TYPE.as_pointer())
    ctx = b.inttoptr(p.load(POOL_CTX), I64P)
    caps = b.inttoptr(p.load(POOL_CAPS), I64P)
    n, chunk, nchunks = p.load(POOL_N), p.load(POOL_CHUNK), p.load(POOL_NCHUNKS)
    same_epoch = b.icmp_unsigned("==", b.lshr(t, c64(32)), epoch)
    claimable = b.and_(same_epoch, b.icmp_signed("<", c, nchunks))
    try_bb = fn.append_basic_block("try")
    b.cbranch(claimable, try_bb, done)
    b.position_at_end(try_bb)
    res = b.cmpxchg(p.ptr(POOL_TICKET), t, b.add(t, c64(1)), "acq_rel", "acquire")
    run_bb = fn.append_basic_block("run")
    b.cbranch(b.extract_value(res, 1), run_bb, loop)
    b.position_at_end(run_bb)
    lo = b.mul(c, chunk)
    hi = b.add(lo, chunk)
    hi = b.select(b.icmp_signed("<", hi, n), hi, n)
    # a Ctrl-C since the launch started: the remaining chunks are skipped (and counted done)
    counter = b.inttoptr(p.load(POOL_INTERRUPTS), I64P)
    started = b.load(b.gep(ctx, [c64(SLOT_INTERRUPT_EPOCH)]))
    quiet = b.icmp_unsigned("==", b.load_atomic(counter, "monotonic", 8), started)
    with b.if_else(quiet, likely=True) as (run, skip):
        with run:
            b.call(task, [ctx, caps, lo, hi, tid])
        with skip:
            b.cmpxchg(b.gep(ctx, [c64(SLOT_ERROR)]), c64(0), c64(ERROR_INTERRUPTED), "monotonic",
                      "monotonic")
    b.atomic_rmw("add", p.ptr(POOL_DONE), c64(1), "release")
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _parallel_for(module: ir.Module, triple: str) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P, TASK_TYPE.as_pointer(), I64P,
                                                             I64P, I64, I64]), "jitrt_parallel_for")
    pool_raw, task, ctx, caps, n, cost = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pool = b.bitcast(pool_raw, I64P)
    p = _Pool(b, pool)
    inline_bb, try_bb, par_bb, exit_bb = (fn.append_basic_block(x) for x in
                                          ("inline", "try_lock", "parallel", "exit"))
    nworkers, grain = p.load(POOL_NWORKERS), p.load(POOL_GRAIN)
    work = b.mul(n, cost)
    small = b.or_(b.icmp_signed("<=", work, grain), b.icmp_signed("<=", nworkers, c64(0)))
    b.cbranch(b.icmp_signed("<=", n, c64(0)), exit_bb, try_bb)
    b.position_at_end(try_bb)
    lock_bb = fn.append_basic_block("lock")
    b.cbranch(small, inline_bb, lock_bb)
    b.position_at_end(lock_bb)
    got = b.cmpxchg(p.ptr(POOL_BUSY), c64(0), c64(1), "acquire", "monotonic")
    b.cbranch(b.extract_value(got, 1), par_bb, inline_bb)

    b.position_at_end(inline_bb)
    b.call(task, [ctx, caps, c64(0), n, c64(0)])
    b.branch(exit_bb)

    b.position_at_end(par_bb)
    nchunks = _publish(b, p, task, ctx, caps, n, work, grain, nworkers)
    unlock_bb = fn.append_basic_block("unlock")
    _wait_done(module, fn, b, p, nchunks, unlock_bb, triple)
    b.position_at_end(unlock_bb)
    p.store(POOL_BUSY, c64(0), "release")
    b.branch(exit_bb)
    b.position_at_end(exit_bb)
    b.ret_void()
    return fn


def _publish(b: ir.IRBuilder, p: _Pool, task: ir.Value, ctx: ir.Value, caps: ir.Value,
             n: ir.Value, work: ir.Value, grain: ir.Value, nworkers: ir.Value) -> ir.Value:
    """Split [0, n) into chunks (by estimated work, at most 4 per thread), close the ticket,
    write the job, open the ticket at the next epoch and work on the job too. Returns the
    chunk count."""
    nthreads = b.add(nworkers, c64(1))
    by_grain = b.sdiv(b.add(work, b.sub(grain, c64(1))), grain)
    cap = b.mul(nthreads, c64(4))
    cap = b.select(b.icmp_signed("<", n, cap), n, cap)
    nchunks0 = b.select(b.icmp_signed("<", by_grain, cap), by_grain, cap)
    chunk = b.sdiv(b.add(n, b.sub(nchunks0, c64(1))), nchunks0)
    nchunks = b.sdiv(b.add(n, b.sub(chunk, c64(1))), chunk)
    # close the ticket (same epoch, nothing claimable) before touching the parameters
    old_ticket = p.load(POOL_TICKET)
    closed = b.or_(b.and_(old_ticket, c64(-(1 << 32))), c64(0xFFFFFFFF))
    b.atomic_rmw("xchg", p.ptr(POOL_TICKET), closed, "acq_rel")
    p.store(POOL_FN, b.ptrtoint(task, I64))
    p.store(POOL_CTX, b.ptrtoint(ctx, I64))
    p.store(POOL_CAPS, b.ptrtoint(caps, I64))
    p.store(POOL_N, n)
    p.store(POOL_CHUNK, chunk)
    p.store(POOL_NCHUNKS, nchunks)
    p.store(POOL_DONE, c64(0))
    epoch = b.and_(b.add(b.lshr(old_ticket, c64(32)), c64(1)), c64(0xFFFFFFFF))
    p.store(POOL_TICKET, b.shl(epoch, c64(32)), "release")
    run_chunks = b.module.globals["jitrt_run_chunks"]
    b.call(run_chunks, [p.pool, epoch, c64(0)])
    return nchunks


def _wait_done(module: ir.Module, fn: ir.Function, b: ir.IRBuilder, p: _Pool,
               nchunks: ir.Value, done_bb: ir.Block, triple: str) -> None:
    """Wait until every chunk is done: spin, and after 2,000 polls yield the core (a worker
    holding a chunk may have been descheduled on a busy machine)."""
    wait_bb, spin_bb = fn.append_basic_block("wait"), fn.append_basic_block("spin")
    yield_bb, pause_bb = fn.append_basic_block("yield"), fn.append_basic_block("pause")
    sched_yield = _sched_yield(module)
    spins = b.alloca(I64)
    b.store(c64(0), spins)
    b.branch(wait_bb)
    b.position_at_end(wait_bb)
    finished = b.icmp_signed(">=", p.load(POOL_DONE, "acquire"), nchunks)
    b.cbranch(finished, done_bb, spin_bb)
    b.position_at_end(spin_bb)
    count = b.add(b.load(spins), c64(1))
    b.store(count, spins)
    b.cbranch(b.icmp_signed(">", count, c64(2000)), yield_bb, pause_bb)
    b.position_at_end(yield_bb)
    b.call(sched_yield, [])
    b.branch(wait_bb)
    b.position_at_end(pause_bb)
    _pause(module, b, triple)
    b.branch(wait_bb)


def _worker(module: ir.Module, run_chunks: ir.Function, triple: str) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64P, I64]), "jitrt_worker")
    pool, tid = fn.args
    usleep = ir.Function(module, ir.FunctionType(I32, [I32]), "usleep")
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    p = _Pool(b, pool)
    seen = b.alloca(I64)
    spins = b.alloca(I64)
    b.store(b.lshr(p.load(POOL_TICKET, "acquire"), c64(32)), seen)
    b.store(c64(0), spins)
    loop, check, work, idle, spin, sleep, exit_bb = (fn.append_basic_block(x) for x in (
        "loop", "check", "work", "idle", "spin", "sleep", "exit"))
    b.branch(loop)
    b.position_at_end(loop)
    b.cbranch(b.icmp_signed("!=", p.load(POOL_SHUTDOWN, "acquire"), c64(0)), exit_bb, check)
    b.position_at_end(check)
    epoch = b.lshr(p.load(POOL_TICKET, "acquire"), c64(32))
    b.cbranch(b.icmp_unsigned("!=", epoch, b.load(seen)), work, idle)
    b.position_at_end(work)
    b.store(epoch, seen)
    b.call(run_chunks, [pool, epoch, tid])
    b.store(c64(0), spins)
    b.branch(loop)
    b.position_at_end(idle)
    count = b.add(b.load(spins), c64(1))
    b.store(count, spins)
    b.cbranch(b.icmp_signed("<", count, p.load(POOL_SPIN)), spin, sleep)
    b.position_at_end(spin)
    # the first polls `pause`; later ones yield the core, so that an idle worker sharing a
    # core with the launching thread (a busy machine) gives it way instead of spinning on it
    pause_bb, yield_bb = fn.append_basic_block("pause"), fn.append_basic_block("yield")
    b.cbranch(b.icmp_signed("<", count, c64(PAUSE_POLLS)), pause_bb, yield_bb)
    b.position_at_end(pause_bb)
    _pause(module, b, triple)
    b.branch(loop)
    b.position_at_end(yield_bb)
    b.call(_sched_yield(module), [])
    b.branch(loop)
    b.position_at_end(sleep)
    b.call(usleep, [ir.Constant(I32, 200)])
    b.branch(loop)
    b.position_at_end(exit_bb)
    b.ret_void()
    return fn


def _interrupts(module: ir.Module) -> None:
    """The interrupt counter, the SIGINT handler that bumps it and chains to the previous
    handler, and `jitrt_interrupt_state()` (the state's address, for the Python side)."""
    state = ir.GlobalVariable(module, ir.ArrayType(I64, 2), "jitrt_interrupt_state_data")
    state.initializer = ir.Constant(ir.ArrayType(I64, 2), [0, 0])
    state.linkage = "internal"
    getter = ir.Function(module, ir.FunctionType(I64P, []), "jitrt_interrupt_state")
    b = ir.IRBuilder(getter.append_basic_block("entry"))
    b.ret(b.gep(state, [c64(0), c64(0)]))
    handler = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), "jitrt_on_sigint")
    b = ir.IRBuilder(handler.append_basic_block("entry"))
    b.atomic_rmw("add", b.gep(state, [c64(0), c64(0)]), c64(1), "seq_cst")
    prev = b.load_atomic(b.gep(state, [c64(0), c64(1)]), "monotonic", 8)
    with b.if_then(b.icmp_unsigned(">", prev, c64(1))):   # not SIG_DFL (0) / SIG_IGN (1)
        fn_type = ir.FunctionType(ir.VoidType(), [I32])
        b.call(b.inttoptr(prev, fn_type.as_pointer()), [handler.args[0]])
    b.ret_void()


def build_runtime_module(triple: str, data_layout: str) -> ir.Module:
    module = ir.Module(name="jitrt_runtime")
    module.triple, module.data_layout = triple, data_layout
    _interrupts(module)
    run_chunks = _run_chunks(module)
    _parallel_for(module, triple)
    _worker(module, run_chunks, triple)
    native_launcher.emit(module)   # the CPython-callable launcher (see its module)
    native_gpu_entry.emit(module)  # what it calls for a kernel on a GPU
    return module
