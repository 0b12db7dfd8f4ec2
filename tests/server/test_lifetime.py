"""Which clusters outlive the Jupyter server: "server" ones stop with it, records of dead clusters
are forgotten when a server starts."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from eugo_jupyter import _processes as processes
from eugo_jupyter import records
from tests.fixtures.jupyter import jupyter_server

DEADLINE = 240.0


async def test_server_lifetime_cluster_stops_with_the_server(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    body = {"kind": "local", "name": "short-lived", "head": {"num_cpus": 1}, "lifetime": "server"}
    response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
    cluster_id = json.loads(response.body)["id"]
    deadline = time.monotonic() + DEADLINE
    while True:
        model = json.loads((await jp_fetch("eugo", "clusters", cluster_id)).body)
        assert model["status"] in ("starting", "running"), model["error"]
        if model["status"] == "running":
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.5)
    assert model["lifetime"] == "server" and len(model["nodes"]) == 1
    record = records.read_record(cluster_id)
    assert record is not None and all(processes.group_members(g) for g in record["pgids"])

    # What the Jupyter server does when it shuts down.
    await jp_serverapp.extension_manager.stop_all_extensions()

    assert [pid for g in record["pgids"] for pid in processes.group_members(g)] == []
    assert records.read_record(cluster_id) is None
    assert not Path(record["temp_dir"]).exists()


async def test_a_dead_clusters_record_is_forgotten_on_start(jp_fetch: Any) -> None:
    finished = subprocess.Popen(["true"], start_new_session=True)  # noqa: ASYNC220 - `true` exits at once
    # its process group is empty now, like a cluster killed while the server was down
    finished.wait()
    records.write_record(
        {
            "id": "c-dead0001",
            "name": "gone",
            "kind": "local",
            "address": "127.0.0.1:1",
            "dashboard_url": None,
            "created": "2026-01-01T00:00:00+00:00",
            "lifetime": "persistent",
            "server_pid": os.getpid(),
            "pids": [finished.pid],
            "pgids": [finished.pid],
            "temp_dir": "/tmp/eugo-c-dead0001",
        }
    )
    records.set_active({"id": "c-dead0001", "address": "127.0.0.1:1", "name": "gone"})
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []
    assert records.read_record("c-dead0001") is None
    assert records.active_record() is None  # new kernels go back to the embedded default


def test_a_real_jupyter_server_stopped_by_sigterm_stops_its_cluster(tmp_path: Path) -> None:
    """The whole path: `jupyter server` process, launch over HTTP, SIGTERM, nothing left."""
    import signal

    record: dict[str, Any] = {}
    try:
        with jupyter_server(tmp_path) as (client, server):
            body = {"kind": "local", "name": "ends with server", "head": {"num_cpus": 1}}
            model = client.launch(body)
            assert model["lifetime"] == "server"  # the default
            model = client.wait_until_running(model["id"], timeout=DEADLINE)
            path = tmp_path / "eugo" / "clusters" / f"{model['id']}.json"
            record = json.loads(path.read_text())
            assert processes.cluster_processes(record["pgids"], record["temp_dir"])

            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=DEADLINE) == 0

        assert processes.cluster_processes(record["pgids"], record["temp_dir"]) == set()
        assert not path.exists()
        assert not Path(record["temp_dir"]).exists()
    finally:
        if record:
            processes.stop(record["pgids"], record["temp_dir"])
