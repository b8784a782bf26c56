"""Warm starts without the frontend: a key computed before lowering, and a checked manifest.

Stage: runtime (the offline cache's front door; `compiler.compile_kernel` calls it). The
offline-cache key of a kernel (`cache/keys.py`) includes the IR the frontend produced, so a
lookup used to run the frontend first (importing the lowering, ~5 ms, then ~1.5 ms a
kernel). A *pre-key* is computed from what is known before lowering: the kernel's source,
its specialization (name and concrete parameters), its return annotation, the config items
that affect code, the target, the LLVM, Python, numpy and jitrt versions and the hash of
jitrt's sources. It names a *manifest*, written next to the entry after a full lookup or
compile: the full key that lookup used, and every Python value the frontend could have read,
each with its *fingerprint*:

- every name and attribute chain of the kernel's source (`x`, `jr.sin`, `cfg.N`, `x.grad`,
  every prefix of each; the kernel's parameters excluded), resolved as the frontend resolves
  names (closure cell, then module globals, then builtins), and the same for the source of
  every `@jr.func` reached (in that func's own globals), transitively;
- a fingerprint is the whole value for constants (numbers, strings, tuples, lists, dicts,
  small numpy arrays, jitrt's frozen values such as dtypes and vector types), the module and
  qualified name for functions and classes of jitrt, the standard library's math modules and
  numpy (checked to be that very object), the field's layout (dtype, shape, element shape,
  offset, name, gradient and dual layouts) and which chains name the same field, and for a func its
  source text, defaults and annotations.

A warm start computes the pre-key, reads the manifest, resolves every chain again and
compares fingerprints; when all match it loads the full key's entry with the fields the
manifest's slots name, and the frontend does not run. Any difference, any value whose kind
has no fingerprint (an object of the user's own class, a plain Python function, a module of
the user's used other than as `mod.attr`, a forward-mode kernel, a field the frontend made
itself), a missing or damaged manifest: the full path runs, as it always did, and writes
the manifest again. A `fastcache=True` kernel (Quadrants' option) may have template
parameters: each argument is a check of its own, fingerprinted whole, and its walk also
fingerprints the user's objects, classes, enums and plain functions (`_Walk.users`,
`_user_value`); docs/offline_cache.md says what that checks. A manifest is only written
when the frontend's own record agrees with it (every field slot found among the fields and
ndarrays the walk saw, every func it inlined among the funcs found). The same file
(`WarmFile`) keeps the marshalled code of the kernel's generated launchers.
"""
from __future__ import annotations

import builtins
import dataclasses
import enum
import sys
import types
from typing import Any

import numpy as np
import xxhash

from ..frozen import _setattr as _frozen_setattr, frozen
from ..host_matrix import HostMatrix

MANIFEST_VERSION = "jitrt pre-key 4"
TEMPLATE_SCOPE = -1           # the scope of a check of a template argument as a whole
ALTERNATIVES = 4              # manifests kept per pre-key (same source, other globals)
MAX_ARRAY_BYTES = 1 << 16     # a larger numpy constant has no fingerprint (the full path runs)
MAX_ITEMS = 4096              # elements of a container fingerprinted
# modules whose functions and classes are fingerprinted by name (their behaviour is fixed by
# the versions in the pre-key); a user's own function has no fingerprint
NAMED_MODULES = ("jitrt", "builtins", "math", "cmath", "operator", "numpy")
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


class _Failed:
    """What a lookup found when a name is unbound or an attribute access raised."""
    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


_MISSING = _Failed("missing")


class Unsupported(Exception):
    """A value the manifest cannot describe: this kernel's warm start runs the frontend."""


# one check: (scope, chain, fingerprint). Scope 0 is the kernel's function, scope s > 0 the
# func that check `funcs[s - 1]` resolved to; a chain is a name and attributes (`("jr",
# "sin")`); a fingerprint is nested tuples of str, int, bool and None (what marshal stores).
CheckTuple = tuple[int, tuple[str, ...], Any]


