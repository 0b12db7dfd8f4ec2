"""Registering the ``.eugo`` accessors without importing pandas.

``import eugo_jupyter`` must stay cheap (a Ray worker imports it), so pandas is never imported on
its behalf. Instead:

- if pandas is already imported, the accessors are registered at once;
- otherwise a one-shot import hook waits for pandas: right after pandas finishes importing
  (whenever the notebook does ``import pandas``), the accessors are registered;
- ``eugo_jupyter.pandas.register()`` (also run on first access of ``eugo.pandas``) registers
  them explicitly, importing pandas.

``%load_ext eugo_jupyter`` imports the package, so it installs the same hook.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["install"]


def _register_quietly() -> None:
    try:
        from . import register

        register()
    except Exception as exc:  # noqa: BLE001 - never break `import pandas` for the user
        warnings.warn(
            f"eugo_jupyter could not register the .eugo pandas accessors: {exc}", stacklevel=3
        )


class _Loader(importlib.abc.Loader):
    """pandas' own loader, plus registering the accessors once pandas has run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _register_quietly()

    def __getattr__(self, name: str) -> Any:  # resources, get_code...: pandas' loader answers
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when ``pandas`` is looked up, wraps the real spec's loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "pandas":
            return None
        _uninstall()  # one shot; also keeps the lookup below from finding us again
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def install() -> None:
    """Register now if pandas is loaded, else when it gets imported. Idempotent."""
    if "pandas" in sys.modules:
        _register_quietly()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
