"""Keeping each cluster's card fresh: what its backend sees, and its Ray state, read off the loop.

The manager's monitoring, one job of its own: :meth:`Observer.fresh` decides whether a cluster's
data is old enough to read again (one read at a time), a read asks the backend what it sees (at
most every ``max_age`` seconds; an ended cluster turns "stopped", once) and then the cluster's
Ray state (:func:`.monitor.read`, in a thread, at most every ``probe_every`` seconds), and the
data in hand answers steady polls at once. The task counts, the one costly part for the head,
are read only when :class:`.pacing.CountsPace` says so (while work moves, and just after it
stops), in the background, one count read at a time, while the probes go on. The manager holds
one Observer and never reads Ray itself.

>>> observer = Observer(backends, monitor.read, 2.0, 5.0, pool, save)       # doctest: +SKIP
>>> await observer.fresh(cluster)                                            # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from .. import records
from . import monitor, proxy_policy
from .backends import Backend, Observed, ray_start
from .cluster import Cluster
from .models import error_text, timestamp, unread_text
from .pacing import CountsPace

__all__ = ["Observer"]


class Observer:
    """Reads the manager's clusters: their backends' view and their Ray state, cached."""

    def __init__(
        self,
        backends: dict[str, Backend],
        read: Callable[..., dict[str, Any]],
        max_age: float,
        read_timeout: float,
        slow: Executor,
        save: Callable[[Cluster], None],
        probe_every: float = 0.5,
    ) -> None:
        self.backends = backends
        self.max_age = max_age  # the backend's view; the task counts while work moves
        self.probe_every = min(probe_every, max_age)  # the Ray state without the task counts
        # How a cluster's Ray state is read (monitor.read); a test's fake backend gives its own.
        self._read_cluster = read
        self.read_timeout = read_timeout
        self._slow = slow  # the manager's pool for slow work (a backend's release)
        self._save = save

    async def fresh(self, cluster: Cluster) -> None:
        """Re-read the cluster if its data is older than ``probe_every`` (one read at a time)."""
        if cluster.status not in ("running", "error") or not cluster.record.get("address"):
            return
        if cluster.launching is not None and not cluster.launching.done():
            return  # the launch loop reads it until it is up
        owned = self.backends[cluster.kind].owns_processes
        if cluster.status == "error" and not cluster.updated and owned:
            return  # failed to launch: nothing to read
        if time.monotonic() - cluster.read_at < self.probe_every:
            return
        if cluster.refreshing is None or cluster.refreshing.done():
            cluster.refreshing = asyncio.ensure_future(self.refresh(cluster))
        if cluster.updated is None or time.monotonic() - cluster.read_at > 3 * self.max_age:
            # Nothing read yet, or nobody polled for a while: this caller wants today's data.
            await asyncio.shield(cluster.refreshing)
        # Otherwise a steady poll gets the data in hand at once and the read finishes in the
        # background: it never waits on Ray (with 100,000 tasks a read takes the GCS most of a
        # second).

    async def read_again(self, cluster: Cluster) -> None:
        """A read that begins now: after the record changed (a job added or removed), or when a
        caller asks for today's data.

        A read already under way began before: it would give the old jobs and states, so it is
        waited for (its outcome is its own) before the new read starts.
        """
        running = cluster.refreshing
        if running is not None and not running.done():
            await asyncio.wait([running])
        cluster.read_at = 0.0
        await self.fresh(cluster)

    async def observe(self, cluster: Cluster) -> Observed:
        """Ask the backend what it sees; an ended cluster turns "stopped" and loses its record."""
        loop = asyncio.get_running_loop()
        backend = self.backends[cluster.kind]
        observed = await loop.run_in_executor(None, backend.state, cluster.record)
        cluster.backend_state = observed.detail
        changed = {
            key: value
            for key, value in (
                ("address", observed.address),
                ("dashboard_url", observed.dashboard_url),
            )
            if value and cluster.record.get(key) != value
        }
        if changed:
            cluster.record.update(changed)
            self._save(cluster)
        if observed.ended and cluster.status not in ("stopping", "stopped"):
            cluster.status, cluster.error = "stopped", observed.ended
            # If it was the active one, new kernels say it is gone (and why) as they fall back.
            records.forget(cluster.record, gone=observed.ended)
            # The manager acts on the end, once; reading the state never changes anything.
            await loop.run_in_executor(self._slow, backend.release, cluster.record)
        return observed

    async def refresh(self, cluster: Cluster) -> None:
        owned = self.backends[cluster.kind].owns_processes
        # A backend's view may cost a scheduler query (squeue, qstat): at most every max_age.
        due = not cluster.read_at or time.monotonic() - cluster.observed_at >= self.max_age
        if owned and due:
            cluster.observed_at = time.monotonic()
            try:
                await self.observe(cluster)
            except Exception as exc:  # noqa: BLE001 - a scheduler or API that did not answer
                cluster.read_at = time.monotonic()
                cluster.error = unread_text(exc)
                return
            if cluster.status == "stopped":
                return
        address = str(cluster.record["address"])
        loop = asyncio.get_running_loop()
        if address.startswith("ray://"):
            cluster.read_at = time.monotonic()
            up = await loop.run_in_executor(None, monitor.reachable, address)
            cluster.status = "running" if up else "error"
            cluster.error = (
                "Nodes and tasks are not shown for a ray:// address (it only lets kernels "
                "connect); connect with the head's GCS address (host:port) to monitor."
                if up
                else f"Nothing answers at {address} any more."
            )
            return
        try:
            data = await self.read(cluster)
        except Exception as exc:  # noqa: BLE001 - any failure to read becomes a sentence
            cluster.read_at = time.monotonic()
            detail = error_text(exc)
            if not self.backends[cluster.kind].owns_processes:  # connected: it may be gone
                cluster.status = "error"
                cluster.error = (
                    f"The cluster at {address} does not answer ({detail}). "
                    "It may have been stopped; remove it or connect again."
                )
            else:
                cluster.error = unread_text(exc)
            return
        self.took(cluster, data)
        cluster.status, cluster.error = "running", None

    async def read(self, cluster: Cluster) -> dict[str, Any]:
        """The cluster's Ray state without waiting for the task counts (``tasks`` None: the last
        ones are kept), unless none were read yet or the manager asked for today's data.

        The cheap probe runs at every read; when the pace says the counts are due, a count read
        starts in the background (:meth:`_count`), one at a time. A probe that sees the work stop
        while a count read is under way does not wait for it: the final read is booked and
        starts the moment the other ends, so the counts' lag after a run is at most two reads.
        """
        loop = asyncio.get_running_loop()
        pace = self._pace(cluster)
        forced = not cluster.read_at  # never read, or the manager asked for today's data
        address, timeout = str(cluster.record["address"]), self.read_timeout

        def probe() -> tuple[dict[str, Any], float | None]:
            data = self._read_cluster(address, None, timeout, counts=False)
            wait = pace.due(
                time.monotonic(),
                moving=bool(data.get("moving")),
                mark=str(data.get("mark", "")),
                unsettled=_in_flight(cluster.monitoring["tasks"]),
            )
            return data, wait

        data, wait = await asyncio.wait_for(
            loop.run_in_executor(None, probe), timeout=self.read_timeout * 3
        )
        counting = cluster.counting
        under_way = counting is not None and not counting.done()
        if forced:
            if counting is not None and under_way:
                await asyncio.wait([counting])  # it began before: its counts are old
            tasks = await self._count_once(cluster, pace.moving)
            data["tasks"] = tasks
            return data
        if wait is None:
            return data
        if under_way:
            if not pace.moving:
                pace.defer(time.monotonic() + wait)  # the final read, right after this one
            return data
        cluster.counting = asyncio.ensure_future(self._count(cluster, wait))
        return data

    def _pace(self, cluster: Cluster) -> CountsPace:
        if cluster.pace is None:
            # A cluster the Manager launched reports its task events every REPORT_EVERY_MS;
            # one it connected to, as Ray does by default, every second.
            ours = self.backends[cluster.kind].owns_processes
            report = ray_start.REPORT_EVERY_MS / 1000 if ours else 1.0
            cluster.pace = CountsPace(
                busy_every=self.max_age, settle=report + 0.05, report_every=report
            )
        pace: CountsPace = cluster.pace
        return pace

    async def _count(self, cluster: Cluster, wait: float | None) -> None:
        """Count reads in the background, from ``wait`` seconds on, while the pace books more:
        the final one after a run, and once more when that one still saw tasks in flight."""
        pace = self._pace(cluster)
        while wait is not None:
            await asyncio.sleep(wait)
            if cluster.status in ("stopping", "stopped"):
                return  # its GCS is going: a read of it would block a thread for nothing
            try:
                tasks = await self._count_once(cluster, pace.moving)
            except Exception:  # noqa: BLE001 - the GCS may be busy: the next probe books again
                return
            if tasks is not None and cluster.status not in ("stopping", "stopped"):
                cluster.monitoring = {**cluster.monitoring, "tasks": tasks}
                cluster.updated = timestamp()
            wait = pace.after(time.monotonic(), unsettled=_in_flight(tasks) and not pace.moving)

    async def _count_once(self, cluster: Cluster, moving: bool) -> dict[str, int] | None:
        """One read with the task counts (a pass over the GCS's task table); None: unknown."""
        loop = asyncio.get_running_loop()
        pace = self._pace(cluster)
        record = cluster.record
        address, timeout = str(record["address"]), self.read_timeout

        def count() -> dict[str, int] | None:
            # Task counts may go through the dashboard with this account's token: only to a
            # proven one.
            dashboard = self.dashboard_decision(record).url
            began = time.monotonic()
            pace.began(began, moving=moving)
            try:
                data = self._read_cluster(address, dashboard, timeout, counts=True)
            finally:
                pace.took(time.monotonic() - began)
            if dashboard is None and record.get("dashboard_url"):
                return None  # not zero: unknown now (the last counts are kept)
            tasks: dict[str, int] | None = data["tasks"]
            return tasks

        return await asyncio.wait_for(
            loop.run_in_executor(None, count), timeout=self.read_timeout * 3
        )

    def dashboard_decision(self, record: dict[str, Any]) -> proxy_policy.Decision:
        """Whether this account's Ray token may go to the record's dashboard (blocking).

        See :func:`.proxy_policy.decide`: a dashboard on this machine must be held by the
        cluster's own Ray session; one elsewhere must be named by the user or started by us.
        """
        backend = self.backends.get(str(record.get("kind")))
        return proxy_policy.decide(
            record.get("dashboard_url"),
            str(record.get("address")),
            local_ips=monitor.local_ips(),
            named=bool(record.get("dashboard_named")),
            ours=bool(backend and backend.owns_processes),
        )

    def took(self, cluster: Cluster, data: dict[str, Any]) -> None:
        if data["tasks"] is None:
            data["tasks"] = cluster.monitoring["tasks"]
        cluster.monitoring, cluster.updated = data, timestamp()
        cluster.read_at = time.monotonic()


def _in_flight(tasks: dict[str, int] | None) -> bool:
    """Whether task counts show tasks pending or running."""
    return bool(tasks and tasks["pending"] + tasks["running"])
