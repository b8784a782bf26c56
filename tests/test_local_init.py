"""Locals assigned before any read get no zero store in the function's first block
(codegen/local_init.py); every other local keeps it, so no read sees an undefined value.
(A kernel's own locals are always assigned before they are read: the frontend refuses a read
that may come first. The locals the passes make, autodiff's among them, are not checked
there: this analysis keeps the zero of any it cannot prove assigned.)"""
import numpy as np
import pytest

import jitrt as jr
from jitrt import dtypes
from jitrt.codegen.local_init import assigned_before_read, entry_body
from jitrt.ir import nodes as n

nd = jr.types.ndarray
INT = dtypes.i32


def local(name):
    return n.Local(name, INT)


def assign(name, value=None):
    return n.Assign(name, value if value is not None else n.Const(1, INT))


def plus(name):
    return n.Binary("+", local(name), n.Const(1, INT), INT)


def test_straight_line_locals_need_no_zero():
    body = (assign("a"), assign("b", plus("a")), n.Eval(local("b")))
    assert assigned_before_read(body) == {"a", "b"}


def test_a_read_before_the_assignment_keeps_the_zero():
    body = (assign("b", plus("a")), assign("a"))
    assert assigned_before_read(body) == {"b"}


def test_an_if_assigns_surely_only_on_both_branches():
    both = n.If(n.Const(True, INT), (assign("x"),), (assign("x"), assign("y")))
    body = (both, n.Eval(local("x")), n.Eval(local("y")))
    assert assigned_before_read(body) == {"x"}


def test_a_loop_may_run_again_or_not_at_all():
    carried = n.For("i", n.Const(0, INT), n.Const(4, INT),
                    (n.If(n.Binary(">", local("i"), n.Const(0, INT), INT),
                          (n.Eval(local("prev")),), ()),
                     assign("prev", local("i")), assign("t"), n.Eval(local("t"))))
    after = (carried, n.Eval(local("i")))
    # prev: read in a later iteration before this one assigns it; i: read after zero trips
    assert assigned_before_read(after) == {"t"}
    loop = n.While(n.Binary("<", local("w"), n.Const(3, INT), INT),
                   (assign("w", plus("w")), assign("u")))
    assert assigned_before_read((loop, n.Eval(local("u")))) == set()


def test_the_cpu_entry_reads_a_parallel_tasks_box_and_captures():
    serial = n.Task("serial", (n.If(n.Const(True, INT), (assign("m"),), ()),
                               assign("k")))
    parallel = n.Task("parallel", (), vars=("j",), begins=(n.Const(0, INT),),
                      ends=(local("m"),), captures=(("k", INT),))
    later = n.Task("serial", (assign("z", plus("k")),))
    assert assigned_before_read(entry_body([serial, parallel, later])) == {"k", "z"}


@pytest.mark.cpu_only
def test_assigned_locals_get_no_store_in_the_first_block():
    @jr.kernel
    def chain(x: nd(dtype=jr.f32, ndim=1)):
        for i in x:
            a = x[i] * 2.0
            b = a + 1.0
            c = b * a
            x[i] = c
    jr.init(arch=jr.cpu, offline_cache=False)
    from jitrt.backends import cpu
    from test_codegen_targets import module_text_for
    text = module_text_for(chain, cpu.codegen_target(), np.ones(4, np.float32))
    task = text.split("_task0")[1]
    first = task.split("allocas:")[1].split("start:")[0]
    assert '%"a"' in first and '%"c"' in first                # their slots are there ...
    assert "store float 0x0" not in first                      # ... with no zero stored
    assert 'store i64 0, i64* %"$index"' in first              # (codegen's own keep it)
