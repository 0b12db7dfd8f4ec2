"""Clusters from code on a real SLURM (munged, slurmctld, two slurmd here).

kind "allocation" inside a two-node job, and kind "slurm" launched from a plain script.

The job's script is a plain Python process (no Jupyter server) that calls
``eugo.hpc.launch("allocation")``: the head on the batch node, a worker through ``srun
--overlap`` on the other. Ray must see exactly the job's CPUs on each node (2, on nodes that
have 4), a task runs on each node, and nothing is left after ``close()`` or after ``scancel``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eugo_jupyter import _processes as processes
from tests.fixtures.slurm import Slurm, require_slurm, slurm_cluster

DEADLINE = 900.0  # the machine is shared and Ray starts slowly under load: we poll, never time

_SCRIPT = """\
import json, os, sys, time
import ray
import eugo_jupyter as eugo
import eugo_jupyter.server.backends.allocation

out = sys.argv[1]
cluster = eugo.hpc.launch("allocation", name="in-job", margin=60)
plan = cluster.preview()
cluster.use()
nodes = [n for n in ray.nodes() if n["Alive"]]

@ray.remote(num_cpus=2)
def where():
    return ray.get_runtime_context().get_node_id()

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

ran = sorted(ray.get([
    where.options(scheduling_strategy=On(n["NodeID"], soft=False)).remote() for n in nodes
]))
facts = {
    "plan": plan,
    "cpus": sorted(n["Resources"].get("CPU", 0) for n in nodes),
    "nodes": sorted(n["NodeID"] for n in nodes),
    "ran": ran,
    "id": cluster.id,
    "offered": eugo_jupyter.server.backends.allocation.AllocationBackend().facts()["available"],
    "temp_dir": eugo.records.read_record(cluster.id)["temp_dir"],
}
with open(out + ".tmp", "w") as f:
    json.dump(facts, f)
os.rename(out + ".tmp", out)
if sys.argv[2] == "close":
    cluster.close()
    json.dump({"closed": True}, open(out + ".closed", "w"))
else:
    time.sleep(3600)
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    require_slurm()
    with slurm_cluster(tmp_path_factory.mktemp("slurm") / "daemons") as running:
        yield running


def _submit(slurm: Slurm, folder: Path, mode: str) -> tuple[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "job.py"
    script.write_text(_SCRIPT)
    out = folder / "facts.json"
    batch = folder / "job.sbatch"
    batch.write_text(
        textwrap.dedent(f"""\
        #!/bin/bash
        #SBATCH --nodes=2 --ntasks-per-node=1 --cpus-per-task=2 --time=00:30:00
        #SBATCH --output={folder}/job.out
        exec {sys.executable} {script} {out} {mode}
        """)
    )
    env = {
        **slurm.env,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "JUPYTER_RUNTIME_DIR": str(folder / "runtime"),
    }
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        ["sbatch", "--parsable", str(batch)], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0], out


def _wait_for(path: Path, folder: Path, job: str, slurm: Slurm) -> dict[str, object]:
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        log = folder / "job.out"
        state = subprocess.run(
            ["squeue", "--noheader", f"--jobs={job}", "--format=%T"], env=slurm.env,
            capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        assert state in ("PENDING", "RUNNING", "CONFIGURING", ""), state
        assert state or path.exists(), f"job {job} ended: {log.read_text() if log.exists() else ''}"
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "no output"
        time.sleep(1)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def _left(temp_dir: str) -> list[str]:
    return [processes.cmdline(p) for p in processes.pids() if temp_dir in processes.cmdline(p)]


def _gone(temp_dir: str) -> list[str]:
    deadline = time.monotonic() + 120
    while _left(temp_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    return _left(temp_dir)


def test_a_two_node_job_gets_ray_on_its_own_cpus_and_nothing_is_left_after_close(
    slurm: Slurm, tmp_path: Path
) -> None:
    job, out = _submit(slurm, tmp_path, "close")
    facts = _wait_for(out, tmp_path, job, slurm)
    assert facts["cpus"] == [2.0, 2.0]  # the job's 2 CPUs per node, not the nodes' 4
    assert facts["offered"] is True  # inside a job, the panel offers "This job's nodes"
    assert len(facts["nodes"]) == 2 and facts["ran"] == facts["nodes"]  # a task on each node
    plan = str(facts["plan"])
    assert f"SLURM job {job}" in plan and "No job is submitted." in plan
    assert "srun --overlap --nodes=1 --ntasks=1 --cpus-per-task=2 -w" in plan
    assert "sbatch" not in plan
    _wait_for(Path(str(out) + ".closed"), tmp_path, job, slurm)
    assert _gone(str(facts["temp_dir"])) == []


def test_scancel_ends_the_cluster_with_the_job(slurm: Slurm, tmp_path: Path) -> None:
    job, out = _submit(slurm, tmp_path, "stay")
    facts = _wait_for(out, tmp_path, job, slurm)
    assert facts["cpus"] == [2.0, 2.0]
    assert _left(str(facts["temp_dir"]))  # the guard for the check below: it is running
    subprocess.run(["scancel", job], env=slurm.env, check=True, timeout=60)
    assert _gone(str(facts["temp_dir"])) == []


_SLURM_SCRIPT = """\
import json, sys
import eugo_jupyter as eugo

cluster = eugo.hpc.launch("slurm", name="scripted", nodes=2, walltime="00:20:00",
                          cpus_per_node=1)
try:
    cluster.wait(timeout=600)  # raises with the card's sentence (a busy machine's, say)
except Exception:
    cluster.close()
    raise
with cluster:
    nodes = len([n for n in cluster.refresh()["nodes"] if n["alive"]])
    total = sum(eugo.hpc.map(abs, [-1, -2, 3]))
    grown = len(cluster.scale(3).model["slurm"]["jobs"])   # one more worker job
    shrunk = len(cluster.scale(2).model["slurm"]["jobs"])  # and cancelled again
    jobs = [j["id"] for j in cluster.refresh()["slurm"]["jobs"]]
    print(json.dumps({"sum": total, "jobs": jobs, "nodes": nodes, "scaled": [grown, shrunk]}))
"""


def test_a_script_launches_slurm_jobs_through_the_api_and_cancels_them(
    slurm: Slurm, tmp_path: Path
) -> None:
    env = {**slurm.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", _SLURM_SCRIPT], env=env, capture_output=True, text=True,
        timeout=DEADLINE, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["sum"] == 6 and facts["nodes"] == 2 and len(facts["jobs"]) == 2
    assert facts["scaled"] == [3, 2]  # scale(n): n nodes, the head's job included
    queue = subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING", "--format=%i"], env=slurm.env,
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert not set(facts["jobs"]) & set(queue)  # close() cancelled both jobs
