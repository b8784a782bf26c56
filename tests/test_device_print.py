"""In-kernel `print` on CUDA, checked without a GPU: the PTX holds one format string with
Taichi's printf specifiers (`%f` for an f32, `%.12f` for an f64, `%lld` for an integer), the
same text the CPU prints (dtypes.DataType.print_spec)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jitrt as jr

pytestmark = pytest.mark.cpu_only      # PTX is built on the CPU; nothing runs on a GPU


@jr.kernel
def show(a: jr.types.ndarray(dtype=jr.f32, ndim=1), n: jr.i32, d: jr.f64):
    for i in range(a.shape[0]):
        print("v", a[i], n, a[i] * 2.0, d, "100%")


def ptx_strings(ptx: str) -> set[str]:
    """The byte-array globals of a PTX module, as text."""
    return {bytes(int(x) for x in m.group(1).split(",")).decode().rstrip("\0")
            for m in re.finditer(r"\.b8 jitrt_fmt\S*\[\d+\] = \{([\d, ]+)\}", ptx)}


def test_cuda_print_uses_taichis_specifiers():
    ptx = jr.debug.gpu_asm(show, np.ones(4, np.float32), 3, 0.5, arch="cuda")
    assert ptx_strings(ptx) == {"v %f %lld %f %.12f 100%%\n"}
    assert "vprintf" in ptx


def test_cpu_print_shows_the_same_text(capfd):
    capfd.readouterr()
    show(np.array([233.3], np.float32), 3, 0.1)
    assert capfd.readouterr().out == "v 233.300003 3 466.600006 0.100000000000 100%\n"
