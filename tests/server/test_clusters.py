"""Real clusters through the REST API: launch two nodes, watch them, submit from a client, find
an infeasible request explained, activate for new kernels, shut down and prove nothing is left.

One two-node cluster (head: 1 CPU; worker: 1 CPU and 1 *declared* GPU, bookkeeping only since no
GPU exists here) is shared by the module: each test's server finds it again through its record,
as a restarted Jupyter server would. The last test shuts it down.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from tests.fixtures.jupyter import fetch_json, poll_model, run_as_new_kernel

DEADLINE = 240.0  # generous: the machine is shared; we poll for a condition, never time it
_shared: dict[str, Any] = {}


async def _two_nodes(jp_fetch: Any) -> dict[str, Any]:
    """The module's cluster: launched through REST the first time, found again afterwards."""
    if "id" not in _shared:
        body = {
            "kind": "local",
            "name": "two nodes",
            "head": {"num_cpus": 1, "num_gpus": 0},
            "workers": [{"num_cpus": 1, "num_gpus": 1}],
            "lifetime": "persistent",
        }
        response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
        assert response.code == 201
        model = json.loads(response.body)
        assert model["status"] == "starting"
        assert model["spec"]["workers"] == [
            {"num_cpus": 1, "num_gpus": 1, "memory": None, "object_store_memory": None}
        ]
        _shared["id"] = model["id"]
    model = await poll_model(jp_fetch, _shared["id"], lambda m: m["status"] == "running")
    _shared["record"] = json.loads(
        (
            Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "eugo" / "clusters" / f"{model['id']}.json"
        ).read_text()
    )
    return model


@pytest.fixture(scope="module", autouse=True)
def _stop_leftover_cluster() -> Any:
    """If a test failed before the shutdown test, still stop what the module launched."""
    yield
    record = _shared.get("record")
    if record and _shared.get("stopped") is not True:
        assert processes.stop(record["pgids"], record["temp_dir"]) == []


async def test_launch_shows_both_nodes_and_their_resources(jp_fetch: Any) -> None:
    model = await _two_nodes(jp_fetch)
    assert model["kind"] == "local" and model["name"] == "two nodes"
    assert model["dashboard_url"].startswith("http://127.0.0.1:")
    assert model["address"] and ":" in model["address"]
    nodes = model["nodes"]
    assert len(nodes) == 2 and all(n["alive"] for n in nodes)
    head = next(n for n in nodes if n["is_head"])
    worker = next(n for n in nodes if not n["is_head"])
    assert head["resources_total"]["CPU"] == 1 and "GPU" not in head["resources_total"]
    assert worker["resources_total"]["CPU"] == 1 and worker["resources_total"]["GPU"] == 1
    assert worker["gpus"] == []  # declared, not real: NVML sees no device on this machine
    assert model["resources"]["total"]["CPU"] == 2 and model["resources"]["total"]["GPU"] == 1
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert [c["id"] for c in listed] == [model["id"]]


CLIENT = textwrap.dedent(
    """
    import sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")

    @ray.remote(num_cpus=1)
    def feasible(x):
        return x * 2

    @ray.remote(num_cpus=1, num_gpus=2)
    def needs_two_gpus():
        return "never"

    assert ray.get([feasible.remote(i) for i in range(6)]) == [0, 2, 4, 6, 8, 10]
    stuck = needs_two_gpus.remote()
    print("submitted", flush=True)
    time.sleep(600)  # keep the driver alive: its pending task stays in the cluster's demands
    """
)


async def test_client_tasks_show_in_counts_and_infeasible_request_is_explained(
    jp_fetch: Any,
) -> None:
    model = await _two_nodes(jp_fetch)
    before = model["tasks"]["finished"]
    assert not any(w["infeasible"] for w in model["waiting"])
    # A plain Ray client sends the cluster's token only when told to (eugo.hpc does it itself).
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    client = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
        [sys.executable, "-c", CLIENT, model["address"]],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        model = await poll_model(
            jp_fetch,
            model["id"],
            lambda m: (
                any(w["infeasible"] for w in m["waiting"]) and m["tasks"]["finished"] >= before + 6
            ),
        )
        stuck = next(w for w in model["waiting"] if w["infeasible"])
        assert stuck["request"] == {"CPU": 1.0, "GPU": 2.0}
        assert stuck["count"] == 1
        assert stuck["reason"].startswith("needs 2 GPUs and 1 CPU; the largest node has 1 GPU")
        assert "num_gpus=1" in stuck["reason"]  # the fix is named
        assert model["tasks"]["pending"] >= 1
    finally:
        client.kill()
        client.wait()


