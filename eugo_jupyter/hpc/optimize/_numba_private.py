"""The one module that uses numba's private API: when numba renames one, this is the file to fix.

What the optimizer needs that has no public API in numba:

- **The node cache** (:mod:`._nodecache`): numba's ``FunctionCache`` located in a folder of our
  key, built from ``numba.core.caching``'s ``_CacheLocator`` and ``CompileResultCacheImpl``,
  and set as a dispatcher's ``_cache``.
- **The ``print`` numba compiles** (:mod:`._compile`): numba types the ``builtins.print`` it
  found when it loaded and lowers the one it finds when its CPU target starts; Ray's
  ``tqdm_ray`` replaces ``builtins.print`` with its ``safe_print`` in a process that showed a
  bar, which can fall between the two. The registries say which object numba knows.
- **New argument types** (:mod:`._runtime`): a settled dispatcher calls its
  ``_compile_for_args`` (looked up on the instance) before compiling a version for argument
  types it has none for; the optimizer puts its own there to check that version against
  Python first.
- **An argument's type as a call would see it** (:mod:`._compile`): ``numba.typeof`` with
  ``numba.core.typing.typeof.Purpose.argument`` (a read-only array types as read-only, as in a
  call), which numba does not export.

``tests/test_layering.py`` checks that no other module names them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._prewarm import import_numba

__all__ = [
    "cache_class",
    "call_compile_for_args",
    "can_intercept",
    "ensure_cache_path",
    "intercept_new_types",
    "set_cache",
    "stop_intercepting",
    "typed_print",
    "typeof_argument",
]


@functools.cache
def cache_class(folder_of: Callable[[Any], Path | None]) -> type:
    """numba's ``FunctionCache``, located in ``folder_of(py_func)`` (built on first use: numba
    loads late). The stamp check compares the folder's name (our key), not a file's mtime."""
    import_numba()  # whole, before its parts
    from numba.core import caching

    class Locator(caching._CacheLocator):
        def __init__(self, folder: Path) -> None:
            self._folder = folder

        def ensure_cache_path(self) -> None:
            self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)

        def get_cache_path(self) -> str:
            return str(self._folder)

        def get_source_stamp(self) -> str:
            return self._folder.name

        def get_disambiguator(self) -> str:
            return "eugo"

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            folder = folder_of(py_func)
            return None if folder is None else cls(folder)

    class Impl(caching.CompileResultCacheImpl):
        _locator_classes: list[Any] = [Locator]

        def __init__(self, py_func: Any) -> None:
            self._name = py_func.__qualname__
            super().__init__(py_func)

        def get_filename_base(self, fullname: str, abiflags: str) -> str:
            # One folder per key: the function's name is enough (the cell file's is not).
            return super().get_filename_base(self._name, abiflags)

    class Cache(caching.FunctionCache):
        _impl_class = Impl

    return Cache


def typed_print() -> Any:
    """The ``print`` numba compiles, known to both its typing and its lowering. When Ray's
    ``safe_print`` came into ``builtins`` after numba loaded, the lowering (loaded with Ray's)
    is given the typed one too, so that the two agree."""
    import builtins

    import_numba()  # whole, before its parts
    from numba.core.typing.templates import builtin_registry

    typed = [v for v, _ in builtin_registry.globals if _is_print(v)]
    from numba.cpython import printimpl  # registers its lowering of today's builtins.print

    lowered = [f for _, f, _ in printimpl.registry.functions if _is_print(f)]
    for value in (builtins.print, *typed):
        if any(value is t for t in typed) and any(value is f for f in lowered):
            return value
    if not typed:
        return builtins.print  # numba's own error follows, as without us
    # Both loaded, each with another object: numba's lowering of print serves the typed one too
    # (the registry is incremental: the target installs it at its next refresh, each compile).
    from numba.core import types

    printimpl.registry.lower(typed[0], types.VarArg(types.Any))(printimpl.print_varargs_impl)
    return typed[0]


def _is_print(value: Any) -> bool:
    return callable(value) and getattr(value, "__name__", None) in ("print", "safe_print")


def ensure_cache_path(cache: Any) -> None:
    """Make the folder of a cache built by :func:`cache_class`."""
    cache._impl.locator.ensure_cache_path()


def set_cache(dispatcher: Any, cache: Any) -> None:
    """Make ``dispatcher`` load from and save to ``cache``."""
    dispatcher._cache = cache


def can_intercept(dispatcher: Any) -> bool:
    """Whether ``dispatcher`` is numba's, with the hook for new argument types."""
    return dispatcher is not None and hasattr(dispatcher, "_compile_for_args")


def intercept_new_types(dispatcher: Any, callback: Callable[..., Any]) -> None:
    """Numba calls ``callback(*args, **kwargs)`` (which returns a callable numba then calls
    with the arguments) for argument types ``dispatcher`` has no version for."""
    dispatcher._compile_for_args = callback  # numba looks it up on the instance


def stop_intercepting(dispatcher: Any) -> None:
    vars(dispatcher).pop("_compile_for_args", None)


def call_compile_for_args(dispatcher: Any, *args: Any, **kwargs: Any) -> Any:
    """Numba's own handling of new argument types (compile the version, then run it)."""
    return type(dispatcher)._compile_for_args(dispatcher, *args, **kwargs)


def typeof_argument(value: Any) -> Any:
    """numba's type of ``value`` passed as an argument of a compiled call."""
    import_numba()  # whole, before its parts
    from numba.core.typing.typeof import Purpose, typeof

    return typeof(value, Purpose.argument)
