"""The cluster model: the JSON the REST API and the panel read, built in one function.

The model (``GET /eugo/clusters/{id}``; ``GET /eugo/clusters`` is a list of these)::

    {
      "id": "c-3f9a2b1c",                # "c-" + 8 hex digits, stable across server restarts
      "name": "dev",
      "kind": "local" | "slurm" | "connect" | ...,   # the backend that drives it
      "status": "starting" | "running" | "stopping" | "stopped" | "error",
                                         # a DELETE that answers 204 removes the cluster from
                                         # the list; "stopped" stays listed only for a cluster
                                         # that ended by itself (wall time, killed), with `error`
                                         # saying why, until the user removes it
      "error": null | "a sentence saying what went wrong and what to do",
      "progress": null | "The head: `ray start` timed out ...; try 2 of 3 in 2 s.",
                                         # while "starting": what the launch is doing over again
      "active": false,                   # true: new kernels connect to this cluster
      "lifetime": "server" | "persistent" | null,   # null for kind "connect" (not ours to stop)
      "address": "192.0.2.2:52345" | null,   # GCS host:port ("ray://host:port" as given);
                                         # null while a launch has not started its head yet
      "dashboard_url": "http://127.0.0.1:52346" | null,   # Ray's own port
      "dashboard_proxy": "eugo/clusters/c-3f9a2b1c/dashboard/" | null,  # relative to the server's
                                         # base_url: the dashboard behind Jupyter's auth
      "dashboard_refused": null | "why the dashboard the cluster publishes is not proxied",
      "created": "2026-11-29T16:20:00+00:00",
      "updated": "2026-11-29T16:21:03+00:00" | null,   # when the monitoring below was read
      "spec": {...} | null,              # what was asked for, as the backend checked it
      "scalable": false,                 # true: the card offers Add node / Remove node
      "resources": {"total": {"CPU": 3.0, ...}, "available": {"CPU": 2.0, ...}},
      "nodes": [{"node_id": "ab12...", "address": "192.0.2.2", "is_head": true, "alive": true,
                 "resources_total": {...}, "resources_available": {...}, "gpus": [...]}],
      "tasks": {"pending": 0, "running": 1, "finished": 10000, "failed": 0, "dropped": 0},
                                         # task attempts by state; "dropped": attempts Ray no
                                         # longer keeps (past RAY_task_events_max_num_task_in_gcs,
                                         # 100,000 by default, the oldest finished go first), so
                                         # with dropped > 0 the counts are "at least"
      "waiting": [{"request": {"CPU": 1.0, "GPU": 1.0}, "count": 1, "infeasible": true,
                   "reason": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU; ...",
                   "functions": []}],
      "final_error": false,              # true: the error will not clear by itself (a stopped
                                         # cluster, or a failed launch); false while a launch may
                                         # still come up (a queued job, a node still joining)
      "facts": {"label": "SLURM", "node_label": "job", "stop_effect": "cancels its jobs",
                "scalable": true, "fields": ["partition", ...]},   # the kind's own words
      "slurm": {"jobs": [...], ...}      # only for kind "slurm" ("gridengine" for Grid Engine...):
                                         # the backend's own state, under its kind's name
                                         # (see backends/batch.py); "kubernetes": the
                                         # RayCluster's name, namespace, state, message,
                                         # client_address (ray://) and its pods as "jobs"
      "expiry": null | {...},            # idle timeout / max lifetime countdown (expiry.py)
      "found": {"temp_dir", "session_dir", "pid"},  # only for kind "found" (discovery.py)
      "findings": [...]                  # the latest profiled runs' findings, newest first
                                         # (written by kernels next to the record:
                                         # records.write_findings)
    }

>>> model = make_cluster_model({"id": "c-1", "name": "x", "kind": "local"}, "starting")
>>> model["status"], model["nodes"], model["active"]
('starting', [], False)
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypedDict

from .. import records
from . import monitor
from .expiry import ExpiryModel

__all__ = [
    "ClusterModel",
    "KindFacts",
    "TaskCounts",
    "error_text",
    "make_cluster_model",
    "timestamp",
    "unread_text",
]


def timestamp() -> str:
    """Now, as a model's ``created`` and ``updated`` fields write it (UTC, to the second)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def error_text(exc: BaseException) -> str:
    """An exception as a model's ``error`` (or a sentence's part) says it: its first line, at
    most 400 characters, else the exception's type.

    >>> error_text(OSError("No route to host\\nmore detail"))
    'No route to host'
    """
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else type(exc).__name__


