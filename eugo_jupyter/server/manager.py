"""The cluster manager: owns every cluster the Jupyter server launched or connected.

Async, imports no tornado, and does not know which backend it drives: ``routes.py`` translates
HTTP into calls on :class:`ClusterManager`, which returns JSON-ready models
(:func:`.models.make_cluster_model`), ``None``/``False`` for an unknown id (HTTP 404), and raises
:class:`~eugo_jupyter.exceptions.OptionsError` for bad input or
:class:`~eugo_jupyter.exceptions.ClusterError` for an impossible action (an unreachable address,
activating a cluster that is not running): both HTTP 400 with ``{"message": ...}``.

Monitoring (:mod:`.observer`) is read off the event loop: Ray's nodes, resources and waiting
requests at most every 0.5 s, the backend's view at most every ``max_age`` seconds (2 by
default), the task counts (a pass over the GCS's whole task table) only while work moves and
just after it stops (:mod:`.pacing`). A request that finds the data older starts a new read;
while polls come steadily it answers at once with the data in hand (see ``updated``), so
polling costs about a millisecond however large the cluster's task history is; after a pause
(data over ``3 * max_age`` old) it waits for the read.

``nodes``, ``tasks``, ``waiting`` and ``resources`` are empty (``[]``, zero counts, ``{}``) until
the first successful read and while the cluster is not running; a failed read keeps the last
values and says why in ``error`` (status stays "running" for a launched cluster whose backend
still sees it; a connected cluster that stops answering turns "error"). A launched cluster that
ends by itself (SLURM's wall time, processes killed) turns "stopped" with the reason in
``error``; its record is removed at once, so kernels no longer pick it.

Clusters found on this machine but not started here (``discovery.py``) are listed after the
manager's own, as kind "found"; DELETE stops one only with ``confirm=True``. A launched cluster
may carry an idle timeout and a maximum lifetime (``expiry.py``), watched by a task of its own.
What the manager keeps of each cluster is a :class:`.cluster.Cluster`; clusters of lifetime
"server" stop with the server, however it exits (:class:`.watchdog.ExitGuard`).

Usable without the panel or HTTP, from any asyncio code (a notebook cell can ``await``):

>>> manager = ClusterManager()
>>> model = await manager.create({"kind": "slurm", "slurm": {"nodes": 2}})  # doctest: +SKIP
>>> model = await manager.wait_until_running(model["id"])                      # doctest: +SKIP
>>> await manager.activate(model["id"])                                         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import copy
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from .. import records
from ..exceptions import ClusterError, OptionsError
from . import discovery, expiry, monitor, requests, watchdog
from .backends import Backend, PlanModel, Spec, default_backends
from .cluster import Cluster, new_record
from .launch import Launch
from .models import ClusterModel, KindFacts, make_cluster_model
from .observer import Observer
from .profiles import apply_profile, check_profile

__all__ = ["ClusterManager"]


class ClusterManager:
    """Launch, connect, monitor, scale, activate and stop clusters; methods return models.

    ``profiles`` are launch profiles an administrator offers (see :meth:`profiles`).
    ``adopt=False`` (a manager inside a script, :mod:`.from_code`) leaves the records other
    processes wrote alone: only a Jupyter server adopts what a previous one left.
    """

    def __init__(
        self,
        max_age: float = 2.0,
        launch_timeout: float = 180.0,
        read_timeout: float = 5.0,
        backends: dict[str, Backend] | None = None,
        profiles: list[dict[str, Any]] | None = None,
        find_clusters: bool = True,
        read: Callable[..., dict[str, Any]] = monitor.read,
        adopt: bool = True,
    ):
        self.max_age = max_age
        self.launch_timeout = launch_timeout
        self.read_timeout = read_timeout
        self.backends = backends if backends is not None else default_backends()
        self._profiles = [check_profile(p, self.backends) for p in profiles or []]
        # Launches and shutdowns take seconds to minutes: a pool of their own, so they never
        # queue the quick monitoring reads (which use the loop's default pool).
        self._slow = ThreadPoolExecutor(max_workers=4, thread_name_prefix="eugo-launch")
        # The monitoring: what each backend sees and each cluster's Ray state, cached.
        self.observer = Observer(self.backends, read, max_age, read_timeout, self._slow, self._save)
        self._clusters: dict[str, Cluster] = {}
        self._started: asyncio.Task[None] | None = None
        self._adopt = adopt
        self._exit = watchdog.ExitGuard(self.close_sync)
        # Found clusters: heads on this machine the manager did not start.
        self._found = discovery.FoundClusters(
            own=lambda: [c.record for c in self._clusters.values()],
            max_age=max_age,
            pool=self._slow,
            enabled=find_clusters,
        )

    # -- lifecycle of the manager itself

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.ensure_future(self._reconcile())
        await asyncio.shield(self._started)

    async def _reconcile(self) -> None:
        """Find the clusters a previous server left: adopt the alive ones, forget the dead."""
        if not self._adopt:
            return
        loop = asyncio.get_running_loop()
        for record in records.list_records():
            backend = self.backends.get(str(record.get("kind")))
            if record["id"] in self._clusters or backend is None:
                continue
            status = await loop.run_in_executor(self._slow, backend.adopt, record)
            if status is None:
                records.forget(  # and its logs and sockets: ours to remove
                    record, gone="It was no longer running when the Jupyter server started again."
                )
                continue
            record = {**record, "server_pid": os.getpid(), "status": status}
            records.write_record(record)
            cluster = Cluster(record=record, status=status)
            self._clusters[cluster.id] = cluster
            self._watch(cluster, record.get("expiry"))
            if record.get("lifetime") == "server":
                self._exit.arm()
            if status == "starting":
                cluster.launching = asyncio.ensure_future(Launch(self, cluster, backend).run())

    def _stops_with_server(self, cluster: Cluster) -> bool:
        backend = self.backends.get(cluster.kind)
        owned = bool(backend and backend.owns_processes)
        return owned and cluster.record.get("lifetime") == "server"

    async def close(self) -> None:
        """The Jupyter server is stopping: stop the clusters launched with lifetime "server"."""
        for cluster in self._clusters.values():
            if cluster.watching is not None:
                cluster.watching.cancel()
        ours = [c for c in self._clusters.values() if self._stops_with_server(c)]
        await asyncio.gather(*(self._stop(c) for c in ours), return_exceptions=True)
        for cluster in self._clusters.values():  # the others outlive us: stop watching them
            for task in cluster.background():
                task.cancel()
        self._exit.disarm()

    def close_sync(self) -> None:
        """Like :meth:`close`, for interpreter exit (no event loop)."""
        for cluster in list(self._clusters.values()):
            if not self._stops_with_server(cluster) or cluster.status == "stopped":
                continue
            if not self.backends[cluster.kind].stop(cluster.record):
                records.delete_record(cluster.id)
                self._clusters.pop(cluster.id, None)

    # -- models

    def _model(self, cluster: Cluster) -> ClusterModel:
        active = records.active_record()
        backend = self.backends.get(cluster.kind)
        model = make_cluster_model(
            cluster.record,
            cluster.status,
            error=cluster.error,
            active_id=str(active["id"]) if active else None,
            monitoring=cluster.monitoring,
            updated=cluster.updated,
            backend_state=cluster.backend_state,
            scalable=bool(backend and backend.scalable),
        )
        model["final_error"] = cluster.final
        model["facts"] = cast(KindFacts, backend.facts()) if backend else None
        model["expiry"] = cluster.limits.to_model(time.time()) if cluster.limits else None
        return model

    async def list_clusters(self) -> list[ClusterModel]:
        """Every cluster this server knows, oldest first, with fresh monitoring."""
        await self._ensure_started()
        clusters = list(self._clusters.values())
        await asyncio.gather(*(self.observer.fresh(c) for c in clusters), self._found.scan())
        return [self._model(c) for c in clusters if c.id in self._clusters] + self._found.models()

    async def get_cluster(self, cluster_id: str, fresh: bool = False) -> ClusterModel | None:
        """One cluster's model, or None for an unknown id; ``fresh=True`` waits for a new read."""
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is None and cluster_id.startswith("f-"):
            return await self._found.get(cluster_id)
        if cluster is None:
            return None
        if fresh:
            await self.observer.read_again(cluster)
        else:
            await self.observer.fresh(cluster)
        return self._model(cluster)

    async def wait_until_running(
        self, cluster_id: str, timeout: float | None = None
    ) -> ClusterModel:
        """Wait for a launch to be up; raises ClusterError with the card's sentence if it fails.

        >>> model = await manager.wait_until_running("c-3f9a2b1c")   # doctest: +SKIP
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            model = await self.get_cluster(cluster_id, fresh=True)
            if model is None:
                raise ClusterError(f"No cluster with id {cluster_id!r}.")
            if model["status"] == "running":
                return model
            if model.get("final_error"):
                raise ClusterError(model["error"] or f"The cluster is {model['status']}.")
            if deadline is not None and time.monotonic() > deadline:
                raise ClusterError(
                    f"Cluster {cluster_id} is still {model['status']} after {timeout:g} s"
                    + (f": {model['error']}" if model["error"] else ".")
                )
            await asyncio.sleep(0.5)

    # -- profiles and previews

    def profiles(self) -> list[dict[str, Any]]:
        """The launch profiles this server offers (``GET /eugo/profiles``); see
        :mod:`.profiles`."""
        return copy.deepcopy(self._profiles)

    def kinds(self) -> dict[str, dict[str, Any]]:
        """Each kind's facts and launch form (``GET /eugo/kinds``), by kind."""
        return {
            kind: {**backend.facts(), "form": backend.form_model()}
            for kind, backend in self.backends.items()
        }

    def _validate(self, body: Any) -> tuple[Backend, Spec]:
        if isinstance(body, dict) and "profile" in body:
            body = apply_profile(body, self._profiles)
        kind = requests.body_kind(body, tuple(self.backends))
        backend = self.backends[kind]
        return backend, backend.validate(body)

    async def preview(self, body: Any) -> PlanModel:
        """What a launch body would run (job scripts, commands); nothing is started."""
        backend, spec = self._validate(body)
        return backend.plan(spec).to_model(spec)

    # -- actions

    async def create(self, body: Any) -> ClusterModel:
        """Launch or connect, by the body's ``kind``; raises OptionsError on bad input.

        A launch returns at once with status "starting" and goes on in the background; a
        connect checks the address first and raises ClusterError within seconds if nothing
        answers there.
        """
        await self._ensure_started()
        limits = None
        if isinstance(body, dict) and ("idle_timeout" in body or "max_lifetime" in body):
            limits = expiry.parse_limits(body)
            body = {k: v for k, v in body.items() if k not in ("idle_timeout", "max_lifetime")}
        backend, spec = self._validate(body)
        if limits and not backend.owns_processes:
            raise OptionsError(
                f"idle_timeout and max_lifetime apply to clusters the Manager launches, not to "
                f"kind {spec.kind!r} (not ours to stop); leave them out."
            )
        record = new_record(f"c-{secrets.token_hex(4)}", spec)
        cluster = Cluster(record=record, status="starting")
        if backend.starts_quickly:  # a refusal (bad address, bad partition) is this call's error
            loop = asyncio.get_running_loop()
            record.update(
                await loop.run_in_executor(
                    self._slow, backend.start, spec, record, self.launch_timeout
                )
            )
        if not backend.owns_processes:
            record["status"] = cluster.status = "running"
            records.write_record(record)
            self._clusters[cluster.id] = cluster
            await self.observer.fresh(cluster)
            return self._model(cluster)
        self._clusters[cluster.id] = cluster
        self._watch(cluster, limits)
        records.write_record(record)
        if spec.lifetime == "server":
            self._exit.arm()
        started = backend.starts_quickly
        if started:
            await self.observer.observe(cluster)  # the card shows the submitted jobs at once
        launch = Launch(self, cluster, backend, None if started else spec)
        cluster.launching = asyncio.ensure_future(launch.run())
        return self._model(cluster)

    def _running(self, cluster_id: str) -> Cluster | None:
        cluster = self._clusters.get(cluster_id)
        if cluster is not None and cluster.status != "running":
            raise ClusterError(
                f"Cluster {cluster.record.get('name')!r} is {cluster.status}; this needs a "
                "running cluster. Wait until it is running."
            )
        return cluster

    async def activate(self, cluster_id: str) -> ClusterModel | None:
        """Mark a running cluster as the one new kernels connect to; None for an unknown id."""
        await self._ensure_started()
        cluster = self._running(cluster_id)
        if cluster is None:
            return None
        records.set_active(cluster.record)
        return self._model(cluster)

    async def _scale(self, cluster_id: str, add: bool, node: str = "") -> ClusterModel | None:
        await self._ensure_started()
        cluster = self._running(cluster_id)
        if cluster is None:
            return None
        backend = self.backends[cluster.kind]
        if not backend.scalable:
            raise ClusterError(
                f"A {cluster.kind} cluster cannot add or remove nodes; launch a new one instead."
            )
        loop = asyncio.get_running_loop()
        call = backend.add_node if add else backend.remove_node
        args = (cluster.record,) if add else (cluster.record, node)
        cluster.record.update(await loop.run_in_executor(self._slow, call, *args))
        self._save(cluster)
        await self.observer.read_again(cluster)
        return self._model(cluster)

    async def add_node(self, cluster_id: str) -> ClusterModel | None:
        """Add one worker node (for the batch kinds, one more job); None for an unknown id."""
        return await self._scale(cluster_id, True)

    async def remove_node(self, cluster_id: str, node: str) -> ClusterModel | None:
        """Remove worker node ``node`` (the batch kinds: its job id); None for an unknown id."""
        return await self._scale(cluster_id, False, node)

    async def dashboard_target(self, cluster_id: str) -> tuple[str, dict[str, str]] | str | None:
        """Where the cluster's dashboard answers and the headers that authenticate to it.

        None for an unknown id or a cluster without dashboard; a sentence when the dashboard
        may not receive this account's Ray token (:meth:`dashboard_decision`, checked on every
        use: who listens on a port can change). The server proxies the dashboard behind its own
        authentication, so the browser never talks to Ray's ports.
        """
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is not None:
            record = cluster.record
        else:
            head = self._found.head(cluster_id)
            if head is None:
                return None
            record = {"kind": "found", "address": head.address}
            record["dashboard_url"] = self._found.dashboard(cluster_id)
        if not record.get("dashboard_url"):
            return None
        loop = asyncio.get_running_loop()
        decision = await loop.run_in_executor(None, self.observer.dashboard_decision, record)
        if decision.url is None:
            return decision.reason
        headers = await loop.run_in_executor(None, monitor.auth_headers)
        return decision.url.rstrip("/"), headers

    async def delete(self, cluster_id: str, confirm: bool = False) -> bool:
        """Shut a launched cluster down (detach a connected one); False for an unknown id.

        Returns once every process the cluster started is gone; raises ClusterError otherwise.
        A found cluster (not started here) is stopped only with ``confirm=True``; without it,
        ConfirmationError.
        """
        await self._ensure_started()
        cluster = self._clusters.get(cluster_id)
        if cluster is None and cluster_id.startswith("f-"):
            return await self._found.stop(cluster_id, confirm)
        if cluster is None:
            return False
        await self._stop(cluster)
        return True

    async def _stop(self, cluster: Cluster) -> None:
        backend = self.backends.get(cluster.kind)
        if backend is not None and backend.owns_processes:
            cluster.status = "stopping"
            if cluster.counting is not None:
                cluster.counting.cancel()  # no count read of a cluster going away
            if cluster.launching is not None and not cluster.launching.done():
                # A local launch must finish for its processes to be stopped; a queued job's
                # launch loop stops by itself once the status is "stopping".
                await asyncio.shield(cluster.launching)
                cluster.status = "stopping"
            if await self._stop_processes(cluster, backend):
                self._save(cluster)
                raise ClusterError(cluster.error)
        records.delete_record(cluster.id)
        self._clusters.pop(cluster.id, None)

    async def _stop_processes(self, cluster: Cluster, backend: Backend) -> list[str]:
        """Stop what the cluster started; its status and error say whether anything is left."""
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(self._slow, backend.stop, cluster.record)
        cluster.status = "error" if left else "stopped"
        cluster.error = f"{len(left)} did not stop: {', '.join(left[:10])}." if left else None
        return left

    def _save(self, cluster: Cluster) -> None:
        records.write_record({**cluster.record, "status": cluster.status, "error": cluster.error})

    # -- idle timeout and maximum lifetime (see expiry.py)

    def _watch(self, cluster: Cluster, limits: dict[str, Any] | None) -> None:
        cluster.limits = expiry.Expiry.from_limits(limits)
        if cluster.limits is None:
            return
        cluster.record["expiry"] = cluster.limits.to_record()
        cluster.watching = asyncio.ensure_future(
            expiry.watch(
                cluster,
                cluster.limits,
                known=lambda: cluster.id in self._clusters,
                save=lambda: self._save(cluster),
                expire=lambda reason: self._expire(cluster, reason),
                read_timeout=self.read_timeout,
                dashboard=lambda: self.observer.dashboard_decision(cluster.record).url,
            )
        )

    async def _expire(self, cluster: Cluster, reason: str | None) -> None:
        """A limit fired: stop every node, keep the card with the reason until it is removed."""
        cluster.status = "stopping"
        await self._stop_processes(cluster, self.backends[cluster.kind])
        cluster.monitoring = monitor.empty()
        cluster.record["stop_reason"] = reason
        # New kernels must not pick a stopped cluster; they say it is gone as they fall back.
        records.mark_active_gone(cluster.id, reason or "It was stopped by its limit.")
        self._save(cluster)
