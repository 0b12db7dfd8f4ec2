"""The batch backends through REST, against a real SLURM (munged, slurmctld, two slurmd) and a real
Grid Engine (a private qmaster and execd), each started once for the module.

Per scheduler, one two-node cluster (a head job and a worker job) is shared by the scenarios, as
in test_clusters.py: preview, launch queued -> running, a kernel runs a task on the worker node,
Add node / Remove node, shutdown with nothing left, a bad field refused in the scheduler's words.
A test that applies to one scheduler only is parametrized with that one (``SLURM_ONLY``,
``GRID_ENGINE_ONLY``): it shares its daemons and, where it runs in between, its cluster. What
every scheduler shares beyond REST (the bad-field table, a request no node can run, a one-minute
wall time) is the contract suite's (tests/server/test_backend_contract.py).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from tests.fixtures.gridengine import gridengine_cell, require_gridengine
from tests.fixtures.jupyter import error_of, fetch_json, poll_model, run_as_new_kernel
from tests.fixtures.slurm import require_slurm, slurm_cluster
from tests.fixtures.waiting import until

DEADLINE = 1200.0  # the machine is shared and Ray starts slowly under load: we poll, never time
SLURM_ONLY = pytest.mark.parametrize("case", ["slurm"], indirect=True)
GRID_ENGINE_ONLY = pytest.mark.parametrize("case", ["gridengine"], indirect=True)
PROFILE = {
    "name": "debug, 2 nodes",
    "description": "Two nodes of the debug partition for ten minutes.",
    "body": {"kind": "slurm", "slurm": {"partition": "debug", "nodes": 2, "walltime": "00:10:00"}},
    "editable": ["slurm.walltime"],
}


@dataclass
class Case:
    """A scheduler up for the module, and its own words for what the scenarios check."""

    kind: str
    label: str
    env: dict[str, str]  # its commands' environment
    variables: dict[str, str]  # what the server's environment needs of it
    shared: Path  # where the clusters' folders go
    hosts: list[str]  # its nodes' host names
    manager: dict[str, Any]  # the extension's settings for it, and other parts' (traits)
    traits: dict[str, Any]
    body: dict[str, Any]  # the launch, and what a node asks for in the plan's summary
    detail: str
    directives: tuple[str, ...]  # lines of the head job's script
    submit: str  # the submit command, and its scripts' suffix
    suffix: str
    listing: list[str]  # lists the live jobs, as "<id> ... <state> ..."
    running: str  # a running job's state, and those a new head job may be seen in first
    waiting: tuple[str, ...]
    bad: dict[str, Any]  # a launch with a field it refuses, and a fragment of its refusal
    refusal: str
    mark: str  # names a job's Ray folder in its processes' command lines
    cluster: dict[str, Any] = field(default_factory=dict)  # the scenarios' cluster: id, model

    def jobs(self) -> str:
        return subprocess.run(
            self.listing, env=self.env, capture_output=True, text=True, check=True
        ).stdout

    def ray_processes_of(self, job_ids: list[str]) -> list[str]:
        marks = [self.mark.format(j) for j in job_ids]
        return [
            f"{pid}: {processes.cmdline(pid)[:100]}"
            for pid in processes.pids()
            if any(m in processes.cmdline(pid) for m in marks)
        ]


@contextlib.contextmanager
def _slurm(tmp: Path) -> Iterator[Case]:
    require_slurm()
    with slurm_cluster(tmp / "daemons") as slurm:
        yield Case(
            kind="slurm", label="SLURM", env=slurm.env,
            variables={"SLURM_CONF": str(slurm.conf)}, shared=tmp / "shared", hosts=slurm.nodes,
            manager={"slurm_shared_dir": str(tmp / "shared"), "profiles": [PROFILE]}, traits={},
            body={
                "kind": "slurm", "name": "on slurm", "lifetime": "persistent",
                "slurm": {"partition": "debug", "walltime": "00:20:00", "nodes": 2,
                          "cpus_per_node": 1},
            },
            detail="1 CPU per node",
            directives=("#SBATCH --partition=debug", "#SBATCH --time=00:20:00"),
            submit="sbatch", suffix="sbatch",
            listing=["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING",
                     "--format=%i %j %T"],
            running="RUNNING", waiting=("PENDING", "RUNNING"),
            bad={"kind": "slurm", "slurm": {"partition": "nope"}},
            refusal="invalid partition specified: nope", mark="/tmp/eugo-{}/",
        )  # fmt: skip


@contextlib.contextmanager
def _gridengine(tmp: Path) -> Iterator[Case]:
    require_gridengine()
    with gridengine_cell() as cell:
        yield Case(
            kind="gridengine", label="Grid Engine", env=cell.env, variables=cell.variables,
            shared=tmp / "shared", hosts=[cell.host], manager={},
            # Configured with the part it configures: the backend's own traits.
            traits={"GridEngineBackend": {"shared_dir": str(tmp / "shared"),
                                          "memory_resource": "mem_job"}},
            body={
                "kind": "gridengine", "name": "on grid engine", "lifetime": "persistent",
                "gridengine": {"queue": "all.q", "parallel_environment": "smp",
                               "walltime": "00:20:00", "nodes": 2, "cpus_per_node": 1,
                               "memory_per_node": "1GiB"},
            },
            detail="1 slot of PE smp per node",
            directives=("#$ -pe smp 1", "#$ -l h_rt=00:20:00", "#$ -q all.q",
                        "#$ -l mem_job=1024M"),
            submit="qsub", suffix="sh", listing=["qstat", "-u", "*"],
            running="r", waiting=("qw", "t", "r"),
            bad={"kind": "gridengine", "gridengine": {"queue": "nope.q"}},
            refusal="nope.q", mark="/eugo-ge-{}/",
        )  # fmt: skip


@pytest.fixture(scope="module", params=["slurm", "gridengine"])
def case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Case]:
    start = {"slurm": _slurm, "gridengine": _gridengine}[request.param]
    with (
        start(tmp_path_factory.mktemp(request.param)) as running,
        pytest.MonkeyPatch.context() as env,
    ):
        for name, value in running.variables.items():
            env.setenv(name, value)
        yield running


@pytest.fixture(scope="module")
def runtime_dir(case: Case, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One per scheduler: a cluster one scheduler's scenarios left must not reach the other's.
    return tmp_path_factory.mktemp(f"runtime-{case.kind}")


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], case: Case) -> dict[str, Any]:
    extension = {**jp_server_config["EugoManagerExtension"], **case.manager}
    return {**jp_server_config, "EugoManagerExtension": extension, **case.traits}


async def _poll(
    jp_fetch: Any,
    case: Case,
    ready: Callable[[dict[str, Any]], bool],
    seen: list[str] | None = None,
) -> dict[str, Any]:
    """Poll the cluster's model until ``ready``; ``seen`` collects the head job's states.

    An "error" model keeps being polled: a job the scheduler holds can still start."""

    def note(model: dict[str, Any]) -> None:
        jobs = model.get(case.kind, {}).get("jobs", [])
        if seen is not None and jobs and (not seen or seen[-1] != jobs[0]["state"]):
            seen.append(jobs[0]["state"])

    return await poll_model(
        jp_fetch, case.cluster["id"], ready,
        deadline_s=DEADLINE, interval_s=1, each=note, stop_on_error=False,
    )  # fmt: skip


async def _running(jp_fetch: Any, case: Case) -> dict[str, Any]:
    """The cluster, as this test's (new) server finds it again: starting until it has seen every
    job's node in Ray, then running."""
    return await _poll(jp_fetch, case, lambda m: m["status"] == "running")


