"""A Jupyter server that dies by SIGKILL: its lifetime-"server" clusters stop anyway, its
persistent ones are adopted by the next server, and dead clusters' folders are removed (issue 16).

Real processes throughout: a `jupyter server` subprocess, clusters launched over its REST API,
SIGKILL, then the process table. Every wait is a bounded poll on a condition.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter import _raytoken
from eugo_jupyter.server.backends import local, ray_start
from eugo_jupyter.server.client import ManagerClient
from tests.fixtures.jupyter import jupyter_server

DEADLINE = 300.0


def _launch(client: ManagerClient, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    """Launch each of ``bodies`` (they start together), then wait until each runs."""
    ids = [client.launch(body)["id"] for body in bodies]
    return [client.wait_until_running(cluster_id, timeout=DEADLINE) for cluster_id in ids]


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    # Whatever a failed test left: stop it by its record.
    for path in (tmp_path / "eugo" / "clusters").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("temp_dir"):
            processes.stop(record.get("pgids", []), record["temp_dir"])


def _ours(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The clusters the servers launched: not the other heads found on this shared machine."""
    return [m for m in models if m["kind"] != "found"]


def _record(runtime: Path, cluster_id: str) -> dict[str, Any]:
    return json.loads((runtime / "eugo" / "clusters" / f"{cluster_id}.json").read_text())


def _ray_processes(record: dict[str, Any]) -> set[tuple[int, int]]:
    return processes.cluster_processes(record["pgids"], record["temp_dir"])


def test_sigkilled_server_stops_its_clusters_and_the_next_server_adopts_persistent_ones(
    runtime: Path,
) -> None:
    with jupyter_server(runtime, deadline_s=DEADLINE) as (first, process):
        short, kept = _launch(
            first,
            {"kind": "local", "name": "short", "lifetime": "server"},
            {"kind": "local", "name": "kept", "lifetime": "persistent"},
        )
        short_record, kept_record = _record(runtime, short["id"]), _record(runtime, kept["id"])
        assert _ray_processes(short_record) and _ray_processes(kept_record)

        # Before any launch the token file was made owner-only (ray start writes it 0644).
        token = _raytoken.token_path()
        assert token.exists() and token.stat().st_mode & 0o077 == 0

        process.send_signal(signal.SIGKILL)  # no exit hook of the server runs
        process.wait()

        deadline = time.monotonic() + DEADLINE
        while _ray_processes(short_record):
            assert time.monotonic() < deadline, "the server's cluster outlived it"
            time.sleep(0.5)
        while (runtime / "eugo" / "clusters" / f"{short['id']}.json").exists() or Path(
            short_record["temp_dir"]
        ).exists():
            assert time.monotonic() < deadline, "record or temp folder left behind"
            time.sleep(0.5)
        assert _ray_processes(kept_record), "the persistent cluster must survive the crash"

    with jupyter_server(runtime, deadline_s=DEADLINE) as (second, _):
        listed = {c["id"]: c for c in _ours(second.clusters())}
        assert list(listed) == [kept["id"]]
        assert listed[kept["id"]]["status"] == "running"
        second.shutdown(kept["id"])
        assert _ray_processes(kept_record) == set()
        assert not Path(kept_record["temp_dir"]).exists()


def test_a_forgotten_dead_clusters_folder_is_removed(runtime: Path) -> None:
    """A persistent cluster killed while no server ran: the next server forgets it and removes
    the temp folder we made for it (Ray's logs and sockets), not just its record."""
    temp_dir = f"/tmp/eugo-c-{secrets.token_hex(4)}"
    cluster_id = temp_dir.rsplit("eugo-", 1)[1]
    started = local.launch(ray_start.NodeSpec(num_cpus=1), [], temp_dir)
    records_dir = runtime / "eugo" / "clusters"
    records_dir.mkdir(parents=True)
    (records_dir / f"{cluster_id}.json").write_text(
        json.dumps(
            {
                "id": cluster_id, "name": "gone", "kind": "local", "lifetime": "persistent",
                "address": started.gcs_address, "dashboard_url": started.dashboard_url,
                "created": "2026-01-01T00:00:00+00:00", "server_pid": 1,
                "pgids": started.pgids, "pids": started.pgids, "temp_dir": temp_dir,
            }
        )
    )  # fmt: skip
    # Killed hard, as by the OOM killer: no chance to clean its folder.
    for pid, _ in processes.cluster_processes(started.pgids, temp_dir):
        with contextlib.suppress(ProcessLookupError):  # a worker may end with its raylet first
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + DEADLINE
    while processes.cluster_processes(started.pgids, temp_dir):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert Path(temp_dir).exists()

    with jupyter_server(runtime, deadline_s=DEADLINE) as (client, _):
        assert _ours(client.clusters()) == []
        assert not (records_dir / f"{cluster_id}.json").exists()
        assert not Path(temp_dir).exists()
