"""The manager's launch loop through the in-memory fake backend: milliseconds, no Ray.

What the manager makes of a backend's answers: a queued job keeps the launch "starting" with no
deadline running; a request the scheduler can never satisfy turns it to an error that is not
final (the scheduler may still start it) and back once the job runs; the head's end turns it
"stopped", forgets the record and lets the backend release what is left, once; a restarted
server adopts a live record and finds it running; scaling goes through the backend. The same
fake runs the backend contract suite with the real backends (test_backend_contract.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter import records
from eugo_jupyter.exceptions import ClusterError
from eugo_jupyter.server.manager import ClusterManager
from tests.fixtures.fake_backend import FakeBackend
from tests.fixtures.waiting import until_async


@pytest.fixture(autouse=True)
def _runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))


def _manager(fake: FakeBackend, launch_timeout: float = 60.0) -> ClusterManager:
    return ClusterManager(
        max_age=0.01, launch_timeout=launch_timeout, backends={"fake": fake},
        find_clusters=False, read=fake.read,
    )  # fmt: skip


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


BODY = {"kind": "fake", "name": "f", "lifetime": "persistent", "fake": {"nodes": 2}}


async def _running(manager: ClusterManager, fake: FakeBackend, nodes: int) -> dict[str, Any]:
    """A fake cluster of ``nodes`` running jobs, once the manager has seen it run."""
    model = await manager.create({**BODY, "fake": {"nodes": nodes}})
    for job in model["fake"]["jobs"]:
        fake.move(job["id"], "running")
    return dict(await manager.wait_until_running(model["id"], timeout=10))


def test_queued_jobs_keep_the_launch_starting_then_it_runs_once_every_node_joined() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake, launch_timeout=0.05)  # queued: no launch deadline runs
        model = await manager.create(BODY)
        assert model["status"] == "starting" and model["final_error"] is False
        assert model["facts"]["node_label"] == "job"
        head, worker = (j["id"] for j in model["fake"]["jobs"])
        await asyncio.sleep(0.2)  # four launch timeouts: still waiting, no error
        model = await manager.get_cluster(model["id"], fresh=True)
        assert model is not None and model["status"] == "starting" and model["error"] is None
        fake.move(head, "running")

        async def one_node() -> bool:
            m = await manager.get_cluster(model["id"])
            return m is not None and len(m["nodes"]) == 1

        await until_async(
            one_node, "the head's node shows while the worker waits", deadline_s=10, every_s=0.005
        )
        now = await manager.get_cluster(model["id"])
        assert now is not None and now["status"] == "starting", now["error"]
        fake.move(worker, "running")
        running = await manager.wait_until_running(model["id"], timeout=10)
        assert len(running["nodes"]) == 2
        assert await manager.delete(model["id"]) is True
        assert fake.jobs == {head: "ended", worker: "ended"}
        assert records.list_records() == []

    _run(scenario)


def test_a_never_satisfiable_request_is_an_error_that_is_not_final() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await manager.create({**BODY, "fake": {"nodes": 1}})
        head = model["fake"]["jobs"][0]["id"]
        fake.move(head, "impossible")

        async def blocked() -> bool:
            m = await manager.get_cluster(model["id"])
            return m is not None and m["status"] == "error"

        await until_async(blocked, "the card says it cannot run", deadline_s=10, every_s=0.005)
        m = await manager.get_cluster(model["id"])
        assert m is not None
        assert m["error"] == f"Fake cannot run job {head} as asked."
        assert m["final_error"] is False  # an administrator may still make it fit
        with pytest.raises(ClusterError, match="still error"):
            await manager.wait_until_running(model["id"], timeout=0.05)
        fake.move(head, "running")
        assert (await manager.wait_until_running(model["id"], timeout=10))["error"] is None
        await manager.delete(model["id"])

    _run(scenario)


def test_the_heads_end_stops_the_cluster_forgets_it_and_releases_the_rest_once() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await manager.create(BODY)
        head, worker = (j["id"] for j in model["fake"]["jobs"])
        fake.move(head, "running")
        fake.move(worker, "running")
        await manager.wait_until_running(model["id"], timeout=10)
        fake.move(head, "ended")  # the wall time, or an administrator
        m = await manager.get_cluster(model["id"], fresh=True)
        assert m is not None and m["status"] == "stopped" and m["final_error"] is True
        assert m["error"] == f"Job {head} (the Ray head) ended; the cluster with it."
        assert records.read_record(model["id"]) is None  # kernels no longer pick it
        assert fake.released == [model["id"]] and fake.jobs[worker] == "ended"
        await manager.get_cluster(model["id"], fresh=True)
        assert fake.released == [model["id"]]  # acted on once, never by a later read
        with pytest.raises(ClusterError, match="ended; the cluster with it"):
            await manager.wait_until_running(model["id"], timeout=1)

    _run(scenario)


def test_a_restarted_server_adopts_a_live_record_and_forgets_a_dead_one() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        first = _manager(fake)
        live = await first.create(BODY)
        dead = await first.create({**BODY, "name": "dead", "fake": {"nodes": 1}})
        for job in live["fake"]["jobs"]:
            fake.move(job["id"], "running")
        fake.move(dead["fake"]["jobs"][0]["id"], "ended")
        for task in [c.launching for c in first._clusters.values()]:
            assert task is not None
            task.cancel()  # the first server is gone; its records stay

        second = _manager(fake)
        adopted = await second.wait_until_running(live["id"], timeout=10)
        assert adopted["status"] == "running" and len(adopted["nodes"]) == 2
        assert await second.get_cluster(dead["id"]) is None
        assert [r["id"] for r in records.list_records()] == [live["id"]]
        await second.delete(live["id"])

    _run(scenario)


def test_add_and_remove_node_go_through_the_backend() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await _running(manager, fake, nodes=1)
        grown = await manager.add_node(model["id"])
        assert grown is not None
        added = grown["fake"]["jobs"][-1]["id"]
        assert fake.jobs[added] == "queued"
        shrunk = await manager.remove_node(model["id"], added)
        assert shrunk is not None and [j["role"] for j in shrunk["fake"]["jobs"]] == ["head"]
        assert fake.jobs[added] == "ended"
        await manager.delete(model["id"])

    _run(scenario)


def test_a_node_added_while_a_read_is_under_way_is_on_the_card_it_returns() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await _running(manager, fake, nodes=1)
        # A poll's read asks the scheduler before the node is added, and answers after.
        gate = fake.state_gate = threading.Event()
        poll = asyncio.ensure_future(manager.get_cluster(model["id"], fresh=True))
        await asyncio.get_running_loop().run_in_executor(None, fake.state_entered.wait, 10)
        grow = asyncio.ensure_future(manager.add_node(model["id"]))

        async def submitted() -> bool:
            return len(fake.jobs) == 2

        await until_async(submitted, "the worker job submitted", deadline_s=10, every_s=0.005)
        gate.set()
        grown = await grow
        assert grown is not None
        assert [j["role"] for j in grown["fake"]["jobs"]] == ["head", "worker"]
        await poll
        await manager.delete(model["id"])

    _run(scenario)


def test_a_fresh_read_asked_while_a_read_is_under_way_is_a_new_one() -> None:
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await _running(manager, fake, nodes=2)
        worker = model["fake"]["jobs"][1]["id"]
        # A read asks the scheduler while the worker job runs, and answers after it ended.
        gate = fake.state_gate = threading.Event()
        first = asyncio.ensure_future(manager.get_cluster(model["id"], fresh=True))
        await asyncio.get_running_loop().run_in_executor(None, fake.state_entered.wait, 10)
        fake.move(worker, "ended")
        second = asyncio.ensure_future(manager.get_cluster(model["id"], fresh=True))
        gate.set()
        seen = await second
        assert seen is not None
        assert [j["state"] for j in seen["fake"]["jobs"]] == ["running", "ended"]
        await first
        await manager.delete(model["id"])

    _run(scenario)


def test_a_refused_submit_is_the_requests_error_and_leaves_nothing() -> None:
    fake = FakeBackend()
    fake.refuse_submit = "invalid queue"

    async def scenario() -> None:
        manager = _manager(fake)
        with pytest.raises(ClusterError, match="Fake refused it"):
            await manager.create(BODY)
        assert await manager.list_clusters() == []
        assert records.list_records() == []

    _run(scenario)


def test_a_scheduler_that_does_not_answer_is_said_on_the_card_and_asked_again() -> None:
    """While coming up and once running. Before, the launch's task ended on the exception
    (never retrieved: the card stayed "starting" for good, and nothing said why), and a running
    cluster's poll raised it."""
    fake = FakeBackend()

    async def scenario() -> None:
        manager = _manager(fake)
        model = await manager.create(BODY)
        head, worker = (j["id"] for j in model["fake"]["jobs"])
        fake.refuse_state = "its controller is down"

        async def said() -> dict[str, Any] | None:
            m = await manager.get_cluster(model["id"])
            return m if m is not None and m["status"] == "error" else None

        m = await until_async(said, "the card saying so", deadline_s=10, every_s=0.005)
        assert m["error"] == (
            "Could not read the cluster's state just now: Fake did not answer "
            "(state): its controller is down"
        ), m["error"]
        assert m["final_error"] is False
        fake.refuse_state = None
        fake.move(head, "running")
        fake.move(worker, "running")
        running = await manager.wait_until_running(model["id"], timeout=10)
        assert running["error"] is None and len(running["nodes"]) == 2

        fake.refuse_state = "its controller is down again"
        m = await manager.get_cluster(model["id"], fresh=True)
        assert m is not None and m["status"] == "running"
        assert m["error"] is not None and "its controller is down again" in m["error"]
        fake.refuse_state = None
        await manager.delete(model["id"])

    _run(scenario)
