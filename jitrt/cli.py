"""The `jitrt` command line: `python -m jitrt demo|bench|cache ...`.

Stage: tooling (outside the compile pipeline). `main(argv)` parses the arguments with argparse
and returns the process exit status; it is also the `jitrt` console script. Each subcommand is
one `add_<name>(subparsers)` function that declares its arguments and sets `handler`, a
function `(args) -> int`. The demo and the benchmark are imported inside their handlers (they
define kernels at import time).

The `cache` group (`info`, `list`, `clear`, `verify`) is declared here in full, so its
interface is fixed, but its implementation belongs to the offline cache: when a module
`jitrt.cache.cli` exists, every cache action calls its `run(args) -> int` (the namespace has
`cache_action` and the options below). Until then each action prints "offline cache: not
available in this version" and exits with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE = 0, 1, 2
CACHE_ACTIONS = {
    "info": "show the cache directory, format version, entry count and size",
    "list": "list the cached kernels",
    "clear": "delete every cached kernel",
    "verify": "check every entry's checksum and format version",
    "finish": "compile the optimised copies of kernels cached as quick copies (processes "
              "that ended before them)",
}
CACHE_PLUGIN = "jitrt.cache.cli"


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


# ---- demo ------------------------------------------------------------------------------------

def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the physics demo (particles on a bumpy floor)",
                       description="Simulate particles falling onto a bumpy floor with jitrt "
                       "kernels, print energies and timings, and check the result against "
                       "numpy (exit status 1 if they disagree).")
    p.add_argument("--particles", type=positive_int, default=4096, help="default: 4096")
    p.add_argument("--steps", type=positive_int, default=300, help="default: 300 (at least 2)")
    p.add_argument("--arch", default="cpu", help="default: cpu")
    p.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from . import demo
    return demo.main(particles=args.particles, steps=max(args.steps, 2), arch=args.arch)


# ---- bench -----------------------------------------------------------------------------------

def add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure the host overhead of a kernel launch",
                       description="Time launches of small kernels (1 array; 4 arrays + 2 "
                       "scalars) with jitrt ndarrays, numpy arrays and bound launches, against "
                       "an empty ctypes call.")
    p.add_argument("--launches", type=positive_int, default=20000,
                   help="launches per timed run (default: 20000)")
    p.add_argument("--repeats", type=positive_int, default=5,
                   help="timed runs per case; the median is reported (default: 5)")
    p.add_argument("--arch", default="cpu", help="default: cpu")
    p.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    from . import bench
    return bench.main(launches=args.launches, repeats=args.repeats, arch=args.arch)


# ---- cache (implemented by the offline cache; a stub until it lands) ---------------------------

def add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="inspect or clear the offline kernel cache",
                       description="Inspect or clear the offline kernel cache.")
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    for action, text in CACHE_ACTIONS.items():
        ap = actions.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        ap.add_argument("--dir", dest="cache_dir", default=None,
                        help="cache directory (default: as jr.init would choose: "
                        "JITRT_OFFLINE_CACHE_DIR, JITRT_CACHE_DIR, then the XDG cache dir)")
        if action == "clear":
            ap.add_argument("-y", "--yes", action="store_true", help="do not ask to confirm")
        if action == "finish":
            ap.add_argument("--keys", default=None, help="only these entries (comma-separated "
                            "keys; what a process that ended before them starts this with)")
            ap.add_argument("--background", action="store_true", help="at a lower priority, "
                            "skipping entries another finishing process holds")
        ap.set_defaults(handler=run_cache)


def cache_plugin() -> Callable[[argparse.Namespace], int] | None:
    """The offline cache's `run(args)`, or None while `jitrt.cache.cli` does not exist."""
    try:
        spec = importlib.util.find_spec(CACHE_PLUGIN)
    except ModuleNotFoundError:   # the parent package jitrt.cache does not exist either
        spec = None
    if spec is None:
        return None
    return importlib.import_module(CACHE_PLUGIN).run


def run_cache(args: argparse.Namespace) -> int:
    plugin = cache_plugin()
    if plugin is None:
        print("offline cache: not available in this version")
        return EXIT_UNAVAILABLE
    return plugin(args)


# ---- entry point -----------------------------------------------------------------------------

SUBCOMMANDS = (add_demo, add_bench, add_cache)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(prog="jitrt", description="jitrt: a JIT kernel runtime "
                                     "for Python built on llvmlite.")
    parser.add_argument("--version", action="version", version=f"jitrt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed check, 2 usage/unavailable)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:   # output piped into a reader that stopped early (`| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
