"""What the panel shows about a cluster, read in the server: nodes, GPUs, task counts, waiting.

Blocking functions (the manager runs them in a thread and caches the result). Nodes and pending
demands come from the GCS through :func:`eugo_jupyter._raystate.snapshot`, the verdicts from
:func:`eugo_jupyter._feasibility.waiting_from`, task counts from the GCS's task-event query
(:func:`eugo_jupyter._raystate.task_states`: it counts finished tasks without sending them),
GPUs through NVML for nodes on this machine.

The task counts are the costly part: whatever the query asks, the GCS copies every task record
it keeps (about 0.8 s of the head's CPU at 100,000 records), while everything else costs it
about a millisecond. So :func:`read` takes ``counts=False`` for a read without them, and gives
the cheap signals :mod:`.pacing` decides on: ``moving`` (work is in flight now) and ``mark``
(changes whenever a driver submits tasks or a job starts or ends).

>>> read("192.0.2.2:6379", "http://127.0.0.1:8265")["tasks"]      # doctest: +SKIP
{'pending': 0, 'running': 1, 'finished': 10000, 'failed': 0, 'dropped': 0}
"""

from __future__ import annotations

import functools
from typing import Any

from .. import _nvml
from .._feasibility import waiting_from
from .._rayaddress import reachable
from .._raystate import (
    dashboard_auth_headers,
    drivers,
    enable_token_auth,
    held_by_actors,
    published_dashboard,
    snapshot,
    task_states,
)

__all__ = ["auth_headers", "dashboard_of", "empty", "local_ips", "reachable", "read"]

_RUNNING = ("RUNNING", "RUNNING_IN_RAY_GET", "RUNNING_IN_RAY_WAIT")
_FINISHED = ("FINISHED",)
_FAILED = ("FAILED",)


def empty() -> dict[str, Any]:
    """The monitoring part of a model before anything was read."""
    return {
        "nodes": [],
        "resources": {"total": {}, "available": {}},
        "tasks": {"pending": 0, "running": 0, "finished": 0, "failed": 0, "dropped": 0},
        "waiting": [],
    }


@functools.lru_cache(maxsize=1)
def _use_token_auth() -> None:
    """Send the token this account's clusters use on our GCS and state API calls."""
    enable_token_auth()


def auth_headers() -> dict[str, str]:
    """The HTTP header that carries this account's Ray token to a dashboard (empty without)."""
    _use_token_auth()
    return dashboard_auth_headers()


def dashboard_of(gcs_address: str, timeout: float = 5.0) -> str | None:
    """The dashboard URL a cluster published in its GCS, or None if it has none."""
    _use_token_auth()
    url = published_dashboard(gcs_address, timeout)
    if not url:
        return None
    return url if "://" in url else f"http://{url}"


def local_ips() -> set[str]:
    """This machine's addresses as Ray sees them (loopback and the node IP)."""
    ips = {"127.0.0.1", "localhost"}
    try:
        import ray.util

        ips.add(str(ray.util.get_node_ip_address()))
    except Exception:  # noqa: BLE001 - without it, only loopback nodes count as local
        pass
    return ips


def _nvml_gpus() -> list[dict[str, Any]]:
    """This machine's GPUs as NVML sees them; empty without a driver or a device."""
    keys = ("index", "name", "memory_total", "memory_used", "utilization")
    return [{k: d.get(k) for k in keys} for d in _nvml.devices(utilization=True)["devices"]]


def _by_group(states: dict[str, int]) -> dict[str, int]:
    """Ray's task states summed into the panel's four counts."""
    counts = {"pending": 0, "running": 0, "finished": 0, "failed": 0}
    for state, count in states.items():
        if state in _RUNNING:
            counts["running"] += int(count)
        elif state in _FINISHED:
            counts["finished"] += int(count)
        elif state in _FAILED:
            counts["failed"] += int(count)
        else:
            counts["pending"] += int(count)
    return counts


def _summarized(dashboard_url: str, timeout: int) -> dict[str, int]:
    """Task counts by state from the dashboard's task summary (grows with the task table)."""
    from ray.util.state import summarize_tasks

    summary = summarize_tasks(address=dashboard_url, timeout=timeout, raise_on_missing_output=False)
    states: dict[str, int] = {}
    for group in summary.get("cluster", {}).get("summary", {}).values():
        for state, count in group.get("state_counts", {}).items():
            states[state] = states.get(state, 0) + int(count)
    return states


def _task_counts(gcs_address: str, dashboard_url: str | None, timeout: int) -> dict[str, int]:
    """Pending, running, finished and failed attempts, and how many Ray dropped (see models).

    From the GCS's own task-event query (:func:`~eugo_jupyter._raystate.task_states`), which
    counts the finished attempts without sending them; the dashboard's task summary only for a
    cluster whose GCS holds no task events (one that keeps them in its dashboard instead).
    """
    if not dashboard_url:
        return {**_by_group({}), "dropped": 0}
    states = task_states(gcs_address, timeout)
    if states.stored == 0:
        return {**_by_group(_summarized(dashboard_url, timeout)), "dropped": 0}
    return {**_by_group(states.counts), "dropped": states.dropped}


