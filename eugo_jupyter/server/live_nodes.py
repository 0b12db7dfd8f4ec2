"""The nodes and GPUs panes' figures, from what Ray's reporter agents already gather.

Each node's reporter agent samples its CPU, memory, object store and (through NVML) its GPUs,
and the dashboard serves them all at ``/nodes?view=summary``; the server reads that page with
the cluster's token and shapes it here (pure functions: no HTTP, no Ray). Nothing new runs on
the nodes. The GPUs' processes are matched to the tasks running in those worker processes
(node id and pid, from the task events).

>>> nodes_of({"data": {"summary": []}}, [])
[]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["GpuModel", "NodeModel", "entries", "gpus_of", "no_gpu_message", "nodes_of"]

_MIB = 1024 * 1024  # the reporter gives GPU memory in MiB (NVML's bytes // 2**20)


class NodeModel(TypedDict):
    """One node of ``GET .../live/nodes`` (bytes; None where the reporter gave nothing)."""

    node_id: str
    node: str | None
    alive: bool
    cpu_percent: float | None
    cpus: int | None
    mem_used: int | None
    mem_total: int | None
    object_store_used: int | None
    object_store_total: int | None


class GpuModel(TypedDict):
    """One GPU of ``GET .../live/gpus``."""

    node_id: str
    node: str | None
    index: int
    name: str
    utilization: float | None
    memory_used: int | None
    memory_total: int | None
    tasks: list[dict[str, Any]]


def entries(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-node entries of the dashboard's summary page."""
    data = summary.get("data", summary)
    entries = data.get("summary", []) if isinstance(data, Mapping) else []
    return [e for e in entries if isinstance(e, Mapping)]  # type: ignore[misc]


def _node_id(entry: Mapping[str, Any]) -> str:
    return str((entry.get("raylet") or {}).get("nodeId") or "")


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def nodes_of(summary: Mapping[str, Any], known: list[dict[str, Any]]) -> list[NodeModel]:
    """Per node (those of the cluster model ``known``, plus any the reporter adds): CPU use,
    memory and object store. A node whose reporter said nothing has None figures."""
    by_id = {_node_id(e): e for e in entries(summary)}
    order = [str(n["node_id"]) for n in known] + [i for i in by_id if i not in {
        str(n["node_id"]) for n in known}]  # fmt: skip
    alive = {str(n["node_id"]): bool(n.get("alive")) for n in known}
    address = {str(n["node_id"]): n.get("address") for n in known}
    store = {
        str(n["node_id"]): (n.get("resources_total") or {}).get("object_store_memory")
        for n in known
    }
    out: list[NodeModel] = []
    for node_id in order:
        entry = by_id.get(node_id, {})
        raylet = entry.get("raylet") or {}
        mem = entry.get("mem") or []  # total, available, percent, used
        cpus = entry.get("cpus") or []  # logical, physical
        used = _int(raylet.get("objectStoreUsedMemory"))
        free = _int(raylet.get("objectStoreAvailableMemory"))
        # The scheduler's figure for the store's size; the reporter's used + free without it.
        total = _int(store.get(node_id) or (raylet.get("resourcesTotal") or {}).get(
            "objectStoreMemory"))  # fmt: skip
        if not total and used is not None and free is not None:
            total = used + free
        out.append(
            {
                "node_id": node_id,
                "node": entry.get("ip") or address.get(node_id),
                "alive": alive.get(node_id, raylet.get("state") == "ALIVE"),
                "cpu_percent": entry.get("cpu"),
                "cpus": _int(cpus[0]) if cpus else None,
                "mem_used": _int(mem[3]) if len(mem) > 3 else None,
                "mem_total": _int(mem[0]) if mem else None,
                "object_store_used": used,
                "object_store_total": total or None,
            }  # fmt: skip
        )
    return out


def gpus_of(
    summary: Mapping[str, Any], running: Mapping[tuple[str, int], tuple[str, str]]
) -> list[GpuModel]:
    """Every GPU of every node the reporter sees, with the processes holding it: a task (by
    ``running``: (node id, worker pid) -> (task id, function)) or, for a process that runs no
    task we know of, its pid."""
    out: list[GpuModel] = []
    for entry in entries(summary):
        node_id = _node_id(entry)
        for gpu in entry.get("gpus") or []:
            tasks: list[dict[str, Any]] = []
            for process in gpu.get("processesPids") or []:
                pid = _int(process.get("pid"))
                if pid is None:
                    continue
                task = running.get((node_id, pid))
                if task is not None:
                    tasks.append({"task_id": task[0], "func": task[1], "pid": pid})
                else:
                    tasks.append({"pid": pid, "func": None})
            used, total = _int(gpu.get("memoryUsed")), _int(gpu.get("memoryTotal"))
            out.append(
                {
                    "node_id": node_id,
                    "node": entry.get("ip"),
                    "index": _int(gpu.get("index")) or 0,
                    "name": str(gpu.get("name") or "GPU"),
                    "utilization": gpu.get("utilizationGpu"),
                    "memory_used": used * _MIB if used is not None else None,
                    "memory_total": total * _MIB if total is not None else None,
                    "tasks": tasks,
                }
            )
    return out


def no_gpu_message(known: list[dict[str, Any]]) -> str:
    """What the GPU pane says when no reporter sees a GPU, naming declared GPUs if any."""
    declared = [
        n for n in known if n.get("alive") and (n.get("resources_total") or {}).get("GPU", 0) > 0
    ]
    if declared:
        where = ", ".join(str(n.get("address")) for n in declared[:5])
        return (
            f"This cluster has no GPU that NVML sees: nodes {where} declare GPUs to Ray, but "
            "their reporter agents find no NVIDIA device (declared GPUs are bookkeeping only)."
        )
    return (
        "This cluster has no GPU: no node's reporter agent finds an NVIDIA device. Launch a "
        "cluster on GPU nodes to see their utilization and memory here."
    )
