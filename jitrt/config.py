"""The configuration table: every `jr.init` option, its type, default and `JITRT_<NAME>` variable.

Stage: runtime set-up. `resolve(**kwargs)` merges, in order of precedence, explicit `init`
arguments, then environment variables, then defaults, and returns a frozen `Config`. The offline
cache key derives its compile-option part from the fields marked `affects_codegen`, so adding an
option here is the only step needed for it to reach the key.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import field, fields
from typing import Any, Callable

import numpy as np

from .frozen import frozen
from . import dtypes
from .backends import registry
from .errors import ConfigError, UnknownOptionError
from .peer_options import peer_options, peer_values




def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


MAX_THREADS = max(64, 16 * _cores())   # far past this, thread creation itself fails


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected a boolean: 1/0, true/false, yes/no or on/off")


def _parse_optional_int(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none") else _parse_int(text)


def _parse_int(text: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError("expected an integer") from None


def _check_bool(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                               and value in (0, 1)):
        return bool(value)
    raise ValueError("expected True or False")


def _int_in(lo: int, hi: int | None, what: str) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        if ok and value >= lo and (hi is None or value <= hi):
            return int(value)
        top = f"to {hi}" if hi is not None else "or more"
        raise ValueError(f"expected an integer from {lo} {top} ({what})")
    return check


def _check_threads(value: Any) -> int | None:
    return None if value is None else _int_in(
        1, MAX_THREADS, f"worker threads counting the caller; this machine has {_cores()} "
        "cores, None uses all of them")(value)


OTHER_ARCHES = ("vulkan", "metal", "opengl", "gles", "dx11", "dx12")   # Taichi's, not jitrt's


def _check_loop_guard(value: Any) -> int | None:
    return None if value is None else _int_in(
        1, (1 << 31) - 2, "iterations a while loop may run before it raises; None: no "
        "bound")(value)


def _check_arch(value: Any) -> str:
    name = getattr(value, "name", value)
    arches = registry.names()      # the backend registry's archs, then "gpu"
    if isinstance(name, str) and name.strip().lower() in arches:
        return name.strip().lower()
    if isinstance(name, str) and name.strip().lower() in OTHER_ARCHES:
        raise ValueError(f"arch {name.strip().lower()} is not supported by jitrt: use one of "
                         f"{', '.join(arches)}")
    raise ValueError(f"expected one of {', '.join(arches)} (or jr.cpu, jr.gpu, ...)")


def _check_log_level(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().lower()
    text = {"trace": "debug", "warn": "warning"}.get(text, text)   # Taichi's spellings
    if text in ("debug", "info", "warning", "error", "critical"):
        return text
    raise ValueError("expected one of debug, info, warning (warn), error, critical")


def _check_dir(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return os.fspath(value)
    raise ValueError("expected a directory path or None")


def _fraction(value: Any) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if ok and 0.0 <= float(value) <= 1.0:
        return float(value)
    raise ValueError("expected a number from 0 to 1 (a fraction of the cache's entries)")


def _check_dtype(kind: str) -> Callable[[Any], dtypes.DataType]:
    def check(value: Any) -> dtypes.DataType:
        try:
            dt = dtypes.coerce(value)
        except TypeError:
            dt = None
        wanted = (lambda d: d.is_float) if kind == "a float" else (lambda d: d.is_int)
        if dt is None or not wanted(dt):
            names = [d.name for d in dtypes.ALL if wanted(d)]
            raise ValueError(f"expected {kind} type: {', '.join(names)}")
        return dt
    return check


@frozen
class Option:
    name: str
    default: Any
    parse: Callable[[str], Any]     # JITRT_<NAME> text -> value
    check: Callable[[Any], Any]     # value -> normalised value; ValueError names what is accepted
    affects_codegen: bool
    doc: str


OPTIONS: tuple[Option, ...] = (
    Option("arch", "cpu", str, _check_arch, True, " | ".join(registry.names())),
    Option("device_id", 0, _parse_int, _int_in(0, 1 << 16, "the GPU to use; 0 is the first"),
           False, "which device of the arch (GPUs; the CPU is device 0)"),
    Option("enable_fallback", True, _parse_bool, _check_bool, False,
           "a GPU arch this machine lacks falls back to the CPU with a warning (Taichi's "
           "default); False: jr.BackendUnavailableError"),
    Option("debug", False, _parse_bool, _check_bool, True, "compile assert statements in"),
    Option("fast_math", True, _parse_bool, _check_bool, True,
           "CPU: math in parallel loop bodies may use jitrt's own vectorizable sin/cos/tan/exp/"
           "log/pow (<= 2 ulp f32, <= 1.3 ulp f64); False: the C library's everywhere. "
           "Arithmetic stays IEEE either way"),
    Option("random_seed", 0, _parse_int, _int_in(0, (1 << 64) - 1, "an integer seed"), False,
           "where jr.random()'s sequence starts"),
    Option("tiered_compile", True, _parse_bool, _check_bool, False,
           "CPU: a kernel's first compile runs a quickly compiled copy at once while the "
           "optimised copy is compiled on a background thread, then swapped in and cached; "
           "False: every compile is optimised before the first launch"),
    Option("offline_cache", True, _parse_bool, _check_bool, False, "use the on-disk kernel cache"),
    Option("offline_cache_dir", None, str, _check_dir, False,
           "cache directory (else JITRT_CACHE_DIR, else XDG)"),
    Option("offline_cache_max_bytes", 1 << 30, _parse_int,
           _int_in(0, None, "bytes; the least recently used entries are evicted past it"),
           False, "disk cache size cap (LRU eviction)"),
    Option("offline_cache_cleaning_factor", 0.0, float, _fraction, False,
           "when the cache passes its cap, also evict at least this fraction of its entries "
           "(least recently used first), so that eviction runs less often (Taichi's option)"),
    Option("ad_stack_size", 0, _parse_int,
           _int_in(0, 1 << 24, "0 sizes adstacks exactly; N forces every stack to N entries"),
           True, "0: size adstacks exactly; N: force every stack to N"),
    Option("ad_stack_experimental_enabled", True, _parse_bool, _check_bool, True,
           "False: a gradient that needs adstacks is a compile error (Quadrants' switch)"),
    Option("default_fp", dtypes.f32, str, _check_dtype("a float"), True, "type of float literals"),
    Option("default_ip", dtypes.i32, str, _check_dtype("an integer"), True, "type of int literals"),
    Option("num_threads", None, _parse_optional_int, _check_threads, False,
           "CPU worker threads (None: all cores)"),
    Option("kernel_profiler", False, _parse_bool, _check_bool, False,
           "time every launch per kernel (jr.profiler); off: no cost"),
    Option("tape_graph", False, _parse_bool, _check_bool, False,
           "GPUs: a jr.ad.Tape whose launches repeat the previous Tape's replays its reverse "
           "pass as one device graph (built at the second such step, ~0.1-2 ms per launch; "
           "a replay saves ~1-2 us per launch)"),
    Option("log_level", None, str, _check_log_level, False,
           "log to stderr at this level (debug | info | warning | error); None: silent"),
    Option("parallel_grain", 8192, _parse_int,
           _int_in(1, None, "estimated work below which a parallel loop runs on one thread"),
           False, "estimated work (~simple ops) below which a parallel loop runs on the calling "
           "thread"),
    # loop_guard changes generated code, but the cache key has it through the frontend IR (the
    # counters are in it), so unset it leaves every key as it was
    Option("loop_guard", None, _parse_optional_int, _check_loop_guard, False,
           "debugging: a while loop of a kernel past N iterations raises, naming its line "
           "(passes/loop_guard.py); None: no bound"),
)
OPTION_BY_NAME = {opt.name: opt for opt in OPTIONS}


@frozen
class Config:
    arch: str
    device_id: int
    enable_fallback: bool
    debug: bool
    fast_math: bool
    random_seed: int
    tiered_compile: bool
    offline_cache: bool
    offline_cache_dir: str | None
    offline_cache_max_bytes: int
    offline_cache_cleaning_factor: float
    ad_stack_size: int
    ad_stack_experimental_enabled: bool
    default_fp: dtypes.DataType
    default_ip: dtypes.DataType
    num_threads: int | None
    kernel_profiler: bool
    tape_graph: bool
    log_level: str | None
    parallel_grain: int
    loop_guard: int | None
    # Taichi's options jitrt ignores, as given (peer_options.peer_values): read as attributes
    peer: tuple[tuple[str, Any], ...] = field(default=(), compare=False, repr=False)

    def __getattr__(self, name: str) -> Any:
        """A Taichi option jitrt accepts and ignores (`cfg.print_ir`): the value given to
        `init`, else `TI_<NAME>`, else Taichi's default (docs/porting.md)."""
        for key, value in object.__getattribute__(self, "peer"):
            if key == name:
                return value
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    def codegen_items(self) -> tuple[tuple[str, str], ...]:
        """The (name, value) pairs that change generated code: one part of the cache key."""
        return tuple((o.name, repr(getattr(self, o.name))) for o in OPTIONS if o.affects_codegen)


