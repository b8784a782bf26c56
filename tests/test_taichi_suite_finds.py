"""Bugs that running Taichi 1.7.4's own test suite against jitrt found (tools/taichi_suite)."""
import jitrt as jr


def test_print_in_a_versioned_field_loop(capfd):
    # the loop over a field's indices is compiled twice (checked and unchecked bodies); each
    # copy of the print used to define the same format-string global: DuplicatedNameError
    x = jr.field(jr.f32, shape=3)

    @jr.kernel
    def k(s: jr.f32):
        for i in x:
            x[i] = i * s
            print("x[", i, "]=", x[i])
    k(0.5)
    jr.sync()
    out = sorted(capfd.readouterr().out.splitlines())
    # floats print as Python does on the CPU (0.0), as %g on GPUs (0): compare the numbers
    assert [line.split("]=")[0] for line in out] == ["x[ 0 ", "x[ 1 ", "x[ 2 "]
    assert [float(line.split("]=")[1]) for line in out] == [0.0, 0.5, 1.0]
