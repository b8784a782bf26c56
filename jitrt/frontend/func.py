"""`@jr.func` objects: Python functions inlined into kernels.

Stage: frontend. A `Func` keeps the function, its parameters annotated `jr.template()` (passed
by reference when inlined) and its parsed source (read once). Lowering inlines it at each call
site (`lower_call.py`); called outside a kernel it is the plain Python function.
"""
from __future__ import annotations

import inspect
import textwrap
import typing
import weakref
from typing import Any, Callable

from ..errors import KernelSyntaxError
from ..types import Template
from .source import SourceInfo, capture


def resolve_annotation(fn: Callable, ann: Any) -> Any:
    """The jitrt annotation of a parameter: the text of a string annotation evaluated, and of
    `typing.Annotated[T, spec]` the spec (T is for type checkers: docs/usage.md, "Type
    checking")."""
    if isinstance(ann, str):
        try:
            ann = eval(ann, fn.__globals__)  # noqa: S307 - the user's own annotation text
        except Exception as exc:  # noqa: BLE001
            raise KernelSyntaxError(f"cannot evaluate annotation {ann!r} of "
                                    f"{fn.__qualname__}: {exc}") from None
    if typing.get_origin(ann) is typing.Annotated:
        return ann.__metadata__[0]
    return ann


def refuse_wrapped(fn: Callable, decorator: str) -> None:
    """A function that another decorator wrapped before `@jr.kernel`/`@jr.func` saw it
    (`@jr.kernel @twice def k`, with `functools.wraps`): its source is the inner function's,
    so compiling it would silently drop the wrapper. Refused, naming the decorator(s)."""
    if not hasattr(fn, "__wrapped__"):
        return
    inner = inspect.unwrap(fn)
    code = getattr(inner, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code is not None else ("?", 0)
    names = wrapping_decorators(inner, decorator)
    raise KernelSyntaxError(
        f"{decorator} on {inner.__qualname__}: the function is wrapped by "
        f"{', '.join('@' + x for x in names) or 'another decorator'} (placed between "
        f"{decorator} and the def); {decorator} compiles the function's own source, so the "
        f"wrapper would be silently dropped. Put {decorator} directly on the def and do "
        "what the wrapper does in the body (a @jr.func may call another)", *where)


def wrapping_decorators(fn: Callable, decorator: str) -> list[str]:
    """The source text of the decorators listed below the jitrt one on `fn`'s def."""
    import ast
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    texts = [ast.unparse(d) for d in fdef.decorator_list]
    short = decorator.lstrip("@").split(".")[-1]           # "kernel", "func"
    below = [k for k, t in enumerate(texts) if t.split("(")[0].split(".")[-1] == short]
    return texts[below[-1] + 1:] if below else texts


class Func:
    """A function inlined into kernels. Parameters annotated `jr.template()` are by reference."""

    def __init__(self, fn: Callable) -> None:
        refuse_wrapped(fn, "@jr.func")
        self.fn = fn
        self.is_lambda = fn.__name__ == "<lambda>"
        self.name = "lambda" if self.is_lambda else fn.__name__
        self._source: SourceInfo | None = None
        anns = {k: resolve_annotation(fn, v)
                for k, v in getattr(fn, "__annotations__", {}).items()}
        self.template_params = frozenset(k for k, v in anns.items() if isinstance(v, Template))
        # the other annotations: a dtype, int/float or a vector/matrix type converts the
        # parameter (or the return value), as Taichi's casts do (lower_return.py)
        self.return_type = anns.pop("return", None)
        self.param_types = {k: v for k, v in anns.items() if k not in self.template_params}

    @property
    def key(self) -> str:
        """What names the func's source in a cache key: its module and qualified name (two
        modules may each have a `support_driver`); a lambda's also has its text (the lambdas
        of one scope share a qualified name)."""
        name = f"{self.fn.__module__}.{self.fn.__qualname__}"
        if self.is_lambda:
            return f"{name}:{self.source().text}"
        return name

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = capture(self.fn)
        return self._source

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)  # outside kernels: plain Python

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """`obj.f` for a func defined in a class: inlined with `self` bound to obj."""
        return self if obj is None else BoundFunc(self, obj)

    def __repr__(self) -> str:
        return f"<jitrt func {self.fn.__qualname__}>"


class BoundFunc:
    """A `@jr.func` method reached through its object: called in a kernel, it is inlined with
    the object as its first argument; outside kernels, the plain bound method."""

    def __init__(self, func: Func, obj: Any) -> None:
        self.func, self.obj = func, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func.fn(self.obj, *args, **kwargs)


_PLAIN_FUNCS: "weakref.WeakKeyDictionary[Any, Func]" = weakref.WeakKeyDictionary()


def plain_func(fn: Any) -> Func:
    """The Func of a plain Python function called from a kernel (made once per function)."""
    found = _PLAIN_FUNCS.get(fn)
    if found is None:
        found = _PLAIN_FUNCS[fn] = Func(fn)
    return found
