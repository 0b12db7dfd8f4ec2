"""Launch backends of the EugoHPC Manager: one module per ``kind`` of cluster.

The manager knows backends only through :class:`~.base.Backend`; it gets its set from
:func:`default_backends` (the ``ssh`` backend adds itself there).

>>> sorted(default_backends())
['connect', 'local', 'slurm', 'ssh']
"""

from __future__ import annotations

from .base import Backend, Observed, Plan, PlanModel, Spec
from .connect import ConnectBackend
from .local import LocalBackend
from .slurm import SlurmBackend
from .ssh import SshBackend

__all__ = ["Backend", "Observed", "Plan", "PlanModel", "Spec", "default_backends"]


def default_backends(slurm_dir: str | None = None) -> dict[str, Backend]:
    """One backend per kind; ``slurm_dir`` is the shared folder SLURM clusters live in."""
    backends: list[Backend] = [
        LocalBackend(), SlurmBackend(slurm_dir), SshBackend(), ConnectBackend()
    ]
    return {b.kind: b for b in backends}
