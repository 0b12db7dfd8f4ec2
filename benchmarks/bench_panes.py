"""What the live panes cost: the server's and the head's (GCS) CPU with every pane polling,
against the panel's cluster model alone; each pane's reply time; and how soon a finished task
shows in the task stream.

One run, ratios in the same run, a printed table. Usage:

    python benchmarks/bench_panes.py                    # 20,000 tasks on record
    python benchmarks/bench_panes.py --tasks 100000     # the issue's figure (Ray keeps 100,000)
    python benchmarks/bench_panes.py --tasks 100000 --system-config '{"enable_timeline": false}'

A local cluster (the Manager's own launch, a head of 2 CPUs) gets ``--tasks`` tiny tasks from a
driver process, then that driver keeps submitting ``--rate`` tiny tasks a second while the
phases run, so the task table stays full and moving. Phase "panel": the panel's poll
(``get_cluster``, every ``--panel-every`` s) for ``--seconds``. Phase "panes": the same plus
each of the five live views every ``--pane-every`` s, the task stream passing its cursor back
as a pane does. CPU is this process's (the server's work: manager, observer, live hub) and the
cluster's ``gcs_server`` process's, per second of wall time. The appearance time is, for each
task first seen in a task-stream reply, that reply's time less the task's end (it includes the
pane's own polling interval, and Ray's report interval of task events). Before the phases, what
one task query costs the GCS (its CPU, the median of 8): the floor of the stream's delay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any

import psutil

from eugo_jupyter import _raystate
from eugo_jupyter.server import live_tasks
from eugo_jupyter.server.backends import ray_start
from eugo_jupyter.server.live import LiveHub, LiveTarget
from eugo_jupyter.server.manager import ClusterManager

DRIVER = textwrap.dedent(
    """
    import sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    fill, rate = int(sys.argv[2]), float(sys.argv[3])

    @ray.remote  # one CPU each: two workers, no crowd of processes on a small head
    def tiny(i):
        return i

    done = 0
    while done < fill:
        n = min(5000, fill - done)
        ray.get([tiny.remote(i) for i in range(n)])
        done += n
    print("filled", flush=True)
    while True:
        began = time.monotonic()
        ray.get([tiny.remote(i) for i in range(max(1, int(rate / 4)))])
        time.sleep(max(0.0, 0.25 - (time.monotonic() - began)))
    """
)


def gcs_process(address: str) -> psutil.Process:
    """The cluster's GCS server process (by its port)."""
    port = address.rsplit(":", 1)[1]
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "gcs_server" in cmd and f"--gcs_server_port={port}" in cmd:
            return proc
    raise RuntimeError(f"no gcs_server process for port {port}")


def cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def query_cost(address: str, gcs: psutil.Process) -> dict[str, float]:
    """The GCS's CPU for one query of the finished attempts and one of the active ones (s)."""
    _raystate.enable_token_auth()
    cost: dict[str, float] = {}
    for label, only in (("finished", {"states": ("FINISHED",)}),
                        ("active", {"not_states": live_tasks.NOT_ACTIVE})):  # fmt: skip
        spent: list[float] = []
        for _ in range(8):
            before = cpu(gcs)
            _raystate.task_events(address, limit=2000, timeout=60, **only)
            spent.append(cpu(gcs) - before)
        cost[label] = statistics.median(spent)
    return cost


class Phase:
    """One measured phase: CPU of this process and of the GCS per wall second."""

    def __init__(self, gcs: psutil.Process) -> None:
        self.gcs = gcs
        self.me = psutil.Process()

    def __enter__(self) -> Phase:
        self.t0, self.c0, self.g0 = time.monotonic(), cpu(self.me), cpu(self.gcs)
        return self

    def __exit__(self, *exc: Any) -> None:
        wall = time.monotonic() - self.t0
        self.server = (cpu(self.me) - self.c0) / wall
        self.head = (cpu(self.gcs) - self.g0) / wall


