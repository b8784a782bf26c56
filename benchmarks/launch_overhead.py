"""Launch-overhead benchmark: a thin script over `jitrt.bench` (same as `python -m jitrt bench`).

    python benchmarks/launch_overhead.py [--launches 20000] [--repeats 5]

Prints a table of microseconds per launch for a 1-array kernel (L0) and a 4-array + 2-scalar
kernel (L1), with jitrt ndarrays, numpy arrays and bound launches, against an empty ctypes call.
"""
from __future__ import annotations

import os
import sys

try:
    import jitrt  # noqa: F401
except ImportError:  # run from a source checkout without installing: use the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jitrt.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
