"""Names of Taichi/Quadrants that jitrt lacks fail with advice, in Python and in kernels."""
import numpy as np
import pytest

import jitrt as jr
from jitrt.peer_names import MISSING


@pytest.mark.parametrize("name", ["SNode", "Mesh", "f16", "GUI", "cache_read_only"])
def test_a_peer_name_says_what_to_use(name):
    with pytest.raises(AttributeError, match=f"jitrt.{name} is not in jitrt: ") as info:
        getattr(jr, name)
    assert MISSING[name] in str(info.value)


def test_forward_mode_and_unknown_names():
    assert "FwdMode" not in MISSING and jr.ad.FwdMode is not None   # tests/test_forward_ad.py
    with pytest.raises(AttributeError, match="has no attribute 'nonexistent'"):
        jr.nonexistent  # noqa: B018
    assert jr.x64 == jr.cpu == jr.arm64


def test_in_kernels_the_advice_is_in_the_compile_error():
    @jr.kernel
    def k(a: jr.types.ndarray(dtype=jr.f32, ndim=1)):
        for i in range(a.shape[0]):
            jr.cache_read_only(a)
    with pytest.raises(jr.KernelCompileError, match="jitrt has no cache hint"):
        k(np.zeros(2, np.float32))
