"""The slurm backend against a real SLURM (munged, slurmctld, two slurmd on this machine).

One two-node cluster (a head job and a worker job) is shared by the module, as in
test_clusters.py: preview, launch PENDING -> RUNNING, a kernel runs a task on the worker node,
Add node / Remove node, shutdown with nothing left. What every scheduler shares (the bad-field
table, a request no node can run, a one-minute wall time) is the contract suite's
(tests/server/test_backend_contract.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from tests.fixtures.jupyter import fetch_json, poll_model, run_as_new_kernel
from tests.fixtures.slurm import Slurm, require_slurm, slurm_cluster
from tests.fixtures.waiting import until

DEADLINE = 1200.0  # the machine is shared and Ray starts slowly under load: we poll, never time
_shared: dict[str, Any] = {}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    require_slurm()
    folder = tmp_path_factory.mktemp("slurm")
    saved = os.environ.get("SLURM_CONF")
    with slurm_cluster(folder / "daemons") as running:
        os.environ["SLURM_CONF"] = str(running.conf)
        yield running
    if saved is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = saved


@pytest.fixture
def manager_config(slurm: Slurm) -> dict[str, object]:
    return {
        # Other engineers' or users' Ray heads on this machine are not this module's business
        # (a dead one made listing wait past the client's timeout).
        "find_clusters": False,
        "slurm_shared_dir": str(slurm.folder / "shared"),
        "profiles": [
            {
                "name": "debug, 2 nodes",
                "description": "Two nodes of the debug partition for ten minutes.",
                "body": {
                    "kind": "slurm",
                    "slurm": {"partition": "debug", "nodes": 2, "walltime": "00:10:00"},
                },
                "editable": ["slurm.walltime"],
            }
        ],
    }


async def _error(jp_fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*parts, **kwargs)
    body = info.value.response.body if info.value.response is not None else b"{}"
    return info.value.code, json.loads(body).get("message", "")


async def _poll(
    jp_fetch: Any, cluster_id: str, ready: Callable[[dict[str, Any]], bool], seen: list[str]
) -> dict[str, Any]:
    """Poll the model until ``ready``; ``seen`` collects the SLURM states of the head job.

    An "error" model keeps being polled: a job SLURM holds can still start."""

    def note(model: dict[str, Any]) -> None:
        jobs = model.get("slurm", {}).get("jobs", [])
        if jobs and (not seen or seen[-1] != jobs[0]["state"]):
            seen.append(jobs[0]["state"])

    return await poll_model(
        jp_fetch, cluster_id, ready,
        deadline_s=DEADLINE, interval_s=1, each=note, stop_on_error=False,
    )  # fmt: skip


def _squeue(slurm: Slurm) -> str:
    return subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING", "--format=%i %j %T"],
        env=slurm.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _ray_processes_of(job_ids: list[str]) -> list[str]:
    marks = [f"/tmp/eugo-{j}/" for j in job_ids]
    return [
        f"{pid}: {processes.cmdline(pid)[:100]}"
        for pid in processes.pids()
        if any(m in processes.cmdline(pid) for m in marks)
    ]


BODY = {
    "kind": "slurm",
    "name": "on slurm",
    "lifetime": "persistent",
    "slurm": {"partition": "debug", "walltime": "00:20:00", "nodes": 2, "cpus_per_node": 1},
}


async def test_preview_returns_the_script_that_is_then_submitted(
    jp_fetch: Any, slurm: Slurm
) -> None:
    plan = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST", body=json.dumps(BODY)
    )
    assert plan["kind"] == "slurm"
    assert plan["summary"].startswith("2 SLURM jobs of 1 node each")
    scripts = {s["name"]: s for s in plan["scripts"]}
    assert scripts["worker"]["count"] == 1
    head = scripts["head"]["text"]
    assert "#SBATCH --partition=debug" in head and "#SBATCH --time=00:20:00" in head
    assert "start --head --block" in head
    assert [c[0] for c in plan["commands"]] == ["sbatch", "sbatch"]
    assert _squeue(slurm) == ""  # a preview submits nothing
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert [c for c in listed if c["kind"] != "found"] == []  # other heads on a shared machine

    response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(BODY))
    assert response.code == 201
    model = json.loads(response.body)
    _shared["id"] = model["id"]
    assert model["kind"] == "slurm" and model["status"] == "starting"
    assert [j["role"] for j in model["slurm"]["jobs"]] == ["head", "worker"]
    folder = Path(model["slurm"]["dir"])
    assert (folder / "head.sbatch").read_text() == head
    assert (folder / "worker.sbatch").read_text() == scripts["worker"]["text"]


async def test_launch_goes_pending_to_running_and_the_nodes_join(
    jp_fetch: Any, slurm: Slurm
) -> None:
    seen: list[str] = []
    model = await _poll(jp_fetch, _shared["id"], lambda m: m["status"] == "running", seen)
    assert seen[-1] == "RUNNING" and seen[0] in ("PENDING", "RUNNING")
    jobs = model["slurm"]["jobs"]
    assert [j["state"] for j in jobs] == ["RUNNING", "RUNNING"]
    assert all(j["nodes"] and j["nodes"][0] in slurm.nodes for j in jobs)
    assert all(0 < j["time_left"] <= 20 * 60 for j in jobs)
    assert len([n for n in model["nodes"] if n["alive"]]) == 2
    assert model["address"] and model["scalable"] is True
    assert _squeue(slurm).count("RUNNING") == 2
    _shared["model"] = model


def test_each_job_keeps_ray_in_a_private_folder_with_no_open_exporter() -> None:
    """Ray makes its folders 0777: each job's folder on its node is 0700 around them; the jobs'
    token file is owner-only, and Ray's Prometheus exporters (no token) are off (issue 16)."""
    import stat

    from eugo_jupyter._raytoken import token_path

    jobs = _shared["model"]["slurm"]["jobs"]
    for job in jobs:  # the test's nodes are this machine: the folders can be looked at here
        outer = Path(f"/tmp/eugo-{job['id']}")
        assert stat.S_IMODE(outer.stat().st_mode) == 0o700
        assert stat.S_IMODE((outer / "r").stat().st_mode) == 0o777  # Ray's own, inside ours
        assert any((outer / "r").glob("session_*"))
    assert stat.S_IMODE(token_path().stat().st_mode) == 0o600
    # The head's GCS runs with the exporters' switches, as the job script exported them.
    head_dir = f"/tmp/eugo-{jobs[0]['id']}/r"
    lines = {pid: processes.cmdline(pid) for pid in processes.pids()}
    gcs = [pid for pid, line in lines.items() if head_dir in line and "gcs_server" in line]
    assert gcs
    environ = processes.environment(gcs[0])
    assert environ is not None
    assert environ.get("RAY_enable_metrics_collection") == "0"
    assert environ.get("DASHBOARD_METRIC_PORT") == "-1"


