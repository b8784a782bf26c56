"""Running an external compile tool (ptxas, ld.lld) on one file.

Stage: backend helper. `transform(command, data, suffix_in, suffix_out, what)` writes `data` to
a temporary file, runs `command + [input, "-o", output]` and returns the output file's bytes;
a failure raises RuntimeError naming `what` with the tool's message (a code generation bug,
never the user's). Caches nothing.
"""
from __future__ import annotations

import os
import subprocess
import tempfile


def transform(command: list[str], data: bytes, suffix_in: str, suffix_out: str,
              what: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="jitrt-tool-") as tmp:
        src, out = os.path.join(tmp, "k" + suffix_in), os.path.join(tmp, "k" + suffix_out)
        with open(src, "wb") as f:
            f.write(data)
        done = subprocess.run([*command, src, "-o", out], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{what}: {done.stderr.strip()[:2000]}")
        with open(out, "rb") as f:
            return f.read()
