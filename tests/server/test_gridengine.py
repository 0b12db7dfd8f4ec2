"""The gridengine backend against a real Grid Engine (a private qmaster and execd on this machine).

One two-node cluster (a head job and a worker job) is shared by the module, as in
test_slurm.py: preview, launch qw -> r, a kernel runs a task on the worker node, Add node /
Remove node, shutdown with nothing left. What every scheduler shares (the bad-field table, a
request no node can run, a one-minute wall time) is the contract suite's
(tests/server/test_backend_contract.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from tests.fixtures.gridengine import GridEngine, gridengine_cell, require_gridengine
from tests.fixtures.jupyter import error_of, fetch_json, poll_model, run_as_new_kernel

DEADLINE = 1200.0  # the machine is shared and Ray starts slowly under load: we poll, never time
_shared: dict[str, Any] = {}


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GridEngine]:
    require_gridengine()
    with gridengine_cell() as running:
        saved = {k: os.environ.get(k) for k in running.variables}
        os.environ.update(running.variables)
        try:
            yield running
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared")


@pytest.fixture
def manager_config(cell: GridEngine, shared: Path) -> dict[str, object]:
    return {"find_clusters": False}


@pytest.fixture
def jp_server_config(manager_config: dict[str, object], shared: Path) -> dict[str, object]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"eugo_jupyter": True},
            "allow_unauthenticated_access": False,
        },
        "EugoManagerExtension": manager_config,
        # Configured with the part it configures: the backend's own traits.
        "GridEngineBackend": {"shared_dir": str(shared), "memory_resource": "mem_job"},
    }


def _qstat(cell: GridEngine) -> str:
    return subprocess.run(
        ["qstat", "-u", "*"], env=cell.env, capture_output=True, text=True, check=True
    ).stdout


def _ray_processes_of(job_ids: list[str]) -> list[str]:
    marks = [f"/eugo-ge-{j}/" for j in job_ids]
    return [
        f"{pid}: {processes.cmdline(pid)[:100]}"
        for pid in processes.table()
        if any(m in processes.cmdline(pid) for m in marks)
    ]


async def _poll(jp_fetch: Any, cluster_id: str, ready: Any, seen: list[str]) -> dict[str, Any]:
    def note(model: dict[str, Any]) -> None:
        jobs = model.get("gridengine", {}).get("jobs", [])
        if jobs and (not seen or seen[-1] != jobs[0]["state"]):
            seen.append(jobs[0]["state"])

    return await poll_model(
        jp_fetch, cluster_id, ready,
        deadline_s=DEADLINE, interval_s=1, each=note, stop_on_error=False,
    )  # fmt: skip


BODY = {
    "kind": "gridengine",
    "name": "on grid engine",
    "lifetime": "persistent",
    "gridengine": {
        "queue": "all.q", "parallel_environment": "smp", "walltime": "00:20:00", "nodes": 2,
        "cpus_per_node": 1, "memory_per_node": "1GiB",
    },
}  # fmt: skip


async def test_preview_returns_the_scripts_that_are_then_submitted(
    jp_fetch: Any, cell: GridEngine, shared: Path
) -> None:
    plan = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST", body=json.dumps(BODY)
    )
    assert plan["kind"] == "gridengine"
    assert plan["summary"] == (
        "2 Grid Engine jobs of 1 node each (1 slot of PE smp per node), wall time 00:20:00: "
        "the Ray head, then 1 worker."
    )
    scripts = {s["name"]: s for s in plan["scripts"]}
    head = scripts["head"]["text"]
    for line in ("#$ -pe smp 1", "#$ -l h_rt=00:20:00", "#$ -q all.q", "#$ -l mem_job=1024M"):
        assert line in head.splitlines()
    assert "h_vmem" not in head  # never the address-space limit Ray does not survive
    assert "start --head --block" in head
    assert [c[0] for c in plan["commands"]] == ["qsub", "qsub"]
    assert _qstat(cell) == ""  # a preview submits nothing

    response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(BODY))
    assert response.code == 201
    model = json.loads(response.body)
    _shared["id"] = model["id"]
    assert model["kind"] == "gridengine" and model["status"] == "starting"
    assert [j["role"] for j in model["gridengine"]["jobs"]] == ["head", "worker"]
    folder = Path(model["gridengine"]["dir"])
    assert folder.parent == shared
    assert (folder / "head.sh").read_text() == head
    assert (folder / "worker.sh").read_text() == scripts["worker"]["text"]


async def test_launch_goes_queued_to_running_and_both_nodes_join(
    jp_fetch: Any, cell: GridEngine
) -> None:
    seen: list[str] = []
    model = await _poll(jp_fetch, _shared["id"], lambda m: m["status"] == "running", seen)
    assert seen[-1] == "r" and seen[0] in ("qw", "t", "r")
    jobs = model["gridengine"]["jobs"]
    assert [j["state"] for j in jobs] == ["r", "r"]
    assert all(j["nodes"] == [cell.host] for j in jobs)
    assert all(0 < j["time_left"] <= 20 * 60 for j in jobs)
    assert model["gridengine"]["walltime"] == "00:20:00"
    assert len([n for n in model["nodes"] if n["alive"]]) == 2
    assert model["address"] and model["scalable"] is True
    assert _qstat(cell).count(" r ") == 2
    _shared["model"] = model


async def test_a_kernel_on_the_active_cluster_runs_a_task_on_the_worker(jp_fetch: Any) -> None:
    model = await _poll(jp_fetch, _shared["id"], lambda m: m["status"] == "running", [])
    await fetch_json(
        jp_fetch, "eugo", "clusters", model["id"], "activate", method="POST", body="{}"
    )
    head_node = next(n["node_id"] for n in model["nodes"] if n["is_head"])
    probe = textwrap.dedent(
        """
        import sys, time, ray
        import eugo_jupyter as eugo
        conn = eugo.hpc.init()

        @eugo.hpc.distribute
        def where():
            time.sleep(1)  # long enough that the calls cannot all run on one node in turn
            return ray.get_runtime_context().get_node_id()

        nodes = eugo.hpc.get([where.options(num_cpus=1)() for _ in range(8)])
        print(conn.source, "|", sorted(set(nodes) - {sys.argv[1]}) != [])
        eugo.hpc.shutdown()
        """
    )
    result = await run_as_new_kernel(probe, head_node, timeout_s=DEADLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    source, on_worker = (p.strip() for p in result.stdout.strip().splitlines()[-1].split("|"))
    assert source == "active cluster 'on grid engine'"
    assert on_worker == "True"


async def test_add_and_remove_a_worker_node(jp_fetch: Any, cell: GridEngine) -> None:
    cluster_id = _shared["id"]
    await _poll(jp_fetch, cluster_id, lambda m: m["status"] == "running", [])
    response = await jp_fetch("eugo", "clusters", cluster_id, "nodes", method="POST", body="{}")
    jobs = json.loads(response.body)["gridengine"]["jobs"]
    assert [j["role"] for j in jobs] == ["head", "worker", "worker"]
    added = jobs[-1]["id"]
    await _poll(jp_fetch, cluster_id, lambda m: len([n for n in m["nodes"] if n["alive"]]) == 3, [])
    model = await fetch_json(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", added, method="DELETE"
    )
    assert [j["id"] for j in model["gridengine"]["jobs"]] == [j["id"] for j in jobs[:2]]
    assert added not in _qstat(cell).split()
    assert _ray_processes_of([added]) == []
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", jobs[0]["id"], method="DELETE"
    )
    assert code == 400 and "is not a worker job of this cluster" in message


async def test_shutdown_deletes_the_jobs_and_leaves_no_process(
    jp_fetch: Any, cell: GridEngine
) -> None:
    model = await _poll(jp_fetch, _shared["id"], lambda m: m["status"] == "running", [])
    jobs = [j["id"] for j in model["gridengine"]["jobs"]]
    response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert _qstat(cell) == ""
    assert _ray_processes_of(jobs) == []
    assert not Path(model["gridengine"]["dir"]).exists()
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert listed == []


async def test_an_unknown_queue_is_refused_with_grid_engines_message(
    jp_fetch: Any, cell: GridEngine, shared: Path
) -> None:
    body = {"kind": "gridengine", "gridengine": {"queue": "nope.q"}}
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body)
    )
    assert code == 400
    assert message.startswith("Grid Engine refused it (qsub):")
    assert "nope.q" in message
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []
    assert list(shared.glob("c-*")) == []  # nothing half made is left


def test_a_worker_job_follows_a_head_that_started_again_on_new_ports(
    cell: GridEngine, tmp_path: Path
) -> None:
    """A head job whose first `ray start` fails (a busy machine) tries again on new ports and
    publishes them; a worker that had already started against the first address must follow,
    since its Ray retries a dead GCS for many minutes. (Seen in a SLURM test run: the worker
    never joined.) Here the first "head" is a plain TCP listener, the second a real Ray head."""
    import secrets
    import socket
    import tempfile

    from eugo_jupyter.server import monitor
    from eugo_jupyter.server.backends import local
    from eugo_jupyter.server.backends.gridengine import GridEngineBackend
    from eugo_jupyter.server.backends.ray_start import NodeSpec, node_ip

    backend = GridEngineBackend(str(tmp_path / "shared"))
    spec = backend.validate({"kind": "gridengine", "gridengine": {"nodes": 2}})
    folder = backend.root / "c-follow"
    folder.mkdir(parents=True)
    Path(backend.script_path(str(folder), "worker")).write_text(
        backend.script(spec.fields, "worker")
    )
    ip = node_ip()
    with socket.socket() as first:  # answers TCP, speaks no GCS: the head's failed first try
        first.bind((ip, 0))
        first.listen()
        (folder / "gcs").write_text(f"{ip}:{first.getsockname()[1]}\n")
        job = subprocess.run(
            backend.submit_command(str(folder), "c-follow", "worker"),
            env=cell.env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # A short folder: Ray's socket paths under it must stay within 107 bytes.
        head_dir = f"{tempfile.gettempdir()}/eugo-t-{secrets.token_hex(3)}"
        head = local.launch(NodeSpec(num_cpus=1), [], head_dir)
        try:
            deadline = time.monotonic() + DEADLINE
            while not _ray_processes_of([job]):  # the worker's Ray is trying the first address
                assert time.monotonic() < deadline, "the worker job's Ray never started"
                time.sleep(0.5)
            (folder / "gcs.tmp").write_text(f"{head.gcs_address}\n")
            (folder / "gcs.tmp").rename(folder / "gcs")
            while sum(n["alive"] for n in monitor.read(head.gcs_address, None)["nodes"]) < 2:
                assert time.monotonic() < deadline, "the worker never joined the moved head"
                time.sleep(1)
        finally:
            subprocess.run(["qdel", job], env=cell.env, capture_output=True)
            assert processes.stop(head.pgids, head.temp_dir) == []
    end = time.monotonic() + 120
    while _ray_processes_of([job]):
        assert time.monotonic() < end, _ray_processes_of([job])
        time.sleep(0.5)
