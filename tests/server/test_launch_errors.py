"""A launch that cannot start says why, in the cluster's model or as an error, and leaves
nothing."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter.exceptions import LaunchError
from eugo_jupyter.server.backends import ray_start


async def test_ray_missing_puts_the_cluster_in_error_with_the_fix(
    jp_fetch: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A server whose environment has no `ray` command (nothing beside its Python, nothing on PATH).
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    body = {"kind": "local", "name": "no ray", "head": {"num_cpus": 1}}
    model = json.loads(
        (await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))).body
    )
    deadline = time.monotonic() + 60
    while model["status"] == "starting":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
        model = json.loads((await jp_fetch("eugo", "clusters", model["id"])).body)
    assert model["status"] == "error"
    assert "The `ray` command was not found" in model["error"]
    assert "pip install 'ray[default]'" in model["error"]
    assert not Path(f"/tmp/eugo-{model['id']}").exists()
    response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []


def test_port_in_use_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        temp_dir = f"/tmp/eugo-t-{port}"
        with pytest.raises(LaunchError) as info:
            ray_start.run_ray_start(
                ["--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                 f"--temp-dir={temp_dir}"],
                timeout=240,
            )  # fmt: skip
    # Said as soon as the GCS failed (Ray's own `ray start` waited on 40 s for the dying process
    # to end), in Ray's words without its boilerplate, with the words the local backend's retry
    # of a port race looks for.
    message = str(info.value)
    assert message.startswith("`ray start` failed: its gcs_server stopped: Failed to"), message
    assert f"The specified port is {port}" in message and "already in use" in message, message
    leftovers = [pid for pid in processes.pids() if temp_dir in processes.cmdline(pid)]
    assert leftovers == []
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_a_start_past_its_time_is_stopped_and_says_so() -> None:
    temp_dir = f"/tmp/eugo-t-late-{os.getpid()}"
    with pytest.raises(LaunchError) as info:  # `ray start`'s own imports take longer
        ray_start.run_ray_start(["--head", "--num-cpus=1", f"--temp-dir={temp_dir}"], timeout=0.2)
    assert str(info.value) == (
        "`ray start` did not finish within 0.2 s; the machine may be overloaded. "
        "Try again, or launch fewer nodes."
    )
    assert [pid for pid in processes.pids() if temp_dir in processes.cmdline(pid)] == []
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_one_nodes_ports_are_distinct_even_when_the_os_hands_one_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The OS may give the same free port to two binds in a row (each socket is closed before
    # the next): `ray start` then refused with "trying to use a port number that is used by
    # other components". The repeat cannot be provoked on demand, so the OS's answers are
    # replayed here, repeats included.
    answers = iter([50001, 50001, 50002, 50002, 50002, *range(50003, 50020)])
    monkeypatch.setattr(ray_start, "free_port", lambda: next(answers))
    args, gcs, dashboard = ray_start.head_arguments(
        ray_start.NodeSpec(num_cpus=1), "192.0.2.2", "/tmp/eugo-c-ports"
    )
    ports = [int(a.split("=")[1]) for a in args if a.split("=")[0].endswith("port")]
    assert len(ports) == len(ray_start.HEAD_PORTS) + len(ray_start.NODE_PORTS)
    assert len(set(ports)) == len(ports), ports
    assert (gcs, dashboard) == (50001, 50002)


def test_a_head_killed_before_it_prints_an_error_says_how_it_ended(tmp_path: Path) -> None:
    # What a card showed as "failed: no output": the head's `ray start` ended (here, killed) having
    # printed only INFO lines. The error now says how it ended and its last line.
    from eugo_jupyter.server.backends import allocation

    log = tmp_path / "head.log"
    line = "2026-12-06 10:00:00,000 INFO scripts.py:1 -- Local node IP"
    script = f"import os; print({line!r}, flush=True); os.kill(os.getpid(), 9)"
    with pytest.raises(LaunchError) as info:
        allocation._start(
            [sys.executable, "-c", script], log, str(tmp_path), 60, lambda: False,
            "The head's `ray start`", "late",
        )  # fmt: skip
    assert str(info.value).startswith("The head's `ray start` failed: ")
    assert "ended with exit -9 (killed by SIGKILL)" in str(info.value)
    assert "its last line: 2026-12-06 10:00:00,000 INFO scripts.py:1 -- Local node IP" in str(
        info.value
    )
    assert ray_start.why("") == "it printed nothing"
    # srun's own line that the step failed never hides what `ray start` printed before it
    printed = (
        "[2026-12-07 10:00:00,000 W 1 1] rpc_client.h:153: Failed to connect to GCS at 10.0.0.1\n"
        "srun: error: vm: task 0: Exited with exit code 1\n"
    )
    assert ray_start.why(printed, 1).endswith("Failed to connect to GCS at 10.0.0.1")
    assert (
        ray_start.why("", 137) == "it printed nothing and ended with exit 137 (killed by SIGKILL)"
    )
