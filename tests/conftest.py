"""Shared test set-up: every test runs against a fresh CPU program without the disk cache.

`jr.init` is cheap (the worker pool and the loaded native code are kept process-wide), so it
runs before every test: kernels defined at module level recompile in each test that uses them,
and counters from one test never leak into another.
"""
from __future__ import annotations

import numpy as np
import pytest

import jitrt as jr


@pytest.fixture(autouse=True)
def fresh_program():
    program = jr.init(arch=jr.cpu, offline_cache=False)
    yield program
    jr.reset()


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded by the test's name: random inputs that are stable between runs."""
    seed = sum(ord(c) * (k + 1) for k, c in enumerate(request.node.name))
    return np.random.default_rng(seed)
