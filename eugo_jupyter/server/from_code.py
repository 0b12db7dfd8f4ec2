"""Clusters from code: ``eugo.hpc.launch`` returns a :class:`Cluster`, ``eugo.hpc.clusters`` a
:class:`ClusterTable`.

One schema: :func:`body_of` turns the keyword arguments into the very body ``POST
/eugo/clusters`` takes (the kind's own fields, given flat, go under the kind's key; the rest stay
at the top), and the backend's own ``validate`` checks it, here in this process before anything
starts, so a bad argument raises OptionsError with the REST API's sentence. Where the calls go
is :mod:`.code_channel`.

>>> body_of("slurm", {"name": "hpc", "nodes": 2, "walltime": "01:00:00"})
{'kind': 'slurm', 'name': 'hpc', 'slurm': {'nodes': 2, 'walltime': '01:00:00'}}
>>> body_of("local", {"workers": [{"num_cpus": 1}]})
{'kind': 'local', 'workers': [{'num_cpus': 1}]}
"""

from __future__ import annotations

import html
import shlex
from typing import Any

from ..exceptions import ClusterError, OptionsError
from . import requests
from .backends import default_backends
from .code_channel import Channel, find_channel

__all__ = ["Cluster", "ClusterTable", "body_of", "clusters", "launch"]

_backends = default_backends()


def body_of(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The REST body for ``launch(kind, **fields)``; OptionsError for an unknown kind."""
    requests.body_kind({"kind": kind}, tuple(_backends))
    nested = set(_backends[kind].facts()["fields"])
    body: dict[str, Any] = {"kind": kind}
    part = {k: v for k, v in fields.items() if k in nested}
    body.update({k: v for k, v in fields.items() if k not in nested})
    if part:
        given = body.get(kind, {})
        if not isinstance(given, dict):
            raise OptionsError(f"{kind} must be an object such as {{'nodes': 2}}, not {given!r}.")
        body[kind] = {**given, **part}
    return body


def _check(body: dict[str, Any]) -> None:
    """The backend's own check of the body (profiles and limits are the Manager's to check)."""
    checked = {k: v for k, v in body.items() if k not in ("idle_timeout", "max_lifetime")}
    if "profile" not in checked:
        _backends[body["kind"]].validate(checked)


def launch(kind: str, *, start: bool = True, **fields: Any) -> Cluster:
    """Check the body, start it (unless ``start=False``), return its :class:`Cluster`."""
    body = body_of(kind, fields)
    _check(body)
    cluster = Cluster(body, find_channel())
    return cluster.start() if start else cluster


def clusters() -> ClusterTable:
    """Every cluster the Manager knows (the server's, or this process's and the recorded)."""
    return ClusterTable(find_channel().list())


def _plan_text(plan: dict[str, Any]) -> str:
    lines = [plan["summary"]]
    for script in plan.get("scripts", []):
        count = script.get("count", 1)
        lines += ["", f"# {script['name']} (x{count})" if count != 1 else f"# {script['name']}"]
        lines.append(script["text"].rstrip())
    if plan.get("commands"):
        lines += ["", *(shlex.join(command) for command in plan["commands"])]
    return "\n".join(lines)


def _facts(model: dict[str, Any]) -> dict[str, str]:
    """The card's lines: status, nodes, CPUs/GPUs, jobs and time left."""
    total = model.get("resources", {}).get("total", {})
    alive = sum(1 for n in model.get("nodes", []) if n.get("alive"))
    status = model.get("status", "not started")
    facts = {"status": status + (f": {model['error']}" if model.get("error") else "")}
    if model.get("progress"):
        facts["status"] += f" ({model['progress']})"
    facts["nodes"] = f"{alive} alive"
    cpus, gpus = total.get("CPU", 0), total.get("GPU", 0)
    facts["resources"] = f"{cpus:g} CPUs" + (f", {gpus:g} GPUs" if gpus else "")
    jobs = (model.get(str(model.get("kind"))) or {}).get("jobs") or []
    if jobs:
        facts["jobs"] = ", ".join(
            f"{j.get('id')} {j.get('role', '')} {j.get('state', '')}".strip() for j in jobs
        )
        left = [j["time_left"] for j in jobs if isinstance(j.get("time_left"), int)]
        if left:
            facts["time left"] = f"{min(left) // 60} min"
    if model.get("address"):
        facts["address"] = str(model["address"])
    return facts


