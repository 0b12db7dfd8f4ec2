"""The cluster manager: owns every cluster the Jupyter server launched or connected, returns models.

Async, imports no tornado: ``routes.py`` translates HTTP into calls on :class:`ClusterManager`,
which returns plain JSON-ready dicts ("models"), ``None``/``False`` for an unknown id (HTTP 404),
and raises :class:`~eugo_jupyter.exceptions.OptionsError` for bad input or
:class:`~eugo_jupyter.exceptions.ClusterError` for an impossible action (an unreachable address,
activating a cluster that is not running): both HTTP 400 with ``{"message": ...}``.

The cluster model (``GET /eugo/clusters/{id}``; ``GET /eugo/clusters`` is a list of these)::

    {
      "id": "c-3f9a2b1c",                # "c-" + 8 hex digits, stable across server restarts
      "name": "dev",
      "kind": "local" | "connect",
      "status": "starting" | "running" | "stopping" | "stopped" | "error",
                                         # a DELETE that answers 204 removes the cluster from
                                         # the list, so "stopped" is seen only in passing
      "error": null | "a sentence saying what went wrong and what to do",
      "active": false,                   # true: new kernels connect to this cluster
      "lifetime": "server" | "persistent" | null,   # null for kind "connect" (not ours to stop)
      "address": "192.0.2.2:52345" | null,   # GCS host:port ("ray://host:port" as given);
                                         # null while a launch has not started its head yet
      "dashboard_url": "http://127.0.0.1:52346" | null,   # Ray's own port (this machine only)
      "dashboard_proxy": "eugo/clusters/c-3f9a2b1c/dashboard/" | null,  # relative to the server's
                                         # base_url: the dashboard behind Jupyter's auth
      "created": "2026-11-29T16:20:00+00:00",
      "updated": "2026-11-29T16:21:03+00:00" | null,   # when the monitoring below was read
      "spec": {                          # what was asked for; null for kind "connect"
        "head": {"num_cpus": 2, "num_gpus": 0, "memory": null, "object_store_memory": null},
        "workers": [{"num_cpus": 1, "num_gpus": 1, "memory": null, "object_store_memory": null}]
      },
      "resources": {                     # sums over alive nodes, for the resource bars
        "total":     {"CPU": 3.0, "GPU": 1.0, "memory": 1.2e10, ...},
        "available": {"CPU": 2.0, "GPU": 1.0, "memory": 1.2e10, ...}
      },
      "nodes": [
        {"node_id": "ab12...", "address": "192.0.2.2", "is_head": true, "alive": true,
         "resources_total": {"CPU": 2.0, "memory": ..., "object_store_memory": ...},
         "resources_available": {"CPU": 1.0, ...},
         "gpus": [                         # real devices read through NVML (empty when none)
           {"index": 0, "name": "NVIDIA H200", "memory_total": 150e9, "memory_used": 1e9,
            "utilization": 12.0}]}
      ],
      "tasks": {"pending": 0, "running": 1, "finished": 10000, "failed": 0},
      "waiting": [
        {"request": {"CPU": 1.0, "GPU": 1.0}, "count": 1, "infeasible": true,
         "reason": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU; launch or ...",
         "functions": []}
      ]
    }

Monitoring is read at most every ``max_age`` seconds (2 by default) and off the event loop. A
request that finds it older starts a new read; while polls come steadily it answers at once with
the data in hand (see ``updated``), so polling costs about a millisecond however large the
cluster's task history is; after a pause (data over ``3 * max_age`` old) it waits for the read.

``nodes``, ``tasks``, ``waiting`` and ``resources`` are empty (``[]``, zero counts, ``{}``) until
the first successful read and while the cluster is not running; a failed read keeps the last
values and says why in ``error`` (status stays "running" for a launched cluster whose processes
are alive; a connected cluster that stops answering turns "error").
"""

from __future__ import annotations

