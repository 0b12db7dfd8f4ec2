"""``eugo.hpc.launch`` and ``eugo.hpc.clusters``: clusters from a notebook cell or a script.

The Manager's backends and its REST client sit above hpc (``eugo_jupyter.server``), so these two
functions call what the package root registered in :mod:`eugo_jupyter._hooks`
(``server/from_code.py``): hpc never imports the server, and a Ray worker never loads it.

>>> import eugo_jupyter as eugo
>>> cluster = eugo.hpc.launch("local", workers=[{"num_cpus": 1}])   # doctest: +SKIP
>>> cluster.wait().use()                                            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from .. import _hooks
from ..exceptions import OptionsError

__all__ = ["clusters", "launch"]


def _launcher() -> _hooks.Launcher:
    if _hooks.launcher is None:
        raise OptionsError(
            "Clusters cannot be launched from here: import eugo_jupyter (which registers the "
            "launcher) rather than eugo_jupyter.hpc alone."
        )
    return _hooks.launcher


def launch(kind: str, **fields: Any) -> Any:
    """Launch a cluster of ``kind`` ("local", "slurm", "gridengine", "ssh", "kubernetes",
    "allocation", "connect"); returns a Cluster (``preview``, ``wait``, ``scale``, ``use``,
    ``close``).

    The keyword arguments are the fields of ``POST /eugo/clusters`` (the kind's own fields given
    flat: ``nodes=2`` for ``{"slurm": {"nodes": 2}}``); bad ones raise OptionsError naming the
    field, before anything starts. ``start=False`` checks and returns without starting.

    >>> import eugo_jupyter as eugo
    >>> cluster = eugo.hpc.launch("slurm", nodes=2, walltime="01:00:00")   # doctest: +SKIP
    >>> print(cluster.preview())                                          # doctest: +SKIP
    """
    return _launcher().launch(kind, **fields)


def clusters() -> Any:
    """What the Manager knows: every cluster, as a table (HTML in a notebook).

    >>> import eugo_jupyter as eugo
    >>> eugo.hpc.clusters()                                  # doctest: +SKIP
    """
    return _launcher().clusters()
