"""`import taichi` resolves to jitrt itself (the runner puts this directory first on the path).

Only the alias: every name a Taichi test reaches through `ti.` is jitrt's own, so the suite
measures jitrt, not a translation layer. The few `taichi.lang.*` modules Taichi's tests import
for their own harness (the host's arch list, whether torch is installed, the exception module)
come from `taichi_harness.py` beside this package.
"""
import sys

import jitrt

import taichi_harness

sys.modules["taichi"] = jitrt
taichi_harness.register_modules()