async def run(args: argparse.Namespace) -> None:
    manager = ClusterManager(find_clusters=False)
    hub = LiveHub()
    model = await manager.create({"kind": "local", "name": "panes", "head": {"num_cpus": 2}})
    cluster_id = model["id"]
    driver = None
    try:
        model = await manager.wait_until_running(cluster_id, timeout=600)
        address = str(model["address"])
        gcs = gcs_process(address)
        print(f"cluster {address}; filling {args.tasks:,} tasks ...", flush=True)
        driver = subprocess.Popen(  # noqa: ASYNC220 - returns at once; read in a thread
            [sys.executable, "-c", DRIVER, address, str(args.tasks), str(args.rate)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "RAY_AUTH_MODE": "token"},
        )  # fmt: skip
        assert driver.stdout is not None
        began = time.monotonic()
        line = ""
        while line.strip() != "filled":
            line = await asyncio.get_running_loop().run_in_executor(None, driver.stdout.readline)
            assert line, "the driver ended before it filled the task table"
        print(f"filled in {time.monotonic() - began:.0f} s; measuring ...", flush=True)
        cost = await asyncio.get_running_loop().run_in_executor(None, query_cost, address, gcs)

        async def panel(until: float) -> None:
            while time.monotonic() < until:
                await manager.get_cluster(cluster_id)
                await asyncio.sleep(args.panel_every)

        await panel(time.monotonic() + 5)  # warm: the first reads
        with Phase(gcs) as alone:
            await panel(time.monotonic() + args.seconds)

        latency: dict[str, list[float]] = {v: [] for v in ("tasks", "progress", "nodes",
                                                           "gpus", "failures")}  # fmt: skip
        appeared: list[float] = []
        seen: set[str] = set()
        cursor: str | None = None

        async def pane(view: str, until: float) -> None:
            nonlocal cursor
            while time.monotonic() < until:
                model = await manager.get_cluster(cluster_id)
                assert model is not None
                dashboard = await manager.dashboard_target(cluster_id) if view in (
                    "nodes", "gpus") else None  # fmt: skip
                target = LiveTarget(cluster_id, dict(model), dashboard)
                t0 = time.perf_counter()
                if view == "tasks":
                    reply = await hub.tasks(target, cursor, 2000)
                    cursor = reply["cursor"]
                    for row in reply["tasks"]:
                        if row["end"] and row["task_id"] not in seen:
                            seen.add(row["task_id"])
                            if first_done:
                                appeared.append(reply["now"] - row["end"])
                elif view == "failures":
                    reply = await hub.failures(target, 100)
                else:
                    reply = await getattr(hub, view)(target)
                latency[view].append(time.perf_counter() - t0)
                await asyncio.sleep(args.pane_every)

        first_done = False
        t = time.monotonic() + 5
        await asyncio.gather(*(pane(v, t) for v in latency))  # warm: the window's first fill
        first_done = True
        with Phase(gcs) as panes:
            until = time.monotonic() + args.seconds
            await asyncio.gather(panel(until), *(pane(v, until) for v in latency))
        table = hub._watches[cluster_id]

        print(f"\n{args.tasks:,} tasks on record, {args.rate:g} more a second; panel every "
              f"{args.panel_every:g} s, panes every {args.pane_every:g} s, {args.seconds:g} s "
              "a phase\n")  # fmt: skip
        print(
            "one task query, GCS CPU (median of 8): "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in cost.items())
            + "\n"
        )
        print(f"{'':28}{'panel alone':>14}{'all panes':>14}{'ratio':>8}")
        for label, a, b in (
            ("server CPU s per s", alone.server, panes.server),
            ("head (GCS) CPU s per s", alone.head, panes.head),
        ):
            print(f"{label:28}{a:14.3f}{b:14.3f}{b / a if a else float('inf'):8.1f}")
        print("\nreply time per view (ms): median, 95th percentile, max")
        for view, times in latency.items():
            ms = sorted(x * 1000 for x in times)
            p95 = ms[int(0.95 * (len(ms) - 1))]
            print(f"  {view:10}{statistics.median(ms):9.1f}{p95:9.1f}{ms[-1]:9.1f}  ({len(ms)})")
        if appeared:
            s = sorted(appeared)
            p95 = s[int(0.95 * (len(s) - 1))]
            print(
                f"\nfinished -> in the task stream (s): median {statistics.median(s):.2f}, "
                f"95th percentile {p95:.2f}, max {s[-1]:.2f} over {len(s):,} tasks"
            )
        print(f"last task read took {table.tasks_took:.2f} s; rows asked per read "
              f"{table.finished_rows}; window {len(table.ledger.rows):,} rows")  # fmt: skip
    finally:
        if driver is not None:
            driver.kill()
            driver.wait()
        await manager.delete(cluster_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks on record first")
    parser.add_argument("--rate", type=float, default=200.0, help="tasks a second meanwhile")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--panel-every", type=float, default=1.5, help="the panel's poll (s)")
    parser.add_argument("--pane-every", type=float, default=1.0, help="each pane's poll (s)")
    parser.add_argument("--system-config", default="{}", help="JSON added to the head's")
    args = parser.parse_args()
    ray_start.SYSTEM_CONFIG.update(json.loads(args.system_config))  # the launch below takes it
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
