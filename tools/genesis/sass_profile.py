"""Summarise the per-instruction reports `NCU=REGEX bash tools/genesis/gpu.sh run ...` writes
(`<log>.sass.csv`: Nsight Compute's source page, one row per SASS instruction).

    python3 tools/genesis/sass_profile.py A.sass.csv [B.sass.csv ...]
    python3 tools/genesis/sass_profile.py --hot COUNT A.sass.csv    # the instructions run
                                                                    # COUNT times, in order

For each report: the warp instructions executed, by opcode; the stall samples, by opcode;
and the code grouped by how often each instruction ran (a loop body's instructions share
their count), with the share of executed instructions and of stall samples of each group,
which is where a kernel's time goes when it waits on memory.
"""
from __future__ import annotations

import argparse
import collections
import csv


def rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    header = table[1]                 # (row 0 names the kernel)
    return [dict(zip(header, r)) for r in table[2:] if len(r) >= len(header)]


def number(text: str) -> int:
    return int(text.replace(",", "") or 0)


def opcode(source: str) -> str:
    words = [w for w in source.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else "?"


def summary(path: str, top: int = 12) -> None:
    table = rows(path)
    executed = [number(r["Instructions Executed"]) for r in table]
    samples = [number(r["Warp Stall Sampling (All Samples)"]) for r in table]
    total, sampled = sum(executed) or 1, sum(samples) or 1
    by_op: collections.Counter[str] = collections.Counter()
    stalled: collections.Counter[str] = collections.Counter()
    for r, e, s in zip(table, executed, samples):
        by_op[opcode(r["Source"])] += e
        stalled[opcode(r["Source"])] += s
    print(f"{path}: {len(table)} instructions, {total:,} executed, {sampled:,} stall samples")
    print("  executed by opcode:", ", ".join(f"{k} {v:,}" for k, v in by_op.most_common(top)))
    print("  samples by opcode: ", ", ".join(f"{k} {v:,}" for k, v in stalled.most_common(top)))
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for k, e in enumerate(executed):
        groups[e].append(k)
    print(f"  {'runs':>8} {'instrs':>6} {'executed':>9} {'samples':>8}")
    def weight(group: tuple[int, list[int]]) -> int:
        return -sum(samples[k] for k in group[1])
    for count, members in sorted(groups.items(), key=weight)[:top]:
        got = sum(samples[k] for k in members)
        print(f"  {count:>8} {len(members):>6} {100 * count * len(members) / total:>8.1f}% "
              f"{100 * got / sampled:>7.1f}%")


def hot(path: str, count: int) -> None:
    for k, r in enumerate(rows(path)):
        if number(r["Instructions Executed"]) == count:
            print(f"{k:5d} {number(r['Warp Stall Sampling (All Samples)']):5d} "
                  f"{r['Source'].strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--hot", type=int, default=None, help="list the instructions run "
                        "this many times (a loop body), with their stall samples")
    args = parser.parse_args()
    for path in args.reports:
        if args.hot is None:
            summary(path)
        else:
            hot(path, args.hot)


if __name__ == "__main__":
    main()
