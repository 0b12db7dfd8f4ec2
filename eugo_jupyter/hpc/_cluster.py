"""``cluster()`` and ``waiting()``: what the connected cluster has, and what waits on it."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from .._feasibility import WaitingList, waiting_from
from .._raystate import NodeFacts
from .._units import format_bytes
from . import _checks, _session, _submissions

__all__ = ["ClusterInfo", "cluster", "describe", "waiting"]


def _fmt(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class ClusterInfo:
    """A snapshot of the connected cluster: nodes with CPUs, GPUs and memory, and what waits."""

    address: str
    source: str
    embedded: bool
    dashboard_url: str | None
    nodes: list[NodeFacts]
    waiting: WaitingList = field(default_factory=WaitingList)

    def total(self, resource: str) -> float:
        """Sum of a resource (``"CPU"``, ``"GPU"``, ``"memory"``) over alive nodes."""
        return sum(n.total.get(resource, 0.0) for n in self.nodes if n.alive)

    def available(self, resource: str) -> float:
        """Free amount of a resource over alive nodes."""
        return sum(n.available.get(resource, 0.0) for n in self.nodes if n.alive)

    def _summary(self) -> str:
        alive = sum(n.alive for n in self.nodes)
        where = "embedded local Ray" if self.embedded else f"Ray at {self.address} ({self.source})"
        return (
            f"{where}: {alive} node{'s' if alive != 1 else ''}, "
            f"{_fmt(self.available('CPU'))}/{_fmt(self.total('CPU'))} CPUs free, "
            f"{_fmt(self.available('GPU'))}/{_fmt(self.total('GPU'))} GPUs free"
        )

    def __str__(self) -> str:
        lines = [self._summary()]
        for n in self.nodes:
            role = "head" if n.is_head else "worker"
            state = "alive" if n.alive else "DEAD"
            lines.append(
                f"  {n.node_id[:8]} {role:6} {state:5} {n.address:15} "
                f"CPU {_fmt(n.available.get('CPU', 0))}/{_fmt(n.total.get('CPU', 0))}  "
                f"GPU {_fmt(n.available.get('GPU', 0))}/{_fmt(n.total.get('GPU', 0))}  "
                f"memory {format_bytes(n.total.get('memory', 0))}"
            )
        if self.waiting:
            lines.append("Waiting:")
            lines.extend(f"  {line}" for line in str(self.waiting).splitlines())
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = "".join(
            "<tr>"
            f"<td><code>{html.escape(n.node_id[:8])}</code></td>"
            f"<td>{'head' if n.is_head else 'worker'}</td>"
            f"<td>{'alive' if n.alive else '<b>dead</b>'}</td><td>{html.escape(n.address)}</td>"
            f"<td>{_fmt(n.available.get('CPU', 0))} / {_fmt(n.total.get('CPU', 0))}</td>"
            f"<td>{_fmt(n.available.get('GPU', 0))} / {_fmt(n.total.get('GPU', 0))}</td>"
            f"<td>{format_bytes(n.total.get('memory', 0))}</td></tr>"
            for n in self.nodes
        )
        dashboard = (
            f" &middot; <a href='{html.escape(self.dashboard_url)}' target='_blank'>dashboard</a>"
            if self.dashboard_url
            else ""
        )
        waiting = f"<div><b>Waiting</b>{self.waiting._repr_html_()}</div>" if self.waiting else ""
        return (
            f"<div class='eugo-cluster'><p><b>{html.escape(self._summary())}</b>{dashboard}</p>"
            "<table><thead><tr><th>node</th><th>role</th><th>state</th><th>address</th>"
            "<th>CPU free / total</th><th>GPU free / total</th><th>memory</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{waiting}</div>"
        )

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


def waiting() -> WaitingList:
    """What waits for resources, and whether any node could ever run it.

    Each entry has ``request``, ``count``, ``infeasible`` (True: no alive node can ever run it,
    for example a GPU request on a cluster without GPUs) and ``reason``, a plain sentence with
    the fix; entries that are only queued behind busy resources say so.

    >>> eugo.hpc.waiting()               # doctest: +SKIP
    1 x 1 GPU and 1 CPU (heavy_math): NEVER RUNS: needs 1 GPU and 1 CPU; no node in this ...
    """
    snap = _checks.current_snapshot(max_age=0, asked=True)
    if snap is None:
        return WaitingList()
    return waiting_from(snap, _submissions.functions_by_request())


def cluster() -> ClusterInfo:
    """The connected cluster's nodes, CPUs, GPUs and memory; renders as a table in a notebook.

    >>> eugo.hpc.cluster()               # doctest: +SKIP
    embedded local Ray: 1 node, 2/2 CPUs free, 0/0 GPUs free
    """
    return describe(_session.connection())


def describe(conn: _session.Connection) -> ClusterInfo:
    """``conn``'s cluster as :func:`cluster` shows it, without connecting: the ClusterStatus
    widget's thread reads through this, so a shutdown meanwhile never makes it start a Ray."""
    snap = _checks.current_snapshot(max_age=0, asked=True, address=conn.address)
    nodes = snap.nodes if snap else []
    found = waiting_from(snap, _submissions.functions_by_request()) if snap else WaitingList()
    return ClusterInfo(
        address=conn.address,
        source=conn.source,
        embedded=conn.embedded,
        dashboard_url=conn.dashboard_url,
        nodes=nodes,
        waiting=found,
    )
