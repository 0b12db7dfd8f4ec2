"""What the manager keeps of one cluster: its record, status, monitoring and running tasks.

One :class:`Cluster` per cluster the manager launched, connected or adopted. The manager
(:mod:`.manager`) changes it; the launch loop (:mod:`.launch`), the monitoring
(:mod:`.observer`) and the expiry watch (:mod:`.expiry`) read and set the parts named in their
own docstrings. :func:`new_record` is the one place a record starts.

>>> cluster = Cluster(record=new_record("c-3f9a2b1c", spec), status="starting")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from . import expiry, monitor
from .backends import Spec
from .models import timestamp
from .pacing import CountsPace

__all__ = ["Cluster", "new_record"]


@dataclass
class Cluster:
    record: dict[str, Any]  # what is on disk; the backend keeps its own keys here
    status: str
    error: str | None = None
    monitoring: dict[str, Any] = field(default_factory=monitor.empty)
    backend_state: dict[str, Any] | None = None  # the model's key named after the kind
    updated: str | None = None
    read_at: float = 0.0  # the last Ray read ended (0: read at the next request)
    observed_at: float = 0.0  # the backend's view was last asked for
    pace: CountsPace | None = None  # when the task counts are read again (the observer's)
    refreshing: asyncio.Task[None] | None = None
    counting: asyncio.Task[None] | None = None  # a task-count read in the background
    launching: asyncio.Task[None] | None = None
    limits: expiry.Expiry | None = None  # idle timeout / max lifetime, when set at launch
    watching: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def kind(self) -> str:
        return str(self.record.get("kind"))

    @property
    def final(self) -> bool:
        """Whether the cluster's error is final: it will not come up by itself.

        The one owner of that rule (the model's ``final_error``; the REST client reads it): a
        stopped cluster, or an error while no launch loop runs. While the loop runs (a queued or
        held job, nodes still joining) an error may still turn into "running".
        """
        if self.status == "stopped":
            return True
        launching = self.launching is not None and not self.launching.done()
        return self.status == "error" and not launching

    def background(self) -> list[asyncio.Task[None]]:
        """The tasks the manager runs for this cluster that have not ended."""
        tasks = (self.launching, self.refreshing, self.counting, self.watching)
        return [t for t in tasks if t is not None and not t.done()]


def new_record(cluster_id: str, spec: Spec) -> dict[str, Any]:
    """The one place a cluster's record starts; backends add their keys when they start."""
    return {
        "id": cluster_id,
        "name": spec.name,
        "kind": spec.kind,
        "address": None,
        "dashboard_url": None,
        "created": timestamp(),
        "lifetime": spec.lifetime,
        "server_pid": os.getpid(),
        "pids": [],
        "spec": spec.to_model(),
        "status": "starting",
    }
