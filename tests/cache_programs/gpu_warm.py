"""sim.py's program on the fake GPU vendor with CUDA's compile step (PTX, then ptxas), run in
fresh processes by the offline-cache tests:

    python gpu_warm.py CACHE_DIR

Prints sim.py's JSON line, then one more: the kinds of image the driver was given to load
("cubin": an ELF from ptxas, "ptx": text it would compile itself).
"""
import json
import os
import pathlib
import sys

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1])]   # tests/: the fake vendor
os.environ["FAKEGPU_SM"] = "80"
os.environ["JITRT_ARCH"] = "fakegpu"

import fakegpu_backend  # noqa: E402
import sim  # noqa: E402

from jitrt.backends import registry  # noqa: E402

registry.register(registry.Backend("fakegpu", "fakegpu_backend", stream_gpu=True,
                                   host_memory=False))
sim.main()
images = fakegpu_backend.LIB[0].images
print(json.dumps({"images": ["cubin" if i.startswith(b"\x7fELF") else "ptx" for i in images]}))
