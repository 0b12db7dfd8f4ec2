"""The one module that uses numba's private API: when numba renames one, this is the file to fix.

Two things the optimizer needs have no public API in numba:

- **The node cache** (:mod:`._nodecache`): numba's ``FunctionCache`` located in a folder of our
  key, built from ``numba.core.caching``'s ``_CacheLocator`` and ``CompileResultCacheImpl``,
  and set as a dispatcher's ``_cache``.
- **New argument types** (:mod:`._runtime`): a settled dispatcher calls its
  ``_compile_for_args`` (looked up on the instance) before compiling a version for argument
  types it has none for; the optimizer puts its own there to check that version against
  Python first.

``tests/test_layering.py`` checks that no other module names them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "cache_class",
    "call_compile_for_args",
    "can_intercept",
    "ensure_cache_path",
    "intercept_new_types",
    "set_cache",
    "stop_intercepting",
]


@functools.cache
def cache_class(folder_of: Callable[[Any], Path | None]) -> type:
    """numba's ``FunctionCache``, located in ``folder_of(py_func)`` (built on first use: numba
    loads late). The stamp check compares the folder's name (our key), not a file's mtime."""
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
