"""The launch plan (jitrt/launch_plan.py, runtime/plan_builder.py): one frozen plan per launch
handle, built once and read by every launcher of it (Python, bound, native)."""
import dataclasses

import numpy as np
import pytest

import jitrt as jr
from jitrt.launch_plan import LaunchPlan
from test_gpu_launch_path import RecordingDriver, on_fake_device

ND = jr.types.ndarray
pytestmark = pytest.mark.cpu_only


def handle_of(kernel):
    (handle,) = kernel.handles.values()
    return handle


def test_the_plan_describes_each_parameter_as_the_launchers_pack_it():
    @jr.kernel
    def k(x: ND(dtype=jr.f32, ndim=1), y: ND(dtype=jr.f32, ndim=2), n: jr.i16,
          s: jr.types.template(), v: jr.types.vector(3, jr.i32), a: jr.f32 = 2.5):
        for i in range(x.shape[0]):
            y[i, 0] = x[i] * a + n + s + v[0]

    x, y = np.ones(4, np.float32), np.zeros((4, 2), np.float32)
    k(x, y, 3, 7, (1, 2, 3))
    plan = handle_of(k).plan
    assert isinstance(plan, LaunchPlan) and plan.nargs == 6
    assert [(p.name, p.kind) for p in plan.params] == [
        ("x", "ndarray"), ("y", "ndarray"), ("n", "scalar"), ("s", "template"),
        ("v", "vector"), ("a", "scalar")]
    px, py, pn, ps, pv, pa = plan.params
    assert (px.written, py.written) == (False, True) and plan.written == {1}
    assert (px.ndim, py.ndim, pv.element_shape) == (1, 2, (3,))
    # (an integer converts as its bit pattern in either signedness, as in Taichi)
    assert pn.int_range == (-32768, 65535) and pv.int_range == (-2**31, 2**32 - 1)
    assert pa.int_range is None and pa.has_default and pa.default == 2.5
    assert ps.template == 7 and ps.slot == -1
    layout = handle_of(k).compiled.layout
    assert [p.slot for p in plan.params] == list(layout.param_slots)
    assert plan.array_bumps == ((1, False),) and plan.field_bumps == ()
    assert plan.returns.kind == "none" and plan.faults_in_context and not plan.adstacks
    np.testing.assert_allclose(y[:, 0], 2.5 + 3 + 7 + 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.nargs = 1     # read by every launcher: never changed after it is built


def test_every_launcher_of_a_handle_reads_its_one_plan():
    @jr.kernel
    def total(x: ND(dtype=jr.f64, ndim=1)) -> jr.f64:
        s: jr.f64 = 0.0
        for i in range(x.shape[0]):
            s += x[i]
        return s

    x = jr.ndarray(jr.f64, 5)
    x.from_numpy(np.arange(5.0))
    assert total(x) == 10.0
    handle = handle_of(total)
    bound = total.bind(x)
    assert bound.plan is handle.plan and bound() == 10.0
    assert handle.plan.returns.kind == "float"
    assert total(x) == 10.0 and handle_of(total).plan is handle.plan   # built once


def test_vector_and_unsigned_returns_are_planned():
    @jr.kernel
    def vec() -> jr.types.vector(2, jr.f32):
        return jr.Vector([1.0, 2.0])

    @jr.kernel
    def big() -> jr.u8:
        return 255

    np.testing.assert_allclose(vec(), [1.0, 2.0])
    assert big() == 255
    assert handle_of(vec).plan.returns.kind == "field"
    ret = handle_of(big).plan.returns
    assert (ret.kind, ret.bits) == ("unsigned", 8)


def test_cpu_tasks_carry_no_boxes():
    """A fused CPU entry never reads a task's box: reading it would unpickle a stored
    kernel's IR at every warm start."""
    @jr.kernel
    def fill(y: ND(dtype=jr.f32, ndim=1)):
        for i in range(y.shape[0]):
            y[i] = 1.0

    fill(np.zeros(3, np.float32))
    tasks = handle_of(fill).plan.tasks
    assert [t.kind for t in tasks] == ["parallel"] and tasks[0].box == ()


@pytest.fixture
def fake_gpu():
    yield from on_fake_device(RecordingDriver())


def test_a_gpu_plan_has_each_task_with_its_box_and_block(fake_gpu):
    @jr.kernel
    def two(y: ND(dtype=jr.f32, ndim=1)):
        jr.loop_config(block_dim=64)
        for i in range(3, y.shape[0]):
            y[i] = 1.0
        for j in range(2):
            y[j] = 2.0

    two(jr.ndarray(jr.f32, shape=(100,)))
    tasks = handle_of(two).plan.tasks
    assert [(t.kind, t.block_dim, len(t.box)) for t in tasks] == [
        ("parallel", 64, 1), ("parallel", 0, 1)]
    (begin, end), = tasks[0].box
    assert begin.value == 3 and type(end).__name__ == "Shape"


def test_the_device_runs_a_plans_tasks_as_the_launch_does(fake_gpu):
    """`run_tasks(plan, context)` (what a device graph captures) launches the plan's tasks in
    order with the grids of the generated task loop: a box from an array's shape sizes its
    grid, a serial task is one thread."""
    @jr.kernel
    def two(y: ND(dtype=jr.f32, ndim=1)):
        jr.loop_config(block_dim=64)
        for i in range(y.shape[0]):
            y[i] = 1.0
        y[0] = 2.0

    y = jr.ndarray(jr.f32, shape=(1000,))
    two(y)
    launched = [c for c in fake_gpu.calls if c[0] == "launch"]
    handle = handle_of(two)
    assert [t.kind for t in handle.plan.tasks] == ["parallel", "serial"]
    jr.sync()
    fake_gpu.calls.clear()
    handle.program.device.run_tasks(handle.plan, handle)
    assert fake_gpu.calls == launched
    assert [c[2:] for c in launched] == [(16, 64), (1, 1)]     # 1000 points, 64 a block
