"""The on-disk store of compiled kernels.

Stage: cache. One file per entry, `<key>.jkc`:
    8 bytes  magic b"JITRTKC\\0"
    4 bytes  format version (little-endian u32)
    4 bytes  header length (u32)
    header   JSON: key, kernel_name, created, payload_bytes, checksum (xxh3-128 of payload)
    payload  pickle of the artifact (object code and every piece of metadata)
Writes go to a temporary file in the same directory and are renamed into place, so readers
(other processes included) see a complete old entry or a complete new one. A read that finds
a wrong magic, version, key, length or checksum, or an unreadable payload, warns once per
problem kind, deletes the entry and reports a miss: the caller recompiles and overwrites.
A small side file in the same format, `<pre-key>.jkm`, holds a kernel's (and its adjoint's)
warm-start manifests and launchers' marshalled code (`runtime/prekey.py`); side files are
not counted against `max_bytes`, `clear()` removes them, and an eviction removes those not
used since the last entry it evicted was. Last use is the file's mtime (touched on every
hit), except that an mtime more than `FUTURE_SLACK_S` ahead of the clock (a copied or
restored directory, a file another tool stamped) counts as the oldest use: an entry nobody
touched since is evicted first instead of outliving every fresh one. Past `max_bytes` the
least recently used entries are evicted after a write, at least the fraction
`offline_cache_cleaning_factor` of them (default 0: just below the cap). A save
costs O(1) in the number of entries: the store keeps the directory's size up to date and
scans for eviction only when it passes the cap.
Location: `offline_cache_dir`, else `JITRT_CACHE_DIR`, else `$XDG_CACHE_HOME/jitrt`, else
`~/.cache/jitrt`.
"""
from __future__ import annotations

import math
import os
import pathlib
import pickle
import itertools
import struct
import threading
import time
import warnings
from typing import Any

import xxhash

from ..frozen import frozen

MAGIC = b"JITRTKC\0"
FORMAT_VERSION = 4   # 4: IR walkers and SizeExprs moved to jitrt.ir (pickled class paths)
SUFFIX = ".jkc"
MANIFEST_SUFFIX = ".jkm"   # a pre-key's manifests and launcher codes (`runtime/prekey.py`)
SIDE_SUFFIXES = (MANIFEST_SUFFIX,)   # small files outside the size accounting
_PREFIX = struct.Struct("<8sII")
# an mtime this far past the clock is not a use this machine saw (`last_used`); the slack
# covers a file system whose server clock runs a little ahead of ours
FUTURE_SLACK_S = 60.0


class CacheWarning(UserWarning):
    """A damaged, foreign or outdated offline-cache entry was ignored and rebuilt."""


_warned: set[str] = set()


def _warn_once(kind: str, message: str) -> None:
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(message, CacheWarning, stacklevel=4)


def default_dir(configured: str | None) -> pathlib.Path:
    if configured:
        return pathlib.Path(configured).expanduser()
    env = os.environ.get("JITRT_CACHE_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg).expanduser() if xdg else pathlib.Path.home() / ".cache"
    return base / "jitrt"


class EntryError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def last_used(mtime: float, now: float) -> float:
    """An entry's last use for eviction: its mtime, or 0 (the oldest) when that lies more
    than `FUTURE_SLACK_S` in the future."""
    return mtime if mtime <= now + FUTURE_SLACK_S else 0.0


@frozen
class EntryInfo:
    path: pathlib.Path
    key: str
    kernel_name: str
    size: int
    created: float
    last_used: float


def encode(key: str, kernel_name: str, artifact: Any, raw: bool = False) -> bytes:
    """An entry's bytes; `raw`: `artifact` is the payload itself (bytes), not pickled."""
    import json
    payload = artifact if raw else pickle.dumps(artifact, protocol=pickle.HIGHEST_PROTOCOL)
    header = json.dumps({"key": key, "kernel_name": kernel_name, "created": time.time(),
                         "payload_bytes": len(payload),
                         "checksum": xxhash.xxh3_128_hexdigest(payload)}).encode()
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)) + header + payload


def decode_header(data: bytes) -> tuple[dict, int]:
    import json   # here, not with the module: `import jitrt` does not need it
    if len(data) < _PREFIX.size:
        raise EntryError("truncated", "the file is truncated")
    magic, version, hlen = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise EntryError("foreign", "not a jitrt cache entry")
    if version != FORMAT_VERSION:
        raise EntryError("version", f"written in cache format {version}, this jitrt reads "
                         f"format {FORMAT_VERSION}")
    start = _PREFIX.size + hlen
    if len(data) < start:
        raise EntryError("truncated", "the file is truncated")
    try:
        header = json.loads(data[_PREFIX.size:start])
    except ValueError:
        raise EntryError("damaged", "the entry header is unreadable") from None
    return header, start


def decode(data: bytes, key: str | None, raw: bool = False) -> Any:
    header, start = decode_header(data)
    payload = data[start:]
    if key is not None and header.get("key") != key:
        raise EntryError("foreign", "the entry belongs to another key")
    if len(payload) != header.get("payload_bytes"):
        raise EntryError("truncated", "the payload is truncated")
    if xxhash.xxh3_128_hexdigest(payload) != header.get("checksum"):
        raise EntryError("damaged", "the checksum does not match (bit flip?)")
    if raw:
        return payload
    try:
        return pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a damaged entry
        raise EntryError("damaged", f"the payload cannot be read ({exc})") from None


