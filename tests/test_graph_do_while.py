"""`while jr.graph.do_while(flag):` in a `@jr.kernel(graph=True)` kernel (Quadrants' device-side
loop over a kernel's tasks), run as a host-side do-while over the kernel's parts."""
import numpy as np
import pytest

import jitrt as jr


def test_do_while_repeats_until_the_flag_is_zero(arch):
    x = jr.field(jr.i32, shape=8)

    @jr.kernel(graph=True)
    def count(flag: jr.types.ndarray(jr.i32, ndim=0), out: jr.types.ndarray(jr.i32, ndim=1)):
        for i in range(8):                       # once, before the loop
            x[i] = 0
        while jr.graph.do_while(flag):
            for i in range(8):
                x[i] += i
            for _ in range(1):
                flag[()] = max(flag[()] - 1, 0)
        for i in range(8):                       # once, after it
            out[i] = x[i] * 10

    flag = jr.ndarray(jr.i32, shape=())
    flag[()] = 3
    out = jr.ndarray(jr.i32, shape=8)
    count(flag, out)
    assert flag[()] == 0
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 3 * 10)
    flag[()] = 0                                 # a do-while: the body runs once even so
    count(flag, out)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 10)
    assert flag[()] == 0


def nested_loops(total):
    """A graph kernel with a do_while loop nested in another: `total` counts the runs of the
    inner body (n for each outer iteration)."""
    @jr.kernel(graph=True)
    def nested(outer: jr.types.ndarray(jr.i32, ndim=0), inner: jr.types.ndarray(jr.i32, ndim=0),
               n: jr.i32):
        total[None] = 0
        while jr.graph.do_while(outer):
            inner[()] = n
            while jr.graph.do_while(inner):
                total[None] += 1
                inner[()] -= 1
            outer[()] -= 1

    return nested


def test_nested_do_while_and_numpy_flags(arch):
    total = jr.field(jr.i32, shape=())
    nested = nested_loops(total)

    outer = jr.ndarray(jr.i32, shape=())
    inner = jr.ndarray(jr.i32, shape=())
    outer[()] = 4
    nested(outer, inner, 5)
    assert total[None] == 20
    assert outer[()] == 0 and inner[()] == 0


def test_do_while_refusals(arch):
    with pytest.raises(jr.KernelSyntaxError, match="assigned in another part"):
        @jr.kernel(graph=True)
        def crosses(flag: jr.types.ndarray(jr.i32, ndim=0)):
            s = 1
            while jr.graph.do_while(flag):
                flag[()] = s - 1

    with pytest.raises(jr.KernelSyntaxError, match="name of a 0-d i32 ndarray parameter"):
        @jr.kernel(graph=True)
        def not_a_param(flag: jr.types.ndarray(jr.i32, ndim=0)):
            while jr.graph.do_while(flag[()]):
                flag[()] = 0

    @jr.kernel
    def nested_in_for(flag: jr.types.ndarray(jr.i32, ndim=0)):
        for i in range(2):
            while jr.graph.do_while(flag):
                flag[()] = 0

    flag = jr.ndarray(jr.i32, shape=())
    with pytest.raises(jr.KernelCompileError, match="top level of a @jr.kernel"):
        nested_in_for(flag)


def test_repeated_calls_loop_on_the_device_where_graphs_hold_loops(arch):
    """A second call with the same arguments replays one device graph where the device
    builds loops (CUDA's conditional nodes: the flag is tested on the device, no read on the
    host); elsewhere the host loop runs again. Either way each call loops as its flags say,
    nested loops included, with the flags set from the host between calls."""
    total = jr.field(jr.i32, shape=())
    nested = nested_loops(total)

    outer, inner = jr.ndarray(jr.i32, shape=()), jr.ndarray(jr.i32, shape=())
    before = jr.debug.stats().get("graph_replays", 0)
    for k in (4, 2, 7, 1):
        outer[()] = k
        nested(outer, inner, 3)
        assert total[None] == 3 * k and outer[()] == 0 and inner[()] == 0
    outer[()] = 2
    nested(outer, inner, 5)                  # another n: recorded again, then replayed
    assert total[None] == 10
    outer[()] = 3
    nested(outer, inner, 5)
    assert total[None] == 15
    replays = jr.debug.stats().get("graph_replays", 0) - before
    program = jr.runtime.program.current()
    assert replays == (4 if program.device.graph_loops else 0)