@frozen
class Manifest:
    variant: str                  # the pre-key of the kernel object (its mode, name)
    key: str                      # the full offline-cache key
    checks: tuple[CheckTuple, ...]
    funcs: tuple[int, ...]        # scope s > 0 is the func that check funcs[s - 1] resolved to
    slots: tuple[int, ...]        # field slot k is the field or ndarray the walk saw slots[k]th


class WarmFile:
    """One kernel's file in the offline cache (`<file key>.jkm`, shared by the kernel, its
    adjoint and its other modes: the same source and function): their manifests (most recent
    first, at most ALTERNATIVES per variant) and the marshalled code of the launchers
    generated for them (by source text), so that a warm start reads one small file per
    kernel besides its entries and compiles no launcher (a 20-line launcher takes 0.5-0.7 ms
    to compile on the development VM). Read once per program (`warm_file`); written when a
    full lookup recorded a manifest or a launcher was compiled (`flush`), never on a warm
    start that found everything."""

    def __init__(self, store: Any, pre: str, name: str) -> None:
        from ..cache.store import MANIFEST_SUFFIX
        self.store, self.pre, self.name, self.dirty = store, pre, name, False
        self.manifests: tuple[Manifest, ...] = ()
        self.codes: dict[str, bytes] = {}
        payload = store.load(pre, MANIFEST_SUFFIX)
        if isinstance(payload, bytes):
            self._read(payload)

    def _read(self, payload: bytes) -> None:
        found = _parse(payload)
        if found is not None:
            self.manifests, self.codes = found

    def add(self, manifest: Manifest) -> None:
        """`manifest` first, then the other alternatives already stored (of its variant, at
        most ALTERNATIVES in all)."""
        self.manifests = _newest_first((manifest,), self.manifests)
        self.dirty = True

    def of(self, variant: str) -> tuple[Manifest, ...]:
        return tuple(m for m in self.manifests if m.variant == variant)

    def code(self, source: str, filename: str) -> types.CodeType:
        """`compile(source, filename, "exec")`, from the stored code when it is there."""
        import marshal
        key = xxhash.xxh3_64_hexdigest(f"{filename}\0{source}".encode("utf-8",
                                                                     "surrogatepass"))
        data = self.codes.get(key)
        if data is not None:
            try:
                code = marshal.loads(data)
            except (EOFError, ValueError, TypeError):
                code = None
            if isinstance(code, types.CodeType) and code.co_filename == filename:
                return code
        code = compile(source, filename, "exec")
        self.codes[key] = marshal.dumps(code)
        self.dirty = True
        return code

    def flush(self) -> None:
        """Write the file if something was added since it was read. Another process may have
        written it since (several runs warming one cache at once): what it stored is kept
        after this process's own manifests (within ALTERNATIVES a variant) and launchers,
        so that no run's manifests are lost to the last writer."""
        import marshal
        from ..cache.store import MANIFEST_SUFFIX
        if not self.dirty:
            return
        self.dirty = False
        payload = self.store.load(self.pre, MANIFEST_SUFFIX)
        theirs = _parse(payload) if isinstance(payload, bytes) else None
        if theirs is not None:
            self.manifests = _newest_first(self.manifests, theirs[0])
            self.codes = {**theirs[1], **self.codes}
        try:
            payload = marshal.dumps((MANIFEST_VERSION, tuple(
                (m.variant, m.key, m.checks, m.funcs, m.slots) for m in self.manifests),
                self.codes))
        except ValueError:           # a fingerprint marshal cannot store: keep the codes
            payload = marshal.dumps((MANIFEST_VERSION, (), self.codes))
        self.store.save(self.pre, f"{self.name} (warm start)", payload, MANIFEST_SUFFIX)


def _parse(payload: bytes) -> tuple[tuple[Manifest, ...], dict[str, bytes]] | None:
    """(manifests, launcher codes) of a WarmFile's payload; None for another version's
    layout or a damaged file (rewritten at the next flush)."""
    import marshal
    try:
        version, items, codes = marshal.loads(payload)
        if version != MANIFEST_VERSION:
            return None
        return (tuple(Manifest(variant, key, checks, funcs, slots)
                      for variant, key, checks, funcs, slots in items),
                {str(k): bytes(v) for k, v in codes.items()})
    except (EOFError, ValueError, TypeError, AttributeError):
        return None


