"""Where data has to live: a task that cannot see a file the notebook sees says where and why.

The cluster: this process's embedded Ray as the head node (1 CPU) and a worker node started
with ``unshare --mount`` in its own
mount namespace, where a private tmpfs covers the data folder. The notebook (this process) and
the head see the files; the worker node sees an empty folder, as a second machine without the
notebook's disk would. Calls pinned to the worker ask for its custom resource ``island``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import DataLocationError, MapItemError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")

# Mounts a tmpfs over the data folder inside the new namespace, then becomes the worker node.
_WORKER = """
import os, subprocess, sys
folder, address, ray = sys.argv[1], sys.argv[2], sys.argv[3]
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", folder], check=True)
os.chdir("/")
os.execv(ray, [ray, "start", f"--address={address}", "--num-cpus=2", '--resources={"island": 2}',
               "--block", "--disable-usage-stats"])
"""


def _nodes_alive() -> int:
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def island(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from eugo_jupyter._raystate import enable_token_auth

    data = tmp_path_factory.mktemp("data")
    (data / "tile.npy").write_bytes(b"\x93NUMPY" + bytes(100))
    eugo.hpc.shutdown()
    enable_token_auth()  # the worker node's `ray start` inherits the auth mode the head uses
    # The head is this process's embedded Ray (its dashboard on a free port: Ray's task events,
    # which name the node a task ran on, come through it).
    head = eugo.hpc.init(num_cpus=1, dashboard_port=_free_port())
    ray_cli = str(Path(sys.executable).with_name("ray"))
    worker = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _WORKER,
         str(data), head.address, ray_cli],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # only bounds a broken start; it measures nothing
        while _nodes_alive() < 2:
            assert worker.poll() is None, "the worker node in its own mount namespace exited"
            assert time.monotonic() < deadline, "the worker node never joined"
            time.sleep(0.5)
        yield {"data": data, "tile": data / "tile.npy"}
    finally:
        try:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        except ProcessLookupError:
            pass
        eugo.hpc.shutdown()


def read_header(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(6)


@eugo.hpc.distribute
def read_tile(path: str) -> bytes:
    return read_header(path)


def test_missing_on_the_worker_node_says_where_it_ran_and_the_fix(island: dict[str, Any]) -> None:
    import ray

    path = str(island["tile"])
    future = read_tile.options(resources={"island": 1})(path)
    with pytest.raises(DataLocationError) as caught:
        eugo.hpc.get(future, timeout=120)
    message = str(caught.value)
    worker = next(n for n in ray.nodes() if n["Alive"] and n["Resources"].get("island"))
    assert isinstance(caught.value, FileNotFoundError)
    assert caught.value.filename == path
    assert f"node {worker['NodeID'][:12]}" in message
    assert f"where {path!r} does not exist" in message
    assert f"On this notebook's machine {path} exists (a file)" in message
    assert "storage all nodes mount" in message and "eugo.hpc.put" in message


def test_a_relative_path_names_the_worker_directory(
    island: dict[str, Any], monkeypatch: Any
) -> None:
    monkeypatch.chdir(island["data"])  # the notebook runs next to its data
    future = read_tile.options(resources={"island": 1})("tile.npy")
    with pytest.raises(DataLocationError) as caught:
        eugo.hpc.get(future, timeout=120)
    message = str(caught.value)
    assert "'tile.npy' is a relative path" in message
    assert f"not the notebook's ({island['data']})" in message
    assert f"On this notebook's machine {island['tile']} exists" in message


def test_a_path_missing_everywhere_says_so(island: dict[str, Any]) -> None:
    missing = str(island["data"] / "never-written.npy")
    with pytest.raises(DataLocationError, match="does not exist on this notebook's machine either"):
        eugo.hpc.get(read_tile.options(resources={"island": 1})(missing), timeout=120)


def test_map_names_the_item_and_the_node(island: dict[str, Any]) -> None:
    with pytest.raises(MapItemError) as caught:
        eugo.hpc.map(read_header, [str(island["tile"])] * 3, resources={"island": 1})
    message = str(caught.value)
    assert "on item #0" in message
    assert "exists (a file): the notebook and that node do not share this storage" in message


def test_other_errors_are_left_alone(island: dict[str, Any]) -> None:
    @eugo.hpc.distribute
    def fails() -> None:
        raise ValueError("not about files")

    with pytest.raises(ValueError, match="not about files") as caught:
        eugo.hpc.get(fails(), timeout=120)
    assert not isinstance(caught.value, DataLocationError)


def test_readiness_flags_paths_the_worker_cannot_see(island: dict[str, Any]) -> None:
    paths = [str(island["tile"])] * 4
    report = eugo.hpc.readiness(read_header, paths)
    check = next(c for c in report.checks if c.name == "paths visible on every node")
    assert check.ok is False
    assert f"{str(island['tile'])!r} exists here but not on node" in check.detail
    assert report.verdict.startswith("not ready:")
    assert "storage all nodes mount" in report.verdict
