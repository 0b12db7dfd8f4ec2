"""Notebook widgets: per-call resource options, a live cluster summary, GPU verification.

Loaded on first use: ipywidgets is never imported on Ray workers.

>>> import eugo_jupyter as eugo
>>> w = eugo.widgets.ResourceOptions(num_cpus=4, num_gpus=0.25)     # doctest: +SKIP
>>> w.value                                                        # doctest: +SKIP
{'num_cpus': 4, 'num_gpus': 0.25}
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ClusterStatus", "GPUCheck", "ResourceOptions"]

# Public name -> module that defines it; each module imports ipywidgets only when first used.
_WHERE = {
    "ClusterStatus": "._cluster_status",
    "GPUCheck": ".gpu_check",
    "ResourceOptions": "._resource_options",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module 'eugo_jupyter.widgets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
