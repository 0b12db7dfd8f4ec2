"""The observer's task-count reads run in the background while the probes go on (fake backend).

A count read makes the GCS copy its whole task table (1 to 2 s at 100,000 records on a loaded
head). When the work stops while one is under way, the probes that keep running see the stop
and book the final read, which starts as soon as the other ends: the card shows the final
counts without waiting for another poll and another read. Milliseconds, no Ray: the fake
backend's reads, with a count read held open by the test. The real reads are in
``test_observer.py``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter.server.manager import ClusterManager
from tests.fixtures.fake_backend import FakeBackend
from tests.fixtures.waiting import until_async


@pytest.fixture(autouse=True)
def _runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))


class Work:
    """What the fake cluster's Ray would say: whether work moves, and tasks finished so far."""

    def __init__(self, fake: FakeBackend) -> None:
        self.fake = fake
        self.moving = True
        self.finished = 10
        self.gate: threading.Event | None = None  # set: the next count read waits for it
        self.entered = threading.Event()
        self.probes = 0
        self.counted: list[int] = []  # the finished count each count read saw

    def read(
        self, address: str, dashboard_url: str | None, timeout: float, counts: bool = True
    ) -> dict[str, Any]:
        data = self.fake.read(address, dashboard_url, timeout, counts)
        data.update(moving=self.moving, mark="m")
        if not counts:
            self.probes += 1
            return data
        finished = self.finished  # a GCS query sees the table as it was when it began
        gate, self.gate = self.gate, None
        if gate is not None:
            self.entered.set()
            gate.wait(10)
        self.counted.append(finished)
        data["tasks"] = {"pending": 0, "running": 0, "finished": finished, "failed": 0}
        data["tasks"]["dropped"] = 0
        return data


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def test_the_final_counts_follow_a_read_that_was_under_way_when_the_work_stopped() -> None:
    fake = FakeBackend()
    work = Work(fake)

    async def scenario() -> None:
        manager = ClusterManager(
            max_age=0.01, backends={"fake": fake}, find_clusters=False, read=work.read
        )
        model = await manager.create(
            {"kind": "fake", "name": "f", "lifetime": "persistent", "fake": {"nodes": 1}}
        )
        fake.move(model["fake"]["jobs"][0]["id"], "running")
        await manager.wait_until_running(model["id"], timeout=10)
        cluster_id = model["id"]

        # A count read begins while the work moves, and is held open (a slow GCS pass).
        gate = work.gate = threading.Event()
        while not work.entered.is_set():
            await manager.get_cluster(cluster_id)
            await asyncio.sleep(0.02)
        # The run ends meanwhile; the panel's polls still answer and still probe.
        work.moving, work.finished = False, 100
        probes = work.probes
        for _ in range(3):
            polled = await asyncio.wait_for(manager.get_cluster(cluster_id), timeout=5)
            assert polled is not None and polled["tasks"]["finished"] == 10
            await asyncio.sleep(0.02)
        assert work.probes > probes
        # The held read ends with the old counts; the final read follows by itself: no poll.
        gate.set()
        cluster = manager._clusters[cluster_id]  # the card as the next poll will show it
        await until_async(
            lambda: cluster.monitoring["tasks"]["finished"] == 100, "final counts", 10, 0.005
        )
        assert work.counted[-2:] == [10, 100]
        await manager.delete(cluster_id)
        await manager.close()

    _run(scenario)
