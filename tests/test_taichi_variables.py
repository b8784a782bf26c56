"""Taichi's `TI_<NAME>` environment variables set the jitrt option of that name where
`JITRT_<NAME>` is not set (a Taichi user's environment means the same to a ported program)."""
import pytest

import jitrt as jr
from jitrt.config import resolve


def test_a_ti_variable_sets_the_option_and_jitrts_own_wins(monkeypatch):
    for name in ("JITRT_DEBUG", "TI_DEBUG", "JITRT_FAST_MATH", "TI_FAST_MATH"):
        monkeypatch.delenv(name, raising=False)
    assert resolve().debug is False and resolve().fast_math is True
    monkeypatch.setenv("TI_DEBUG", "1")
    monkeypatch.setenv("TI_FAST_MATH", "0")
    assert resolve().debug is True and resolve().fast_math is False
    monkeypatch.setenv("JITRT_DEBUG", "0")
    assert resolve().debug is False
    with pytest.warns(UserWarning, match="overrides TI_FAST_MATH=0"):
        assert resolve(fast_math=True).fast_math is True   # an argument wins, as over JITRT_


def test_init_reads_ti_debug(monkeypatch):
    monkeypatch.delenv("JITRT_DEBUG", raising=False)
    monkeypatch.setenv("TI_DEBUG", "1")
    jr.init(arch=jr.cpu)
    try:
        assert jr.lang.impl.current_cfg().debug is True
    finally:
        jr.reset()
