"""An embedded Ray whose start fails (Ray waits a fixed 30 s for its GCS's port and for its
raylet to register, which a busy machine can miss) is tried once more, and a failed try leaves
no Ray process behind.

Each case runs in a real new Python process whose Ray start really begins (GCS, raylet,
dashboard, agents); the wait for the raylet's registration (or the GCS's port file) is made to
fail at once instead of after 30 s of a loaded machine, with the exception Ray raises then.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

SCRIPT = """
import json, os, sys, time, warnings
import ray._private.node as node
import ray._private.services as services

real, real_port = services.get_node, node.wait_for_persisted_port
fails, wait = int(sys.argv[1]), sys.argv[2]

def get_node(*args, **kwargs):
    global fails
    if fails and wait == "raylet":
        fails -= 1
        raise Exception("The current node timed out during startup. (made to fail at once)")
    return real(*args, **kwargs)

def wait_for_persisted_port(session_dir, node_id, name, *args, **kwargs):
    global fails
    if fails and wait == "gcs" and name == node.GCS_SERVER_PORT_NAME:
        fails -= 1
        raise RuntimeError(f"Timed out waiting for file {session_dir}/{name} (made to fail)")
    return real_port(session_dir, node_id, name, *args, **kwargs)

services.get_node = get_node
node.wait_for_persisted_port = wait_for_persisted_port

import eugo_jupyter as eugo
from eugo_jupyter.hpc import _session
from eugo_jupyter import _processes as processes

@eugo.hpc.distribute
def one():
    return 1

result = {}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    try:
        eugo.hpc.init(num_cpus=1)
        result["ran"] = eugo.hpc.get(one())
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
result["warnings"] = [str(w.message) for w in seen]
result["temp"] = _session._own_temp

def ray_processes():
    # Every process started under this one, and the orphans (an agent whose raylet was killed
    # is adopted by init, and renames itself "ray::..."), found by their log files under this
    # test's temp folder.
    mine = processes.descendants({os.getpid()}) | set(processes.holders(os.environ["TMPDIR"]))
    return sorted(processes.cmdline(pid) for pid in mine - {os.getpid()})


def kinds(lines):
    # By the program and its script (a forkserver's preload list names Ray's modules too); an
    # agent is named by its script until it renames itself.
    names = {
        "gcs_server": ("gcs_server",),
        "raylet": ("raylet/raylet",),
        "dashboard agent": ("ray::DashboardAgent", "dashboard/agent.py"),
        "runtime env agent": ("ray::RuntimeEnvAgent", "runtime_env/agent/main.py"),
    }
    heads = [" ".join(line.split()[:3]) for line in lines]
    return {k: sum(any(n in head for n in v) for head in heads) for k, v in names.items()}

# The raylet's agents end a moment after it (bounded wait): then one Ray runs, or none.
want = {k: int("ran" in result) for k in kinds([])}
for _ in range(100):
    if kinds(ray_processes()) == want:
        break
    time.sleep(0.2)
result["kinds"], result["want"] = kinds(ray_processes()), want
eugo.hpc.shutdown()
result["folders"] = sorted(n for n in os.listdir(os.environ["TMPDIR"]) if n.startswith("eugo-k-"))
print("RESULT", json.dumps(result))
"""


def _start(fails: int, tmp: str, wait: str = "raylet") -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS")}
    env.update(TMPDIR=tmp, JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(fails), wait],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


@pytest.fixture
def tmp() -> Iterator[str]:
    # Short: Ray's socket paths under it must fit AF_UNIX's 107 bytes.
    folder = tempfile.mkdtemp(prefix="eugo-t-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("wait", ["raylet", "gcs"])
def test_a_start_that_times_out_is_tried_again_and_its_processes_are_gone(
    tmp: str, wait: str
) -> None:
    # Either of Ray's fixed 30 s waits: the raylet's registration, the GCS's port file.
    result = _start(1, tmp, wait)
    assert result.get("ran") == 1, result
    assert any("did not start" in w and "trying once more" in w for w in result["warnings"])
    # One Ray runs: the second try's (nothing of the first try is left); both folders go at
    # shutdown.
    assert result["kinds"] == result["want"], result
    assert result["folders"] == [], result


def test_two_failed_starts_say_so_with_the_fix_and_leave_nothing_running(tmp: str) -> None:
    result = _start(2, tmp)
    assert result["error"].startswith("ClusterError: The embedded local Ray did not start, twice")
    assert "eugo.hpc.init(address=...)" in result["error"]
    assert result["kinds"] == result["want"], result
    assert result["folders"] == [], result