import asyncio
import atexit
import math
import re
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .. import _rayprobe, records
from .._raytoken import secure_token_file
from .._tempdirs import remove_ours
from ..exceptions import ClusterError, OptionsError
from ..hpc._options import parse_memory
from . import launcher, limits, monitor, proxy_policy, watchdog

__all__ = ["ClusterManager", "parse_connect", "parse_launch"]

STATUSES = ("starting", "running", "stopping", "stopped", "error")
LIFETIMES = ("server", "persistent")
MAX_WORKERS = 32
MAX_CPUS = 1024
MAX_GPUS = 64
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")
_ADDRESS_RE = re.compile(
    r"^(?P<scheme>ray://)?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])"
    r":(?P<port>[0-9]{1,5})$"
)
_NODE_KEYS = ("num_cpus", "num_gpus", "memory", "object_store_memory")


# ---------------------------------------------------------------- input validation (400s)


def _keys(body: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise OptionsError(
            f"Unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
            f"{where}; allowed: {', '.join(allowed)}."
        )


def _count(value: Any, key: str, where: str, low: int, high: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and (math.isnan(value) or not value.is_integer()))
    ):
        raise OptionsError(
            f"{where}.{key}={value!r} is not allowed: give a whole number from {low} to {high}."
        )
    if not low <= value <= high:
        raise OptionsError(
            f"{where}.{key}={value!r} is out of range: give a whole number from {low} to {high}."
        )
    return int(value)


def _node(value: Any, where: str, default_cpus: int) -> launcher.NodeSpec:
    if not isinstance(value, dict):
        raise OptionsError(
            f'{where} must be an object such as {{"num_cpus": 1, "num_gpus": 0}}, not {value!r}.'
        )
    _keys(value, _NODE_KEYS, where)
    cpus = _count(value.get("num_cpus", default_cpus), "num_cpus", where, 0, MAX_CPUS)
    gpus = _count(value.get("num_gpus", 0), "num_gpus", where, 0, MAX_GPUS)
    memory = value.get("memory")
    store = value.get("object_store_memory")
    memory = None if memory is None else parse_memory(memory, f"{where}.memory")
    store = None if store is None else parse_memory(store, f"{where}.object_store_memory")
    limits.check_node_memory(memory, store, where)
    return launcher.NodeSpec(
        num_cpus=cpus, num_gpus=gpus, memory=memory, object_store_memory=store
    )


