"""Whether a resource request can ever run, and why not, in plain sentences.

Pure functions over a request (``{"CPU": 1, "GPU": 0.25}``) and the nodes of a
:class:`~eugo_jupyter._raystate.Snapshot`: the kernel uses them at the call site and in
``waiting()``, the Jupyter server in its cluster models.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._raystate import NodeFacts, Snapshot
from ._units import format_bytes

__all__ = [
    "Waiting",
    "WaitingList",
    "describe_request",
    "fix_for",
    "infeasible_reason",
    "missing_everywhere",
    "needs_sentence",
    "waiting_from",
]

_NOUNS = {"CPU": ("CPU", "CPUs"), "GPU": ("GPU", "GPUs")}


def _amount(name: str, value: float) -> str:
    if name in ("memory", "object_store_memory"):
        return f"{format_bytes(value)} of {'memory' if name == 'memory' else 'object store'}"
    number = f"{value:g}"
    singular, plural = _NOUNS.get(name, (name, name))
    return f"{number} {singular if value <= 1 else plural}"


def describe_request(request: Mapping[str, float]) -> str:
    """``{"CPU": 4, "GPU": 1}`` -> ``"1 GPU and 4 CPUs"`` (GPUs first: they are the scarce part).

    >>> describe_request({"CPU": 1, "GPU": 0.25})
    '0.25 GPU and 1 CPU'
    """
    order = sorted(request, key=lambda k: (k != "GPU", k != "CPU", k))
    parts = [_amount(k, request[k]) for k in order if request[k]]
    if not parts:
        return "no resources"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _largest(nodes: list[NodeFacts], name: str) -> float:
    return max((node.total.get(name, 0.0) for node in nodes), default=0.0)


def infeasible_reason(
    request: Mapping[str, float], nodes: Iterable[NodeFacts], *, about: str = "cluster"
) -> str | None:
    """None if some alive node could run ``request`` once it is idle, else a plain sentence.

    ``about="node"`` words it for one node (``nodes`` holds just that node): "it has no GPU"
    where the cluster's sentence says "no node in this cluster has a GPU".

    >>> infeasible_reason({"CPU": 1, "GPU": 1}, [NodeFacts("a", "", True, True, {"CPU": 2}, {})])
    'needs 1 GPU and 1 CPU; no node in this cluster has a GPU'
    >>> infeasible_reason(
    ...     {"CPU": 4}, [NodeFacts("a", "", True, True, {"CPU": 2}, {})], about="node"
    ... )
    'needs 4 CPUs; it has 2 CPUs'
    """
    alive = [node for node in nodes if node.alive]
    needs = needs_sentence(request)
    if not alive:
        return f"{needs}; the cluster has no alive node"
    if any(all(node.total.get(k, 0.0) >= v for k, v in request.items()) for node in alive):
        return None
    short = [k for k, v in request.items() if _largest(alive, k) < v]
    if short:
        clauses = []
        for name in short:
            most = _largest(alive, name)
            noun = _NOUNS.get(name, (name, name))[0]
            if most == 0:
                article = "an" if noun[0].lower() in "aeiou" else "a"
                owner = "it has no" if about == "node" else f"no node in this cluster has {article}"
                clauses.append(f"{owner} {noun}")
            else:
                owner = "it has" if about == "node" else "the largest node has"
                clauses.append(f"{owner} {_amount(name, most)}")
        return f"{needs}; " + ", and ".join(clauses)
    return f"{needs}; some nodes have each part, but no single node has all of it at once"


def needs_sentence(request: Mapping[str, float]) -> str:
    """``{"CPU": 1, "GPU": 1}`` -> ``"needs 1 GPU and 1 CPU"``, the head of every reason."""
    return f"needs {describe_request(request)}"


def missing_everywhere(request: Mapping[str, float], nodes: Iterable[NodeFacts]) -> list[str]:
    """The requested resources that no alive node has at all (``["GPU"]`` on a CPU cluster).

    >>> missing_everywhere({"CPU": 1, "GPU": 1}, [NodeFacts("a", "", True, True, {"CPU": 2}, {})])
    ['GPU']
    """
    alive = [node for node in nodes if node.alive]
    return [k for k, v in request.items() if v and _largest(alive, k) == 0]


def fix_for(request: Mapping[str, float], nodes: Iterable[NodeFacts]) -> str:
    """What the user can do about an infeasible request, as an instruction."""
    alive = [node for node in nodes if node.alive]
    fixes = []
    if request.get("GPU") and _largest(alive, "GPU") == 0:
        fixes.append("launch or connect a cluster with a GPU node, or drop num_gpus")
    elif request.get("GPU") and _largest(alive, "GPU") < request["GPU"]:
        fixes.append(
            f"ask for at most num_gpus={_largest(alive, 'GPU'):g}, or add a larger GPU node"
        )
    if request.get("CPU", 0) > _largest(alive, "CPU"):
        fixes.append(f"ask for at most num_cpus={_largest(alive, 'CPU'):g}, or add a larger node")
    if request.get("memory", 0) > _largest(alive, "memory"):
        fixes.append("ask for less memory, or add a node with more")
    custom = [
        k for k in request if k not in ("CPU", "GPU", "memory") and request[k] > _largest(alive, k)
    ]
    if custom:
        fixes.append(f"add a node that declares {', '.join(custom)}, or drop it from resources")
    if not fixes:
        fixes.append("add a node that has all of it, or split the request")
    return "; ".join(fixes)


@dataclass(frozen=True)
class Waiting:
    """A resource shape that tasks or actors wait for, and whether any node could ever run it."""

    request: dict[str, float]
    count: int
    infeasible: bool
    reason: str
    functions: tuple[str, ...] = field(default=())

    def to_model(self) -> dict[str, object]:
        """The JSON model the panel shows (``{request, count, infeasible, reason}``)."""
        return {
            "request": dict(self.request),
            "count": self.count,
            "infeasible": self.infeasible,
            "reason": self.reason,
            "functions": list(self.functions),
        }


class WaitingList(list):  # type: ignore[type-arg]
    """A list of :class:`Waiting` that renders as a table in a notebook."""

    def __str__(self) -> str:
        if not self:
            return "Nothing is waiting for resources."
        lines = []
        for item in self:
            mark = "NEVER RUNS" if item.infeasible else "queued"
            who = f" ({', '.join(item.functions)})" if item.functions else ""
            lines.append(
                f"{item.count} x {describe_request(item.request)}{who}: {mark}: {item.reason}"
            )
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if not self:
            return "<p>Nothing is waiting for resources.</p>"
        rows = "".join(
            "<tr>"
            f"<td>{item.count}</td><td>{html.escape(describe_request(item.request))}</td>"
            f"<td>{html.escape(', '.join(item.functions))}</td>"
            f"<td style='color:{'#c62828' if item.infeasible else 'inherit'}'>"
            f"<b>{'never runs' if item.infeasible else 'queued'}</b></td>"
            f"<td>{html.escape(item.reason)}</td></tr>"
            for item in self
        )
        return (
            "<table><thead><tr><th>count</th><th>request</th><th>functions</th><th>state</th>"
            f"<th>why</th></tr></thead><tbody>{rows}</tbody></table>"
        )


def waiting_from(
    snap: Snapshot, functions: Mapping[tuple[tuple[str, float], ...], Iterable[str]] | None = None
) -> WaitingList:
    """Classify each pending demand of a snapshot: infeasible (no node can ever run it) or busy.

    ``functions`` maps a request key (sorted items) to the names of functions known to have
    submitted that shape, so the list can say who is waiting.
    """
    alive = snap.alive_nodes
    result = WaitingList()
    for request, count in snap.demands:
        reason = infeasible_reason(request, alive)
        infeasible = reason is not None
        if infeasible:
            reason = f"{reason}; {fix_for(request, alive)}"
        else:
            reason = (
                f"needs {describe_request(request)}; the resources exist but are busy, "
                "so it starts when running work frees them"
            )
        names = tuple(sorted(set((functions or {}).get(tuple(sorted(request.items())), ()))))
        result.append(Waiting(dict(request), count, infeasible, str(reason), names))
    result.sort(key=lambda w: (not w.infeasible, -w.count))
    return result