def _newest_first(new: tuple[Manifest, ...], old: tuple[Manifest, ...]
                  ) -> tuple[Manifest, ...]:
    """`new`, then the manifests of `old` not in it, keeping at most ALTERNATIVES of each
    variant (the first ones: the most recent)."""
    kept: list[Manifest] = []
    per_variant: dict[str, int] = {}
    for m in new + old:
        if m in kept or per_variant.get(m.variant, 0) >= ALTERNATIVES:
            continue
        per_variant[m.variant] = per_variant.get(m.variant, 0) + 1
        kept.append(m)
    return tuple(kept)


def pre_key(kernel: Any, params: tuple[Any, ...], name: str, cfg: Any, target_key: str
            ) -> tuple[str, str] | None:
    """(file key, variant key) checked before lowering, or None when this kernel always
    takes the full path (forward mode: dual fields; template parameters, unless the kernel
    is `fastcache=True`). A template parameter is in the key by its name part
    (`arguments.template_key`: a constant's value, an object's class); the values themselves
    are checks of the manifest (scope TEMPLATE_SCOPE). The file key leaves out
    the kernel's mode (`.grad`...), so a kernel and its adjoint share one file; the variant
    key has everything."""
    if kernel.dual_args is not None or (not getattr(kernel, "fastcache", False) and any(
            p.kind == "template" for p in params)):
        return None
    from .._version import __version__
    from ..cache import keys
    # the concrete parameters and the return type are frozen records (dtypes, vector types)
    # whose repr shows every field
    h = xxhash.xxh3_128()
    for part in (MANIFEST_VERSION, kernel.source().text, kernel.qualname,
                 repr((params, kernel.ret)), repr(cfg.codegen_items()),
                 repr((cfg.default_fp, cfg.default_ip, cfg.debug)),
                 target_key, keys.llvm_versions(), __version__, keys.compiler_hash(),
                 sys.version, sys.implementation.cache_tag, np.__version__):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    file_key = h.hexdigest()
    mode = (name, bool(kernel.adjoint), bool(getattr(kernel, "validate", False)))
    return file_key, xxhash.xxh3_128_hexdigest(f"{file_key}\0{mode!r}".encode(
        "utf-8", "surrogatepass"))


def warm_file(program: Any, file_key: str, name: str) -> WarmFile:
    """The program's WarmFile of `file_key`, read from the offline cache on first use."""
    found = program.warm_files.get(file_key)
    if found is None:
        found = program.warm_files[file_key] = WarmFile(program.cache_store, file_key, name)
    return found  # type: ignore[no-any-return]


Origins = tuple[tuple[str, tuple[str, int, int, int]], ...]   # func key -> source place


def resolve(kernel: Any, manifests: tuple[Manifest, ...], templates: dict[str, Any]
            ) -> tuple[str, tuple[Any, ...], Origins] | None:
    """(full key, field objects by slot, func source origins) of the first manifest whose
    every fingerprint matches the values of this process (`templates`: the template
    arguments of this call, by parameter name); None when none does."""
    for m in manifests:
        try:
            found = _check(kernel, m, templates)
        except Exception:  # noqa: BLE001 - a malformed manifest or a raising lookup: full path
            found = None
        if found is not None:
            return found
    return None


def _check(kernel: Any, m: Manifest, templates: dict[str, Any]
           ) -> tuple[str, tuple[Any, ...], Origins] | None:
    walk = _Walk(bool(getattr(kernel, "fastcache", False)))
    fns = [kernel.fn]
    func_checks = set(m.funcs)
    for k, (scope, chain, fingerprint) in enumerate(m.checks):
        if scope == TEMPLATE_SCOPE:
            if chain[0] not in templates or walk.fingerprint(templates[chain[0]]) != fingerprint:
                return None
            continue
        if scope >= len(fns):
            return None
        obj = _lookup(fns[scope], chain)
        if walk.fingerprint(obj) != fingerprint:
            return None
        if k in func_checks:
            fns.append(obj.fn)
    return m.key, tuple(walk.field_list[k] for k in m.slots), _origins(walk.funcs)


