"""Which `qd.` names of Genesis's source jitrt lacks, with the count of their uses.

    python tools/genesis/names.py GENESIS_PACKAGE_DIR [--all]

Scans every .py file under the directory for `qd.NAME` and `qd.NAME.ATTR` (Genesis says
`import quadrants as qd`), resolves each against `jitrt` (attribute by attribute) and prints
the ones that do not resolve, most used first (`--all`: every name, resolved or not). Run with
jitrt importable (PYTHONPATH=the checkout). Names reached through an object (`x.tensor(...)`)
are not seen; submodule imports (`from quadrants.lang import impl`) are listed by run.py.
"""
from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

NAME = re.compile(r"\bqd\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")


def uses(root: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in root.rglob("*.py"):
        for m in NAME.finditer(path.read_text(encoding="utf-8", errors="replace")):
            counts[m.group(1) + (f".{m.group(2)}" if m.group(2) else "")] += 1
    return counts


def resolves(module: object, dotted: str) -> bool:
    """Whether `module.dotted` exists (or, for `Vector.x`/`Matrix.x`, is one of the class
    methods the kernel frontend resolves itself: `jr.Matrix.cols([...])` in kernels)."""
    head, _, attr = dotted.partition(".")
    if head in ("Vector", "Matrix") and attr:
        from jitrt.frontend.lower_expr import CONSTRUCTORS, METHODS
        if attr in CONSTRUCTORS + METHODS:
            return True
    obj = module
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - any failure means "not there"
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    import jitrt
    counts = uses(args.root)
    missing = 0
    for name, count in counts.most_common():
        ok = resolves(jitrt, name)
        # `qd.X.attr` where X itself is missing: report X once
        if not ok and "." in name and not resolves(jitrt, name.split(".")[0]):
            name = name.split(".")[0] + ".*"
        if args.all or not ok:
            print(f"{count:6d}  {name}{'' if ok else '  MISSING'}")
        missing += 0 if ok else count
    print(f"{len(counts)} distinct names, {sum(counts.values())} uses; "
          f"{missing} uses of names jitrt lacks")


if __name__ == "__main__":
    main()
