"""Shared test set-up: every test runs against a fresh CPU program without the disk cache, and
the default cache location is a temporary directory for the whole session.

`jr.init` is cheap (the worker pool and the loaded native code are kept process-wide), so it
runs before every test: kernels defined at module level recompile in each test that uses them,
and counters from one test never leak into another.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

# Never touch the user's real cache: every default location (this process and the subprocesses
# tests start, which inherit the environment) points into a directory of this session.
_SESSION_CACHE = tempfile.mkdtemp(prefix="jitrt-tests-")
os.environ["JITRT_CACHE_DIR"] = os.path.join(_SESSION_CACHE, "jitrt")
os.environ["XDG_CACHE_HOME"] = os.path.join(_SESSION_CACHE, "xdg")

import jitrt as jr  # noqa: E402  (after the cache location is set)


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
