"""The ClusterManager called directly, without HTTP (as dask-labextension tests its manager).

A real local cluster for the lifecycle; previews, profiles and refusals start nothing. Other Ray
heads may run on this machine (a user's own, other servers' or kernels' embedded ones): the
manager lists them as kind "found", and these tests look only at the manager's own clusters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter import records
from eugo_jupyter.exceptions import ClusterError, OptionsError
from eugo_jupyter.server import monitor
from eugo_jupyter.server.manager import ClusterManager

PROFILE = {
    "name": "GPU partition, 2 nodes, 1 h",
    "description": "Two GPU nodes for an hour.",
    "body": {
        "kind": "slurm",
        "slurm": {"partition": "gpu", "nodes": 2, "gpus_per_node": 1, "walltime": "01:00:00"},
    },
    "editable": ["slurm.walltime", "slurm.nodes"],
}


def _own(models: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The manager's own clusters in a list: heads it found on this machine are not its own."""
    return [model for model in models if model["kind"] != "found"]


@pytest.fixture
def manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClusterManager]:
    """A manager with a runtime folder of its own: a record another test left behind (a
    cluster it could not stop) is not listed here as one of this manager's."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    yield ClusterManager(profiles=[PROFILE])


def test_a_local_cluster_launches_runs_and_stops_with_nothing_left(
    manager: ClusterManager,
) -> None:
    async def scenario() -> None:
        model = await manager.create({"kind": "local", "name": "direct", "head": {"num_cpus": 1}})
        assert model["status"] == "starting" and model["kind"] == "local"
        assert model["spec"] == {
            "head": {"num_cpus": 1, "num_gpus": 0, "memory": None, "object_store_memory": None},
            "workers": [],
        }
        record = records.read_record(model["id"])
        assert record is not None and record["status"] == "starting"
        model = await manager.wait_until_running(model["id"], timeout=600)
        assert [n["alive"] for n in model["nodes"]] == [True]
        assert model["resources"]["total"]["CPU"] == 1.0
        record = records.read_record(model["id"])
        assert record is not None and record["address"] == model["address"]
        assert await manager.activate(model["id"]) is not None
        assert (await manager.get_cluster(model["id"]))["active"] is True  # type: ignore[index]
        with pytest.raises(ClusterError, match="cannot add or remove nodes"):
            await manager.add_node(model["id"])

        assert await manager.delete(model["id"]) is True
        assert processes.cluster_processes(record["pgids"], record["temp_dir"]) == set()
        # A read of the stopped cluster says so at once, instead of waiting in Ray's client for
        # a GCS that is gone (30 s or more, whatever the timeout: a server's exit waited on it).
        with pytest.raises(ConnectionError, match="nothing accepts connections at"):
            monitor.read(str(model["address"]), None, timeout=5.0)
        assert records.read_record(model["id"]) is None
        assert records.active_record() is None
        assert _own(await manager.list_clusters()) == []
        assert await manager.get_cluster(model["id"]) is None
        assert await manager.delete(model["id"]) is False

    asyncio.run(scenario())


def test_preview_of_a_local_launch_starts_nothing(manager: ClusterManager) -> None:
    body = {"kind": "local", "head": {"num_cpus": 2}, "workers": [{"num_cpus": 1, "num_gpus": 1}]}
    plan = asyncio.run(manager.preview(body))
    assert plan["summary"] == (
        "A head with 2 CPUs and a worker with 1 CPU and 1 GPU on this machine."
    )
    assert _own(asyncio.run(manager.list_clusters())) == []


def test_a_profile_fills_the_body_and_fixes_what_it_does_not_let_change(
    manager: ClusterManager,
) -> None:
    assert [p["name"] for p in manager.profiles()] == ["GPU partition, 2 nodes, 1 h"]
    plan = asyncio.run(
        manager.preview({"profile": PROFILE["name"], "slurm": {"walltime": "00:30:00"}})
    )
    head = plan["scripts"][0]["text"]
    assert "#SBATCH --partition=gpu" in head and "#SBATCH --time=00:30:00" in head
    assert "#SBATCH --gpus-per-node=1" in head
    with pytest.raises(OptionsError, match=r"slurm.partition is fixed by the profile"):
        asyncio.run(manager.preview({"profile": PROFILE["name"], "slurm": {"partition": "cpu"}}))
    with pytest.raises(OptionsError, match="is not offered by this server"):
        asyncio.run(manager.preview({"profile": "nope"}))


def test_a_bad_profile_fails_the_servers_start_with_the_field_named() -> None:
    bad = {**PROFILE, "body": {"kind": "slurm", "slurm": {"walltime": "soon"}}}
    with pytest.raises(OptionsError, match="slurm.walltime='soon' is not allowed"):
        ClusterManager(profiles=[bad])


def test_connecting_to_nothing_is_refused_and_leaves_no_record(manager: ClusterManager) -> None:
    with pytest.raises(ClusterError, match="No Ray cluster answers at 127.0.0.1:1"):
        asyncio.run(manager.create({"kind": "connect", "address": "127.0.0.1:1"}))
    assert [r for r in records.list_records() if r.get("address") == "127.0.0.1:1"] == []
