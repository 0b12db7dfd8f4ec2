"""A launched cluster seen by another local user or another host: its folders are out of their
reach, and no port outside loopback answers without this account's token (issue 16)."""

from __future__ import annotations

import http.client
import os
import secrets
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter import _tempdirs as tempdirs
from eugo_jupyter._tempdirs import expected_dir
from eugo_jupyter.server.backends import local, ray_start

DEADLINE = 240.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[local.Launched]:
    """A head started the way the manager starts every node (same flags and environment); it
    runs all three exporters: its own node's, the dashboard's and the autoscaler monitor's."""
    temp_dir = expected_dir(f"c-t{secrets.token_hex(4)}")
    started = local.launch(ray_start.NodeSpec(num_cpus=1), [], temp_dir)
    yield started
    assert processes.stop(started.pgids, started.temp_dir) == []


def _logs(started: local.Launched) -> Path:
    return Path(tempdirs.ray_temp_dir(started.temp_dir), "session_latest", "logs")


def _wait_for_exporter_attempts(started: local.Launched) -> None:
    """The dashboard and the autoscaler monitor open their exporters a while after start: wait
    until both logged their attempt, so the port listing below sees the settled state."""
    wanted = {
        "dashboard.log": "Starting dashboard metrics server",
        "monitor.log": "Starting autoscaler metrics server",
    }
    deadline = time.monotonic() + DEADLINE
    while wanted:
        for name, needle in list(wanted.items()):
            path = _logs(started) / name
            if path.exists() and needle in path.read_text(errors="replace"):
                del wanted[name]
        assert time.monotonic() < deadline, f"never logged: {wanted}"
        time.sleep(0.5)


def _listeners(pids: set[int]) -> list[tuple[str, int, str]]:
    """(host, port, process) of every TCP listening socket of these processes (``ss -ltnp``)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            local = line.split()[3]
            host, _, port = local.rpartition(":")
            found.append((host.strip("[]"), int(port), line.split("users:")[-1]))
    return found


def _answers_without_token(host: str, port: int) -> str | None:
    """What an HTTP request without a token gets from host:port; None if it is refused."""
    for path in ("/metrics", "/"):
        try:
            with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as response:
                return f"HTTP {response.status} for {path}"
        except urllib.error.HTTPError as exc:
            if exc.code not in (401, 403, 404):
                return f"HTTP {exc.code} for {path}"
        except (OSError, ValueError, http.client.HTTPException):
            continue  # a gRPC port, or a reset: nothing served over HTTP/1
    return None


def test_no_unauthenticated_port_outside_loopback(cluster: local.Launched) -> None:
    _wait_for_exporter_attempts(cluster)
    pids = {pid for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir)}
    listeners = _listeners(pids)
    outside = [(h, p, who) for h, p, who in listeners if not h.startswith(("127.", "::ffff:127."))]
    assert outside, "expected Ray's gRPC ports to listen for other nodes"
    ip = ray_start.node_ip()
    open_ports = []
    for host, port, who in outside:
        answer = _answers_without_token(ip, port)
        if answer is not None:
            open_ports.append(f"{host}:{port} {who}: {answer}")
    assert open_ports == []
    # The three Prometheus exporters say, in their own logs, that they are not serving.
    assert "An exception occurred while starting the metrics server" in (
        _logs(cluster) / "dashboard.log"
    ).read_text(errors="replace")
    assert "An exception occurred while starting the metrics server" in (
        _logs(cluster) / "monitor.log"
    ).read_text(errors="replace")


def test_rays_folders_sit_inside_a_folder_only_this_account_can_enter(
    cluster: local.Launched,
) -> None:
    outer = os.lstat(cluster.temp_dir)
    assert stat.S_ISDIR(outer.st_mode) and outer.st_uid == os.geteuid()
    assert stat.S_IMODE(outer.st_mode) == 0o700
    # Ray makes its own folders 0777; what matters is that every one is below the 0700 folder.
    ray_dir = Path(tempdirs.ray_temp_dir(cluster.temp_dir))
    assert stat.S_IMODE(ray_dir.stat().st_mode) == 0o777  # Ray's choice, kept out of reach
    sockets = list(ray_dir.glob("session_*/sockets/*"))
    assert sockets, "expected Ray's unix sockets under the cluster's folder"
    # Every session, log or socket path a process of the cluster was given lies below it.
    paths = []
    for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir):
        for token in processes.cmdline(pid).replace("=", " ").split():
            if token.startswith("/") and "/session_" in token:
                paths.append(token)
    assert paths
    assert [p for p in paths if not p.startswith(cluster.temp_dir + "/")] == []
