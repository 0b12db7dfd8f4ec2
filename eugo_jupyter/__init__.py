"""eugo_jupyter: Ray, made Jupyter-native.

>>> import eugo_jupyter as eugo
>>> @eugo.hpc.distribute
... def double(x):
...     return 2 * x
>>> eugo.hpc.get(double(21))       # doctest: +SKIP
42

This module only registers: the distributed API lives in ``eugo_jupyter.hpc``, which, like the
Jupyter parts (server extension, magics, widgets), loads on first use: a Ray worker importing
this package never pulls in a web server or IPython, and the Jupyter server never loads hpc.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from . import _hooks
from .exceptions import EugoError
from .pandas import _hook

# The .eugo pandas accessors: registered now if pandas is loaded, else when it is imported;
# pandas itself is never imported here (see eugo_jupyter/pandas/_hook.py).
_hook.install()

__version__ = "0.1.0"

__all__ = ["EugoError", "__version__", "check", "gpu", "hpc", "widgets"]


def _size_gpu_memory(options: Mapping[str, Any]) -> dict[str, Any]:
    # Lazy: gpu/ loads only when a call uses gpu_memory=; hpc never imports gpu/ itself.
    from .gpu.sizing import options_for_gpu_memory

    return options_for_gpu_memory(options)


class _GpuUse:
    # Lazy, as above: gpu/audit.py loads only when a GPU call is measured or a report reads audits.
    def measure(
        self, name: str, num_gpus: float, started: float, duration: float, error: str | None
    ) -> Any:
        from .gpu.audit import measure

        return measure(name, num_gpus, started, duration, error)

    def latest_records(self) -> Any:
        from .gpu.audit import audit_records

        return audit_records()


class _Launcher:
    # Lazy, as above: the Manager's backends and REST client load at the first launch.
    def launch(self, kind: str, **fields: Any) -> Any:
        from .server.from_code import launch

        return launch(kind, **fields)

    def clusters(self) -> Any:
        from .server.from_code import clusters

        return clusters()


class _Optimizer:
    # Lazy, as above: the optimizer (and numba) load at the first call that asks for optimize=.
    def for_task(self, fn: Any, mode: Any, options: Mapping[str, Any], label: str) -> Any:
        from .hpc.optimize._calls import for_task

        return for_task(fn, mode, options, label)

    def wrap(
        self, fn: Any, mode: Any, options: Mapping[str, Any], expected_calls: int | None = None
    ) -> Any:
        from .hpc.optimize._runtime import Optimized, Settings

        return Optimized(fn, Settings.of(mode, options, expected_calls))

    def declared(self) -> None:
        from .hpc.optimize._prewarm import declare

        declare()


_hooks.set_gpu_memory_sizer(_size_gpu_memory)
_hooks.set_optimizer(_Optimizer())
_hooks.set_gpu_use(_GpuUse())
_hooks.set_launcher(_Launcher())


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Jupyter server hook: the EugoHPC Manager's REST API under ``/eugo/``."""
    from .server import EugoManagerExtension  # lazy: only the Jupyter server pays for tornado

    return [{"module": "eugo_jupyter", "app": EugoManagerExtension}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Jupyter server hook for servers that load module-style extensions."""
    from .server import _load

    _load(serverapp)


def __getattr__(name: str) -> Any:
    # Lazy: heavy or Jupyter-only parts load on first access.
    import importlib

    if name in {"exceptions", "gpu", "hpc", "magics", "records", "widgets"}:
        return importlib.import_module(f".{name}", __name__)
    if name == "check":
        return importlib.import_module(".gpu", __name__).check
    raise AttributeError(f"module 'eugo_jupyter' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext eugo_jupyter``: registers ``%%distribute`` and ``%eugo``, binds ``eugo``.

    Loading twice is harmless.
    """
    from .magics import load

    # The package is handed over, so magics never imports eugo_jupyter back (no import cycle).
    load(ipython, sys.modules[__name__])


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the built EugoHPC Manager panel (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "eugo_jupyter"}]
