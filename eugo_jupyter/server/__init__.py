"""The Jupyter server extension of the EugoHPC Manager: registration only.

Routes live in :mod:`.routes`, state in :mod:`.manager`, backends in :mod:`.backends`,
reading a cluster in :mod:`.monitor`. Jupyter finds it through
``eugo_jupyter._jupyter_server_extension_points``; this module is imported only by the server.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, List, Unicode

from .backends import default_backends
from .manager import ClusterManager
from .routes import setup_route_handlers

__all__ = ["ClusterManager", "EugoManagerExtension", "setup_route_handlers"]


class EugoManagerExtension(ExtensionApp):
    """Mounts ``/eugo/`` and stops clusters launched with lifetime "server" when the server
    stops."""

    name = "eugo_jupyter"
    load_other_extensions = True

    max_age = Float(
        2.0,
        config=True,
        help=(
            "Seconds between reads of what a cluster's backend sees (a scheduler query may be "
            "behind it), and between reads of its task counts while work runs (each is a pass "
            "over Ray's task table). Ray's nodes and resources are read every 0.5 s at most."
        ),
    )
    launch_timeout = Float(
        180.0,
        config=True,
        help="Seconds a `ray start` may take before the launch counts as failed.",
    )

    find_clusters = Bool(
        True,
        config=True,
        help="List Ray heads running on this machine that the Manager did not start (kind "
        '"found"), so they can be connected to.',
    )
    slurm_shared_dir = Unicode(
        "",
        config=True,
        help="Older name of c.SlurmBackend.shared_dir, still read when that is not set: the "
        "folder on a file system every SLURM node shares, where SLURM clusters keep their job "
        "scripts, logs and the head's address (default: ~/.eugo/slurm).",
    )
    profiles = List(
        Dict(),
        config=True,
        help="Launch profiles offered in the panel (GET /eugo/profiles): each "
        '{"name": "GPU, 2 nodes, 1 h", "description": "...", "body": {"kind": "slurm", '
        '"slurm": {"partition": "gpu", "nodes": 2, "walltime": "01:00:00"}}, '
        '"editable": ["slurm.walltime", "slurm.nodes"]}.',
    )

    def initialize_settings(self) -> None:
        self.manager = ClusterManager(
            max_age=self.max_age,
            launch_timeout=self.launch_timeout,
            backends=default_backends(parent=self, slurm_dir=self.slurm_shared_dir or None),
            profiles=list(self.profiles),
            find_clusters=self.find_clusters,
        )

    def initialize_handlers(self) -> None:
        setup_route_handlers(self.serverapp.web_app, self.manager)

    async def stop_extension(self) -> None:
        await self.manager.close()


def _load(serverapp: Any) -> EugoManagerExtension:
    """Load for a server that calls module-style hooks (``_load_jupyter_server_extension``)."""
    return EugoManagerExtension._load_jupyter_server_extension(serverapp)  # type: ignore[no-any-return]