def record(kernel: Any, variant: str, key: str, field_objs: tuple[Any, ...],
           used_funcs: dict[str, str], origins: dict[str, tuple[str, int, int, int]],
           templates: dict[str, Any]) -> Manifest | None:
    """The manifest of a kernel the frontend just lowered, or None when it cannot have one.
    `field_objs`, `used_funcs` and `origins` are the frontend's record (CompileContext);
    `templates` the template arguments it was lowered for, by parameter name."""
    try:
        walk = _Walk(bool(getattr(kernel, "fastcache", False)))
        scopes: list[tuple[Any, Any]] = [(kernel.fn, kernel.source().tree)]
        checks: list[CheckTuple] = [(TEMPLATE_SCOPE, (name,), walk.fingerprint(value))
                                    for name, value in sorted(templates.items())]
        funcs: list[int] = []
        s = 0
        while s < len(scopes):
            fn, tree = scopes[s]
            found, whole = chains(tree, _param_names(fn))
            for chain in found:
                obj = _lookup(fn, chain)
                seen = len(walk.funcs)
                # a module of the user's used as a value (passed to a func, put in a tuple)
                # has attributes no chain lists: only `mod.attr` chains are checked
                walk.user_modules = chain not in whole
                fp = walk.fingerprint(obj)
                if len(walk.funcs) > seen:        # a func seen for the first time
                    if len(walk.funcs) > seen + 1 or walk.funcs[-1] is not obj:
                        return None  # a func inside a container: its globals are not walked
                    funcs.append(len(checks))
                    scopes.append((obj.fn, obj.source().tree))
                checks.append((s, chain, fp))
            s += 1
    except Exception:  # noqa: BLE001 - Unsupported, or a value that broke the walk: no manifest
        return None
    slots = []
    for fld in field_objs:
        k = walk.fields.get(id(fld))
        if k is None or walk.field_list[k] is not fld:    # one the frontend made itself
            return None
        slots.append(k)
    mine = dict(_origins(walk.funcs))
    # jitrt's own funcs (the simt tiles' methods) are fixed by the pre-key's hash of jitrt's
    # sources; every other func inlined must be one the walk found, at the same place
    users = {q for q in used_funcs if not q.startswith("jitrt.")}
    if not users <= set(mine) or any(mine.get(q) != o for q, o in origins.items()
                                     if not q.startswith("jitrt.")):
        return None
    return Manifest(variant, key, tuple(checks), tuple(funcs), tuple(slots))


def chains(tree: Any, params: frozenset[str]) -> tuple[list[tuple[str, ...]],
                                                      set[tuple[str, ...]]]:
    """Every name and attribute chain a function's source reads, each prefix too, in source
    order (the first occurrence), leaving out the function's own parameters; and the chains
    used whole somewhere (not only as the base of a longer one: `f(cfg)` uses `cfg` whole,
    `cfg.N` does not)."""
    import ast
    nodes = list(ast.walk(tree))
    inner = {id(node.value) for node in nodes if isinstance(node, ast.Attribute)}
    out: dict[tuple[str, ...], None] = {}
    whole: set[tuple[str, ...]] = set()
    for node in nodes:
        if id(node) in inner:
            continue
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id not in params:
            chain = (node.id, *reversed(parts))
            whole.add(chain)
            for k in range(1, len(chain) + 1):
                out.setdefault(chain[:k])
    return list(out), whole


def _param_names(fn: Any) -> frozenset[str]:
    code = fn.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)   # *args, **kwargs
    return frozenset(code.co_varnames[:count])


