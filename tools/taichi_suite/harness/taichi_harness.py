"""The parts of Taichi's test harness its test files import from `taichi.lang.*`, written for
jitrt's runner: they describe the machine and the test environment, not the language.

- `taichi.lang.misc.get_host_arch_list()`: the host's arch, `[ti.cpu]`;
- `taichi.lang.util.has_pytorch()` / `has_paddle()` / `has_clangpp()`: whether the package is
  installed here;
- `taichi.lang.exception`: the module of Taichi's exception names, which jitrt exports at top
  level (`ti.TaichiSyntaxError`, ...); a name jitrt lacks fails as `ti.<name>` would.
Any other module of Taichi's internals (`taichi.lang.impl`, `taichi._lib.core`, ...) imports
as an empty stand-in whose every attribute is an AttributeError saying "Taichi's internals":
the test that uses it fails there (the runner counts it out of scope), while the file's other
tests still run. Nothing of Taichi's behaviour is imitated. Every other
`taichi.X` module is `jitrt.X` (`from taichi.math import vec3` is `jitrt.math.vec3`), one
module object, not a second copy.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import shutil
import sys
import types


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _module(name: str, **attrs: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


def _exception_module() -> types.ModuleType:
    import jitrt
    mod = _module("taichi.lang.exception")

    def __getattr__(name: str) -> object:
        return getattr(jitrt, name)
    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return mod


INTERNALS = ("taichi.lang.", "taichi._")


class _Internals(types.ModuleType):
    """A module of Taichi's internals: importable, every attribute an AttributeError."""
    __path__: list[str] = []     # a package: its submodules are internals too

    def __getattr__(self, name: str) -> object:
        raise AttributeError(f"{self.__name__}.{name} is Taichi's internals, not part of jitrt")


class _InternalsFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True) \
            if fullname.startswith(INTERNALS) else None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return _Internals(spec.name)

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        pass


class _JitrtAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`taichi.X.Y` is the module `jitrt.X.Y` (ModuleNotFoundError naming taichi.X.Y if none)."""

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if not fullname.startswith("taichi.") or fullname.startswith(INTERNALS):
            return None
        real = "jitrt." + fullname[len("taichi."):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        real = importlib.import_module("jitrt." + spec.name[len("taichi."):])
        self.own_spec = real.__spec__
        return real

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        # the import system stamped the alias's spec on jitrt's module: give it its own back
        module.__spec__ = self.own_spec


def register_modules() -> None:
    sys.meta_path.insert(0, _JitrtAlias())
    sys.meta_path.append(_InternalsFinder())
    import jitrt
    misc = _module("taichi.lang.misc", get_host_arch_list=lambda: [jitrt.cpu])
    util = _module("taichi.lang.util", has_pytorch=lambda: _has("torch"),
                   has_paddle=lambda: _has("paddle"),
                   has_clangpp=lambda: shutil.which("clang++") is not None)
    lang = _Internals("taichi.lang")
    lang.__dict__.update(misc=misc, util=util, exception=_exception_module())
    sys.modules["taichi.lang"] = lang