def _tasks_or_none(
    gcs_address: str, dashboard_url: str | None, timeout: int
) -> dict[str, int] | None:
    """Task counts, or None when they cannot be read now (the caller keeps the last ones)."""
    try:
        return _task_counts(gcs_address, dashboard_url, timeout)
    except Exception:  # noqa: BLE001 - the GCS or the dashboard may still be starting
        return None


def _sum(nodes: list[dict[str, Any]], key: str) -> dict[str, float]:
    total: dict[str, float] = {}
    for node in nodes:
        if node["alive"]:
            for name, value in node[key].items():
                total[name] = total.get(name, 0.0) + value
    return total


# Resources that a node's available figure lowers without any task holding them.
_NOT_HELD = ("object_store_memory",)


def _held(nodes: list[dict[str, Any]], kept: dict[str, dict[str, float]]) -> bool:
    """Whether a live node holds more of a resource than its live actors keep (``kept``, by
    node id: see :func:`~eugo_jupyter._raystate.held_by_actors`)."""
    for node in nodes:
        if not node["alive"]:
            continue
        by_actors = kept.get(node["node_id"], {})
        for name, total in node["resources_total"].items():
            used = total - node["resources_available"].get(name, 0.0)
            if name not in _NOT_HELD and used > by_actors.get(name, 0.0) + 1e-9:
                return True
    return False


def _activity(
    nodes: list[dict[str, Any]], waiting: list[dict[str, Any]], gcs_address: str, timeout: float
) -> tuple[bool, str]:
    """Whether work is in flight (a request waits for a node that can run it, a driver has
    tasks in flight, or a node holds resources beyond what its live actors keep), and the
    drivers' activity mark (:func:`~eugo_jupyter._raystate.drivers`); each costs the head
    little.

    An actor keeps its resources while it waits for calls: without subtracting them, a
    notebook's long-lived GPU actor would read as work in flight for as long as it lives, and
    the costly task counts would be read again every few seconds while a panel polls. The
    actor table is read only when resources are held and nothing else says work moves.
    """
    # (A request no node can run waits forever: nothing moves for it.)
    queued = any(not item["infeasible"] for item in waiting)
    try:
        seen = drivers(gcs_address, timeout)
    except Exception:  # noqa: BLE001 - drivers that do not answer may well be busy
        return True, "unknown"
    if queued or seen.busy or not _held(nodes, {}):
        return queued or seen.busy, seen.mark
    try:
        kept = held_by_actors(gcs_address, timeout)
    except Exception:  # noqa: BLE001 - unknown: held resources count as work in flight
        return True, seen.mark
    return _held(nodes, kept), seen.mark


def read(
    gcs_address: str, dashboard_url: str | None, timeout: float = 5.0, counts: bool = True
) -> dict[str, Any]:
    """Nodes, summed resources, task counts and the waiting list of the cluster at an address.

    With ``counts=False`` the task counts are not read (``tasks`` is None: the caller keeps its
    last ones). ``moving`` and ``mark`` are the cheap signals of activity (:func:`_activity`).
    Raises whatever Ray raises when the GCS does not answer; the manager turns it into a
    sentence. Nothing accepting connections at the address raises ConnectionError at once:
    Ray's clients, given a GCS that is gone (a cluster just stopped), block for 30 s or more
    whatever their timeout, and a server that exits waits for that read.
    """
    if not reachable(gcs_address, min(timeout, 2.0)):
        raise ConnectionError(f"nothing accepts connections at {gcs_address}")
    _use_token_auth()
    snap = snapshot(gcs_address, timeout=timeout)
    local = local_ips()
    local_gpus: list[dict[str, Any]] | None = None
    nodes = []
    for node in snap.nodes:
        gpus: list[dict[str, Any]] = []
        declared = int(node.total.get("GPU", 0))
        if node.alive and declared and node.address in local:
            if local_gpus is None:
                local_gpus = _nvml_gpus()
            gpus = local_gpus[:declared]
        nodes.append(
            {
                "node_id": node.node_id,
                "address": node.address,
                "is_head": node.is_head,
                "alive": node.alive,
                "resources_total": dict(node.total),
                "resources_available": dict(node.available),
                "gpus": gpus,
            }
        )
    waiting = [item.to_model() for item in waiting_from(snap)]
    moving, mark = _activity(nodes, waiting, gcs_address, timeout)
    tasks = _tasks_or_none(gcs_address, dashboard_url, int(max(1, timeout))) if counts else None
    return {
        "nodes": nodes,
        "resources": {
            "total": _sum(nodes, "resources_total"),
            "available": _sum(nodes, "resources_available"),
        },
        "tasks": tasks,
        "waiting": waiting,
        "moving": moving,
        "mark": mark,
    }
