"""The one place that reads Ray's cluster state: nodes, their resources, and pending demands.

Everything is read from the GCS by address, so the Jupyter server (which is not a Ray driver)
and a kernel (which is) share the same code. The result is plain data (:class:`Snapshot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NodeFacts", "Snapshot", "snapshot"]


@dataclass(frozen=True)
class NodeFacts:
    """One node as the scheduler sees it."""

    node_id: str
    address: str
    alive: bool
    is_head: bool
    total: dict[str, float]
    available: dict[str, float]


@dataclass(frozen=True)
class Snapshot:
    """Nodes plus the resource shapes that wait for a node (``demands``: shape and count)."""

    nodes: list[NodeFacts] = field(default_factory=list)
    demands: list[tuple[dict[str, float], int]] = field(default_factory=list)

    @property
    def alive_nodes(self) -> list[NodeFacts]:
        return [node for node in self.nodes if node.alive]


_INTERNAL_PREFIXES = ("node:", "accelerator_type:")


def _public(resources: dict[str, float]) -> dict[str, float]:
    """Drop Ray's bookkeeping resources (``node:<ip>``, ``node:__internal_head__``...)."""
    return {k: float(v) for k, v in resources.items() if not k.startswith(_INTERNAL_PREFIXES)}


def snapshot(gcs_address: str, timeout: float = 5) -> Snapshot:
    """Read nodes and pending demands from the GCS at ``gcs_address`` (``host:port``)."""
    from ray.autoscaler.v2.sdk import get_cluster_status

    status = get_cluster_status(gcs_address, timeout=int(max(1, timeout)))
    nodes = []
    for info, alive in (
        *((n, True) for n in status.active_nodes),
        *((n, True) for n in status.idle_nodes),
        *((n, False) for n in status.failed_nodes),
    ):
        if info.node_id is None:
            continue
        total = info.total_resources()
        nodes.append(
            NodeFacts(
                node_id=info.node_id,
                address=info.ip_address,
                alive=alive,
                is_head="node:__internal_head__" in total,
                total=_public(total),
                available=_public(info.available_resources()) if alive else {},
            )
        )
    nodes.sort(key=lambda n: (not n.is_head, not n.alive, n.node_id))
    demands = [
        (dict(bundle.bundle), int(bundle.count))
        for demand in status.resource_demands.ray_task_actor_demand
        for bundle in demand.bundles_by_count
    ]
    return Snapshot(nodes=nodes, demands=demands)
