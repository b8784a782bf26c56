"""One table from the result.json files of ddp_mass_spring.py runs (`--save DIR`).

    python benchmarks/scaling/summarize.py [--write ALL.json] DIR/result.json [...]

A row per run: its size, whether the averaged gradient matched one process over all
environments (and the relative difference), whether the all-reduce tensor shared jitrt's
memory, then the step times of 1 device with E and N*E environments and of N devices with E
each, the strong-scaling ratio (N devices / 1 device at N*E environments; issue 33 asks for at
most 0.6 on 2 GPUs), the weak-scaling ratio (N devices at E each / 1 device at E; at most
1.1) and the all-reduce's share of the N-device step.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

STRONG_TARGET, WEAK_TARGET = 0.6, 1.1
HEADER = ("| envs / device | steps | devices | gradient (max rel diff) | zero-copy | "
          "1 dev, E (ms) | 1 dev, N*E (ms) | N dev (ms) | strong N/1 | weak N/1 | "
          "all-reduce share |")


def row(result: dict) -> str:
    e, n = result["envs_per_device"], result["devices"]
    ms = {(r["devices"], r["envs"]): r for r in result["rows"]}
    one_e = ms.get((1, e))
    one_ne, many = (ms.get((1, n * e)), ms.get((n, n * e))) if n > 1 else (None, None)
    grad = "- (one process)" if "max_rel_diff" not in result else \
        f"{'ok' if result['gradient_ok'] else 'FAILED'} ({result['max_rel_diff']:.1e})"

    def t(r: dict | None) -> str:
        return "-" if r is None else f"{r['ms']:.2f}"

    def ratio(a: dict | None, b: dict | None, target: float) -> str:
        if a is None or b is None:
            return "-"
        q = a["ms"] / b["ms"]
        return f"{q:.2f}x ({'<=' if q <= target else 'over'} {target})"

    share = "-" if many is None or many["allreduce_share"] is None else \
        f"{100 * many['allreduce_share']:.1f}%"
    shared = "-" if result["shares_memory"] is None else str(result["shares_memory"])
    return (f"| {e} | {result['steps']} | {n} | {grad} | {shared} | "
            f"{t(one_e)} | {t(one_ne)} | {t(many)} | {ratio(many, one_ne, STRONG_TARGET)} | "
            f"{ratio(many, one_e, WEAK_TARGET)} | {share} |")


def main(argv: list[str]) -> int:
    """Print the table; `--write PATH` also writes every result as one JSON list (one file
    instead of one per run, for a folder that brings few files back)."""
    write = None
    if argv[:1] == ["--write"]:
        write, argv = Path(argv[1]), argv[2:]
    results = [json.loads(Path(p).read_text()) for p in argv]
    if write is not None:
        write.write_text(json.dumps(results, indent=1))
    if not results:
        print("no result.json to summarise (every run failed: see the logs)")
        return 1
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for result in results:
        print(row(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