def _lookup(fn: Any, chain: tuple[str, ...]) -> Any:
    """What the frontend's scope finds for `chain` in `fn`'s namespace (`context.Scope`):
    a closure cell, else a module global, else a builtin; attributes then; a `_Failed`
    when that fails."""
    name, code = chain[0], fn.__code__
    obj: Any = _MISSING
    if fn.__closure__ and name in code.co_freevars:
        try:
            obj = fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:        # an empty cell: the global of that name, as the frontend
            pass
    if obj is _MISSING:
        if name in fn.__globals__:
            obj = fn.__globals__[name]
        elif hasattr(builtins, name):
            obj = getattr(builtins, name)
        else:
            return _MISSING
    for attr in chain[1:]:
        try:
            obj = getattr(obj, attr)
        except Exception as exc:  # noqa: BLE001 - the failure itself is the value
            return _Failed(type(exc).__name__)
    return obj


def _origins(funcs: list[Any]) -> Origins:
    """The funcs' source places as the frontend records them (`ctx.origins`), by func key."""
    out = {}
    for func in funcs:
        out[func.key] = func.source().place
    return tuple(sorted(out.items()))


class _Walk:
    """Fingerprints of the values one kernel's lookups found; fields and funcs are numbered
    by first sight, so that two walks agree only if the same chains name the same objects."""

    def __init__(self, users: bool = False) -> None:
        self.fields: dict[int, int] = {}      # id of a field or ndarray -> its number
        self.field_list: list[Any] = []       # the fields and ndarrays by number
        self.func_ids: dict[int, int] = {}
        self.funcs: list[Any] = []
        self.items = 0
        self.user_modules = True     # record() allows them only as the base of a chain
        # `users`: a `fastcache=True` kernel's walk, which fingerprints the user's objects,
        # classes, enums and plain functions too (`_user_value`)
        self.users = users
        self.objects: dict[int, int] = {}     # a user object seen -> its number
        self.keep: list[Any] = []             # what those ids are of, alive for the walk

    def _number(self, obj: Any) -> int:
        k = self.fields.get(id(obj))
        if k is None:
            k = self.fields[id(obj)] = len(self.field_list)
            self.field_list.append(obj)
        return k

    def fingerprint(self, obj: Any) -> Any:
        t = type(obj)
        if t in _SCALARS:
            return (t.__name__, repr(obj))
        if t is _Failed:
            return ("lookup", obj.what)
        if t in (tuple, list):
            self._count(len(obj))
            return (t.__name__,) + tuple(self.fingerprint(v) for v in obj)
        if t is dict:
            self._count(len(obj))
            return ("dict",) + tuple((self.fingerprint(k), self.fingerprint(v))
                                     for k, v in obj.items())
        if t in (set, frozenset):
            self._count(len(obj))
            return (t.__name__,) + tuple(sorted(repr(self.fingerprint(v)) for v in obj))
        if t is types.ModuleType:
            name: Any = getattr(obj, "__name__", None)
            if not isinstance(name, str) or sys.modules.get(name) is not obj or (
                    not self.user_modules and name.split(".")[0] not in NAMED_MODULES):
                raise Unsupported(obj)
            return ("module", name)
        field_types, func_type, _, _ = _classes()
        if t in field_types:
            return ("field", self._number(obj), self._layout(obj))
        if t is func_type:
            return self._func(obj)
        if t in _ALIASES or (t.__module__ == "typing" and hasattr(obj, "__args__")):
            # an annotation such as `tuple[vec3, vec4]`, `int | None`, `typing.Tuple[...]`
            # (before `_user_value`: an alias passes attribute reads on to its origin class)
            return ("alias", t.__name__, self.fingerprint(getattr(obj, "__origin__", None)),
                    self.fingerprint(tuple(obj.__args__)))
        if self.users:
            found = self._user_value(obj, t)
            if found is not None:
                return found
        return self._other(obj, t)

    def _user_value(self, obj: Any, t: type) -> Any:
        """A `fastcache=True` kernel's fingerprint of what `_other` has none for (None: then
        `_other` decides): an ndarray by layout and numbering, as a field (the frontend
        compiles one reached through a template argument in as a field); a user's class
        (`_user_class`); an enum member by class and name; a plain function by code,
        defaults, closure and the globals it names; any other object by class and every
        member, recursively (one seen before by its number)."""
        if t is _classes()[2]:
            return ("ndarray", self._number(obj), self._layout(obj))
        owner = obj if isinstance(obj, type) or t is types.FunctionType else t
        if (getattr(owner, "__module__", "") or "").split(".")[0] in NAMED_MODULES:
            return None                      # jitrt's, numpy's...: `_other`'s rules
        k = self.objects.get(id(obj))
        if k is not None:
            return ("seen", k)
        self.objects[id(obj)] = len(self.objects)
        self.keep.append(obj)
        if isinstance(obj, type) and issubclass(obj, enum.Enum):
            return ("enum class", obj.__module__, obj.__qualname__,
                    _module_stamp(obj.__module__),
                    tuple((m.name, self.fingerprint(m.value)) for m in obj))
        if isinstance(obj, type):
            return self._user_class(obj)
        if isinstance(obj, enum.Enum):
            return ("enum", self.fingerprint(t), obj.name)
        if t is types.FunctionType:
            return self._plain_function(obj, True)
        if dataclasses.is_dataclass(obj) and not hasattr(obj, "__dict__"):
            names = [f.name for f in dataclasses.fields(obj)]
        elif hasattr(obj, "__dict__") and not getattr(t, "__slots__", ()):
            names = sorted(vars(obj))
        else:
            raise Unsupported(obj)
        self._count(len(names))
        return ("object", self.fingerprint(t)) + tuple(
            (name, self.fingerprint(getattr(obj, name))) for name in names)

    def _user_class(self, cls: type) -> Any:
        """A user's class: where its code is (module, qualified name, the module file's
        stamp), its bases, and its own attributes (a value set on the class at run time is
        seen); its methods and properties by their code (`_plain_function` without the
        globals they name: Quadrants' fastcache hashes source only)."""
        own = []
        for name, value in vars(cls).items():
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                fp: Any = ("property",) + tuple(
                    None if f is None else self._plain_function(f, False)
                    for f in (value.fget, value.fset))
            elif type(value) is types.FunctionType:
                fp = self._plain_function(value, False)
            else:
                fp = self.fingerprint(value)
            own.append((name, fp))
        self._count(len(own))
        return ("class", cls.__module__, cls.__qualname__, _module_stamp(cls.__module__),
                tuple(self.fingerprint(b) for b in cls.__bases__ if b is not object),
                tuple(own))

    def _plain_function(self, fn: Any, with_globals: bool) -> Any:
        if type(fn) is not types.FunctionType:
            raise Unsupported(fn)
        code = fn.__code__
        cells = tuple(self.fingerprint(c.cell_contents) for c in fn.__closure__ or ())
        named: tuple[Any, ...] = ()
        if with_globals:             # a user module there has none (`mod.X` is not seen)
            saved, self.user_modules = self.user_modules, False
            try:
                named = tuple((name, self.fingerprint(fn.__globals__[name]))
                              for name in code.co_names if name in fn.__globals__)
            finally:
                self.user_modules = saved
        return ("function", fn.__module__, fn.__qualname__, _code_digest(code),
                self.fingerprint(fn.__defaults__), self.fingerprint(fn.__kwdefaults__),
                cells, named)

    def _other(self, obj: Any, t: type) -> Any:
        if t is np.ndarray or issubclass(t, HostMatrix):
            if obj.nbytes > MAX_ARRAY_BYTES or obj.dtype.hasobject:
                raise Unsupported(obj)
            return ("ndarray", obj.dtype.str, obj.shape, xxhash.xxh3_128_hexdigest(
                np.ascontiguousarray(obj).tobytes()))
        if isinstance(obj, np.generic):
            if obj.dtype.hasobject:
                raise Unsupported(obj)
            return ("npscalar", obj.dtype.str, obj.tobytes().hex())
        if t is np.dtype or isinstance(obj, np.dtype):
            return ("npdtype", obj.str, str(obj))
        if t is np.ufunc:
            ufunc: Any = getattr(obj, "__name__", "")
            if getattr(np, ufunc, None) is not obj:
                raise Unsupported(obj)
            return ("ufunc", ufunc)
        if isinstance(obj, enum.Enum):
            return ("enum", self._named(t), obj.name)
        if isinstance(obj, _SCALARS):              # a jitrt subclass (`jr.cpu` is a str)
            return ("scalar", self._named(t), repr(t.__mro__[1](obj)))
        if not isinstance(obj, type) and t.__module__.startswith("jitrt.") and \
                dataclasses.is_dataclass(obj):
            if t.__setattr__ is _frozen_setattr or (
                    t.__dataclass_params__.frozen and t.__dataclass_params__.eq):  # type: ignore[attr-defined]
                names = _FIELD_NAMES.get(t)
                if names is None:
                    names = _FIELD_NAMES[t] = tuple(f.name for f in dataclasses.fields(obj))
                return ("value", self._named(t)) + tuple(
                    self.fingerprint(getattr(obj, name)) for name in names)
            name = _builtin_names().get(id(obj))   # compared by identity (`jr.sin`)
            if name is None:
                name = _jitrt_path(obj)       # a namespace's: `qd.simt.block.sync`
                if name is None:
                    raise Unsupported(obj)
            return ("builtin", name)
        if t in _DESCRIPTORS and getattr(getattr(obj, "__objclass__", None), "__module__",
                                         None) == "builtins":
            return ("slot", obj.__objclass__.__qualname__, obj.__name__)   # `tuple.__add__`
        if t.__module__.startswith("jitrt.") and not isinstance(obj, type):
            path = _jitrt_path(obj)       # `qd.simt.block`, `qd.simt.block.sync`
            if path is not None:
                return ("jitrt", path)
        return self._named(obj)

    def _named(self, obj: Any) -> tuple[str, str, str]:
        """A function or class of one of NAMED_MODULES, by module and qualified name (checked
        to lead to this very object; `type(None)`, in `int | None`, has no name there)."""
        if obj is type(None):
            return ("named", "builtins", "NoneType")
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or \
                module.split(".")[0] not in NAMED_MODULES or "<" in qualname:
            raise Unsupported(obj)
        found: Any = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not obj:
            raise Unsupported(obj)
        return ("named", module, qualname)

    def _layout(self, fld: Any) -> Any:
        """What the frontend reads of a field (or of an ndarray reached through a template
        argument, which it compiles in as a field): never its data or address, nor the name
        of an unnamed one (`field<n>`, from the allocation order: the source's name is
        used)."""
        buffers = _classes()[3]
        return (self.fingerprint(fld.dtype), tuple(fld.shape), tuple(fld.element_shape),
                tuple(fld.offset), fld.name if fld.named else None, fld.named, fld.implicit,
                None if fld.grad is None else
                self._layout(fld.grad) if type(fld.grad) in buffers else self._fail(fld.grad),
                None if fld.dual is None else
                self._layout(fld.dual) if type(fld.dual) in buffers else self._fail(fld.dual))

    def _func(self, func: Any) -> Any:
        k = self.func_ids.get(id(func))
        if k is not None:
            return ("func", k)
        self.func_ids[id(func)] = len(self.funcs)
        self.funcs.append(func)
        fn = func.fn
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(func)
        return ("func", self.func_ids[id(func)], fn.__qualname__, func.source().text,
                func.is_lambda, tuple(sorted(func.template_params)),
                self.fingerprint(fn.__defaults__), self.fingerprint(fn.__kwdefaults__),
                self.fingerprint(dict(fn.__annotations__)))

    def _fail(self, obj: Any) -> Any:
        raise Unsupported(obj)

    def _count(self, n: int) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise Unsupported("too many items")


