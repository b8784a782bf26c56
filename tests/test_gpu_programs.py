"""Per-iteration work of small differentiable programs on a GPU (issue 32), counted on the
fake vendor (tests/fakegpu_lib.py): driver launches, synchronisations and copies of a
training step written as DiffTaichi's billiards, smoke and wave are (a Tape over many small
launches of a time-stepped field, the loss read at Python scope, a parameter update through
Python-scope element reads and writes, positions read element by element between launches).
Kernels do not run on the fake vendor: what is checked is the calls, which do not depend on
the values. benchmarks/gpu/programs.py --count counts the published programs themselves."""
import pytest

import jitrt as jr

pytestmark = pytest.mark.cpu_only
STEPS, BALLS = 32, 6


@pytest.fixture
def lib(fakegpu_program):
    jr.init(arch="fakegpu", offline_cache=False, enable_fallback=False, tape_graph=True)
    return fakegpu_program[0]


def make_program():
    """A billiards-shaped program: init (a parameter), STEPS advance launches, a loss."""
    x = jr.Vector.field(2, jr.f32, shape=(STEPS, BALLS), needs_grad=True)
    v = jr.Vector.field(2, jr.f32, shape=(), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def initialize():
        for i in range(BALLS):
            x[0, i] = v[None] * float(i)

    @jr.kernel
    def advance(t: jr.i32):
        for i in range(BALLS):
            x[t, i] = x[t - 1, i] * 0.99 + 0.01

    @jr.kernel
    def compute_loss():
        for i in range(BALLS):
            loss[None] += x[STEPS - 1, i].norm_sqr()

    def iteration(draw):
        with jr.ad.Tape(loss):
            initialize()
            for t in range(1, STEPS):
                advance(t)
                if draw and t % 8 == 7:      # the program draws its balls
                    for i in range(BALLS):
                        (x[t, i][0], x[t, i][1])
            compute_loss()
        value = loss[None]
        for d in range(2):
            v[None][d] -= 0.01 * v.grad[None][d]
        return value

    return iteration


def counts(lib):
    names = [c[0] for c in lib.calls]
    syncs = [n for n, _ in lib.log if n in ("fgStreamSynchronize", "fgEventSynchronize")]
    return {"launch": names.count("launch"), "graph_launch": names.count("graph_launch"),
            "d2h": names.count("d2h"), "h2d": names.count("h2d"), "syncs": len(syncs)}


def test_a_repeated_tape_step_replays_its_reverse_pass_as_one_graph(lib):
    iteration = make_program()
    for _ in range(3):               # the first records launches, the second the graph
        iteration(draw=False)
    launches, replays = jr.debug.stats()["launches"], jr.debug.stats()["graph_replays"]
    assert replays == 1                                     # the third step replayed
    lib.calls.clear()
    lib.log.clear()
    iteration(draw=False)
    # before: 1 + 31 + 1 forward launches and as many grad launches, one each; 3 waits (the
    # loss, then each component of the 0-d v.grad); now the loss and v.grad whole, each with
    # the status block in the same wait, and v's two components uploaded without waiting
    assert counts(lib) == {"launch": 33, "graph_launch": 1, "d2h": 4, "h2d": 2, "syncs": 2}
    assert jr.debug.stats()["launches"] == launches + 66    # the grads count as launched
    assert jr.debug.stats()["graph_replays"] == 2


def test_a_changed_step_launches_its_grads_again(lib):
    iteration = make_program()
    for _ in range(3):
        iteration(draw=False)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel
    def other():
        loss[None] += 1.0

    with jr.ad.Tape(loss):           # another recording: its own grads, one by one
        other()
    lib.calls.clear()
    iteration(draw=False)            # differs from the last Tape: launched one by one
    assert counts(lib)["graph_launch"] == 0 and counts(lib)["launch"] == 66


def test_the_reverse_pass_is_launched_one_by_one_by_default(fakegpu_program):
    lib = fakegpu_program[0]
    iteration = make_program()
    for _ in range(3):
        iteration(draw=False)
    lib.calls.clear()
    iteration(draw=False)
    assert counts(lib)["graph_launch"] == 0 and counts(lib)["launch"] == 66


def test_drawing_between_launches_waits_once_per_drawing(lib):
    iteration = make_program()
    for _ in range(3):
        iteration(draw=True)
    lib.calls.clear()
    lib.log.clear()
    iteration(draw=True)
    # 4 drawings of 6 balls (12 reads each): the first read moves one component, the second
    # downloads x whole (before: 12 waits per drawing, 51 in all); then the loss and v.grad
    c = counts(lib)
    assert c["syncs"] == 4 * 2 + 2 and c["graph_launch"] == 1
    x_bytes = STEPS * BALLS * 8
    assert sorted(nbytes for name, _, nbytes in
                  (call for call in lib.calls if call[0] == "d2h"))[-4:] == [x_bytes] * 4


def test_a_graph_kernel_is_one_driver_call_per_repeated_call(fakegpu_program):
    """`@jr.kernel(graph=True)` (Quadrants' option) on a GPU: the first calls launch its
    tasks (the second records them); each later call with the same arguments is one graph
    launch.
    Inside a Tape it launches as usual; a kernel whose arguments change at every call goes
    back to launching as usual after `KernelGraph.MISSES` calls."""
    from jitrt.runtime.graph import KernelGraph
    lib = fakegpu_program[0]
    x = jr.field(jr.f32, shape=(8,), needs_grad=True)
    loss = jr.field(jr.f32, shape=(), needs_grad=True)

    @jr.kernel(graph=True)
    def two(s: jr.f32):
        for i in range(8):
            x[i] = x[i] * s
        for i in range(8):
            loss[None] += x[i]

    two(2.0)             # compiles and launches
    two(2.0)             # launches, recorded
    lib.calls.clear()
    for _ in range(3):
        two(2.0)
    assert counts(lib)["launch"] == 0 and counts(lib)["graph_launch"] == 3
    lib.calls.clear()
    with jr.ad.Tape(loss):
        two(2.0)
    assert counts(lib)["graph_launch"] == 0 and counts(lib)["launch"] >= 2
    two(2.0)
    lib.calls.clear()
    for k in range(KernelGraph.MISSES + 3):
        two(float(k))
    assert counts(lib)["graph_launch"] == 0 and two.graph_launch.off
