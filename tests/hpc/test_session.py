"""Which cluster a fresh process uses: explicit, EUGO_CLUSTER_ADDRESS, RAY_ADDRESS, the active
record, else an embedded local Ray. Each case runs in a real new Python process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import records
from eugo_jupyter.exceptions import ClusterError
from eugo_jupyter.hpc._target import resolve_address
from tests.fixtures.programs import Program

PROBE = """
import json, warnings
warnings.simplefilter("always")
import eugo_jupyter as eugo
@eugo.hpc.distribute
def one():
    return 1
assert eugo.hpc.get(one()) == 1
info = eugo.hpc.cluster()
print(json.dumps({"address": info.address, "source": info.source, "embedded": info.embedded,
                  "nodes": len(info.nodes), "dashboard": info.dashboard_url}))
"""


class Fresh:
    """``code`` in a new process with no cluster address set, started now; :meth:`result` waits
    for it."""

    def __init__(self, code: str, runtime: Path, env: dict[str, str] | None = None) -> None:
        clean = {
            k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS")
        }
        clean.update(env or {}, JUPYTER_RUNTIME_DIR=str(runtime))
        self.program = Program(code, clean)

    def result(self) -> tuple[Any, str]:
        """Its last line's JSON, and what it wrote to stderr (the warnings)."""
        try:
            code, stdout, stderr = self.program.ended()
        finally:
            self.stop()
        assert code == 0, stderr
        return json.loads(stdout.strip().splitlines()[-1]), stderr

    def stop(self) -> None:
        self.program.stop()


def _fresh(code: str, runtime: Path, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """Run ``code`` in a new process with no cluster address set: its last line's JSON, and
    what it wrote to stderr (the warnings)."""
    return Fresh(code, runtime, env).result()


def _probe(env: dict[str, str], runtime: Path) -> dict[str, Any]:
    return _fresh(PROBE, runtime, env)[0]  # type: ignore[no-any-return]


def test_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    assert resolve_address() == (None, "embedded")
    records.write_record({"id": "dev", "name": "dev", "kind": "local", "address": "10.1.1.1:6379"})
    records.set_active(records.read_record("dev") or {})
    assert resolve_address() == ("10.1.1.1:6379", "active cluster 'dev'")
    monkeypatch.setenv("RAY_ADDRESS", "10.2.2.2:6379")
    assert resolve_address() == ("10.2.2.2:6379", "RAY_ADDRESS")
    monkeypatch.setenv("EUGO_CLUSTER_ADDRESS", "10.3.3.3:6379")
    assert resolve_address() == ("10.3.3.3:6379", "EUGO_CLUSTER_ADDRESS")
    assert resolve_address("10.4.4.4:6379") == ("10.4.4.4:6379", "explicit")
    records.delete_record("dev")
    assert records.active_record() is None


def test_records_are_private_and_atomic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    path = records.write_record(
        {"id": "c-1", "name": "x", "kind": "local", "address": "a:1", "created": "1"}
    )
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [r["id"] for r in records.list_records()] == ["c-1"]
    assert records.read_record("c-1")["version"] == records.RECORD_VERSION  # type: ignore[index]
    with pytest.raises(ValueError, match="not a cluster id"):
        records.read_record("../etc/passwd")


def test_unreachable_explicit_address_fails_fast() -> None:
    import eugo_jupyter as eugo

    eugo.hpc.shutdown()
    with pytest.raises(ClusterError, match="No Ray cluster answers at 127.0.0.1:1"):
        eugo.hpc.init(address="127.0.0.1:1")


def test_an_address_that_answers_but_is_no_gcs_is_named_without_trying_ray() -> None:
    import socket

    import ray

    import eugo_jupyter as eugo

    eugo.hpc.shutdown()
    # Ray's own client would retry such a port for about 40 s before a message about timeouts.
    with socket.socket() as listener:  # accepts TCP, speaks no gRPC
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ClusterError, match="but not as a Ray cluster's GCS"):
            eugo.hpc.init(address=address)
    assert not ray.is_initialized()


