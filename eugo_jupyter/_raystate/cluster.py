"""The cluster as the scheduler sees it: nodes, demands, live drivers, what actors hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._gcs import channel, task_stub


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


def has_live_driver(gcs_address: str, timeout: float = 5.0) -> bool:
    """Whether a driver (a kernel, a script) is connected to the cluster; raises if unreadable."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled; not in the stub

    jobs = GcsClient(address=gcs_address).get_all_job_info(timeout=timeout)
    return any(not job.is_dead for job in jobs.values())


@dataclass(frozen=True)
class Drivers:
    """What the connected drivers (kernels, scripts) are doing, read cheaply (:func:`drivers`).

    ``busy``: a live driver has tasks in flight (actor calls and zero-CPU tasks count too, which
    no node's resources show). ``mark``: changes whenever a driver submits a task, or a job
    starts or ends (a driver's own task record gains a ``submit_task`` profile event per
    submission, reported with its task events): a run that starts and ends between two reads
    still changes it.
    """

    busy: bool
    mark: str


def drivers(gcs_address: str, timeout: float = 5.0) -> Drivers:
    """Whether a live driver has tasks in flight, and a mark of their activity (blocking).

    One job-table read (the GCS asks each live driver how many tasks it has in flight) and one
    indexed task-record lookup per live driver; no pass over the task table. Raises if the GCS
    does not answer.
    """
    from ray import _raylet
    from ray.core.generated import gcs_service_pb2

    raylet: Any = _raylet  # compiled: not all in the stub
    pb: Any = gcs_service_pb2
    filters = pb.GetTaskEventsRequest.Filters
    jobs = raylet.GcsClient(address=gcs_address).get_all_job_info(
        skip_submission_job_info_field=True, timeout=timeout
    )
    stub = task_stub(gcs_address)
    busy, marks = False, []
    for job in sorted(jobs.values(), key=lambda j: j.job_id):
        if job.is_dead:
            marks.append(f"{job.job_id.hex()}:ended")
            continue
        busy = busy or bool(job.is_running_tasks)
        only = filters(exclude_driver=False)
        only.task_filters.append(
            filters.TaskIdFilter(
                task_id=raylet.TaskID.for_driver_task(raylet.JobID(job.job_id)).binary(),
                predicate=pb.FilterPredicate.EQUAL,
            )
        )
        reply = stub.GetTaskEvents(pb.GetTaskEventsRequest(limit=1, filters=only), timeout=timeout)
        latest = max(
            (e.start_time for r in reply.events_by_task for e in r.profile_events.events), default=0
        )
        marks.append(f"{job.job_id.hex()}:{latest}")
    return Drivers(busy=busy, mark=" ".join(marks))


def held_by_actors(gcs_address: str, timeout: float = 5.0) -> dict[str, dict[str, float]]:
    """What the live actors hold for their lifetime, by node id (hex): resource -> amount.

    One read of the GCS's actor table, live actors only (blocking). An actor keeps its
    resources (``num_cpus=1``, ``num_gpus=1``) while it waits for calls: held, not moving.
    """
    from ray.core.generated import gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    pb: Any = gcs_service_pb2
    tables: Any = gcs_pb2  # generated: not all in the stub
    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel(gcs_address))
    only = pb.GetAllActorInfoRequest.Filters(state=tables.ActorTableData.ALIVE)
    reply = stub.GetAllActorInfo(pb.GetAllActorInfoRequest(filters=only), timeout=timeout)
    held: dict[str, dict[str, float]] = {}
    for actor in reply.actor_table_data:
        node = held.setdefault(actor.node_id.hex(), {})
        for name, amount in actor.required_resources.items():
            node[name] = node.get(name, 0.0) + amount
    return held
