"""``eugo.widgets``: notebook widgets, loaded on first use (ipywidgets is never imported on workers).

>>> import eugo_jupyter as eugo
>>> eugo.widgets.GPUCheck()            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__all__ = ["GPUCheck"]


def __getattr__(name: str) -> Any:
    if name == "GPUCheck":
        from .gpu_check import GPUCheck

        return GPUCheck
    raise AttributeError(f"module 'eugo_jupyter.widgets' has no attribute {name!r}")