async def _running(jp_fetch: Any) -> dict[str, Any]:
    """The module's cluster, as this test's (new) server finds it again: starting until it has
    seen every job's node in Ray, then running."""
    return await _poll(jp_fetch, _shared["id"], lambda m: m["status"] == "running", [])


async def test_a_kernel_on_the_active_cluster_runs_a_task_on_the_worker(jp_fetch: Any) -> None:
    model = await _running(jp_fetch)
    activated = await fetch_json(
        jp_fetch, "eugo", "clusters", model["id"], "activate", method="POST", body="{}"
    )
    assert activated["active"] is True
    head_node = next(n["node_id"] for n in model["nodes"] if n["is_head"])
    probe = textwrap.dedent(
        """
        import sys, time, ray
        import eugo_jupyter as eugo
        conn = eugo.hpc.init()
        head = sys.argv[1]

        @eugo.hpc.distribute
        def where():
            time.sleep(1)  # long enough that the calls cannot all run on one node in turn
            return ray.get_runtime_context().get_node_id()

        # The head offers 1 CPU, as does the worker: two calls at once use both nodes.
        nodes = eugo.hpc.get([where.options(num_cpus=1)() for _ in range(8)])
        print(conn.source, "|", sorted(set(nodes) - {head}) != [])
        eugo.hpc.shutdown()
        """
    )
    result = await run_as_new_kernel(probe, head_node, timeout_s=DEADLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    source, on_worker = (p.strip() for p in result.stdout.strip().splitlines()[-1].split("|"))
    assert source == "active cluster 'on slurm'"
    assert on_worker == "True"


async def test_add_and_remove_a_worker_node(jp_fetch: Any, slurm: Slurm) -> None:
    cluster_id = (await _running(jp_fetch))["id"]
    response = await jp_fetch("eugo", "clusters", cluster_id, "nodes", method="POST", body="{}")
    assert response.code == 201
    jobs = json.loads(response.body)["slurm"]["jobs"]
    assert [j["role"] for j in jobs] == ["head", "worker", "worker"]
    added = jobs[-1]["id"]
    model = await _poll(
        jp_fetch, cluster_id, lambda m: len([n for n in m["nodes"] if n["alive"]]) == 3, []
    )
    assert model["slurm"]["jobs"][-1]["state"] == "RUNNING"

    model = await fetch_json(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", added, method="DELETE"
    )
    assert [j["id"] for j in model["slurm"]["jobs"]] == [j["id"] for j in jobs[:2]]
    assert added not in _squeue(slurm).split()
    assert _ray_processes_of([added]) == []
    await _poll(jp_fetch, cluster_id, lambda m: len([n for n in m["nodes"] if n["alive"]]) == 2, [])
    code, message = await _error(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", jobs[0]["id"], method="DELETE"
    )
    assert code == 400 and "is not a worker job of this cluster" in message


async def test_shutdown_cancels_the_jobs_and_leaves_no_ray_process(
    jp_fetch: Any, slurm: Slurm
) -> None:
    model = await _running(jp_fetch)
    jobs = [j["id"] for j in model["slurm"]["jobs"]]
    response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert _squeue(slurm) == ""
    assert _ray_processes_of(jobs) == []
    assert not Path(model["slurm"]["dir"]).exists()
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert [c for c in listed if c["kind"] != "found"] == []  # other heads on a shared machine


async def test_a_bad_partition_is_refused_with_slurms_message(jp_fetch: Any, slurm: Slurm) -> None:
    body = {"kind": "slurm", "slurm": {"partition": "nope"}}
    code, message = await _error(jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body))
    assert code == 400
    assert "invalid partition specified: nope" in message
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert [c for c in listed if c["kind"] != "found"] == []  # other heads on a shared machine
    assert list((slurm.folder / "shared").glob("c-*")) == []  # nothing half made is left