def _name(value: Any, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise OptionsError(
            f"name={value!r} is not allowed: use 1 to 64 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return value


def parse_launch(
    body: dict[str, Any],
) -> tuple[str, launcher.NodeSpec, list[launcher.NodeSpec], str]:
    """Check a ``{"kind": "local", ...}`` body; returns (name, head, workers, lifetime).

    >>> parse_launch({"kind": "local", "head": {"num_cpus": 2}})[1]
    NodeSpec(num_cpus=2, num_gpus=0, memory=None, object_store_memory=None)
    """
    _keys(body, ("kind", "name", "head", "workers", "lifetime"), "a local launch")
    name = _name(body.get("name"), "local")
    head = _node(body.get("head", {}), "head", default_cpus=1)
    workers_in = body.get("workers", [])
    if not isinstance(workers_in, list):
        raise OptionsError(
            f'workers must be a list of nodes such as [{{"num_cpus": 1}}], not {workers_in!r}.'
        )
    if len(workers_in) > MAX_WORKERS:
        raise OptionsError(
            f"{len(workers_in)} worker nodes is too many: at most {MAX_WORKERS} on one machine."
        )
    workers = [_node(w, f"workers[{i}]", default_cpus=1) for i, w in enumerate(workers_in)]
    for i, worker in enumerate(workers):
        if worker.num_cpus == 0 and worker.num_gpus == 0:
            raise OptionsError(
                f"workers[{i}] offers nothing: give it num_cpus or num_gpus above 0."
            )
    lifetime = body.get("lifetime", "server")
    if lifetime not in LIFETIMES:
        raise OptionsError(
            f'lifetime={lifetime!r} is not allowed: "server" (stops with the Jupyter server) or '
            '"persistent" (outlives it; shut it down from the panel).'
        )
    return name, head, workers, str(lifetime)


def parse_connect(body: dict[str, Any]) -> tuple[str, str]:
    """Check a ``{"kind": "connect", "address": ...}`` body; returns (name, address).

    >>> parse_connect({"kind": "connect", "address": "10.0.0.5:6379"})
    ('10.0.0.5:6379', '10.0.0.5:6379')
    """
    _keys(body, ("kind", "name", "address", "dashboard"), "a connect request")
    address = body.get("address")
    match = _ADDRESS_RE.fullmatch(address.strip()) if isinstance(address, str) else None
    if match is None or not 1 <= int(match.group("port")) <= 65535:
        raise OptionsError(
            f"address={address!r} is not allowed: give host:port of the head's GCS (for example "
            "10.0.0.5:6379, as printed by `ray start --head`) or ray://host:10001."
        )
    address = address.strip()
    return _name(body.get("name"), address), address


# ---------------------------------------------------------------- state


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class _Cluster:
    record: dict[str, Any]
    status: str
    error: str | None = None
    monitoring: dict[str, Any] = field(default_factory=monitor.empty)
    updated: str | None = None
    read_at: float = 0.0
    refreshing: asyncio.Task[None] | None = None
    launching: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return str(self.record["id"])


class ClusterManager:
    """Launch, connect, monitor, activate and stop clusters; every method returns JSON models.

    >>> manager = ClusterManager()
    >>> model = await manager.create({"kind": "local", "head": {"num_cpus": 2}})   # doctest: +SKIP
    >>> model["status"]                                                             # doctest: +SKIP
    'starting'
    """

    def __init__(
        self, max_age: float = 2.0, launch_timeout: float = 180.0, read_timeout: float = 5.0
    ):
        self.max_age = max_age
        self.launch_timeout = launch_timeout
        self.read_timeout = read_timeout
        self.stale_after = 0.0
        # `ray start` and shutdown take seconds to minutes: a pool of their own, so they never
        # queue the quick monitoring reads (which use the loop's default pool).
        self._slow = ThreadPoolExecutor(max_workers=4, thread_name_prefix="eugo-launch")
        self._clusters: dict[str, _Cluster] = {}
        self._started: asyncio.Task[None] | None = None
        self._atexit = False
        self._watchdog: Any = None

    # -- lifecycle of the manager itself

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.ensure_future(self._reconcile())
        await asyncio.shield(self._started)

    async def _reconcile(self) -> None:
        """Find the clusters a previous server left: adopt the alive ones, forget the dead."""
        loop = asyncio.get_running_loop()
        for record in records.list_records():
            if record["id"] in self._clusters:
                continue
            if record.get("kind") == "connect":
                url = _checked_dashboard(record.get("dashboard_url"), str(record["address"]))
                record = {**record, "dashboard_url": url}  # a record may predate the check
                self._clusters[record["id"]] = _Cluster(record=record, status="running")
                continue
            pgids = [int(p) for p in record.get("pgids", [])]
            temp_dir = str(record.get("temp_dir", ""))
            alive = bool(temp_dir) and bool(
                await loop.run_in_executor(None, launcher.owned_groups, pgids, temp_dir)
            )
            answers = (
                alive
                and bool(record.get("address"))
                and await loop.run_in_executor(None, monitor.reachable, str(record.get("address")))
            )
            if answers:
                record = {**record, "server_pid": _pid(), "status": "running"}
                records.write_record(record)
                self._clusters[record["id"]] = _Cluster(record=record, status="running")
                if record.get("lifetime") == "server":
                    self._register_atexit()
            else:
                if alive:  # half a cluster: its head is gone, so nothing can use the rest
                    await loop.run_in_executor(self._slow, launcher.stop, pgids, temp_dir)
                records.delete_record(record["id"])
                remove_ours(str(record["id"]), temp_dir)  # its logs and sockets: ours to remove

    async def close(self) -> None:
        """The Jupyter server is stopping: stop the clusters launched with lifetime "server"."""
        ours = [
            c
            for c in self._clusters.values()
            if c.record.get("kind") == "local" and c.record.get("lifetime") == "server"
        ]
        await asyncio.gather(*(self._stop(c) for c in ours), return_exceptions=True)
        watchdog.end(self._watchdog)

    def close_sync(self) -> None:
        """Like :meth:`close`, for interpreter exit (no event loop)."""
        for cluster in list(self._clusters.values()):
            if cluster.record.get("kind") == "local" and cluster.record.get("lifetime") == "server":
                if cluster.status in ("stopped",):
                    continue
                left = launcher.stop(_pgids(cluster), str(cluster.record.get("temp_dir", "")))
                if not left:
                    records.delete_record(cluster.id)
                    self._clusters.pop(cluster.id, None)

    def _register_atexit(self) -> None:
        if not self._atexit:
            atexit.register(self.close_sync)
            self._atexit = True
            # atexit runs only on a clean exit; the watchdog covers SIGKILL and crashes.
            self._watchdog = watchdog.start(_pid())

    # -- models

    def _model(self, cluster: _Cluster) -> dict[str, Any]:
        record = cluster.record
        active = records.active_record()
        return {
            "id": cluster.id,
            "name": record.get("name"),
            "kind": record.get("kind"),
            "status": cluster.status,
            "error": cluster.error,
            "active": bool(active and active.get("id") == cluster.id),
            "lifetime": record.get("lifetime"),
            "address": record.get("address"),
            "dashboard_url": record.get("dashboard_url"),
            "dashboard_proxy": (
                f"eugo/clusters/{cluster.id}/dashboard/" if record.get("dashboard_url") else None
            ),
            "created": record.get("created"),
            "updated": cluster.updated,
            "spec": record.get("spec"),
            **cluster.monitoring,
        }

    async def list_clusters(self) -> list[dict[str, Any]]:
        """Every cluster this server knows, oldest first, with fresh monitoring."""
        await self._ensure_started()
        clusters = list(self._clusters.values())
        await asyncio.gather(*(self._fresh(c) for c in clusters))
        return [self._model(c) for c in clusters if c.id in self._clusters]

    async def get_cluster(self, cluster_id: str, fresh: bool = False) -> dict[str, Any] | None:
        """One cluster's model, or None for an unknown id; ``fresh=True`` waits for a new read."""
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is None:
            return None
        if fresh:
            cluster.read_at = 0.0
        await self._fresh(cluster)
        return self._model(cluster)

    # -- monitoring

    async def _fresh(self, cluster: _Cluster) -> None:
        """Re-read the cluster if its data is older than ``max_age`` (one read at a time)."""
        if cluster.status not in ("running", "error") or not cluster.record.get("address"):
            return
        if cluster.record["kind"] == "local" and cluster.status == "error" and not cluster.updated:
            return  # failed to launch: nothing to read
        if time.monotonic() - cluster.read_at < self.max_age:
            return
        if cluster.refreshing is None or cluster.refreshing.done():
            cluster.refreshing = asyncio.ensure_future(self._refresh(cluster))
        if cluster.updated is None or time.monotonic() - cluster.read_at > 3 * self.max_age:
            # Nothing read yet, or nobody polled for a while: this caller wants today's data.
            await asyncio.shield(cluster.refreshing)
            return
        # A steady poll gets the data in hand at once and the read finishes in the background:
        # it never waits on Ray (a task summary over 10,000 tasks can take a second).
        if self.stale_after > 0:
            try:
                await asyncio.wait_for(asyncio.shield(cluster.refreshing), timeout=self.stale_after)
            except asyncio.TimeoutError:
                pass

    async def _refresh(self, cluster: _Cluster) -> None:
        address = str(cluster.record["address"])
        loop = asyncio.get_running_loop()
        if address.startswith("ray://"):
            cluster.read_at = time.monotonic()
            up = await loop.run_in_executor(None, monitor.reachable, address)
            cluster.status = "running" if up else "error"
            cluster.error = (
                "Nodes and tasks are not shown for a ray:// address (it only lets kernels "
                "connect); connect with the head's GCS address (host:port) to monitor."
                if up
                else f"Nothing answers at {address} any more."
            )
            return
        try:
            data = await asyncio.wait_for(
                loop.run_in_executor(
                    None,
                    monitor.read,
                    address,
                    cluster.record.get("dashboard_url"),
                    self.read_timeout,
                ),
                timeout=self.read_timeout * 3,
            )
        except Exception as exc:  # noqa: BLE001 - any failure to read becomes a sentence
            cluster.read_at = time.monotonic()
            await self._read_failed(cluster, exc)
            return
        if data["tasks"] is None:
            data["tasks"] = cluster.monitoring["tasks"]
        cluster.monitoring = data
        cluster.updated = _now()
        cluster.read_at = time.monotonic()
        cluster.status, cluster.error = "running", None

    async def _read_failed(self, cluster: _Cluster, exc: BaseException) -> None:
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        if cluster.record["kind"] == "connect":
            cluster.status = "error"
            cluster.error = (
                f"The cluster at {cluster.record['address']} does not answer ({detail}). "
                "It may have been stopped; remove it or connect again."
            )
            return
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(
            None, launcher.owned_groups, _pgids(cluster), str(cluster.record.get("temp_dir", ""))
        )
        if not left:
            cluster.status = "error"
            cluster.error = (
                "The cluster's processes are gone (stopped outside the manager, or killed). "
                "Remove it and launch a new one."
            )
        else:
            cluster.error = f"Could not read the cluster's state just now: {detail}"

    # -- actions

    async def create(self, body: Any) -> dict[str, Any]:
        """Launch (``kind: local``) or connect (``kind: connect``); raises OptionsError on bad input."""
        await self._ensure_started()
        if not isinstance(body, dict):
            raise OptionsError(
                'The request body must be a JSON object such as {"kind": "local", "head": '
                '{"num_cpus": 2}} or {"kind": "connect", "address": "host:port"}.'
            )
        kind = body.get("kind")
        if kind == "local":
            return await self.launch(*parse_launch(body))
        if kind == "connect":
            dashboard = proxy_policy.parse_user_dashboard(body.get("dashboard"))
            return await self.connect(*parse_connect(body), dashboard=dashboard)
        raise OptionsError(f'kind={kind!r} is not allowed: use "local" (launch) or "connect".')

    async def launch(
        self, name: str, head: launcher.NodeSpec, workers: list[launcher.NodeSpec], lifetime: str
    ) -> dict[str, Any]:
        """Start a local cluster in the background; returns its model with status "starting"."""
        cluster_id = f"c-{secrets.token_hex(4)}"
        record = {
            "id": cluster_id,
            "name": name,
            "kind": "local",
            "address": None,
            "dashboard_url": None,
            "created": _now(),
            "lifetime": lifetime,
            "server_pid": _pid(),
            "pids": [],
            "pgids": [],
            # Short on purpose: Ray puts unix sockets under it (108-byte limit).
            "temp_dir": f"{tempfile.gettempdir()}/eugo-{cluster_id}",
            "spec": {"head": head.to_model(), "workers": [w.to_model() for w in workers]},
            "status": "starting",
        }
        records.write_record(record)
        cluster = _Cluster(record=record, status="starting")
        self._clusters[cluster_id] = cluster
        if lifetime == "server":
            self._register_atexit()
        cluster.launching = asyncio.ensure_future(self._launch(cluster, head, workers))
        return self._model(cluster)

    async def _launch(
        self, cluster: _Cluster, head: launcher.NodeSpec, workers: list[launcher.NodeSpec]
    ) -> None:
        loop = asyncio.get_running_loop()
        temp_dir = str(cluster.record["temp_dir"])
        try:
            started = await loop.run_in_executor(
                self._slow, launcher.launch, head, workers, temp_dir, self.launch_timeout
            )
        except Exception as exc:  # noqa: BLE001 - LaunchError, or anything else, is reported
            cluster.status, cluster.error = "error", _sentence(exc)
            self._save(cluster)
            return
        cluster.record.update(
            address=started.gcs_address,
            dashboard_url=started.dashboard_url,
            pgids=started.pgids,
            pids=started.pgids,
        )
        self._save(cluster)
        # Nodes register with the GCS a moment after `ray start` returns: running means all are up.
        want = 1 + len(workers)
        deadline = time.monotonic() + self.launch_timeout
        while cluster.status == "starting":
            try:
                data = await loop.run_in_executor(
                    None,
                    monitor.read,
                    started.gcs_address,
                    started.dashboard_url,
                    self.read_timeout,
                )
            except Exception:  # noqa: BLE001 - the GCS may not answer yet
                data = None
            if data and sum(n["alive"] for n in data["nodes"]) >= want:
                if data["tasks"] is None:
                    data["tasks"] = cluster.monitoring["tasks"]
                cluster.monitoring, cluster.updated = data, _now()
                cluster.read_at = time.monotonic()
                cluster.status = "running"
                break
            if time.monotonic() > deadline:
                cluster.status = "error"
                cluster.error = (
                    f"Only some of the {want} nodes registered within {self.launch_timeout:g} s. "
                    "Shut this cluster down and launch again, with fewer nodes."
                )
                break
            await asyncio.sleep(0.25)
        self._save(cluster)

    async def connect(
        self, name: str, address: str, dashboard: str | None = None
    ) -> dict[str, Any]:
        """Attach to an existing cluster; raises ClusterError within seconds if nothing answers.

        ``dashboard`` is one the user gave; without it, the one the head publishes is used only
        if it is on the head's own host (see :mod:`.proxy_policy`).
        """
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, secure_token_file)
        if not await loop.run_in_executor(None, monitor.reachable, address, 3.0):
            raise ClusterError(
                f"No Ray cluster answers at {address}: nothing accepts connections there. Check "
                "the host and the port (the head's GCS port, 6379 unless changed, as printed by "
                "`ray start --head`), and that this machine can reach it."
            )
        if dashboard is not None and _checked_dashboard(dashboard, address) is None:
            raise ClusterError(
                f"dashboard={dashboard!r} is not on the cluster's head ({address}): the server "
                "sends this account's Ray token to the dashboard it proxies, so it must be on "
                "the head's own host. Give the head's dashboard, or leave dashboard out."
            )
        given = dashboard is not None
        problem = await loop.run_in_executor(None, _protocol_problem, address)
        if problem:
            raise ClusterError(problem)
        if not address.startswith("ray://"):
            try:
                await asyncio.wait_for(
                    loop.run_in_executor(None, monitor.read, address, None, 3.0), timeout=8
                )
            except Exception as exc:  # noqa: BLE001
                raise ClusterError(
                    f"Something answers at {address}, but not as a Ray cluster's GCS "
                    f"({_sentence(exc)}). Give the head's GCS address (host:port), or "
                    "ray://host:10001 for a Ray client server."
                ) from None
            if not given:
                published = await loop.run_in_executor(None, monitor.dashboard_of, address, 3.0)
                dashboard = _checked_dashboard(published, address)
        cluster_id = f"c-{secrets.token_hex(4)}"
        record = {
            "id": cluster_id,
            "name": name,
            "kind": "connect",
            "address": address,
            "dashboard_url": dashboard,
            "created": _now(),
            "lifetime": None,
            "server_pid": _pid(),
            "pids": [],
            "spec": None,
            "status": "running",
        }
        records.write_record(record)
        cluster = _Cluster(record=record, status="running")
        self._clusters[cluster_id] = cluster
        await self._fresh(cluster)
        return self._model(cluster)

    async def dashboard_target(self, cluster_id: str) -> tuple[str, dict[str, str]] | None:
        """Where the cluster's dashboard answers and the headers that authenticate to it.

        None for an unknown id or a cluster without dashboard. The server proxies the dashboard
        behind its own authentication, so the browser never talks to Ray's ports.
        """
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        url = cluster.record.get("dashboard_url") if cluster else None
        if cluster and cluster.record.get("kind") == "connect":
            # Checked again on every use: a record may predate the check, or have been edited.
            url = _checked_dashboard(url, str(cluster.record.get("address")))
        if not url:
            return None
        loop = asyncio.get_running_loop()
        headers = await loop.run_in_executor(None, monitor.auth_headers)
        return str(url).rstrip("/"), headers

    async def activate(self, cluster_id: str) -> dict[str, Any] | None:
        """Mark a running cluster as the one new kernels connect to; None for an unknown id."""
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is None:
            return None
        if cluster.status != "running":
            raise ClusterError(
                f"Cluster {cluster.record.get('name')!r} is {cluster.status}; only a running "
                "cluster can be made active. Wait until it is running."
            )
        records.set_active(cluster.record)
        return self._model(cluster)

    async def delete(self, cluster_id: str) -> bool:
        """Shut a launched cluster down (detach a connected one); False for an unknown id.

        Returns once every process the cluster started is gone; raises ClusterError otherwise.
        """
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is None:
            return False
        await self._stop(cluster)
        return True

    async def _stop(self, cluster: _Cluster) -> None:
        if cluster.record.get("kind") == "local":
            cluster.status = "stopping"
            if cluster.launching is not None and not cluster.launching.done():
                await asyncio.shield(cluster.launching)  # its processes must exist to be stopped
                cluster.status = "stopping"
            loop = asyncio.get_running_loop()
            left = await loop.run_in_executor(
                self._slow, launcher.stop, _pgids(cluster), str(cluster.record.get("temp_dir", ""))
            )
            if left:
                cluster.status = "error"
                cluster.error = f"{len(left)} processes did not stop: pids {left[:10]}."
                self._save(cluster)
                raise ClusterError(cluster.error)
            cluster.status = "stopped"
        records.delete_record(cluster.id)
        self._clusters.pop(cluster.id, None)

    def _save(self, cluster: _Cluster) -> None:
        records.write_record({**cluster.record, "status": cluster.status, "error": cluster.error})


def _protocol_problem(address: str) -> str | None:
    """Why connecting to ``address`` would fail in a confusing way, or None (blocking)."""
    if address.startswith("ray://"):
        if _rayprobe.speaks_ray_client(address, 5.0):
            return None
        return (
            f"Something answers at {address}, but not as a Ray client server. Give the address "
            "of the head's client server (ray://host:10001 by default), or the GCS address "
            "(host:port) without ray://."
        )
    monitor.auth_headers()  # sets this process's auth mode, as a connection would
    return _rayprobe.auth_mismatch(address, 5.0)


def _checked_dashboard(url: Any, gcs_address: str) -> str | None:
    """A dashboard a connected cluster published, if the token may go there (else None)."""
    return proxy_policy.dashboard_allowed(url, gcs_address, monitor.local_ips())


def _pgids(cluster: _Cluster) -> list[int]:
    return [int(p) for p in cluster.record.get("pgids", [])]


def _pid() -> int:
    import os

    return os.getpid()


def _sentence(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else type(exc).__name__
