"""The one place that uses Ray's private APIs: cluster state, jobs, tokens, the dashboard.

Everything is read from the GCS by address, so the Jupyter server (which is not a Ray driver)
and a kernel (which is) share the same code. The results are plain data (:class:`Snapshot`).
When Ray renames a private module, this is the file to fix. A leaf module: the token file
(``_raytoken``), ``hpc`` and the server all use it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = [
    "NodeFacts",
    "Snapshot",
    "dashboard_auth_headers",
    "enable_token_auth",
    "has_live_driver",
    "new_token",
    "published_dashboard",
    "snapshot",
]


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


def enable_token_auth() -> None:
    """Have this process send the account's Ray token if one exists (Ray's own client setup).

    Quiet: Ray's notice is written for ``ray start``, not for a client. A Ray without token
    authentication, or without a usable token, is left as it is (Ray's own error then says
    what to do).
    """
    try:
        from ray._private.authentication import authentication_token_setup as setup
    except ImportError:  # a Ray without token authentication
        return
    quiet = logging.getLogger(setup.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    except Exception:  # noqa: BLE001 - without a usable token, Ray's own error says what to do
        pass
    finally:
        quiet.setLevel(level)


def dashboard_auth_headers() -> dict[str, str]:
    """The HTTP header that carries this account's Ray token to a dashboard (empty without)."""
    try:
        from ray._private.authentication.http_token_authentication import (
            get_auth_headers_if_auth_enabled,
        )

        return dict(get_auth_headers_if_auth_enabled({}))
    except Exception:  # noqa: BLE001 - a Ray without token auth: no header
        return {}


def published_dashboard(gcs_address: str, timeout: float = 5.0) -> str | None:
    """The dashboard address a cluster published in its GCS key-value store, or None."""
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        client = GcsClient(address=gcs_address)
        value = client.internal_kv_get(b"dashboard", b"dashboard", timeout=timeout)
    except Exception:  # noqa: BLE001 - a cluster without dashboard is still usable
        return None
    return value.decode() if value else None


def new_token() -> str:
    """A new Ray authentication token, as Ray itself generates one."""
    from ray._private.authentication.authentication_token_generator import (
        generate_new_authentication_token,
    )

    return str(generate_new_authentication_token())


def has_live_driver(gcs_address: str, timeout: float = 5.0) -> bool:
    """Whether a driver (a kernel, a script) is connected to the cluster; raises if unreadable."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled; not in the stub

    jobs = GcsClient(address=gcs_address).get_all_job_info(timeout=timeout)
    return any(not job.is_dead for job in jobs.values())
