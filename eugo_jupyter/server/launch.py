"""One launch, from submitting it to "running", as a small object with named steps.

The manager makes one :class:`Launch` per cluster it launches (or adopts while it is still
coming up) and runs it as a task. Its loop state is a few commented attributes, and each turn
of the loop is four steps: :meth:`Launch.observe` asks the backend, :meth:`Launch.judge` turns
what it sees into the card's status (a request that can never run is an error, a queue stops
the launch deadline), :meth:`Launch.joined` reads Ray and says "running" once every node the
backend expects has joined, and :meth:`Launch.overdue` says so when the deadline passes (not
final: a node that joins later still makes the cluster run).

>>> task = asyncio.ensure_future(Launch(manager, cluster, backend, spec).run())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from typing import Any, Protocol

from .backends import Backend, Observed, Spec
from .cluster import Cluster
from .models import error_text, unread_text

__all__ = ["Launch"]


class _Observer(Protocol):
    """What a launch uses of the manager's monitoring (:class:`.observer.Observer`)."""

    async def observe(self, cluster: Cluster) -> Observed: ...
    async def read(self, cluster: Cluster) -> dict[str, Any]: ...
    def took(self, cluster: Cluster, data: dict[str, Any]) -> None: ...


class _Manager(Protocol):
    """What a launch uses of the manager (the manager imports this module, not the reverse)."""

    launch_timeout: float
    max_age: float

    @property
    def _slow(self) -> Executor: ...

    @property
    def observer(self) -> _Observer: ...

    def _save(self, cluster: Cluster) -> None: ...


class Launch:
    """Start ``spec`` (unless it was started before answering), then wait until it is up."""

    def __init__(
        self,
        manager: _Manager,
        cluster: Cluster,
        backend: Backend,
        spec: Spec | None = None,
    ) -> None:
        self.manager = manager
        self.cluster = cluster
        self.backend = backend
        #: What to start first; None when the backend started it before the request answered
        #: (a scheduler's submit) or when a previous server did (an adopted record).
        self.spec = spec
        #: Past this, a launch whose nodes have not all joined says so; a queue pushes it back.
        self.deadline = time.monotonic() + manager.launch_timeout

    @property
    def coming_up(self) -> bool:
        return self.cluster.status in ("starting", "error")

    async def run(self) -> None:
        if self.spec is not None and not await self.start(self.spec):
            return
        while self.coming_up:
            observed = await self.observe()
            if observed is None:  # the backend could not say: the card says why; ask again
                await asyncio.sleep(self.manager.max_age)
                continue
            if not self.coming_up:
                break  # ended, or a shutdown began
            self.judge(observed)
            if await self.joined(observed):
                break
            self.overdue(observed)
            await asyncio.sleep(self.pause(observed))
        if self.cluster.status != "stopped":
            self.manager._save(self.cluster)

    async def start(self, spec: Spec) -> bool:
        """Run the backend's start (it blocks: in the manager's pool); False if it failed."""
        loop = asyncio.get_running_loop()
        try:
            updates = await loop.run_in_executor(
                self.manager._slow, self.backend.start, spec, self.cluster.record,
                self.manager.launch_timeout,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - LaunchError, or anything else, is reported
            self.cluster.status, self.cluster.error = "error", error_text(exc)
            self.manager._save(self.cluster)
            return False
        self.cluster.record.update(updates)
        self.manager._save(self.cluster)
        return True

    async def observe(self) -> Observed | None:
        """What the backend sees; None when it could not say (a scheduler or Kubernetes API
        that did not answer): the card says so, not final, and the next turn asks again."""
        try:
            return await self.manager.observer.observe(self.cluster)
        except Exception as exc:  # noqa: BLE001 - any failure to ask becomes a sentence
            if self.coming_up:
                self.cluster.status = "error"
                self.cluster.error = unread_text(exc)
            return None

    def judge(self, observed: Observed) -> None:
        cluster = self.cluster
        if observed.blocked:
            cluster.status, cluster.error = "error", observed.blocked
        elif cluster.status == "error" and time.monotonic() <= self.deadline:
            cluster.status, cluster.error = "starting", None  # the scheduler changed its mind
        if observed.waiting or observed.blocked:
            # Queued: the scheduler's time, not ours.
            self.deadline = time.monotonic() + self.manager.launch_timeout

    async def joined(self, observed: Observed) -> bool:
        """Read Ray (even while some jobs wait: the card shows the nodes that joined); True
        once every node the backend expects is alive."""
        if not observed.address or observed.blocked:
            return False
        data: dict[str, Any] | None
        try:
            data = await self.manager.observer.read(self.cluster)
        except Exception:  # noqa: BLE001 - the GCS may not answer yet
            data = None
        if not data:
            return False
        self.manager.observer.took(self.cluster, data)  # the card shows the nodes as they join
        if sum(n["alive"] for n in data["nodes"]) >= observed.nodes_expected:
            self.cluster.status, self.cluster.error = "running", None
            return True
        return False

    def overdue(self, observed: Observed) -> None:
        # A job still queued is the scheduler's time, not ours: never overdue while one waits
        # (judge also moves the deadline, but a slow read between the two could outlast it).
        if time.monotonic() <= self.deadline or observed.blocked or observed.waiting:
            return
        # Said, but not final: a node that joins later still makes the cluster run.
        self.cluster.status = "error"
        self.cluster.error = (
            f"Only some of the {observed.nodes_expected} nodes registered within "
            f"{self.manager.launch_timeout:g} s. Wait, or shut this cluster down and launch "
            "again, with fewer nodes."
        )
        self.manager._save(self.cluster)

    def pause(self, observed: Observed) -> float:
        # A scheduler's queue is read less often than Ray's nodes: its controller is shared.
        slow = observed.waiting or observed.blocked or self.cluster.status == "error"
        return self.manager.max_age if slow else 0.5