def unread_text(exc: BaseException) -> str:
    """A card's ``error`` when a read of the cluster failed (Ray's state, or its scheduler's):
    not final, the next read may succeed.

    >>> unread_text(TimeoutError("the GCS did not answer"))
    "Could not read the cluster's state just now: the GCS did not answer"
    """
    return f"Could not read the cluster's state just now: {error_text(exc)}"


class TaskCounts(TypedDict):
    pending: int
    running: int
    finished: int
    failed: int
    dropped: int  # attempts whose records Ray dropped: the counts above are then "at least"


class _ClusterModelBase(TypedDict):
    id: str
    name: str
    kind: str
    status: str
    error: str | None
    progress: str | None
    active: bool
    lifetime: str | None
    address: str | None
    dashboard_url: str | None
    dashboard_proxy: str | None
    dashboard_refused: str | None
    created: str | None
    updated: str | None
    spec: dict[str, Any] | None
    scalable: bool
    resources: dict[str, dict[str, float]]
    nodes: list[dict[str, Any]]
    tasks: TaskCounts
    waiting: list[dict[str, Any]]
    findings: list[Any]


class KindFacts(TypedDict):
    """What the model says about its kind, so no reader tests kinds by name
    (:meth:`.backends.base.Backend.facts`)."""

    label: str  # "SLURM", "Grid Engine", "local"
    node_label: str  # what one node is: "job" (a scheduler's), "pod" (Kubernetes') or "node"
    stop_effect: str  # what Shut down does: "cancels its jobs"
    scalable: bool
    fields: list[str]  # the keys of the launch body's part named after the kind


class ClusterModel(_ClusterModelBase, total=False):
    """One cluster as the REST API returns it; the backend's key is present for its kind only."""

    final_error: bool  # the error will not clear by itself (the manager's rule)
    facts: KindFacts | None
    slurm: dict[str, Any]
    gridengine: dict[str, Any]
    ssh: dict[str, Any]
    kubernetes: dict[str, Any]
    expiry: ExpiryModel | None
    found: dict[str, Any]


def make_cluster_model(
    record: dict[str, Any],
    status: str,
    *,
    error: str | None = None,
    active_id: str | None = None,
    monitoring: dict[str, Any] | None = None,
    updated: str | None = None,
    backend_state: dict[str, Any] | None = None,
    scalable: bool = False,
) -> ClusterModel:
    """The model of one cluster, from its record (what is on disk) and what was read since."""
    cluster_id = str(record["id"])
    data = monitoring if monitoring is not None else monitor.empty()
    try:  # the files outlive the kernel that wrote them; an unreadable one is no findings
        findings: list[Any] = records.read_findings(cluster_id)
    except (OSError, ValueError):
        findings = []
    model: ClusterModel = {
        "id": cluster_id,
        "name": str(record.get("name")),
        "kind": str(record.get("kind")),
        "status": status,
        "error": error,
        "progress": record.get("progress") if status == "starting" else None,
        "active": active_id == cluster_id,
        "lifetime": record.get("lifetime"),
        "address": record.get("address"),
        "dashboard_url": record.get("dashboard_url"),
        "dashboard_proxy": (
            f"eugo/clusters/{cluster_id}/dashboard/" if record.get("dashboard_url") else None
        ),
        "dashboard_refused": record.get("dashboard_refused"),
        "created": record.get("created"),
        "updated": updated,
        "spec": record.get("spec"),
        "scalable": scalable,
        "resources": data["resources"],
        "nodes": data["nodes"],
        "tasks": data["tasks"],
        "waiting": data["waiting"],
        "findings": findings,
    }
    if backend_state is not None:
        model[str(record.get("kind"))] = backend_state  # type: ignore[literal-required]
    return model
