"""What a launch handle's build leaves to the garbage collector (jitrt/long_lived.py,
`age_young`): nothing young, so no later pass of the middle generation walks a build's
objects in the middle of a program's launches."""
import textwrap

import pytest

from test_startup import UNFROZEN, run_python

pytestmark = pytest.mark.cpu_only

BUILD = textwrap.dedent("""
    import gc, json
    import jitrt as jr
    jr.init(arch=jr.cpu, offline_cache=False)
    a = jr.ndarray(jr.f32, 8)
    young = []
    for k in range(3):
        @jr.kernel
        def step(a: jr.types.ndarray(dtype=jr.f32, ndim=1), s: jr.f32):
            for i in range(a.shape[0]):
                v = a[i] * s + i
                if v > 3.0:
                    v = v - 1.0
                a[i] = v
        step(a, 1.0 + k)                       # compiles: the handle's build
        young.append(len(gc.get_objects(1)))
    cycle = []
    cycle.append(cycle)                        # a cycle of the program's, young
    step(a, 2.0)                               # the steady state: nothing is aged
    print(json.dumps({"young": young, "cycle_young": any(o is cycle
                                                          for o in gc.get_objects(0))}))
""")


def test_a_build_leaves_nothing_in_the_middle_generation(tmp_path):
    got = run_python(UNFROZEN + BUILD, script=tmp_path / "build.py")
    assert got["young"] == [0, 0, 0], got
    assert got["cycle_young"] is True
