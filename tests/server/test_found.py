"""Found clusters: a `ray start --head` run outside the Manager (as in a terminal) is listed as
"found" with its address, with or without ``--temp-dir``; Connect attaches to it; DELETE without
confirmation leaves it running (409), with confirmation stops exactly its processes.

Real processes: the heads are started with the `ray` command, the way a user does, in a process
group of their own so the test can clean up after a failure by that group only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from eugo_jupyter.server import discovery
from eugo_jupyter.server.backends import ray_start
from tests.fixtures.jupyter import fetch_json, poll_json

DEADLINE = 240.0  # generous: the machine is shared; we poll for a condition, never time it


def _ray_start_head(temp_dir: str | None) -> tuple[subprocess.Popen[str], str]:
    """A head started by hand; returns the `ray start` process (its group) and the GCS address."""
    free = ray_start.distinct_ports()  # three ports, never one twice
    port = free("gcs")
    args = [
        ray_start.ray_executable(),
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=1",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={free('dashboard')}",
        f"--ray-client-server-port={free('client')}",
        "--disable-usage-stats",
    ]
    if temp_dir:
        args.append(f"--temp-dir={temp_dir}")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    for attempt in (1, 2):  # a loaded machine can time a node's start out: try once more
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        output, _ = proc.communicate(timeout=DEADLINE)
        if proc.returncode == 0:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the failed start left
        assert attempt == 1, output[-2000:]
    return proc, f"{ray_start.node_ip()}:{port}"


@pytest.fixture
def manager_config() -> dict[str, object]:
    return {"find_clusters": True}


@pytest.fixture(scope="module")
def heads() -> Iterator[dict[str, Any]]:
    temp_dir = tempfile.mkdtemp(prefix="eugo-t-")
    started = []
    try:
        started.append(_ray_start_head(temp_dir))
        started.append(_ray_start_head(None))  # /tmp/ray, Ray's default
        yield {
            "custom": started[0][1],
            "default": started[1][1],
            "temp_dir": temp_dir,
            "groups": [proc.pid for proc, _ in started],
        }
    finally:
        for head in discovery.scan():
            if head.pgid in [proc.pid for proc, _ in started]:
                discovery.stop(head)
        for proc, _ in started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def _found(jp_fetch: Any, address: str, present: bool = True) -> dict[str, Any] | None:
    def found(listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in listed if m["address"] == address and m["kind"] == "found"]

    listed = await poll_json(
        jp_fetch, ("eugo", "clusters"), lambda listed: bool(found(listed)) == present,
        deadline_s=DEADLINE, what=f"{address} found={present}",
    )  # fmt: skip
    match = found(listed)
    return match[0] if match else None


async def test_heads_started_outside_the_manager_are_listed_as_found(
    jp_fetch: Any, heads: dict[str, Any]
) -> None:
    custom = await _found(jp_fetch, heads["custom"])
    default = await _found(jp_fetch, heads["default"])
    assert custom is not None and default is not None
    assert custom["status"] == "running" and custom["lifetime"] is None
    assert custom["found"]["temp_dir"] == heads["temp_dir"]
    assert default["found"]["temp_dir"] == "/tmp/ray"
    assert custom["dashboard_url"].startswith("http://127.0.0.1:")
    one = await fetch_json(jp_fetch, "eugo", "clusters", custom["id"])
    assert one["address"] == heads["custom"]


async def test_delete_without_confirmation_leaves_it_running(
    jp_fetch: Any, heads: dict[str, Any]
) -> None:
    model = await _found(jp_fetch, heads["custom"])
    assert model is not None
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert err.value.code == 409
    assert (
        "was not started by the EugoHPC Manager" in json.loads(err.value.response.body)["message"]
    )
    assert any(h.address == heads["custom"] for h in discovery.scan())


async def test_connect_turns_it_into_a_connected_cluster(
    jp_fetch: Any, heads: dict[str, Any]
) -> None:
    await _found(jp_fetch, heads["default"])
    body = {"kind": "connect", "address": heads["default"]}
    connected = await fetch_json(jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body))
    assert connected["kind"] == "connect" and connected["status"] == "running"
    await _found(jp_fetch, heads["default"], present=False)  # listed once, as connected
    await jp_fetch("eugo", "clusters", connected["id"], method="DELETE")  # detaches only
    again = await _found(jp_fetch, heads["default"])
    assert again is not None and again["status"] == "running"


async def test_delete_with_confirmation_stops_exactly_that_head(
    jp_fetch: Any, heads: dict[str, Any]
) -> None:
    model = await _found(jp_fetch, heads["custom"])
    assert model is not None
    response = await jp_fetch(
        "eugo", "clusters", model["id"], method="DELETE", params={"confirm": "true"}
    )
    assert response.code == 204
    assert processes.group_members(heads["groups"][0]) == []
    assert not any(h.address == heads["custom"] for h in discovery.scan())
    assert any(h.address == heads["default"] for h in discovery.scan())  # the other one lives
    await _found(jp_fetch, heads["custom"], present=False)
    assert not Path(model["found"]["session_dir"]).exists()
