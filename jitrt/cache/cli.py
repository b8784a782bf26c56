"""`python -m jitrt cache info|list|clear|verify|finish`: the offline cache's command-line
tools.

Stage: tooling. `run(args)` is called by `jitrt/cli.py` with `args.cache_action` and
`args.cache_dir` (and `args.yes` for clear). The directory is chosen as `jr.init` would
(`--dir`, `JITRT_OFFLINE_CACHE_DIR`, `JITRT_CACHE_DIR`, `$XDG_CACHE_HOME/jitrt`,
`~/.cache/jitrt`). Exit status: 0 ok, 1 damaged entries found by verify, 2 refused (also:
the directory does not exist or is not a directory).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .. import config
from . import store as store_mod


def open_store(args: argparse.Namespace) -> store_mod.CacheStore:
    cfg = config.resolve()
    directory = store_mod.default_dir(args.cache_dir or cfg.offline_cache_dir)
    return store_mod.CacheStore(directory, cfg.offline_cache_max_bytes,
                                cfg.offline_cache_cleaning_factor)


def human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"


def age(seconds: float) -> str:
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def info(store: store_mod.CacheStore, args: argparse.Namespace) -> int:
    entries = store.entries()
    print(f"location:       {store.dir}")
    print(f"format version: {store_mod.FORMAT_VERSION}")
    print(f"entries:        {len(entries)}")
    print(f"size:           {human(sum(e.size for e in entries))} "
          f"(cap {human(store.max_bytes)})")
    return 0


def list_entries(store: store_mod.CacheStore, args: argparse.Namespace) -> int:
    entries = store.entries()
    if not entries:
        print(f"no entries in {store.dir}")
        return 0
    now = time.time()
    print(f"{'kernel':<60} {'size':>10} {'age':>6} {'last use':>9}  key")
    for e in sorted(entries, key=lambda e: e.kernel_name):
        print(f"{e.kernel_name[:60]:<60} {human(e.size):>10} {age(now - e.created):>6} "
              f"{age(now - e.last_used):>9}  {e.key}")
    return 0


def clear(store: store_mod.CacheStore, args: argparse.Namespace) -> int:
    count = len(store.entries())
    if not getattr(args, "yes", False):
        if not sys.stdin.isatty():
            print(f"refusing to delete {count} entries in {store.dir} without --yes")
            return 2
        answer = input(f"delete {count} entries in {store.dir}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 0
    removed = store.clear()
    print(f"deleted {removed} entries from {store.dir}")
    return 0


def verify(store: store_mod.CacheStore, args: argparse.Namespace) -> int:
    entries = store.entries()
    bad = store.verify()
    for path, reason in bad:
        print(f"DAMAGED {path.name}: {reason}")
    print(f"{len(entries) - len(bad)} of {len(entries)} entries OK"
          + (f", {len(bad)} damaged (they are rebuilt on next use)" if bad else ""))
    return 1 if bad else 0


def finish(store: store_mod.CacheStore, args: argparse.Namespace) -> int:
    """Compile the optimised copy of every entry that holds a quick copy with its module
    text, made for this machine (`Artifact.target`), and store it in the entry's place: what
    the process that made the entry would have stored had it lived longer. Entries of other
    machines, and quick copies without their text (the next process builds it), stay.
    `--keys`: only those entries; `--background` (what a process that dropped them at exit
    starts: `finishing.py`): at a lower priority. Each entry is compiled under its lock;
    one another finisher holds is skipped."""
    from . import finishing, keys
    done = other = no_text = 0
    host = keys.host_target()
    wanted = None if not getattr(args, "keys", None) else set(args.keys.split(","))
    if getattr(args, "background", False):
        os.nice(finishing.NICENESS)
    for e in store.entries():
        if wanted is not None and e.key not in wanted:
            continue
        with finishing.holding(store.dir, e.key) as held:
            if not held:                  # another finishing process compiles it
                continue
            artifact = store.load(e.key)
            if artifact is None or getattr(artifact, "tier", "") != "quick":
                continue
            if not artifact.optimised_text:
                no_text += 1
                continue
            if getattr(artifact, "target", "") != host:   # (entries older than the field too)
                other += 1
                continue
            start = time.perf_counter()
            store.save(e.key, artifact.name, artifact.optimised())
        done += 1
        print(f"{artifact.name[:70]}: optimised copy compiled in "
              f"{time.perf_counter() - start:.1f} s")
    print(f"{done} optimised copies compiled in {store.dir}" + (
        f"; {other} quick copies of another machine left" if other else "") + (
        f"; {no_text} quick copies without their module text left (the next process "
        "builds it)" if no_text else ""))
    return 0


ACTIONS = {"info": info, "list": list_entries, "clear": clear, "verify": verify,
           "finish": finish}


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    if not store.dir.exists():
        print(f"jitrt cache: {store.dir} does not exist (no kernel was cached there yet, or "
              "the path is wrong)", file=sys.stderr)
        return 2
    if not store.dir.is_dir():
        print(f"jitrt cache: {store.dir} is not a directory", file=sys.stderr)
        return 2
    return ACTIONS[args.cache_action](store, args)
