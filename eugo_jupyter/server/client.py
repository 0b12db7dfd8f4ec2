"""A small client for the EugoHPC Manager's REST API, for scripts and terminals.

Standard library only (no tornado), synchronous, authenticated with the Jupyter server's token.

>>> client = ManagerClient("http://127.0.0.1:8888/", token="...")          # doctest: +SKIP
>>> model = client.launch({"kind": "slurm", "slurm": {"nodes": 2}})         # doctest: +SKIP
>>> client.wait_until_running(model["id"])["address"]                      # doctest: +SKIP
'10.1.2.3:41234'
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ..exceptions import ClusterError

__all__ = ["ManagerClient"]


class ManagerClient:
    """Calls ``/eugo/...`` on a Jupyter server; errors carry the server's sentence."""

    def __init__(self, url: str, token: str, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: object = None) -> Any:
        """One request; the parsed JSON answer (None for 204). Raises ClusterError on 4xx/5xx."""
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message") or text
            except ValueError:
                message = text
            raise ClusterError(f"{method} {path} answered {error.code}: {message}") from None
        return json.loads(raw) if raw else None

    def clusters(self) -> list[dict[str, Any]]:
        return self.call("GET", "eugo/clusters")  # type: ignore[no-any-return]

    def cluster(self, cluster_id: str) -> dict[str, Any]:
        return self.call("GET", f"eugo/clusters/{cluster_id}")  # type: ignore[no-any-return]

    def launch(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "eugo/clusters", body)  # type: ignore[no-any-return]

    def preview(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "eugo/clusters/preview", body)  # type: ignore[no-any-return]

    def shutdown(self, cluster_id: str) -> None:
        self.call("DELETE", f"eugo/clusters/{cluster_id}")

    def wait_until_running(
        self, cluster_id: str, timeout: float = 600.0, poll: float = 0.5
    ) -> dict[str, Any]:
        """Poll until the cluster runs; ClusterError with the card's sentence if it cannot."""
        deadline = time.monotonic() + timeout
        while True:
            model = self.cluster(cluster_id)
            if model["status"] == "running":
                return model
            if model.get("final_error"):  # the server's rule: it will not come up by itself
                raise ClusterError(model.get("error") or f"The cluster is {model['status']}.")
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"Cluster {cluster_id} is still {model['status']} after {timeout:g} s"
                    + (f": {model['error']}" if model.get("error") else ".")
                )
            time.sleep(poll)
