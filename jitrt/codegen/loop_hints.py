"""Loop metadata for LLVM's loop passes: what to leave alone in a loop whose work it cannot
speed up, so that compiling it costs less.

Stage: codegen. `mark_loop(module, back_edge, hints)` attaches `!llvm.loop` to a loop's
back-edge branch: a loop id (a node naming itself, as LLVM requires) with one entry per hint.
Used where LLVM's transforms cost compile time without a gain at run time (measured with
benchmarks/cold_pair.py; docs/performance.md, "Start-up"):
- `NO_RUNTIME_UNROLL` on a loop for which `unrolling_pointless` holds (serial loops in
  `emit_stmt.py`, a task's loop over its chunk in `kernel_module.py`): each iteration calls
  libm or runs a loop, tens of cycles or more, against one or two for the loop's own counter
  and branch, which is all that unrolling a loop of unknown trip count saves; it copies the
  body, with a remainder loop (an eighth of the adstack kernel pair's compile). LLVM's
  unroller counts `llvm.sin` and the like as cheap instructions, so it unrolled these; a
  constant trip count is still unrolled in full where LLVM finds that worth it, and
  vectorization and interleaving are not affected;
- `UNROLL_BY_4` on a GPU thread's innermost loop of unknown trip count that only computes
  (`loop_versions.effect_free`), or that stores and has no check left (a versioned loop's
  copy without checks; `emit_stmt.counted_loop_hints`): with its reads' checks deferred or
  proven it has one exit, and unrolled by four its iterations' reads are in flight
  together (a chain of gathers waits once per four iterations instead of once per read).
  Left to itself, LLVM unrolled such a loop in full up to the bound a check gave it, with
  an exit test between iterations, which serialised the reads (Genesis's solver,
  docs/gpu.md);
- `NO_UNROLL` on the checked copy of a versioned inner loop (`loop_versions.py`), which runs
  only where an index leaves its array: unrolled, it doubled the copies' code;
- `SCALAR` on an adstack max-reducer's loop (`sizing.py`): it runs once per launch whose
  sizing inputs changed, over one read per point, and vectorizing it (masked loads, with the
  vector and remainder copies) was a third of its gradient kernel's compile.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import nodes as n
from ..ir.walk import exprs_of, walk_expr
from .targets import INSTRUCTIONS

NO_RUNTIME_UNROLL = (("llvm.loop.unroll.runtime.disable",),)
UNROLL_BY_4 = (("llvm.loop.unroll.count", 4),)
NO_UNROLL = (("llvm.loop.unroll.disable",),)
SCALAR = (("llvm.loop.vectorize.enable", False), ("llvm.loop.unroll.disable",))


def mark_loop(module: ir.Module, back_edge: ir.Instruction,
              hints: tuple[tuple[object, ...], ...]) -> None:
    """Attach `hints` (each a name and optional i1 / i32 value) to the loop whose back edge
    is the branch `back_edge`."""
    entries = []
    for name, *value in hints:
        ops: list = [ir.MetaDataString(module, str(name))]
        for v in value:
            ops.append(ir.Constant(ir.IntType(1), v) if isinstance(v, bool)
                       else ir.Constant(ir.IntType(32), v))
        entries.append(module.add_metadata(ops))
    # a node of its own (add_metadata shares equal nodes: the marker keeps loops apart), whose
    # first operand is then made the node itself
    loop_id = module.add_metadata([ir.MetaDataString(module, f"jitrt.loop{len(module.metadata)}"),
                                   *entries])
    loop_id.operands = (loop_id, *entries)
    back_edge.set_metadata("llvm.loop", loop_id)


def unrolling_pointless(body: n.Body, math_is_libm: bool) -> bool:
    """Whether each iteration of a loop with this body runs a loop, or (`math_is_libm`: in a
    serial loop, where the CPU's math is libm's scalar functions, `targets.math_function`)
    calls libm: a transcendental function in its top-level statements' expressions. (A
    task's loop over its chunk may be vectorized, math included: there, only inner loops.)"""
    return any(isinstance(s, (n.For, n.While, n.ReverseFor)) or
               math_is_libm and any(isinstance(e, n.Math) and e.fn not in INSTRUCTIONS
                                    for root in exprs_of(s) for e in walk_expr(root))
               for s in body)
