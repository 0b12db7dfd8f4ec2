"""eugo_jupyter: Ray, made Jupyter-native.

>>> import eugo_jupyter as eugo
>>> @eugo.hpc.distribute
... def double(x):
...     return 2 * x
>>> eugo.hpc.get(double(21))       # doctest: +SKIP
42

This module only registers: the distributed API lives in ``eugo_jupyter.hpc``; the Jupyter
parts (server extension, magics, widgets) load lazily, so a Ray worker importing this package
never pulls in a web server or IPython.
"""

from __future__ import annotations

from typing import Any

from . import hpc
from .exceptions import EugoError

__version__ = "0.1.0"

__all__ = ["EugoError", "__version__", "hpc"]


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

    if name in {"exceptions", "records"}:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'eugo_jupyter' has no attribute {name!r}")


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the built EugoHPC Manager panel (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "eugo_jupyter"}]