class Cluster:
    """A cluster launched from code; its repr is the live card (HTML in a notebook).

    >>> with eugo.hpc.launch("local", workers=[{"num_cpus": 1}]) as cluster:  # doctest: +SKIP
    ...     eugo.hpc.map(abs, range(-3, 0))
    """

    def __init__(self, body: dict[str, Any], channel: Channel) -> None:
        self.body = body
        self._channel = channel
        self.id: str | None = None
        self.model: dict[str, Any] = {"kind": body["kind"], "name": body.get("name")}
        self._connected = False

    @property
    def name(self) -> str:
        return str(self.model.get("name") or self.body.get("name") or self.body["kind"])

    @property
    def status(self) -> str:
        """One of: not started, starting, running, stopping, stopped, error."""
        return str(self.refresh().get("status", "not started"))

    @property
    def address(self) -> str | None:
        return self.refresh().get("address")

    def start(self) -> Cluster:
        """Launch it (``launch`` does, unless given ``start=False``)."""
        if self.id is None:
            self.model = self._channel.create(self.body)
            self.id = str(self.model["id"])
        return self

    def _started(self) -> str:
        if self.id is None:
            self.start()
        assert self.id is not None
        return self.id

    def refresh(self) -> dict[str, Any]:
        """Read the model again (``GET /eugo/clusters/{id}``)."""
        if self.id is not None:
            model = self._channel.get(self.id)
            self.model = model if model is not None else {**self.model, "status": "stopped"}
        return self.model

    def preview(self) -> str:
        """The job scripts and commands this cluster runs, as text; starts nothing."""
        return _plan_text(self._channel.preview(self.body))

    def wait(self, timeout: float | None = None) -> Cluster:
        """Until it runs; ClusterError with the card's sentence if it cannot."""
        self.model = self._channel.wait(self._started(), timeout)
        return self

    def scale(self, nodes: int) -> Cluster:
        """Make it ``nodes`` nodes, the head included (as ``nodes=`` at launch): adds worker
        jobs, or removes the newest ones."""
        cluster_id = self._started()
        nodes = requests.count(nodes, "nodes", "scale", 1, 1024)
        model = self.wait().model
        part = model.get(str(model.get("kind"))) or {}
        workers = [j["id"] for j in part.get("jobs", []) if j.get("role") == "worker"
                   and j.get("state") not in ("ended", "COMPLETED", "CANCELLED")]  # fmt: skip
        if not model.get("scalable"):
            raise ClusterError(
                f"A {model.get('kind')} cluster cannot add or remove nodes; launch a new one "
                "with the nodes you need."
            )
        for _ in range(nodes - 1 - len(workers)):
            self.model = self._channel.add_node(cluster_id)
        for job in reversed(workers[nodes - 1 :]):
            self.model = self._channel.remove_node(cluster_id, str(job))
        return self

    def use(self) -> Cluster:
        """This process's distributed calls go to this cluster (``eugo.hpc.init(address=)``)."""
        from ..hpc import init

        address = self.wait().model.get("address")
        init(address=str(address))
        self._connected = True
        return self

    def close(self) -> None:
        """Stop every node it started (a connected cluster is only forgotten)."""
        if self._connected:
            from ..hpc import shutdown

            shutdown()
            self._connected = False
        if self.id is not None:
            self._channel.delete(self.id)
            self.model = {**self.model, "status": "stopped", "nodes": [], "resources": {}}

    def __enter__(self) -> Cluster:
        return self.use()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        facts = _facts(self.refresh())
        body = "; ".join(f"{k} {v}" for k, v in facts.items())
        return f"<Cluster {self.name!r} ({self.model.get('kind')}, {self.id or '-'}): {body}>"

    def _repr_html_(self) -> str:
        facts = _facts(self.refresh())
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in facts.items()
        )
        title = html.escape(f"{self.name} ({self.model.get('kind')}, {self.id or 'not started'})")
        where = html.escape(self._channel.where)
        return f"<div><b>{title}</b> <small>via {where}</small><table>{rows}</table></div>"


class ClusterTable(list[dict[str, Any]]):
    """The clusters as models (a list), shown as a table."""

    _COLUMNS = ("id", "name", "kind", "status", "address", "lifetime")

    def _rows(self) -> list[list[str]]:
        return [[str(m.get(c) or "") for c in self._COLUMNS] for m in self]

    def __repr__(self) -> str:
        rows = [list(self._COLUMNS), *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._COLUMNS))]
        lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
        return "\n".join(line.rstrip() for line in lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in self._COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
            for row in self._rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
