"""Device-side loops in CUDA graphs (`jr.graph.do_while`): conditional WHILE nodes.

Stage: backend (part of `cuda.CudaDriver`, which hands its `loop_*` calls here; the layout of
launches and loops comes from `gpu_graph.GpuGraph`). Inside a stream capture, `begin` adds a
conditional WHILE node after what was captured so far and captures the loop's body into the
node's own graph on a stream of its own; `end` closes the body with a one-thread kernel
(`LOOP_SET_PTX`) that sets the loop's handle from the flag. Caches: that kernel (loaded once
per driver) and a capture stream per nesting level, both made before a capture (`prepare`:
module loads and stream creation are not allowed while a stream captures).
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cuda import CudaDriver

# `jr.graph.do_while`'s loop handle set on the device: at the end of a conditional node's body
# to (*flag != 0), the loop's test; with a null flag to 1, before a loop nested in another's
# body (a handle's default value is applied once a graph launch, not at each iteration of the
# loop around it)
LOOP_SET_PTX = """
.version 8.0
.target sm_SM
.address_size 64
.extern .func cudaGraphSetConditional
(
    .param .b64 handle,
    .param .b32 value
)
;
.visible .entry jitrt_loop_set(.param .u64 flag, .param .u64 handle)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<3>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [handle];
    mov.u32 %r2, 1;
    setp.eq.u64 %p1, %rd1, 0;
    @%p1 bra SET;
    cvta.to.global.u64 %rd3, %rd1;
    ld.volatile.global.u32 %r1, [%rd3];
    setp.ne.s32 %p2, %r1, 0;
    selp.u32 %r2, 1, 0, %p2;
SET:
    {
    .param .b64 param0;
    st.param.b64 [param0], %rd2;
    .param .b32 param1;
    st.param.b32 [param1], %r2;
    call.uni cudaGraphSetConditional, (param0, param1);
    }
    ret;
}
"""


class GraphLoops:
    """A CUDA driver's graph loops: the setter kernel, the capture streams, the nesting level
    of the loop being captured."""

    def __init__(self, driver: "CudaDriver") -> None:
        self.driver = driver
        self._setter: Any = None
        self._streams: list[Any] = []
        self._level = 0

    def prepare(self, depth: int) -> None:
        """Before a capture with loops nested `depth` deep: the setter kernel loaded and a
        stream per level made."""
        d = self.driver
        self._set_kernel()
        while len(self._streams) < depth:
            self._streams.append(d.checked("cuStreamCreate", d.api.stream_flags(d.lib)))

    def begin(self) -> tuple[Any, Any, Any]:
        """Inside a capture on the driver's current stream: a conditional WHILE node after
        what was captured so far, whose handle starts at 1 at each launch (a do-while: the
        body runs once before the test); the node's body graph is captured from here on, on
        a stream of its own (`prepare`'s), which becomes the current stream. Returns what
        `end` needs."""
        d = self.driver
        cu = d.lib
        capture = d.check(cu.cuStreamGetCaptureInfo(d.cur[0]), "cuStreamGetCaptureInfo")
        graph = capture[2]
        handle = d.checked("cuGraphConditionalHandleCreate", graph, d.context, 1,
                           cu.CU_GRAPH_COND_ASSIGN_DEFAULT)
        if self._level:        # inside another loop's body: 1 again at each iteration
            self._launch_set(0, int(handle))        # (the node then follows this launch)
            capture = d.check(cu.cuStreamGetCaptureInfo(d.cur[0]), "cuStreamGetCaptureInfo")
        deps, edges = list(capture[3]), capture[4]
        params = cu.CUgraphNodeParams()
        params.type = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = handle
        params.conditional.type = cu.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
        params.conditional.size = 1
        params.conditional.ctx = d.context
        try:        # cuda-bindings 13: edge data beside the dependencies; 12: none
            node = d.checked("cuGraphAddNode", graph, deps, edges or None, len(deps), params)
        except TypeError:
            node = d.checked("cuGraphAddNode", graph, deps, len(deps), params)
        flags = cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
        try:
            d.checked("cuStreamUpdateCaptureDependencies", d.cur[0], [node], None, 1, flags)
        except TypeError:
            d.checked("cuStreamUpdateCaptureDependencies", d.cur[0], [node], 1, flags)
        body = self._streams[self._level]
        self._level += 1
        d.checked("cuStreamBeginCaptureToGraph", body, params.conditional.phGraph_out[0],
                  None, None, 0, d.api.capture_mode(cu))
        outer = d.cur[0]
        d.cur[0] = body
        return handle, body, outer

    def end(self, state: tuple[Any, Any, Any], flag_ptr: int) -> None:
        """The end of a `begin` body: a one-thread kernel reads the 4-byte flag at
        `flag_ptr` and sets the loop's handle to (flag != 0); the body's capture ends and
        the outer stream is current again."""
        d = self.driver
        handle, body, outer = state
        try:
            self._launch_set(flag_ptr, int(handle))
        finally:
            d.cur[0] = outer
            self._level -= 1
            d.check(d.lib.cuStreamEndCapture(body), "cuStreamEndCapture (loop body)")

    def close(self) -> None:
        for stream in self._streams:
            self.driver.call(self.driver.api.stream_destroy, stream)
        self._streams.clear()
        self._setter = None           # (its module goes with the driver's others)

    def _set_kernel(self) -> Any:
        """The loop handle's setter (`LOOP_SET_PTX`: a call of the device runtime's
        `cudaGraphSetConditional`, which ptxas and the driver resolve themselves)."""
        d = self.driver
        found = self._setter
        if found is None:
            ptx = LOOP_SET_PTX.replace("sm_SM", f"sm_{d.sm}")
            found = self._setter = d.load_ptx_function(ptx, "jitrt_loop_set")
        return found

    def _launch_set(self, flag_ptr: int, handle: int) -> None:
        """One thread of `jitrt_loop_set` on the current stream: the handle set to
        (*flag_ptr != 0), or to 1 where `flag_ptr` is 0."""
        values = (ctypes.c_uint64 * 2)(flag_ptr, handle)
        base = ctypes.addressof(values)
        params = (ctypes.c_void_p * 2)(base, base + 8)
        self.driver.launch(self._set_kernel(), 1, 1, ctypes.addressof(params))