class CacheStore:
    def __init__(self, directory: pathlib.Path, max_bytes: int,
                 cleaning_factor: float = 0.0) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        # an eviction removes at least this fraction of the entries (jr.init's
        # offline_cache_cleaning_factor), so that the next one comes later
        self.cleaning_factor = cleaning_factor
        # the directory's size as this process knows it: measured once (file sizes only), then
        # kept up to date by our own saves, so a save costs O(1) in the number of entries; the
        # LRU scan runs only when the estimate passes the cap (and measures the truth again).
        # Other processes' writes are seen at the next scan.
        self._approx_bytes: int | None = None

    def path(self, key: str, suffix: str = SUFFIX) -> pathlib.Path:
        return self.dir / f"{key}{suffix}"

    def load(self, key: str, suffix: str = SUFFIX) -> Any | None:
        """The artifact stored under `key`, or for a side file (`SIDE_SUFFIXES`) its payload
        bytes; None when there is none or it is damaged (then it is removed)."""
        path = os.path.join(self.dir, f"{key}{suffix}")   # (not pathlib: a warm start's
        try:                                              # loads are on its critical path)
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            _warn_once("io", f"jitrt offline cache: cannot read {path}: {exc}; recompiling")
            return None
        try:
            artifact = decode(data, key, raw=suffix != SUFFIX)
        except EntryError as exc:
            _warn_once(exc.kind, f"jitrt offline cache: ignoring {path}: {exc}; the kernel is "
                       "recompiled and the entry rewritten")
            self._remove(pathlib.Path(path))
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return artifact

    def save(self, key: str, kernel_name: str, artifact: Any, suffix: str = SUFFIX) -> None:
        """Store `artifact` (pickled) under `key`; a side file's `artifact` is its payload
        (bytes, stored as they are)."""
        tmp = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            data = encode(key, kernel_name, artifact, raw=suffix != SUFFIX)
            fd, tmp = _new_temp_file(str(self.dir))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path(key, suffix))
        except OSError as exc:
            if tmp is not None:           # a full disk must not leave partial files behind
                self._remove(pathlib.Path(tmp))
            _warn_once("io-write", f"jitrt offline cache: cannot write to {self.dir}: {exc}")
            return
        if suffix == SUFFIX:
            self._account(len(data))

    def _account(self, nbytes: int) -> None:
        if self._approx_bytes is None:
            self._approx_bytes = self._scan_bytes()
        else:
            self._approx_bytes += nbytes     # a replaced entry is counted twice: safe side
        if self._approx_bytes > self.max_bytes:
            self.evict()

    def _scan_bytes(self) -> int:
        total = 0
        try:
            with os.scandir(self.dir) as it:
                for entry in it:
                    if entry.name.endswith(SUFFIX):
                        try:
                            total += entry.stat().st_size
                        except OSError:
                            pass
        except OSError:
            pass
        return total

    def _remove(self, path: pathlib.Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    def entries(self) -> list[EntryInfo]:
        out: list[EntryInfo] = []
        if not self.dir.is_dir():
            return out
        now = time.time()
        for path in self.dir.glob(f"*{SUFFIX}"):
            if path.name.startswith(".tmp-"):
                continue
            try:
                st = path.stat()
                with open(path, "rb") as f:
                    head = f.read(65536)
                header, _ = decode_header(head)
                name, created = header.get("kernel_name", "?"), header.get("created", 0.0)
            except (OSError, EntryError):
                name, created = "<unreadable>", 0.0
                try:
                    st = path.stat()
                except OSError:
                    continue
            out.append(EntryInfo(path, path.stem, name, st.st_size, created,
                                 last_used(st.st_mtime, now)))
        return sorted(out, key=lambda e: e.last_used)

    def evict(self) -> int:
        entries = self.entries()
        total = sum(e.size for e in entries)
        removed = 0
        at_least = math.ceil(self.cleaning_factor * len(entries)) if total > self.max_bytes \
            else 0
        last_evicted = None
        for e in entries:  # oldest use first
            if total <= self.max_bytes and removed >= at_least:
                break
            self._remove(e.path)
            total -= e.size
            removed += 1
            last_evicted = e.last_used
        if last_evicted is not None:     # side files unused since then go too
            now = time.time()
            for suffix in SIDE_SUFFIXES:
                for path in self.dir.glob(f"*{suffix}"):
                    try:
                        if last_used(path.stat().st_mtime, now) <= last_evicted:
                            self._remove(path)
                    except OSError:
                        pass
        self._approx_bytes = total
        return removed

    def clear(self) -> int:
        count = 0
        for e in self.entries():
            self._remove(e.path)
            count += 1
        for tmp in self.dir.glob(f".tmp-*{SUFFIX}") if self.dir.is_dir() else []:
            self._remove(tmp)
        for suffix in SIDE_SUFFIXES:
            for side in self.dir.glob(f"*{suffix}") if self.dir.is_dir() else []:
                self._remove(side)
        return count

    def verify(self) -> list[tuple[pathlib.Path, str]]:
        """Every entry whose checksum, format or payload is bad, with the reason."""
        bad = []
        for e in self.entries():
            try:
                decode(e.path.read_bytes(), e.key)
            except (OSError, EntryError) as exc:
                bad.append((e.path, str(exc)))
        return bad


_TEMP_SERIAL = itertools.count()


def _new_temp_file(directory: str) -> tuple[int, str]:
    """(descriptor, path) of a new file for writing in `directory`, `.tmp-<pid>-<thread>-<n>`
    made with O_EXCL and mode 0600, as `tempfile.mkstemp` makes one (which would import
    tempfile, shutil, random, bz2 and lzma on a cold start's path: ~3 ms on the development VM,
    more when the loader is busy); a name left by a dead process of the same id is skipped."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    while True:
        path = os.path.join(directory, f".tmp-{os.getpid()}-{threading.get_ident()}-"
                                       f"{next(_TEMP_SERIAL)}{SUFFIX}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