def _code_digest(code: types.CodeType) -> str:
    """A digest of what a code object does: its bytecode, constants (nested code objects by
    their digests), names and argument shape (not marshal's bytes: they depend on reference
    counts)."""
    h = xxhash.xxh3_128()
    h.update(code.co_code)
    for const in code.co_consts:
        h.update((_code_digest(const) if isinstance(const, types.CodeType) else
                  f"{type(const).__name__}:{const!r}").encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_kwonlyargcount, code.co_flags)).encode(
                       "utf-8", "surrogatepass"))
    return h.hexdigest()


_STAMPS: dict[str, Any] = {}


def _module_stamp(module: Any) -> Any:
    """(path, size, modification time) of a module's source file, once per process, as
    Python's bytecode cache checks a source: a class or function of that module is its code
    there. A module without a file (defined at the prompt, in an exec) has none."""
    found = _STAMPS.get(module)
    if found is None:
        import os
        path = getattr(sys.modules.get(module), "__file__", None) if isinstance(
            module, str) else None
        if not isinstance(path, str):
            raise Unsupported(module)
        st = os.stat(path)
        found = _STAMPS[module] = (path, st.st_size, st.st_mtime_ns)
    return found


_PATHS: dict[int, str] = {}
_PATHS_BUILT = [-1]           # len(sys.modules) when _PATHS was found
_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)
_ALIASES = (types.GenericAlias, types.UnionType)