async def test_profiles_are_listed_and_fix_what_they_do_not_let_change(jp_fetch: Any) -> None:
    profiles = await fetch_json(jp_fetch, "eugo", "profiles")
    assert [p["name"] for p in profiles] == ["debug, 2 nodes"]
    assert profiles[0]["editable"] == ["slurm.walltime"]
    plan = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST",
        body=json.dumps({"profile": "debug, 2 nodes", "slurm": {"walltime": "00:05:00"}}),
    )  # fmt: skip
    assert "#SBATCH --time=00:05:00" in plan["scripts"][0]["text"]
    assert "#SBATCH --partition=debug" in plan["scripts"][0]["text"]
    code, message = await _error(
        jp_fetch, "eugo", "clusters", "preview", method="POST",
        body=json.dumps({"profile": "debug, 2 nodes", "slurm": {"nodes": 5}}),
    )  # fmt: skip
    assert code == 400 and "slurm.nodes is fixed by the profile 'debug, 2 nodes'" in message


def test_a_head_job_ended_outside_the_manager_ends_the_cluster_and_cancels_its_workers(
    slurm: Slurm, tmp_path: Path
) -> None:
    """The head job ending while a worker job runs (an admin's scancel, a node failure): the
    card says the cluster ended and why, and the worker job, which serves nothing without its
    head, is cancelled when the manager acts on the end, never by a read of the state (a read
    once cancelled jobs; before that, it raised: a local name shadowed the scancel call).

    Plain ``sleep`` jobs stand for the two Ray jobs: what is under test is what the backend makes
    of SLURM's states, not Ray."""
    from eugo_jupyter.server.backends.slurm import SlurmBackend

    def submit(role: str) -> str:
        out = subprocess.run(
            ["sbatch", "--parsable", f"--job-name={role}", f"--output={tmp_path}/%x-%j.log",
             "--wrap", "sleep 600"],
            env=slurm.env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return out.strip().split(";")[0]

    head, worker = submit("head"), submit("worker")
    until(lambda: f"{head} head RUNNING" in _squeue(slurm), "SLURM: head job running", 120)
    until(lambda: f"{worker} worker RUNNING" in _squeue(slurm), "SLURM: worker job running", 120)
    subprocess.run(["scancel", head], env=slurm.env, check=True)
    until(lambda: head not in _squeue(slurm).split(), "SLURM: head job ended", 120)

    record = {
        "spec": {},
        "slurm": {
            "dir": str(tmp_path),
            "walltime": "00:10:00",
            "jobs": [{"id": head, "role": "head"}, {"id": worker, "role": "worker"}],
        },
    }
    backend = SlurmBackend()
    observed = backend.state(record)
    assert observed.ended in (
        f"Job {head} (the Ray head) was cancelled outside the manager; the cluster ended.",
        f"SLURM no longer knows job {head} (the Ray head): the cluster has ended.",
    )
    # Reading the state changes nothing (it once cancelled jobs during a monitoring read)...
    assert f"{worker} worker RUNNING" in _squeue(slurm)
    # ...the manager acts on the end, once: the worker job is cancelled.
    backend.release(record)
    until(lambda: worker not in _squeue(slurm).split(), "SLURM: worker job cancelled", 120)
