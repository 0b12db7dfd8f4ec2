"""Stopping a cluster asks Ray's processes to exit in Ray's own order, so none has to be killed.

A real head node started with `ray start`, stopped by the function every backend uses. Sent
SIGTERM all at once, the GCS never exits and the raylet takes seconds (it retries its gone GCS),
so both ended by SIGKILL after the grace; raylets first, the GCS last, each exits at once.
"""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

import pytest

from eugo_jupyter._tempdirs import expected_dir
from eugo_jupyter.server.backends import local as launcher
from eugo_jupyter.server.backends import processes

# Generous, so that a loaded machine never makes a slow exit look like one that needed SIGKILL.
GRACE_S = 120.0


def test_every_process_of_a_stopped_cluster_exits_on_sigterm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = launcher.launch(
        launcher.NodeSpec(num_cpus=1), [], expected_dir(f"c-s{secrets.token_hex(4)}")
    )
    killed: list[str] = []
    send = processes._signal

    def noting_kills(ours: set[tuple[int, int]], sig: int) -> None:
        if sig == signal.SIGKILL:
            killed.extend(processes._cmdline(pid)[:120] for pid, _ in processes._alive(ours))
        send(ours, sig)

    monkeypatch.setattr(processes, "_signal", noting_kills)
    try:
        assert processes.cluster_processes(started.pgids, started.temp_dir)
        assert launcher.stop(started.pgids, started.temp_dir, grace=GRACE_S) == []
    finally:
        monkeypatch.undo()
        launcher.stop(started.pgids, started.temp_dir)
    assert killed == [], "needed SIGKILL: " + "; ".join(killed)
    assert processes.cluster_processes(started.pgids, started.temp_dir) == set()
    assert not Path(started.temp_dir).exists()
