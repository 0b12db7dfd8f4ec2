"""Launch backends of the EugoHPC Manager: one module per ``kind`` of cluster.

The manager knows backends only through :class:`~.base.Backend`. A backend class registers itself
by setting ``kind`` (:func:`~.base.registered`); importing its module here is all it takes, and
:func:`default_backends` makes one of each, configured from the server's configuration under the
class's own name (``c.SlurmBackend.shared_dir``, ``c.GridEngineBackend.memory_resource``). The
manager and the watchdog both take their backends from there.

>>> sorted(default_backends())
['allocation', 'connect', 'gridengine', 'kubernetes', 'local', 'slurm', 'ssh']
"""

from __future__ import annotations

from typing import Any

from . import (  # noqa: F401  (importing registers them)
    allocation,
    connect,
    gridengine,
    kuberay,
    local,
    slurm,
    ssh,
)
from .base import Backend, Observed, Plan, PlanModel, Spec, registered

__all__ = ["Backend", "Observed", "Plan", "PlanModel", "Spec", "default_backends", "registered"]


def default_backends(parent: Any = None, slurm_dir: str | None = None) -> dict[str, Backend]:
    """One backend per registered kind, configured by ``parent`` (the server extension).

    ``slurm_dir`` is the extension's older ``slurm_shared_dir`` setting, still read: it applies
    when ``c.SlurmBackend.shared_dir`` is not set.
    """
    backends = {kind: cls(parent=parent) for kind, cls in registered().items()}
    batch = backends.get("slurm")
    if slurm_dir and isinstance(batch, slurm.SlurmBackend) and not batch.shared_dir:
        backends["slurm"] = slurm.SlurmBackend(slurm_dir, parent=parent)
    return backends
