"""A kernel and a cluster that disagree about token authentication: a ClusterError that says
which side has it on and how to match them, before Ray's confusing "actor died before it ran"
(issue 16). The cluster is a real `ray start --head` with authentication disabled."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator

import pytest

import eugo_jupyter as eugo
from eugo_jupyter import _processes as processes
from eugo_jupyter._rayaddress import auth_mismatch, gcs_wants_token
from eugo_jupyter._tempdirs import expected_dir, make_private
from eugo_jupyter.exceptions import ClusterError
from eugo_jupyter.server.backends import local, ray_start


@pytest.fixture(scope="module")
def open_cluster() -> Iterator[str]:
    """A head started with RAY_AUTH_MODE=disabled, as some teams run theirs."""
    temp_dir = make_private(expected_dir(f"c-a{secrets.token_hex(4)}"))
    ip = ray_start.node_ip()
    args, port, _ = ray_start.head_arguments(ray_start.NodeSpec(num_cpus=1), ip, temp_dir)
    env = {**ray_start.environment(), "RAY_AUTH_MODE": "disabled"}
    for _ in range(2):  # a busy machine can make the raylet miss ray start's 30 s window
        start = subprocess.Popen(
            [ray_start.ray_executable(), "start", *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        # Every process it starts is in its session's group (the Ray client server's command
        # line does not name the temp dir: the group finds it).
        out, _ = start.communicate(timeout=300)
        if start.returncode == 0:
            break
        processes.stop([start.pid], temp_dir)
        make_private(temp_dir)
    try:
        assert start.returncode == 0, out[-2000:]
        yield f"{ip}:{port}"
    finally:
        assert processes.stop([start.pid], temp_dir) == []


def test_the_probe_sees_authentication_off(open_cluster: str) -> None:
    assert gcs_wants_token(open_cluster) is False


def test_a_kernel_sending_a_token_is_told_how_to_match(
    open_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eugo.hpc.shutdown()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))
    with pytest.raises(ClusterError) as info:
        eugo.hpc.init(address=open_cluster)
    message = str(info.value)
    assert f"The cluster at {open_cluster} has token authentication off" in message
    assert "this kernel sends a token" in message
    assert "RAY_AUTH_MODE=disabled" in message
    import ray

    assert not ray.is_initialized()  # nothing half-connected is left behind


def test_a_kernel_without_token_matches(open_cluster: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert auth_mismatch(open_cluster) is None


def test_a_kernel_without_token_is_told_the_cluster_wants_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = local.launch(
        ray_start.NodeSpec(num_cpus=1), [], expected_dir(f"c-a{secrets.token_hex(4)}")
    )
    try:
        monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
        message = auth_mismatch(started.gcs_address) or ""
        assert "has token authentication on, but this kernel sends no token" in message
        assert "~/.ray/auth_token" in message
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        assert auth_mismatch(started.gcs_address) is None
    finally:
        assert processes.stop(started.pgids, started.temp_dir) == []
