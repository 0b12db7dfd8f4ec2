"""The findings of a cluster's latest profiled runs, as the cluster model carries them.

Kernels write them next to the cluster's record when a ``with eugo.hpc.profile()`` block ends
(:func:`eugo_jupyter.records.write_findings`); the files outlive the kernel, so the card keeps
showing them. This module only reads.
"""

from __future__ import annotations

from .. import records

__all__ = ["findings_of"]


def findings_of(cluster_id: str) -> list[records.RunFindings]:
    """The newest runs' findings of a cluster, newest first; [] when none or unreadable.

    >>> findings_of("c-unknown")
    []
    """
    try:
        return records.read_findings(cluster_id)
    except (OSError, ValueError):
        return []