def test_embedded_default_and_each_address_source(
    gpu_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The four processes run at once (each waits mostly on its own Ray's start or connect). The
    # first one's runtime folder has no record; the others' marks the cluster active.
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    records.set_active({"id": "gpu", "name": "gpu", "address": gpu_cluster.address})
    probes = [
        ({}, nothing),
        ({}, tmp_path),
        ({"RAY_ADDRESS": gpu_cluster.address}, tmp_path),
        ({"EUGO_CLUSTER_ADDRESS": gpu_cluster.address, "RAY_ADDRESS": "127.0.0.1:1"}, tmp_path),
    ]
    with ThreadPoolExecutor(len(probes)) as pool:
        embedded, active, ray_address, both = pool.map(lambda probe: _probe(*probe), probes)

    # Nothing configured: a private embedded Ray, even though another cluster runs on this machine.
    assert embedded["embedded"] and embedded["nodes"] == 1
    assert embedded["address"] != gpu_cluster.address
    assert embedded["dashboard"].startswith("http://127.0.0.1:")

    # The cluster marked active in the manager.
    assert active["source"] == "active cluster 'gpu'" and active["nodes"] == 2

    # RAY_ADDRESS beats the record; EUGO_CLUSTER_ADDRESS beats RAY_ADDRESS.
    assert ray_address["source"] == "RAY_ADDRESS"
    assert both["source"] == "EUGO_CLUSTER_ADDRESS" and both["nodes"] == 2


@pytest.fixture(scope="module")
def embedded_starts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Fresh]]:
    """The two tests below each start an embedded Ray in a new process: both processes start
    together (each waits on its own Ray's start much of the time), each in its own runtime
    folder; the first one's marks a cluster active that is gone (nothing answers there)."""
    dead = tmp_path_factory.mktemp("dead-active")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_RUNTIME_DIR", str(dead))
        records.set_active({"id": "gone", "name": "gone", "address": "127.0.0.1:1"})
    runs = {
        "dead active": Fresh(PROBE, dead),
        "listeners": Fresh(LISTENERS, tmp_path_factory.mktemp("listeners")),
    }
    yield runs
    for run in runs.values():
        run.stop()


def test_dead_active_cluster_falls_back_with_a_warning(
    embedded_starts: dict[str, Fresh],
) -> None:
    result, warned = embedded_starts["dead active"].result()
    assert "No Ray cluster answers at 127.0.0.1:1 (from active cluster 'gone')" in warned
    assert result["embedded"]


LISTENERS = """
import json
import eugo_jupyter as eugo
from eugo_jupyter.hpc import _checks, _session, _watch
heard = []
_session.on_connect(lambda c: heard.append(["connect", c.source]))
_session.on_disconnect(lambda reason: heard.append(["disconnect", reason]))
address = eugo.hpc.init(num_cpus=1).address
seen = _checks.current_snapshot() is not None
error = _watch.release(address, "its head stopped accepting connections")
eugo.hpc.shutdown()                 # nothing held any more: no one hears of it
print(json.dumps({"heard": heard, "seen": seen, "cached": _checks._snap is not None,
                  "error": str(error), "address": address}))
"""


def test_listeners_hear_the_connect_and_the_cluster_gone(
    embedded_starts: dict[str, Fresh],
) -> None:
    """What a per-cluster cache hears: the connect, then the cluster let go of when found gone
    (the one disconnect; its cluster read is dropped with it)."""
    result, _ = embedded_starts["listeners"].result()
    (connect, source), (disconnect, reason) = result["heard"]
    assert (connect, source, disconnect) == ("connect", "embedded", "disconnect")
    assert reason.startswith(
        f"the cluster at {result['address']} is gone: its head stopped accepting connections"
    )
    assert result["seen"] and not result["cached"]
    assert "This kernel is still running" in result["error"]
