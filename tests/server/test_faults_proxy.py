"""A connected cluster must not steer this account's Ray token to a host the user did not choose.

The cluster publishes its dashboard address in its own key-value store; here that store is
rewritten, as anyone able to write it could, to point at a listener on another address (a
"trap"). The server must never send a request there, neither through the dashboard proxy nor
for its own task counts (issue 16). A trap on 127.0.0.1 itself, the host a head on this machine
does use, is refused too: its socket does not belong to the cluster's Ray session.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from eugo_jupyter._tempdirs import expected_dir
from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import local, ray_start


class _Trap(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        _Trap.seen.append(dict(self.headers))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def trap() -> Iterator[str]:
    """An HTTP listener on 127.0.0.2: this machine, but not an address the head uses."""
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), _Trap)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def loopback_trap() -> Iterator[str]:
    """An HTTP listener on 127.0.0.1, as any program (or account) on this machine can open."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trap)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def cluster() -> Iterator[local.Launched]:
    started = local.launch(
        ray_start.NodeSpec(num_cpus=1), [], expected_dir(f"c-p{secrets.token_hex(4)}")
    )
    yield started
    assert processes.stop(started.pgids, started.temp_dir) == []


def _publish(gcs_address: str, dashboard: str) -> None:
    """Write the cluster's published dashboard address, as the cluster itself (or anyone who
    can write its key-value store) can."""
    from ray._raylet import GcsClient

    monitor.auth_headers()  # this process sends the token, as the server does
    client = GcsClient(address=gcs_address)
    client.internal_kv_put(b"dashboard", dashboard.encode(), True, b"dashboard")


async def _connect(jp_fetch: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
    return json.loads(response.body)  # type: ignore[no-any-return]


async def test_a_published_dashboard_on_another_host_gets_no_request(
    jp_fetch: Any, cluster: local.Launched, trap: str
) -> None:
    _Trap.seen.clear()
    _publish(cluster.gcs_address, trap)
    model = await _connect(jp_fetch, {"kind": "connect", "address": cluster.gcs_address})
    assert model["dashboard_url"] is None and model["dashboard_proxy"] is None
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("eugo", "clusters", model["id"], "dashboard", "api", "version")
    assert info.value.code == 404
    for _ in range(3):  # monitoring reads (task counts go through the dashboard) send nothing
        await jp_fetch("eugo", "clusters", model["id"])
        await asyncio.sleep(0.1)
    assert _Trap.seen == []
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")


async def test_only_a_dashboard_on_the_heads_host_is_proxied(
    jp_fetch: Any, cluster: local.Launched, trap: str
) -> None:
    real = cluster.dashboard_url.removeprefix("http://")
    _publish(cluster.gcs_address, real)  # what Ray itself published
    model = await _connect(jp_fetch, {"kind": "connect", "address": cluster.gcs_address})
    assert model["dashboard_url"] == cluster.dashboard_url
    response = await jp_fetch("eugo", "clusters", model["id"], "dashboard", "api", "version")
    assert response.code == 200 and "ray_version" in json.loads(response.body)
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")

    # A dashboard the user types is checked the same way: the token stays on the head's host.
    _Trap.seen.clear()
    body = {"kind": "connect", "address": cluster.gcs_address, "dashboard": f"http://{trap}"}
    with pytest.raises(HTTPClientError) as info:
        await _connect(jp_fetch, body)
    assert info.value.code == 400
    assert "is not on the cluster's head" in json.loads(info.value.response.body)["message"]
    body["dashboard"] = cluster.dashboard_url
    model = await _connect(jp_fetch, body)
    response = await jp_fetch("eugo", "clusters", model["id"], "dashboard", "api", "version")
    assert response.code == 200
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert _Trap.seen == []


async def test_a_loopback_port_held_by_another_process_gets_no_token(
    jp_fetch: Any, cluster: local.Launched, loopback_trap: str
) -> None:
    """The head runs here and publishes 127.0.0.1:<port>: same host, but the port is not Ray's."""
    _Trap.seen.clear()
    _publish(cluster.gcs_address, loopback_trap)
    model = await _connect(jp_fetch, {"kind": "connect", "address": cluster.gcs_address})
    assert model["dashboard_url"] is None and model["dashboard_proxy"] is None
    assert "not part of the cluster's Ray session" in model["dashboard_refused"]
    for _ in range(3):  # no task counts through it either
        await jp_fetch("eugo", "clusters", model["id"])
        await asyncio.sleep(0.1)
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")

    # Named by the user, the port is checked the same way: refused with the reason.
    body = {"kind": "connect", "address": cluster.gcs_address}
    body["dashboard"] = f"http://{loopback_trap}"
    with pytest.raises(HTTPClientError) as info:
        await _connect(jp_fetch, body)
    assert info.value.code == 400
    assert (
        "not part of the cluster's Ray session" in json.loads(info.value.response.body)["message"]
    )
    assert _Trap.seen == []


async def test_a_record_steered_to_another_port_is_refused_with_a_reason(
    jp_fetch: Any, cluster: local.Launched, loopback_trap: str
) -> None:
    """A record whose dashboard port changed hands after the connect (the dashboard restarted
    elsewhere, the record edited) is checked again on every use: 403 with the sentence."""
    _publish(cluster.gcs_address, cluster.dashboard_url.removeprefix("http://"))
    model = await _connect(jp_fetch, {"kind": "connect", "address": cluster.gcs_address})
    assert model["dashboard_url"] == cluster.dashboard_url and model["dashboard_refused"] is None
    path = Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "eugo" / "clusters" / f"{model['id']}.json"
    record = json.loads(path.read_text())
    record["dashboard_url"] = f"http://{loopback_trap}"
    path.write_text(json.dumps(record))
    _Trap.seen.clear()
    # The running server keeps its records in memory: a fresh one reads the edited file.
    from eugo_jupyter.server.manager import ClusterManager

    manager = ClusterManager(find_clusters=False)
    target = await manager.dashboard_target(model["id"])
    assert isinstance(target, str) and "not part of the cluster's Ray session" in target
    await manager.close()
    assert _Trap.seen == []
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