def _jitrt_path(obj: Any) -> str | None:
    """The dotted path of an object of jitrt's own classes in its namespaces (`simt.block`
    and the builtins it holds, `simt.Tile32x32`: the frontend recognises them by identity),
    or None. The map is found from the package and its submodules down to four levels of
    attributes, again after a miss when modules were imported since (`jr.simt` is loaded on
    first use); a field or ndarray is never in it (data is not in jitrt's modules)."""
    path = _PATHS.get(id(obj))
    if path is None and _PATHS_BUILT[0] != len(sys.modules):
        _PATHS_BUILT[0] = len(sys.modules)
        _PATHS.clear()
        package = sys.modules["jitrt"]       # (loaded: this module is part of it)
        todo: list[tuple[Any, str, int]] = [(package, "jitrt", 0)]
        seen = {id(package)}
        while todo:
            parent, prefix, depth = todo.pop()
            for name, value in list(vars(parent).items()):
                if name.startswith("__") or id(value) in seen:
                    continue
                mod = getattr(type(value), "__module__", "") or ""
                sub = isinstance(value, types.ModuleType) and \
                    value.__name__.startswith("jitrt.")
                if not sub and (not mod.startswith("jitrt.") or isinstance(value, type)):
                    continue
                seen.add(id(value))
                if not sub:
                    _PATHS[id(value)] = f"{prefix}.{name}"
                if depth < 4 and hasattr(value, "__dict__"):
                    todo.append((value, f"{prefix}.{name}", depth + 1))
        path = _PATHS.get(id(obj))
    return path


_BUILTINS: dict[int, str] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_CLASSES: list[Any] = []


def _classes() -> tuple[frozenset[type], type, type, frozenset[type]]:
    """(the classes of placed fields, Func, Ndarray, fields' and Ndarray together), imported on
    first use (this module is imported before them). A field not placed yet is none of them."""
    if not _CLASSES:
        from ..data import Field, MatrixField, Ndarray, ScalarField
        from ..frontend.func import Func
        fields = frozenset((Field, ScalarField, MatrixField))
        _CLASSES[:] = [fields, Func, Ndarray, fields | {Ndarray}]
    return _CLASSES[0], _CLASSES[1], _CLASSES[2], _CLASSES[3]


def _builtin_names() -> dict[int, str]:
    """id -> name of every `Builtin` object of `frontend/builtins.py` (`jr.sin`, `jr.static`):
    the frontend recognises them by identity."""
    if not _BUILTINS:
        from ..frontend import builtins as bi
        for name, value in vars(bi).items():
            if isinstance(value, bi.Builtin):
                _BUILTINS[id(value)] = name
            elif isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, bi.Builtin):
                        _BUILTINS.setdefault(id(v), f"{name}[{k!r}]")
    return _BUILTINS
