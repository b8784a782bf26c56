"""The configuration table: every `jr.init` option, its type, default and `JITRT_<NAME>` variable.

Stage: runtime set-up. `resolve(**kwargs)` merges, in order of precedence, explicit `init`
arguments, then environment variables, then defaults, and returns a frozen `Config`. The offline
cache key derives its compile-option part from the fields marked `affects_codegen`, so adding an
option here is the only step needed for it to reach the key.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Callable

from . import dtypes


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected a boolean (1/0/true/false), got {text!r}")


def _parse_optional_int(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none") else int(text)


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    parse: Callable[[str], Any]
    affects_codegen: bool
    doc: str


OPTIONS: tuple[Option, ...] = (
    Option("arch", "cpu", str, True, "cpu | cuda | amdgpu | gpu"),
    Option("debug", False, _parse_bool, True, "extra runtime checks"),
    Option("offline_cache", True, _parse_bool, False, "use the on-disk kernel cache"),
    Option("offline_cache_dir", None, str, False,
           "cache directory (else JITRT_CACHE_DIR, else XDG)"),
    Option("offline_cache_max_bytes", 1 << 30, int, False, "disk cache size cap (LRU eviction)"),
    Option("ad_stack_size", 0, int, True, "0: size adstacks exactly; N: force every stack to N"),
    Option("default_fp", dtypes.f32, dtypes.coerce, True, "type of float literals"),
    Option("default_ip", dtypes.i32, dtypes.coerce, True, "type of int literals"),
    Option("num_threads", None, _parse_optional_int, False, "CPU worker threads (None: all cores)"),
    Option("parallel_grain", 8192, int, False,
           "estimated work (~simple ops) below which a parallel loop runs on the calling thread"),
)
OPTION_BY_NAME = {opt.name: opt for opt in OPTIONS}


@dataclass(frozen=True)
class Config:
    arch: str
    debug: bool
    offline_cache: bool
    offline_cache_dir: str | None
    offline_cache_max_bytes: int
    ad_stack_size: int
    default_fp: dtypes.DataType
    default_ip: dtypes.DataType
    num_threads: int | None
    parallel_grain: int

    def codegen_items(self) -> tuple[tuple[str, str], ...]:
        """The (name, value) pairs that change generated code: one part of the cache key."""
        return tuple((o.name, repr(getattr(self, o.name))) for o in OPTIONS if o.affects_codegen)


assert [f.name for f in fields(Config)] == [o.name for o in OPTIONS], "Config and OPTIONS differ"


def resolve(**explicit: Any) -> Config:
    """Build a Config from explicit arguments, then `JITRT_<NAME>` variables, then defaults."""
    unknown = set(explicit) - set(OPTION_BY_NAME)
    if unknown:
        raise TypeError(f"jr.init() got unknown option(s): {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        if opt.name in explicit and explicit[opt.name] is not None:
            value = explicit[opt.name]
            if opt.name in ("default_fp", "default_ip"):
                value = dtypes.coerce(value)
            values[opt.name] = value
            continue
        env = os.environ.get("JITRT_" + opt.name.upper())
        if env is not None:
            try:
                values[opt.name] = opt.parse(env)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"JITRT_{opt.name.upper()}={env!r}: {exc}") from None
        else:
            values[opt.name] = opt.default
    return Config(**values)
