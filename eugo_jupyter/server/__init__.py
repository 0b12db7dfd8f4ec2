"""The Jupyter server extension of the EugoHPC Manager: registration only.

Routes live in :mod:`.routes`, state in :mod:`.manager`, ``ray start`` in :mod:`.launcher`,
reading a cluster in :mod:`.monitor`. Jupyter finds it through
``eugo_jupyter._jupyter_server_extension_points``; this module is imported only by the server.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp

from .manager import ClusterManager
from .routes import setup_route_handlers

__all__ = ["ClusterManager", "EugoManagerExtension", "setup_route_handlers"]


class EugoManagerExtension(ExtensionApp):
    """Mounts ``/eugo/`` and stops clusters launched with lifetime "server" when the server stops."""

    name = "eugo_jupyter"
    load_other_extensions = True

    def initialize_settings(self) -> None:
        self.manager = ClusterManager()

    def initialize_handlers(self) -> None:
        setup_route_handlers(self.serverapp.web_app, self.manager)

    async def stop_extension(self) -> None:
        await self.manager.close()


def _load(serverapp: Any) -> EugoManagerExtension:
    """Load for a server that calls module-style hooks (``_load_jupyter_server_extension``)."""
    return EugoManagerExtension._load_jupyter_server_extension(serverapp)  # type: ignore[no-any-return]
