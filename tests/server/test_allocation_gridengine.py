"""Clusters from code on a real Grid Engine cell (a private qmaster and execd on this machine).

kind "allocation" inside a job of the parallel environment ``smp`` from a plain Python process:
the cell has one host, so the job's nodes are that one host (the head only; ``qrsh -inherit``
would reach the others), with exactly the PE's slots as CPUs. Nothing is left after ``close()``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from tests.fixtures.gridengine import GridEngine, gridengine_cell, require_gridengine

DEADLINE = 900.0  # the machine is shared: we poll for a condition, never time it

_SCRIPT = """\
import json, os, sys
import ray
import eugo_jupyter as eugo

out = sys.argv[1]
cluster = eugo.hpc.launch("allocation", name="in-ge-job")
plan = cluster.preview()
cluster.use()
nodes = [n for n in ray.nodes() if n["Alive"]]
facts = {"plan": plan, "cpus": [n["Resources"].get("CPU") for n in nodes],
         "sum": sum(eugo.hpc.map(abs, [-1, -2, 3])),
         "temp_dir": eugo.records.read_record(cluster.id)["temp_dir"]}
cluster.close()
with open(out + ".tmp", "w") as f:
    json.dump(facts, f)
os.rename(out + ".tmp", out)
"""


@pytest.fixture(scope="module")
def cell() -> Iterator[GridEngine]:
    require_gridengine()
    with gridengine_cell() as running:
        yield running


def _left(temp_dir: str) -> list[str]:
    return [processes.cmdline(p) for p in processes.pids() if temp_dir in processes.cmdline(p)]


def test_a_parallel_job_gets_ray_on_its_slots_and_nothing_is_left(
    cell: GridEngine, tmp_path: Path
) -> None:
    script, out = tmp_path / "job.py", tmp_path / "facts.json"
    script.write_text(_SCRIPT)
    job = tmp_path / "job.sh"
    job.write_text(f"#!/bin/bash\nexec {sys.executable} {script} {out}\n")
    job.chmod(0o755)
    env = {**cell.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    subprocess.run(
        ["qsub", "-V", "-terse", "-b", "y", "-pe", cell.parallel_environment, "2",
         "-q", cell.queue, "-o", str(tmp_path / "job.out"), "-j", "y", str(job)],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    deadline = time.monotonic() + DEADLINE
    while not out.exists():
        log = tmp_path / "job.out"
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "no output"
        time.sleep(1)
    facts: dict[str, Any] = json.loads(out.read_text())
    assert facts["cpus"] == [2.0]  # the PE's 2 slots, not the host's 4
    assert facts["sum"] == 6
    assert "Grid Engine job" in facts["plan"] and "No job is submitted." in facts["plan"]
    end = time.monotonic() + 120
    while _left(facts["temp_dir"]) and time.monotonic() < end:
        time.sleep(0.5)
    assert _left(facts["temp_dir"]) == []