def _alive(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda model: len([n for n in model["nodes"] if n["alive"]]) == count


async def test_preview_returns_the_scripts_that_are_then_submitted(
    jp_fetch: Any, case: Case
) -> None:
    body = json.dumps(case.body)
    plan = await fetch_json(jp_fetch, "eugo", "clusters", "preview", method="POST", body=body)
    assert plan["kind"] == case.kind
    assert plan["summary"] == (
        f"2 {case.label} jobs of 1 node each ({case.detail}), wall time 00:20:00: "
        "the Ray head, then 1 worker."
    )
    scripts = {s["name"]: s for s in plan["scripts"]}
    assert scripts["worker"]["count"] == 1
    head = scripts["head"]["text"]
    assert set(case.directives) <= set(head.splitlines())
    assert "h_vmem" not in head  # never Grid Engine's address-space limit: Ray does not survive it
    assert "start --head --block" in head
    assert [c[0] for c in plan["commands"]] == [case.submit, case.submit]
    assert case.jobs() == ""  # a preview submits nothing
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []

    response = await jp_fetch("eugo", "clusters", method="POST", body=body)
    assert response.code == 201
    model = json.loads(response.body)
    case.cluster["id"] = model["id"]
    assert model["kind"] == case.kind and model["status"] == "starting"
    assert [j["role"] for j in model[case.kind]["jobs"]] == ["head", "worker"]
    folder = Path(model[case.kind]["dir"])
    assert folder.parent == case.shared
    assert (folder / f"head.{case.suffix}").read_text() == head
    assert (folder / f"worker.{case.suffix}").read_text() == scripts["worker"]["text"]


async def test_launch_goes_queued_to_running_and_both_nodes_join(jp_fetch: Any, case: Case) -> None:
    seen: list[str] = []
    model = await _poll(jp_fetch, case, lambda m: m["status"] == "running", seen)
    assert seen[-1] == case.running and seen[0] in case.waiting
    jobs = model[case.kind]["jobs"]
    assert [j["state"] for j in jobs] == [case.running, case.running]
    assert all(len(j["nodes"]) == 1 and j["nodes"][0] in case.hosts for j in jobs)
    assert all(0 < j["time_left"] <= 20 * 60 for j in jobs)
    assert model[case.kind]["walltime"] == "00:20:00"
    assert _alive(2)(model)
    assert model["address"] and model["scalable"] is True
    assert case.jobs().split().count(case.running) == 2
    case.cluster["model"] = model


@SLURM_ONLY
def test_each_job_keeps_ray_in_a_private_folder_with_no_open_exporter(case: Case) -> None:
    """Ray makes its folders 0777: each job's folder on its node is 0700 around them; the jobs'
    token file is owner-only, and Ray's Prometheus exporters (no token) are off (issue 16)."""
    import stat

    from eugo_jupyter._raytoken import token_path

    jobs = case.cluster["model"]["slurm"]["jobs"]
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


async def test_a_kernel_on_the_active_cluster_runs_a_task_on_the_worker(
    jp_fetch: Any, case: Case
) -> None:
    model = await _running(jp_fetch, case)
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

        @eugo.hpc.distribute
        def where():
            time.sleep(1)  # long enough that the calls cannot all run on one node in turn
            return ray.get_runtime_context().get_node_id()

        # The head offers 1 CPU, as does the worker: two calls at once use both nodes.
        nodes = eugo.hpc.get([where.options(num_cpus=1)() for _ in range(8)])
        print(conn.source, "|", sorted(set(nodes) - {sys.argv[1]}) != [])
        eugo.hpc.shutdown()
        """
    )
    result = await run_as_new_kernel(probe, head_node, timeout_s=DEADLINE)
    assert result.returncode == 0, result.stderr[-2000:]
    source, on_worker = (p.strip() for p in result.stdout.strip().splitlines()[-1].split("|"))
    assert source == f"active cluster '{case.body['name']}'"
    assert on_worker == "True"


async def test_add_and_remove_a_worker_node(jp_fetch: Any, case: Case) -> None:
    cluster_id = (await _running(jp_fetch, case))["id"]
    response = await jp_fetch("eugo", "clusters", cluster_id, "nodes", method="POST", body="{}")
    assert response.code == 201
    jobs = json.loads(response.body)[case.kind]["jobs"]
    assert [j["role"] for j in jobs] == ["head", "worker", "worker"]
    added = jobs[-1]["id"]
    model = await _poll(jp_fetch, case, _alive(3))
    assert model[case.kind]["jobs"][-1]["state"] == case.running

    model = await fetch_json(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", added, method="DELETE"
    )
    assert [j["id"] for j in model[case.kind]["jobs"]] == [j["id"] for j in jobs[:2]]
    assert added not in case.jobs().split()
    assert case.ray_processes_of([added]) == []
    await _poll(jp_fetch, case, _alive(2))
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", cluster_id, "nodes", jobs[0]["id"], method="DELETE"
    )
    assert code == 400 and "is not a worker job of this cluster" in message


async def test_shutdown_cancels_the_jobs_and_leaves_no_ray_process(
    jp_fetch: Any, case: Case
) -> None:
    model = await _running(jp_fetch, case)
    jobs = [j["id"] for j in model[case.kind]["jobs"]]
    response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert case.jobs() == ""
    assert case.ray_processes_of(jobs) == []
    assert not Path(model[case.kind]["dir"]).exists()
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []


async def test_a_bad_partition_or_queue_is_refused_with_the_schedulers_message(
    jp_fetch: Any, case: Case
) -> None:
    body = json.dumps(case.bad)
    code, message = await error_of(jp_fetch, "eugo", "clusters", method="POST", body=body)
    assert code == 400
    assert message.startswith(f"{case.label} refused it ({case.submit}):")
    assert case.refusal in message
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []
    assert list(case.shared.glob("c-*")) == []  # nothing half made is left


@SLURM_ONLY
async def test_profiles_are_listed_and_fix_what_they_do_not_let_change(
    jp_fetch: Any, case: Case
) -> None:
    profiles = await fetch_json(jp_fetch, "eugo", "profiles")
    assert [p["name"] for p in profiles] == ["debug, 2 nodes"]
    assert profiles[0]["editable"] == ["slurm.walltime"]
    plan = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST",
        body=json.dumps({"profile": "debug, 2 nodes", "slurm": {"walltime": "00:05:00"}}),
    )  # fmt: skip
    assert "#SBATCH --time=00:05:00" in plan["scripts"][0]["text"]
    assert "#SBATCH --partition=debug" in plan["scripts"][0]["text"]
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", "preview", method="POST",
        body=json.dumps({"profile": "debug, 2 nodes", "slurm": {"nodes": 5}}),
    )  # fmt: skip
    assert code == 400 and "slurm.nodes is fixed by the profile 'debug, 2 nodes'" in message


@SLURM_ONLY
def test_a_head_job_ended_outside_the_manager_ends_the_cluster_and_cancels_its_workers(
    case: Case, tmp_path: Path
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
            env=case.env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return out.strip().split(";")[0]

    head, worker = submit("head"), submit("worker")
    until(lambda: f"{head} head RUNNING" in case.jobs(), "SLURM: head job running", 120)
    until(lambda: f"{worker} worker RUNNING" in case.jobs(), "SLURM: worker job running", 120)
    subprocess.run(["scancel", head], env=case.env, check=True)
    until(lambda: head not in case.jobs().split(), "SLURM: head job ended", 120)

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
    assert f"{worker} worker RUNNING" in case.jobs()
    # ...the manager acts on the end, once: the worker job is cancelled.
    backend.release(record)
    until(lambda: worker not in case.jobs().split(), "SLURM: worker job cancelled", 120)


@GRID_ENGINE_ONLY
def test_a_worker_job_follows_a_head_that_started_again_on_new_ports(
    case: Case, tmp_path: Path
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
            env=case.env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # A short folder: Ray's socket paths under it must stay within 107 bytes.
        head_dir = f"{tempfile.gettempdir()}/eugo-t-{secrets.token_hex(3)}"
        head = local.launch(NodeSpec(num_cpus=1), [], head_dir)
        try:
            what = "the worker job's Ray trying the first address"
            until(lambda: case.ray_processes_of([job]), what, DEADLINE, every_s=0.5)
            (folder / "gcs.tmp").write_text(f"{head.gcs_address}\n")
            (folder / "gcs.tmp").rename(folder / "gcs")

            def joined() -> bool:
                return sum(n["alive"] for n in monitor.read(head.gcs_address, None)["nodes"]) >= 2

            until(joined, "the worker joining the moved head", DEADLINE, every_s=1)
        finally:
            subprocess.run(["qdel", job], env=case.env, capture_output=True)
            assert processes.stop(head.pgids, head.temp_dir) == []
    until(lambda: not case.ray_processes_of([job]), "the worker job's Ray to end", 120, 0.5)