assert [f.name for f in fields(Config)] == [o.name for o in OPTIONS] + ["peer"], \
    "Config and OPTIONS differ"


def resolve(**explicit: Any) -> Config:
    """Build a Config from explicit arguments, then `JITRT_<NAME>` variables (else Taichi's
    `TI_<NAME>`), then defaults.
    Every value is checked; a bad one is a `ConfigError` naming the option and what it
    accepts. Taichi's spellings of options are accepted (`peer_options`)."""
    peer = peer_values(explicit, os.environ)
    explicit = peer_options(explicit)
    unknown = sorted(set(explicit) - set(OPTION_BY_NAME))
    if unknown:
        hints = []
        for name in unknown:
            import difflib   # only to suggest a name for a misspelt option
            close = difflib.get_close_matches(name, list(OPTION_BY_NAME), n=1)
            hints.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        raise UnknownOptionError(f"jr.init() got unknown option(s) {', '.join(hints)}; valid "
                                 f"options: {', '.join(OPTION_BY_NAME)}")
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        var = "JITRT_" + opt.name.upper()
        if var not in os.environ and "TI_" + opt.name.upper() in os.environ:
            var = "TI_" + opt.name.upper()     # Taichi's variable, where jitrt's is not set
        given = opt.name in explicit and explicit[opt.name] is not None
        env_text = os.environ.get(var)
        if given and env_text is not None:
            given = _explicit_or_variable(opt, explicit[opt.name], var, env_text)
        if given:
            values[opt.name] = _checked(opt, explicit[opt.name], f"jr.init({opt.name}=...)")
        elif env_text is not None:
            text = os.environ[var]
            try:
                parsed = opt.parse(text)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{var}={text!r}: {exc}") from None
            values[opt.name] = _checked(opt, parsed, f"{var}={text!r}")
        else:
            values[opt.name] = opt.default
    if values["arch"] == "cpu" and values["device_id"] != 0:
        raise ConfigError(f"jr.init(device_id={values['device_id']}): the CPU is device 0; "
                          "device_id chooses a GPU (arch=jr.cuda or jr.amdgpu)")
    return Config(**values, peer=peer)


def _explicit_or_variable(opt: Option, value: Any, var: str, text: str) -> bool:
    """Both an argument and a variable set the option: True if the argument wins. As in
    Taichi (`TI_ARCH`), `JITRT_ARCH` wins over `arch=`, so one script runs on several backends;
    for every other option the argument wins. Either way one warning names both."""
    shown = getattr(value, "name", value)
    if str(shown).strip().lower() == text.strip().lower():
        return True
    if opt.name == "arch":
        warnings.warn(f"JITRT_ARCH={text} overrides jr.init(arch={shown!r})", stacklevel=5)
        return False
    warnings.warn(f"jr.init({opt.name}={shown!r}) overrides {var}={text}", stacklevel=5)
    return True


def _checked(opt: Option, value: Any, where: str) -> Any:
    try:
        return opt.check(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}, got {value!r}") from None
