"""Where a launch from code goes: the Jupyter server that started this kernel, or this process.

A kernel started by a Jupyter server that runs the Manager sends its launches to that server's
REST API, so the cluster is on the panel, outlives the kernel and the panel can stop it. The
kernel finds its server without any setting: jupyter_client starts a kernel with
``JPY_PARENT_PID`` (the server's pid), and the server writes ``jpserver-<pid>.json`` (its port,
base URL and token, readable by this account only) into the runtime folder the kernel shares.
The token goes only to that server, on this machine: to 127.0.0.1 when the server listens on
every address or on localhost, else to the one address it listens on. A server without the
Manager (``/eugo/`` answers 404), or no server at all (a script, papermill, CI), means this
process runs the backends itself (:class:`InProcess`): a :class:`.manager.ClusterManager` on an
event loop of its own thread, whose lifetime-"server" clusters stop when this process exits.

>>> channel = find_channel()                          # doctest: +SKIP
>>> channel.where                                     # doctest: +SKIP
'the Jupyter server at http://127.0.0.1:8888/'
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .. import records
from ..exceptions import ClusterError
from .client import ManagerClient

__all__ = ["Channel", "InProcess", "Rest", "find_channel", "kernel_server"]

_T = TypeVar("_T")
_LOOPBACK = ("", "0.0.0.0", "::", "localhost", "127.0.0.1")


class Channel(Protocol):
    """The Manager's verbs, whichever Manager answers them."""

    where: str

    def preview(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def create(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def get(self, cluster_id: str) -> dict[str, Any] | None: ...
    def wait(self, cluster_id: str, timeout: float | None) -> dict[str, Any]: ...
    def add_node(self, cluster_id: str) -> dict[str, Any]: ...
    def remove_node(self, cluster_id: str, node: str) -> dict[str, Any]: ...
    def delete(self, cluster_id: str) -> None: ...
    def list(self) -> list[dict[str, Any]]: ...


def kernel_server(
    env: dict[str, str] | None = None, parent: int | None = None
) -> tuple[str, str] | None:
    """The URL and token of the Jupyter server that started this process, or None.

    >>> kernel_server({}, parent=1) is None or True
    True
    """
    from jupyter_core.paths import jupyter_runtime_dir

    env = dict(os.environ) if env is None else env
    pids = [p for p in (env.get("JPY_PARENT_PID", ""),) if p.isdigit()]
    pids.append(str(os.getppid() if parent is None else parent))
    for pid in dict.fromkeys(pids):
        path = Path(jupyter_runtime_dir()) / f"jpserver-{pid}.json"
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or str(info.get("pid")) != pid or not info.get("port"):
            continue
        host = str(info.get("hostname") or "")
        host = "127.0.0.1" if host in _LOOPBACK else host
        host = f"[{host}]" if ":" in host else host
        scheme = "https" if info.get("secure") else "http"
        base = str(info.get("base_url") or "/")
        return f"{scheme}://{host}:{int(info['port'])}{base}", str(info.get("token") or "")
    return None


class Rest:
    """The Manager of the Jupyter server that started this kernel, through its REST API."""

    def __init__(self, client: ManagerClient) -> None:
        self.client = client
        self.where = f"the Jupyter server at {client.url}/"

    def preview(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.client.preview(body)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.client.launch(body)

    def get(self, cluster_id: str) -> dict[str, Any] | None:
        return self.client.cluster(cluster_id)

    def wait(self, cluster_id: str, timeout: float | None) -> dict[str, Any]:
        return self.client.wait_until_running(cluster_id, timeout=timeout or 10 * 365 * 86400.0)

    def add_node(self, cluster_id: str) -> dict[str, Any]:
        return self.client.call("POST", f"eugo/clusters/{cluster_id}/nodes")  # type: ignore[no-any-return]

    def remove_node(self, cluster_id: str, node: str) -> dict[str, Any]:
        return self.client.call("DELETE", f"eugo/clusters/{cluster_id}/nodes/{node}")  # type: ignore[no-any-return]

    def delete(self, cluster_id: str) -> None:
        self.client.shutdown(cluster_id)

    def list(self) -> list[dict[str, Any]]:
        return self.client.clusters()


class InProcess:
    """A Manager in this process: its event loop runs in a thread of its own (a daemon)."""

    where = "this process"

    def __init__(self) -> None:
        from .manager import ClusterManager

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="eugo-manager", daemon=True
        )
        self.thread.start()
        # Other processes' records are theirs (adopt=False); Ray heads found on this machine
        # are for the panel to show.
        self.manager = ClusterManager(find_clusters=False, adopt=False)

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def preview(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._run(self.manager.preview(body)))

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._run(self.manager.create(body)))

    def get(self, cluster_id: str) -> dict[str, Any] | None:
        model = self._run(self.manager.get_cluster(cluster_id, fresh=True))
        return dict(model) if model is not None else None

    def wait(self, cluster_id: str, timeout: float | None) -> dict[str, Any]:
        return dict(self._run(self.manager.wait_until_running(cluster_id, timeout)))

    def _known(self, model: Any, cluster_id: str) -> dict[str, Any]:
        if model is None:
            raise ClusterError(f"No cluster with id {cluster_id!r} in this process.")
        return dict(model)

    def add_node(self, cluster_id: str) -> dict[str, Any]:
        return self._known(self._run(self.manager.add_node(cluster_id)), cluster_id)

    def remove_node(self, cluster_id: str, node: str) -> dict[str, Any]:
        return self._known(self._run(self.manager.remove_node(cluster_id, node)), cluster_id)

    def delete(self, cluster_id: str) -> None:
        self._run(self.manager.delete(cluster_id))

    def list(self) -> list[dict[str, Any]]:
        """This process's clusters, then the ones other processes recorded (as their records
        say: this process does not watch them)."""
        own = [dict(m) for m in self._run(self.manager.list_clusters())]
        ids = {m["id"] for m in own}
        others = [
            {key: r.get(key) for key in ("id", "name", "kind", "status", "address", "lifetime")}
            | {"recorded_by": r.get("server_pid")}
            for r in records.list_records()
            if r.get("id") not in ids
        ]
        return own + others


_lock = threading.Lock()
_channel: Channel | None = None


def find_channel() -> Channel:
    """The Jupyter server that started this kernel if it runs the Manager, else this process
    (decided once per process)."""
    global _channel
    with _lock:
        if _channel is None:
            _channel = _server_channel() or InProcess()
        return _channel


def _server_channel() -> Rest | None:
    found = kernel_server()
    if found is None:
        return None
    client = ManagerClient(*found, timeout=120.0)
    try:
        client.clusters()
    except (ClusterError, OSError):
        return None  # no Manager there (404), or it does not answer: this process runs them
    return Rest(client)