def test_the_graph_of_a_do_while_kernel_on_a_driver_with_graph_loops(fakegpu_program,
                                                                      monkeypatch):
    """What a driver that builds graph loops is asked (the fake vendor made to say it does,
    its loop calls logged): the first call runs the host loop and records; the second, same
    arguments, is one graph launch whose capture holds the part before the loop, the
    loop's body between `loop_begin` and `loop_end` (with the flag's device address), and
    the part after it."""
    lib, program = fakegpu_program
    driver = program.device.driver
    calls: list[tuple] = []
    monkeypatch.setattr(type(driver), "graph_loops", property(lambda self: True))
    monkeypatch.setattr(type(driver), "loop_prepare",
                        lambda self, depth: calls.append(("prepare", depth)))
    def begin(self):
        calls.append(("begin",))
        lib.log.append(("loop_begin", ()))
        return None, None, None

    def end(self, state, ptr):
        calls.append(("end", ptr))
        lib.log.append(("loop_end", ()))
    monkeypatch.setattr(type(driver), "loop_begin", begin)
    monkeypatch.setattr(type(driver), "loop_end", end)
    x = jr.field(jr.i32, shape=4)

    @jr.kernel(graph=True)
    def count(flag: jr.types.ndarray(jr.i32, ndim=0)):
        for i in range(4):
            x[i] = 0
        while jr.graph.do_while(flag):
            for i in range(4):
                x[i] += 1
        for i in range(4):
            x[i] *= 2

    flag = jr.ndarray(jr.i32, shape=())
    flag[()] = 0                       # (the fake runs no kernel: the flag stays 0)
    count(flag)
    assert calls == [("prepare", 1), ("begin",), ("end", program.device.data_ptr(flag))]
    log_start = len(lib.log)
    count(flag)                        # the same arguments: the graph
    names = [name for name, _ in lib.log[log_start:]]
    assert names.count("fgGraphLaunch") == 1 and "fgLaunchKernel" not in names
    captured = [name for name, _ in lib.log if name in (
        "fgStreamBeginCapture", "fgLaunchKernel", "fgStreamEndCapture", "loop_begin",
        "loop_end")]
    start = len(captured) - 1 - captured[::-1].index("fgStreamBeginCapture")
    assert captured[start:] == ["fgStreamBeginCapture", "fgLaunchKernel", "loop_begin",
                                "fgLaunchKernel", "loop_end", "fgLaunchKernel",
                                "fgStreamEndCapture"]


def test_cuda_graph_loops_capture_nested_bodies_in_order():
    """backends/cuda_loops.GraphLoops over a stand-in for the CUDA driver (its calls run only
    on a GPU otherwise): each loop is a conditional node after what was captured so far, its
    body captured on the stream of its nesting level; a nested loop sets its handle to 1 at
    its entry (the setter launched with a null flag), each body ends with the setter reading
    its flag, and the outer stream is current again after each end."""
    from unittest import mock

    from jitrt.backends.cuda_loops import GraphLoops
    driver = mock.MagicMock()
    driver.cur, driver.sm = ["outer stream"], 90
    driver.check.side_effect = lambda result, what: result
    driver.lib.cuStreamGetCaptureInfo.return_value = (0, 1, "graph", ["dep"], None, 1)
    made = iter(["level 0", "level 1"])
    handles = iter([11, 22])
    driver.checked.side_effect = lambda name, *args: {
        "cuStreamCreate": lambda: next(made),
        "cuGraphConditionalHandleCreate": lambda: next(handles),
        "cuGraphAddNode": lambda: "node"}.get(name, lambda: None)()
    launched: list[tuple[int, int]] = []

    def launch(function, grid, block, params):
        import ctypes
        words = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        launched.append(tuple(ctypes.c_uint64.from_address(words[i]).value for i in range(2)))
    driver.launch.side_effect = launch
    loops = GraphLoops(driver)
    loops.prepare(2)
    outer = loops.begin()
    assert driver.cur == ["level 0"]
    inner = loops.begin()
    assert driver.cur == ["level 1"] and launched == [(0, 22)]     # the inner handle set to 1
    loops.end(inner, 0x1000)
    assert driver.cur == ["level 0"] and launched[-1] == (0x1000, 22)
    loops.end(outer, 0x2000)
    assert driver.cur == ["outer stream"] and launched[-1] == (0x2000, 11)
    names = [c.args[0] for c in driver.checked.call_args_list]
    assert names == ["cuStreamCreate", "cuStreamCreate"] + [
        "cuGraphConditionalHandleCreate", "cuGraphAddNode", "cuStreamUpdateCaptureDependencies",
        "cuStreamBeginCaptureToGraph"] * 2
    assert [c.args[0] for c in driver.lib.cuStreamEndCapture.call_args_list] == [
        "level 1", "level 0"]
    assert driver.load_ptx_function.call_count == 1       # the setter loaded once
