"""Target hooks: what differs between CPU, NVPTX and AMDGPU in the generated LLVM IR.

Stage: codegen. A `Target` names the triple and data layout, carries the `TargetTraits` its
backend declares (what the hardware and the launch form give the generated code), maps math
functions to intrinsics or device-library symbols, and on GPUs supplies the few hardware reads
the kernels need: the kernel calling convention, thread and block indices, the block size, the
warp (wavefront) size, a shuffle and a block barrier. The lowering in `emit_*.py` and
`kernel_module.py` is the same for all targets and asks these hooks and traits (never the kind
of device); no code outside this module names an intrinsic of one GPU.
"""
from __future__ import annotations

from llvmlite import ir

from ..frozen import frozen
from . import vector_math
from .declare import declare

I32 = ir.IntType(32)
MAX_BLOCK = 1024       # the most threads per block a GPU launch uses (jr.loop_config's limit)

MATH_INTRINSIC = {"sin": "llvm.sin", "cos": "llvm.cos", "tan": "llvm.tan", "exp": "llvm.exp",
                  "log": "llvm.log", "sqrt": "llvm.sqrt", "tanh": "llvm.tanh",
                  "floor": "llvm.floor", "ceil": "llvm.ceil", "abs": "llvm.fabs",
                  "pow": "llvm.pow", "asin": "llvm.asin", "acos": "llvm.acos",
                  "atan": "llvm.atan", "atan2": "llvm.atan2", "sinh": "llvm.sinh",
                  "cosh": "llvm.cosh", "round": "llvm.roundeven"}
# every GPU has these as instructions (the bit counts: Quadrants' jr.math.popcnt/clz/ffs)
INSTRUCTIONS = ("sqrt", "floor", "ceil", "abs", "round", "popcnt", "clz", "ffs")


class _PrivateAlloca(ir.instructions.AllocaInstr):
    """An alloca in AMDGPU's private address space (5), as that target requires."""

    def __init__(self, parent: ir.Block, typ: ir.Type, name: str) -> None:
        super().__init__(parent, typ, None, name)
        self.type = typ.as_pointer(5)

    def descr(self, buf: list[str]) -> None:
        buf.append(f"alloca {self.allocated_type}, addrspace(5)")


@frozen
class TargetTraits:
    """What a target gives the generated code, declared by the backend that builds the target
    (`backends/cpu.py`, `backends/nvptx.py`, `backends/amdgcn.py`): codegen asks for a
    capability, not for the kind of device. Every field is stated; none has a default."""
    # tasks are kernels over a grid of thread blocks (each thread steps through the task's
    # indices by the grid's size; a task's reductions meet in a block sum first; serial tasks
    # and sizing reducers are kernels too) that the host launches one by one. False: a task is
    # a function over one chunk [lo, hi) of consecutive indices, handed to the thread pool by
    # the kernel's fused entry (what the chunk allows: a rows loop, a gather scan, reduction
    # lanes, a cold checked copy)
    grid_launch: bool
    # the launch context is a read-only upload: what a launch writes (faults, the adstack
    # overflow) goes to the device's status block, tagged with the launch id
    status_block: bool
    # the LLVM address space of field and ndarray data (GPUs' global memory: 1)
    data_address_space: int
    # loops poll the host's Ctrl-C counter (the code runs on threads of the host process)
    host_interrupts: bool
    # adstack entries interleaved across the device's threads (entry k of thread t at
    # k * threads + t, so that a warp's pushes and pops coalesce); False: each thread's stacks
    # are one contiguous region
    interleaved_stacks: bool
    # loops whose body makes runtime unrolling pointless are marked so (`loop_hints`; measured
    # with the CPU's LLVM back end)
    unroll_hints: bool
    # small adstacks of a known capacity may live in each thread's own local (private)
    # memory instead of the heap (`passes.lowered.local_capacity`)
    local_stacks: bool
    # a thread whose access fails a bounds check records it and ends there (PTX `exit`, what
    # Taichi's and Quadrants' checks do on CUDA), so the failing arm never rejoins the code
    # (`ExprEmitter.checked_or_stopped`). False: the access is skipped (a load gives 0) and
    # the thread runs on. (Where the arms rejoined, ptxas put a reconvergence barrier pair
    # around each recorder call: 355 pairs in Genesis's largest solver task)
    fault_ends_thread: bool
    # (with `fault_ends_thread`) in a thread's innermost loop of unknown trip count that only
    # computes, a read whose check depends on data does not branch there: it reads a
    # stand-in instead of an element outside its array, keeps the thread's first failure in
    # registers and tests it after the loop (`codegen/emit_deferred.py`), and the loop is
    # unrolled by four, so that reads of a chain of indices are in flight together, as
    # without checks
    deferred_reads: bool = False
    # a checked access of a field of fewer than 2**31 elements by indices of at most 32 bits
    # tests and combines its indices in 32 bits, widened once for the address (what Taichi's
    # and Quadrants' CUDA code does: `mul.wide.s32`); a GPU's 64-bit integer multiply and add
    # are several instructions each. False: in 64 bits (the CPU's are as cheap)
    narrow_offsets: bool = False


