"""What the guide promises a user sees at the prompt: floats printed from kernels as Taichi
prints them (printf's `%f`), "did you mean" for a misspelt jitrt name, readable defaults in
`help()`, and a `jr.init` docstring that names every option."""
from __future__ import annotations

import pydoc

import numpy as np
import pytest

import jitrt as jr
from jitrt.config import OPTIONS

VALUES = [1.0, -3.0, 0.0, 0.1, 0.5, 100000.0, 1234567.0, 123456.7, 1e15, 1e20,
          1.5e-7, 2.0 / 3.0, float("inf"), float("-inf")]


@jr.kernel
def show(a: jr.types.ndarray(dtype=None, ndim=1)):
    jr.loop_config(serialize=True)
    for i in range(a.shape[0]):
        print(a[i])


@pytest.mark.cpu_only          # CUDA's device printf gets the same format (test_device_print)
@pytest.mark.parametrize("dtype, spec", [(np.float64, "%.12f"), (np.float32, "%f")])
def test_kernel_print_shows_floats_as_taichi_does(dtype, spec, capfd):
    values = np.array(VALUES, dtype)
    capfd.readouterr()
    show(values)
    printed = capfd.readouterr().out.split("\n")[:-1]
    # an f32 widened to double, then printf's %f (Taichi's `print`): 0.1 shows 0.100000
    assert printed == [spec % float(v) for v in values]
    if dtype == np.float32:
        assert printed[:4] == ["1.000000", "-3.000000", "0.000000", "0.100000"]


@pytest.mark.cpu_only
def test_kernel_print_mixes_text_ints_and_floats(capfd):
    @jr.kernel
    def k(x: jr.f32, n: jr.i32):
        print("x =", x, "n =", n, jr.Vector([1.0, 2.5]), 1.5, True, f"{1.5}", sep=" ")

    capfd.readouterr()
    k(2.0, 3)
    # a number given to print itself prints as at run time (Taichi: a constant of the
    # default type), one inside an f-string as Python formats it
    assert capfd.readouterr().out == "x = 2.000000 n = 3 [1.000000, 2.500000] 1.500000 1 1.5\n"


def test_a_misspelt_name_suggests_the_closest():
    with pytest.raises(AttributeError, match=r"has no attribute 'sinn'; did you mean jitrt.sin"):
        jr.sinn  # noqa: B018
    with pytest.raises(AttributeError, match=r"did you mean jitrt.ad.Tape\?"):
        jr.ad.Tpe  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute 'zzzzqq'$"):
        jr.zzzzqq  # noqa: B018
    with pytest.raises(AttributeError, match="jitrt.GUI is not in jitrt: jitrt has no GUI"):
        jr.GUI  # noqa: B018      (the peer-names table still answers first)


def test_a_misspelt_name_in_a_kernel_suggests_the_closest():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = jr.sqrtt(a[i])

    with pytest.raises(jr.KernelCompileError, match=r"did you mean jitrt.sqrt"):
        k(np.ones(2, np.float32))


def test_help_shows_readable_defaults():
    text = pydoc.render_doc(jr.field, renderer=pydoc.plaintext)
    assert "object at 0x" not in text and "shape: 'Any' = <placed later>" in text


def test_init_docstring_names_every_option():
    doc = jr.init.__doc__ or ""
    missing = [o.name for o in OPTIONS if o.name != "arch" and f"`{o.name}`" not in doc]
    assert missing == []


def test_kernel_ir_returns_one_text_per_specialization():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=None, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = a[i] + 1

    assert jr.debug.kernel_ir(k) == ()
    k(np.zeros(2, np.float32))
    k(np.zeros(2, np.int32))
    texts = jr.debug.kernel_ir(k)
    assert isinstance(texts, tuple) and len(texts) == 2 and all(isinstance(t, str) for t in texts)
