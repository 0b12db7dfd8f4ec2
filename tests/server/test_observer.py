"""The card's task counts on a real cluster: settled soon after a run, not recounted at rest.

Counting tasks makes the GCS copy its whole task table (most of a second of the head's CPU at
100,000 records), so a cluster whose work has stopped must not be recounted at every poll, and
a run must still show in the counts, even one that starts and ends between two polls. A driver
process stays connected between its runs, as a notebook's kernel does.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import ray_start
from eugo_jupyter.server.manager import ClusterManager

DEADLINE_S = 240.0  # generous: the machine is shared; conditions are polled, never timed

DRIVER = textwrap.dedent(
    """
    import json, sys, ray
    address = sys.stdin.readline().strip()
    if not address:  # the test ended before the cluster ran
        sys.exit()
    ray.init(address=address, logging_level="ERROR")
    print(json.dumps(ray._private.state.state.get_system_config()), flush=True)  # the head's
    noop = ray.remote(num_cpus=1)(lambda: None)

    @ray.remote(num_cpus=1)
    class Model:
        def ready(self):
            return True

    kept = []
    for line in sys.stdin:
        if line.strip() == "actor":  # one that holds its CPU and waits for calls
            kept.append(Model.remote())
            ray.get(kept[-1].ready.remote())
        else:
            ray.get([noop.remote() for _ in range(int(line))])
        print("done", flush=True)
    """
)


class Driver:
    """A connected Ray driver that runs ``n`` no-op tasks when told to, and says when done.

    Started before the cluster (its imports go on while the cluster launches); connects in
    :meth:`connect`.
    """

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", DRIVER],
            env={**os.environ, "RAY_AUTH_MODE": "token"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.config: dict[str, Any] = {}

    def connect(self, address: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{address}\n")
        self.process.stdin.flush()
        self.config = json.loads(self.process.stdout.readline())  # the head's system config

    def run(self, n: int | str) -> None:
        """Run ``n`` tasks (or "actor": start an actor that holds a CPU while it waits for
        calls) and wait until they all returned to the driver."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{n}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "done"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def test_counts_settle_after_each_run_and_a_cluster_at_rest_is_not_recounted() -> None:
    counted: list[float] = []  # when the manager's reads included the counts (a table pass)

    def read(*args: Any, **kwargs: Any) -> dict[str, Any]:
        data = monitor.read(*args, **kwargs)
        if data["tasks"] is not None:
            counted.append(time.monotonic())
        return data

    manager = ClusterManager(read=read, find_clusters=False)

    async def counts_reach(cluster_id: str, n: int) -> dict[str, Any]:
        """Poll as the panel does until the finished count shows ``n``."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            model = await manager.get_cluster(cluster_id)
            assert model is not None
            if model["tasks"]["finished"] >= n:
                return model
            assert time.monotonic() < deadline, f"counts never showed {n}: {model['tasks']}"
            await asyncio.sleep(0.25)

    async def comes_to_rest(cluster_id: str) -> None:
        """At rest, the panel keeps polling (every probe): once the final count after the run
        is in, the task table is not copied again. (The final counts can take two reads: the
        driver's own submit events may reach the GCS after the first. A poll returns while a
        read goes on, so rest is 3 s without a new count.)"""
        spacing = manager.observer.probe_every * 1.2  # a panel's polls, as fast as it helps
        deadline = time.monotonic() + DEADLINE_S
        quiet = 0
        while quiet * spacing < 3.0:
            before = len(counted)
            await asyncio.sleep(spacing)
            await manager.get_cluster(cluster_id)
            quiet = quiet + 1 if len(counted) == before else 0
            assert time.monotonic() < deadline, "the counts never came to rest"
        at_rest = len(counted)
        for _ in range(6):  # polls over more than busy_every: a recount at rest shows here
            await asyncio.sleep(spacing)
            await manager.get_cluster(cluster_id)
        assert len(counted) == at_rest

    async def scenario() -> None:
        driver = Driver()
        model = await manager.create({"kind": "local", "name": "pace", "head": {"num_cpus": 1}})
        cluster_id = model["id"]
        try:
            model = await manager.wait_until_running(cluster_id, timeout=600)
            await asyncio.get_running_loop().run_in_executor(
                None, driver.connect, str(model["address"])
            )
            # What the card reads after a run (task events, the drivers' backlog behind the
            # waiting list, the nodes' load) reaches the GCS every 250 ms on a cluster the
            # Manager launched, not Ray's every second: the driver takes that from the head.
            assert {key: driver.config.get(key) for key in ray_start.SYSTEM_CONFIG} == {
                "task_events_report_interval_ms": 250,
                "report_worker_backlog_interval_ms": 250,
                "gcs_pull_resource_loads_period_milliseconds": 250,
            }
            await asyncio.get_running_loop().run_in_executor(None, driver.run, 20)
            model = await counts_reach(cluster_id, 20)
            assert model["tasks"] == {
                "pending": 0, "running": 0, "finished": 20, "failed": 0, "dropped": 0,
            }  # fmt: skip

            await comes_to_rest(cluster_id)

            # A run that starts and ends while nobody polls still shows once polls resume.
            await asyncio.get_running_loop().run_in_executor(None, driver.run, 5)
            model = await counts_reach(cluster_id, 25)
            assert model["tasks"]["running"] + model["tasks"]["pending"] == 0

            # An actor that holds the CPU while it waits for calls (a notebook's model) is at
            # rest too: its resources are held, but nothing moves.
            await asyncio.get_running_loop().run_in_executor(None, driver.run, "actor")
            model = await counts_reach(cluster_id, 27)  # its creation task and one call
            await comes_to_rest(cluster_id)
            model = await manager.get_cluster(cluster_id)
            assert model is not None and model["resources"]["available"].get("CPU", 0) == 0
        finally:
            driver.close()
            await manager.delete(cluster_id)
            await manager.close()

    asyncio.run(scenario())