async def test_activate_makes_new_kernels_use_the_cluster(jp_fetch: Any) -> None:
    model = await _two_nodes(jp_fetch)
    activated = await fetch_json(
        jp_fetch, "eugo", "clusters", model["id"], "activate", method="POST", body="{}"
    )
    assert activated["active"] is True
    assert (await fetch_json(jp_fetch, "eugo", "clusters", model["id"]))["active"] is True
    # A new kernel process: same runtime folder, no address anywhere in its code or environment.
    probe = textwrap.dedent(
        """
        import eugo_jupyter as eugo
        conn = eugo.hpc.init()
        info = eugo.hpc.cluster()
        print(conn.address, "|", conn.source, "|", len([n for n in info.nodes if n.alive]))
        eugo.hpc.shutdown()
        """
    )
    result = await run_as_new_kernel(probe, timeout_s=DEADLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    address, source, alive = (
        part.strip() for part in result.stdout.strip().splitlines()[-1].split("|")
    )
    assert address == model["address"]
    assert source == "active cluster 'two nodes'"
    assert alive == "2"


async def test_connect_to_the_running_cluster_and_detach(jp_fetch: Any) -> None:
    model = await _two_nodes(jp_fetch)
    body = json.dumps({"kind": "connect", "address": model["address"], "name": "attached"})
    response = await jp_fetch("eugo", "clusters", method="POST", body=body)
    assert response.code == 201
    attached = json.loads(response.body)
    assert attached["kind"] == "connect" and attached["status"] == "running"
    assert attached["lifetime"] is None
    assert attached["dashboard_url"] == model["dashboard_url"]
    assert len(attached["nodes"]) == 2
    response = await jp_fetch("eugo", "clusters", attached["id"], method="DELETE")
    assert response.code == 204
    # Detaching leaves the cluster itself running.
    still = await fetch_json(jp_fetch, "eugo", "clusters", model["id"])
    assert still["status"] == "running" and len(still["nodes"]) == 2


async def test_dashboard_is_served_behind_the_servers_auth(jp_fetch: Any) -> None:
    model = await _two_nodes(jp_fetch)
    assert model["dashboard_proxy"] == f"eugo/clusters/{model['id']}/dashboard/"
    base = ("eugo", "clusters", model["id"])
    page = await jp_fetch(*base, "dashboard/")
    assert page.code == 200 and b"<title>Ray Dashboard</title>" in page.body
    with pytest.raises(HTTPClientError) as moved:  # its pages use relative links
        await jp_fetch(*base, "dashboard", follow_redirects=False)
    assert moved.value.code == 302
    assert moved.value.response.headers["Location"].endswith(
        f"/eugo/clusters/{model['id']}/dashboard/"
    )
    # Ray's API answers only with the cluster's token: the server adds it, the browser never has it.
    nodes = await jp_fetch(*base, "dashboard", "nodes", params={"view": "summary"})
    assert nodes.code == 200
    assert len(json.loads(nodes.body)["data"]["summary"]) == 2
    # Without credentials a browser is sent to Jupyter's login page, never to the dashboard.
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(*base, "dashboard/", headers={"Authorization": ""}, follow_redirects=False)
    assert refused.value.code == 302
    assert "/login?next=" in refused.value.response.headers["Location"]


HOLDER = textwrap.dedent(
    """
    import os, sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")

    @ray.remote(num_cpus=1)
    class Holder:
        def pid(self):
            return os.getpid(), os.getpgid(0)

    holder = Holder.remote()
    pid, pgid = ray.get(holder.pid.remote())
    print(pid, pgid, flush=True)
    time.sleep(600)
    """
)


async def test_shutdown_leaves_no_ray_process(jp_fetch: Any) -> None:
    model = await _two_nodes(jp_fetch)
    record = _shared["record"]
    assert len(record["pgids"]) == 2  # one process group per node
    assert all(processes.group_members(g) for g in record["pgids"])
    # A live actor: Ray runs it in a process group of its own, which shutdown must find too.
    client = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
        [sys.executable, "-c", HOLDER, model["address"]],
        env={**os.environ, "RAY_AUTH_MODE": "token"},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = await asyncio.get_running_loop().run_in_executor(None, client.stdout.readline)
        actor_pid, actor_pgid = (int(x) for x in line.split())
        assert actor_pgid not in record["pgids"]
        assert _alive(actor_pid)
        response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
        assert response.code == 204
        _shared["stopped"] = True
        assert not _alive(actor_pid)
    finally:
        client.kill()
        client.wait()
    assert [pid for g in record["pgids"] for pid in processes.group_members(g)] == []
    leftovers = [pid for pid in processes.pids() if record["temp_dir"] in processes.cmdline(pid)]
    assert leftovers == []
    assert not Path(record["temp_dir"]).exists()
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []
    runtime = Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "eugo"
    assert not (runtime / "clusters" / f"{model['id']}.json").exists()
    assert not (runtime / "active.json").exists()  # it was the active one


def _alive(pid: int) -> bool:
    from eugo_jupyter._processes import start_time

    return start_time(pid) is not None  # a zombie counts as gone