@frozen
class Target:
    name: str
    triple: str
    data_layout: str
    traits: TargetTraits
    kernel_cc: str = ""           # the calling convention of a GPU kernel
    warp_sizes: tuple[int, ...] = (1,)   # the warp sizes code for this target may run with
    # jitrt's vectorizable math (`vector_math`) allowed (jr.init(fast_math)); GPU targets
    # declare False (their math is the device library's or `portable_math`)
    own_math: bool = True
    # GPU arithmetic under jr.init(fast_math=True), the default: a multiply and an add may
    # fuse into one FMA (`contract`: nvcc's and clang's CUDA default, and Taichi's and
    # Quadrants' fast math), f32 division and square root are the hardware's approximations
    # (`afn`: PTX div.approx.f32 / sqrt.approx.f32, at most 2 ulp off; Taichi's and
    # Quadrants' fast math, nvcc's -use_fast_math). False (the CPU, fast_math=False): each
    # operation rounded as IEEE says
    fast_arith: bool = False
    # iterations of a parallel task one pass of its body may run (`passes/interleave.py`); the
    # adstack heap holds this many copies of each stack
    lanes: int = 1
    # whether reverse mode tapes math partials in the forward sweep (`autodiff.tape_partials`):
    # on the CPU a stack entry costs less than a libm call; a GPU's stacks are in global memory
    tape: bool = False
    # the most context slots a kernel takes as parameters (0: no limit, the CPU's pointer);
    # GPUs: 4 KiB of kernel parameters, less room for the others
    max_param_slots: int = 0
    # how kernels print: "printf" (the host's, floats formatted as Python does), "vprintf"
    # (CUDA's device printf), "" where print() in kernels is not supported
    printer: str = "printf"
    # a tiered compile's quick copy (CPU): a task whose check-free loop copy is for speed only
    # (`kernel_module.fault_only_task`) gets its checked loop alone, half the code to build
    one_copy: bool = False

    def alloca(self, builder: ir.IRBuilder, ty: ir.Type, name: str) -> ir.Value:
        return builder.alloca(ty, name=name)

    def math_function(self, module: ir.Module, fn: str, ty: ir.Type, nargs: int,
                      vectorizable: bool = True) -> ir.Function:
        """The function computing `fn` on `ty`. On the CPU, f32 sin, cos, tan, exp, log and
        pow and f64 sin, cos, tan, exp and log (`vector_math.provides`) are jitrt's own
        branch-free IR (`vector_math`), which loops vectorize; LLVM turns `llvm.sin.f32` and
        the like into a call of libm's `sinf` per element. Where the call
        cannot be vectorized (`vectorizable` False: inside a loop of a task's body, whose
        iterations depend on each other, or in a serial task), libm's scalar function is
        faster than the branch-free code (about 2.7x on `v = sin(v)` chains)."""
        if self.own_math and vectorizable and vector_math.provides(fn, ty):
            return vector_math.define(module, fn, ty)
        name = self.math_symbol(fn, ty)
        existing = module.globals.get(name)
        if existing is not None:
            return existing  # type: ignore[return-value]
        return ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name)

    def math_symbol(self, fn: str, ty: ir.Type) -> str:
        suffix = "f32" if isinstance(ty, ir.FloatType) else "f64"
        return f"{MATH_INTRINSIC[fn]}.{suffix}"


    def mark_kernel(self, fn: ir.Function) -> None:
        """Make `fn` a kernel of this GPU target."""
        fn.calling_convention = self.kernel_cc

    # ---- GPU hardware reads (i32 values), each declared once per module -------------------
    def thread_in_block(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        raise NotImplementedError(self.name)

    def block_index(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        raise NotImplementedError(self.name)

    def block_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        raise NotImplementedError(self.name)

    def warp_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        raise NotImplementedError(self.name)

    def shuffle_down(self, module: ir.Module, b: ir.IRBuilder, v: ir.Value, delta: int,
                     lane: ir.Value) -> ir.Value:
        """The i32 `v` of lane `lane + delta` of this warp (any value past the warp's end)."""
        raise NotImplementedError(self.name)

    def barrier(self, module: ir.Module, b: ir.IRBuilder) -> None:
        """Every thread of the block waits here; shared-memory writes before it are seen
        after it."""
        raise NotImplementedError(self.name)

    # ---- block-level primitives (`qd.simt`, codegen/emit_simt.py) -------------------------
    def lane_id(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        """This thread's lane in its warp (wavefront), an i32."""
        raise NotImplementedError(self.name)

    def shuffle(self, module: ir.Module, b: ir.IRBuilder, mode: str, v: ir.Value,
                x: ir.Value) -> ir.Value:
        """The i32 `v` of another lane of this warp: `mode` "idx" reads lane x, "up" lane
        (lane - x), "down" lane (lane + x); a lane past the warp's ends reads its own `v`."""
        raise NotImplementedError(self.name)

    def ballot(self, module: ir.Module, b: ir.IRBuilder, p: ir.Value) -> ir.Value:
        """The i64 mask of the lanes of this warp whose i1 `p` is true."""
        raise NotImplementedError(self.name)

    def warp_barrier(self, module: ir.Module, b: ir.IRBuilder, mask: ir.Value) -> None:
        """The lanes of `mask` (i32; AMDGPU: the whole wavefront) meet here."""
        raise NotImplementedError(self.name)

    def fence(self, module: ir.Module, b: ir.IRBuilder, scope: str) -> None:
        """Memory operations before it are seen before those after it by every thread of
        `scope`: "block" or "grid"."""
        raise NotImplementedError(self.name)


@frozen
class NvptxTarget(Target):
    kernel_cc: str = "ptx_kernel"
    own_math: bool = False
    warp_sizes: tuple[int, ...] = (32,)
    max_param_slots: int = 500
    printer: str = "vprintf"

    def _sreg(self, module: ir.Module, b: ir.IRBuilder, reg: str) -> ir.Value:
        return b.call(declare(module, f"llvm.nvvm.read.ptx.sreg.{reg}", I32), [])

    def thread_in_block(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._sreg(module, b, "tid.x")

    def block_index(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._sreg(module, b, "ctaid.x")

    def block_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._sreg(module, b, "ntid.x")

    def warp_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return ir.Constant(I32, 32)

    def shuffle_down(self, module: ir.Module, b: ir.IRBuilder, v: ir.Value, delta: int,
                     lane: ir.Value) -> ir.Value:
        shfl = declare(module, "llvm.nvvm.shfl.sync.down.i32", I32, (I32, I32, I32, I32))
        return b.call(shfl, [ir.Constant(I32, -1), v, ir.Constant(I32, delta),
                             ir.Constant(I32, 0x1F)])

    def barrier(self, module: ir.Module, b: ir.IRBuilder) -> None:
        b.call(declare(module, "llvm.nvvm.barrier0", ir.VoidType()), [])

    def lane_id(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._sreg(module, b, "laneid")

    def shuffle(self, module: ir.Module, b: ir.IRBuilder, mode: str, v: ir.Value,
                x: ir.Value) -> ir.Value:
        # the full mask, as Quadrants (a block of fewer than 32 threads: its lanes only);
        # c: the lane clamp, 31 for idx/down (the warp's last lane), 0 for up
        shfl = declare(module, f"llvm.nvvm.shfl.sync.{mode}.i32", I32, (I32, I32, I32, I32))
        clamp = 0 if mode == "up" else 0x1F
        return b.call(shfl, [ir.Constant(I32, -1), v, x, ir.Constant(I32, clamp)])

    def ballot(self, module: ir.Module, b: ir.IRBuilder, p: ir.Value) -> ir.Value:
        vote = declare(module, "llvm.nvvm.vote.ballot.sync", I32, (I32, ir.IntType(1)))
        return b.zext(b.call(vote, [ir.Constant(I32, -1), p]), ir.IntType(64))

    def warp_barrier(self, module: ir.Module, b: ir.IRBuilder, mask: ir.Value) -> None:
        b.call(declare(module, "llvm.nvvm.bar.warp.sync", ir.VoidType(), (I32,)), [mask])

    def fence(self, module: ir.Module, b: ir.IRBuilder, scope: str) -> None:
        name = "llvm.nvvm.membar.cta" if scope == "block" else "llvm.nvvm.membar.gl"
        b.call(declare(module, name, ir.VoidType()), [])

    def math_symbol(self, fn: str, ty: ir.Type) -> str:
        if fn in INSTRUCTIONS:
            return super().math_symbol(fn, ty)
        single = isinstance(ty, ir.FloatType)
        return f"__nv_{fn}{'f' if single else ''}"

    def math_function(self, module: ir.Module, fn: str, ty: ir.Type, nargs: int,
                      vectorizable: bool = True) -> ir.Function:
        """libdevice's functions (`__nv_*`) are declared as what they are: pure, total
        functions of their arguments. The backend optimises a kernel before it inlines them
        (backends/nvptx.py, `compile_ptx`), and LLVM may then hoist a call out of a loop,
        merge two calls with the same argument or drop an unused one, as it would their
        inlined bodies. (llvmlite knows no `memory(none)`: added to the underlying set,
        printed as written.)"""
        func = super().math_function(module, fn, ty, nargs, vectorizable)
        if func.name.startswith("__nv_"):
            for attr in ("memory(none)", "nounwind", "speculatable", "willreturn"):
                set.add(func.attributes, attr)
        return func


@frozen
class AmdgpuTarget(Target):
    """AMDGPU (amdgcn-amd-amdhsa). The IR does not depend on the gfx target: the wavefront
    size is read from `llvm.amdgcn.wavefrontsize` (a constant once the gfx target is known,
    64 on gfx9, 32 on gfx10+ by default) and the block size from the dispatch packet."""
    kernel_cc: str = "amdgpu_kernel"
    own_math: bool = False
    warp_sizes: tuple[int, ...] = (32, 64)
    max_param_slots: int = 500
    printer: str = ""

    def mark_kernel(self, fn: ir.Function) -> None:
        super().mark_kernel(fn)
        # the block sizes the launch path may use (llvmlite knows no string attributes:
        # added to the underlying set, printed as written)
        set.add(fn.attributes, f'"amdgpu-flat-work-group-size"="1,{MAX_BLOCK}"')

    def _read(self, module: ir.Module, b: ir.IRBuilder, name: str) -> ir.Value:
        return b.call(declare(module, f"llvm.amdgcn.{name}", I32), [])

    def thread_in_block(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._read(module, b, "workitem.id.x")

    def block_index(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._read(module, b, "workgroup.id.x")

    def block_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        # hsa_kernel_dispatch_packet_t.workgroup_size_x: a u16 at byte 4 of the packet
        packet_ty = ir.IntType(8).as_pointer(4)
        packet = b.call(declare(module, "llvm.amdgcn.dispatch.ptr", packet_ty), [])
        field = b.bitcast(b.gep(packet, [ir.Constant(I32, 4)]), ir.IntType(16).as_pointer(4))
        size = b.load(field)
        size.set_metadata("invariant.load", module.add_metadata([]))
        return b.zext(size, I32)

    def warp_size(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        return self._read(module, b, "wavefrontsize")

    def shuffle_down(self, module: ir.Module, b: ir.IRBuilder, v: ir.Value, delta: int,
                     lane: ir.Value) -> ir.Value:
        permute = declare(module, "llvm.amdgcn.ds.bpermute", I32, (I32, I32))
        source = b.shl(b.add(lane, ir.Constant(I32, delta)), ir.Constant(I32, 2))
        return b.call(permute, [source, v])

    def barrier(self, module: ir.Module, b: ir.IRBuilder) -> None:
        b.fence("release", "workgroup")
        b.call(declare(module, "llvm.amdgcn.s.barrier", ir.VoidType()), [])
        b.fence("acquire", "workgroup")

    def lane_id(self, module: ir.Module, b: ir.IRBuilder) -> ir.Value:
        lo = declare(module, "llvm.amdgcn.mbcnt.lo", I32, (I32, I32))
        hi = declare(module, "llvm.amdgcn.mbcnt.hi", I32, (I32, I32))
        ones = ir.Constant(I32, -1)
        return b.call(hi, [ones, b.call(lo, [ones, ir.Constant(I32, 0)])])

    def shuffle(self, module: ir.Module, b: ir.IRBuilder, mode: str, v: ir.Value,
                x: ir.Value) -> ir.Value:
        # ds_bpermute reads lane (address / 4) of the whole wavefront (wave64 too); a source
        # past either end of the wavefront is the lane itself, as on NVPTX
        lane = self.lane_id(module, b)
        source = x if mode == "idx" else b.sub(lane, x) if mode == "up" else b.add(lane, x)
        if mode != "idx":
            inside = b.icmp_unsigned("<", source, self.warp_size(module, b))
            source = b.select(inside, source, lane)
        permute = declare(module, "llvm.amdgcn.ds.bpermute", I32, (I32, I32))
        return b.call(permute, [b.shl(source, ir.Constant(I32, 2)), v])

    def ballot(self, module: ir.Module, b: ir.IRBuilder, p: ir.Value) -> ir.Value:
        i64 = ir.IntType(64)
        return b.call(declare(module, "llvm.amdgcn.ballot.i64", i64, (ir.IntType(1),)), [p])

    def warp_barrier(self, module: ir.Module, b: ir.IRBuilder, mask: ir.Value) -> None:
        b.call(declare(module, "llvm.amdgcn.wave.barrier", ir.VoidType()), [])

    def fence(self, module: ir.Module, b: ir.IRBuilder, scope: str) -> None:
        b.fence("seq_cst", "workgroup" if scope == "block" else "agent")

    def alloca(self, builder: ir.IRBuilder, ty: ir.Type, name: str) -> ir.Value:
        instr = _PrivateAlloca(builder.block, ty, name)
        builder._insert(instr)
        return builder.addrspacecast(instr, ty.as_pointer())

    def math_function(self, module: ir.Module, fn: str, ty: ir.Type, nargs: int,
                      vectorizable: bool = True) -> ir.Function:
        """sqrt, floor, ceil, abs, round are instructions; the transcendentals come from jitrt's
        portable math (LLVM cannot lower them for AMDGPU, and ROCm's device libraries are
        not on every machine that builds code objects)."""
        if fn in INSTRUCTIONS:
            return super().math_function(module, fn, ty, nargs)
        from . import portable_math       # (AMDGPU only: the CPU never loads it)
        return portable_math.define(module, fn, ty)
