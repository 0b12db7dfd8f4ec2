"""The one place that uses Ray's private APIs: cluster state, jobs, tokens, the dashboard.

Everything is read from the GCS by address, so the Jupyter server (which is not a Ray driver)
and a kernel (which is) share the same code. The results are plain data (:class:`Snapshot`).
When Ray renames a private module, this is the file to fix. A leaf module: the token file
(``_raytoken``), ``hpc`` and the server all use it.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Drivers",
    "NodeFacts",
    "Snapshot",
    "TaskEvent",
    "TaskEvents",
    "WAITING_STATES",
    "TOKEN_NOTICE_LOGGER",
    "actor_creation_task",
    "dashboard_auth_headers",
    "drivers",
    "enable_token_auth",
    "has_live_driver",
    "held_by_actors",
    "in_async_actor",
    "keep_every_log_line",
    "new_token",
    "published_dashboard",
    "snapshot",
    "startup_timed_out",
    "stop_failed_start",
    "task_events",
    "task_node",
    "task_states",
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


#: The logger that says "Token authentication is enabled" at each connection (a private module).
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def keep_every_log_line() -> None:
    """Ray's log stream in this process no longer folds repeated lines ("[repeated 5x across
    cluster]"): a notebook shows every line. A Ray without that switch is left as it is."""
    try:
        from ray._private import ray_logging

        ray_logging.RAY_DEDUP_LOGS = False  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        pass


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
    stub = _task_stub(gcs_address)
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


@dataclass(frozen=True)
class TaskStates:
    """How many task attempts the GCS holds in each state (Ray's names), drivers left out.

    ``dropped``: attempts whose records Ray no longer has (past
    ``RAY_task_events_max_num_task_in_gcs``, 100,000 by default, the GCS drops the oldest,
    finished ones first; a worker under load may drop events too): their states are not in
    ``counts``, so those are "at least" figures.
    ``stored``: records the GCS holds (drivers included); 0 also where a cluster keeps task
    events elsewhere (``RAY_enable_task_events_to_dashboard_head``).
    """

    counts: dict[str, int]
    dropped: int
    stored: int


# The non-finished attempts a read brings back in full (to see their states); beyond it the
# states are counted one query each. Finished ones are only counted, never sent.
_ROWS = 1000


@functools.lru_cache(maxsize=16)
def _channel(gcs_address: str) -> Any:
    """A gRPC channel to the GCS at an address (one per address, reused)."""
    from ray._private.grpc_utils import init_grpc_channel

    options = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]
    return init_grpc_channel(gcs_address, options)


def _task_stub(gcs_address: str) -> Any:
    """A gRPC stub for the GCS's task events at an address."""
    from ray.core.generated import gcs_service_pb2_grpc

    return gcs_service_pb2_grpc.TaskInfoGcsServiceStub(_channel(gcs_address))


def held_by_actors(gcs_address: str, timeout: float = 5.0) -> dict[str, dict[str, float]]:
    """What the live actors hold for their lifetime, by node id (hex): resource -> amount.

    One read of the GCS's actor table, live actors only (blocking). An actor keeps its
    resources (``num_cpus=1``, ``num_gpus=1``) while it waits for calls: held, not moving.
    """
    from ray.core.generated import gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    pb: Any = gcs_service_pb2
    tables: Any = gcs_pb2  # generated: not all in the stub
    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(_channel(gcs_address))
    only = pb.GetAllActorInfoRequest.Filters(state=tables.ActorTableData.ALIVE)
    reply = stub.GetAllActorInfo(pb.GetAllActorInfoRequest(filters=only), timeout=timeout)
    held: dict[str, dict[str, float]] = {}
    for actor in reply.actor_table_data:
        node = held.setdefault(actor.node_id.hex(), {})
        for name, amount in actor.required_resources.items():
            node[name] = node.get(name, 0.0) + amount
    return held


def _latest_state(event: Any, names: dict[int, str]) -> str:
    """A task attempt's state as Ray's state API names it: the highest status it went through."""
    seen = event.state_updates.state_ts_ns
    return names[max(seen)] if seen else "NIL"


def task_states(gcs_address: str, timeout: float = 5.0) -> TaskStates:
    """Count task attempts by state from the GCS's own task-event query (blocking).

    One query in the common case: the GCS filters on the state itself and counts what it
    filtered out (the finished attempts) without sending them; only the non-finished ones
    (pending, running, failed: usually few) come back, to read their states. That costs the GCS
    a pass over the records it holds (at most 100,000), not the dashboard's conversion of every
    task to a dict as ``ray.util.state.summarize_tasks`` does. Raises what gRPC raises when the
    GCS does not answer.
    """
    from ray.core.generated import common_pb2, gcs_service_pb2

    pb: Any = gcs_service_pb2  # generated: no types for mypy
    TaskStatus: Any = getattr(common_pb2, "TaskStatus")  # noqa: B009 - untyped for mypy
    TaskType: Any = getattr(common_pb2, "TaskType")  # noqa: B009 - untyped for mypy

    names = {int(number): str(name) for name, number in TaskStatus.items()}
    stub = _task_stub(gcs_address)
    filters = pb.GetTaskEventsRequest.Filters

    def query(state: str, predicate: int, limit: int, exclude_driver: bool) -> Any:
        only = filters(exclude_driver=exclude_driver)
        only.state_filters.append(filters.StateFilter(state=state, predicate=predicate))
        reply = stub.GetTaskEvents(
            pb.GetTaskEventsRequest(limit=limit, filters=only), timeout=timeout
        )
        if reply.status.code != 0:
            raise RuntimeError(f"the GCS refused the task query: {reply.status.message}")
        return reply

    # Drivers stay in (so that what the GCS filters out is exactly the finished attempts, a
    # driver that exited included); a driver's record, running or failed, is skipped by type.
    reply = query("FINISHED", pb.FilterPredicate.NOT_EQUAL, _ROWS, exclude_driver=False)
    counts: Counter[str] = Counter()
    for event in reply.events_by_task:
        if event.task_info.type != TaskType.DRIVER_TASK:
            counts[_latest_state(event, names)] += 1
    # The reply counts the attempts left out by the limit as dropped ones too.
    dropped = max(0, int(reply.num_status_task_events_dropped) - int(reply.num_truncated))
    finished_drivers = _finished_drivers(gcs_address, dropped, timeout)
    counts["FINISHED"] = max(0, int(reply.num_filtered_on_gcs) - finished_drivers)
    if reply.num_truncated:  # more non-finished attempts than _ROWS: count each state instead
        for state in names.values():
            if state != "FINISHED":
                counted = query(state, pb.FilterPredicate.EQUAL, 0, exclude_driver=True)
                counts[state] = int(counted.num_truncated)
    return TaskStates(
        counts={state: n for state, n in counts.items() if n},
        dropped=dropped,
        stored=int(reply.num_total_stored),
    )


# Per GCS address: the dropped count the answers were read at, and for each ended job whether
# its driver's record says FINISHED (final once the job ended; re-asked when records drop).
_DRIVERS: dict[str, tuple[int, dict[bytes, bool]]] = {}


def task_node(gcs_address: str, task_id: str, timeout: float = 5.0) -> str | None:
    """The id (hex) of the node that ran task ``task_id`` (hex), from the GCS's task events
    (blocking; no dashboard needed); None while the GCS has no node for it yet."""
    from ray.core.generated import gcs_service_pb2

    pb: Any = gcs_service_pb2
    filters = pb.GetTaskEventsRequest.Filters
    only = filters(exclude_driver=True)
    only.task_filters.append(
        filters.TaskIdFilter(task_id=bytes.fromhex(task_id), predicate=pb.FilterPredicate.EQUAL)
    )
    reply = _task_stub(gcs_address).GetTaskEvents(
        pb.GetTaskEventsRequest(limit=10, filters=only), timeout=timeout
    )
    nodes = [e.state_updates.node_id for e in reply.events_by_task if e.state_updates.node_id]
    return nodes[-1].hex() if nodes else None


def _finished_drivers(gcs_address: str, dropped: int, timeout: float) -> int:
    """How many drivers' records say FINISHED: one indexed lookup per newly ended job."""
    from ray import _raylet
    from ray.core.generated import gcs_service_pb2

    raylet: Any = _raylet  # compiled: not all in the stub
    pb: Any = gcs_service_pb2
    filters = pb.GetTaskEventsRequest.Filters
    jobs = raylet.GcsClient(address=gcs_address).get_all_job_info(timeout=timeout)
    ended = [job.job_id for job in jobs.values() if job.is_dead]
    seen_at, known = _DRIVERS.get(gcs_address, (dropped, {}))
    if seen_at != dropped:
        known = {}  # records were dropped since: a driver's may be among them
    stub = _task_stub(gcs_address)
    for job_id in ended:
        if job_id not in known:
            only = filters(exclude_driver=False)
            only.task_filters.append(
                filters.TaskIdFilter(
                    task_id=raylet.TaskID.for_driver_task(raylet.JobID(job_id)).binary(),
                    predicate=pb.FilterPredicate.EQUAL,
                )
            )
            only.state_filters.append(
                filters.StateFilter(state="FINISHED", predicate=pb.FilterPredicate.EQUAL)
            )
            request = pb.GetTaskEventsRequest(limit=1, filters=only)
            known[job_id] = len(stub.GetTaskEvents(request, timeout=timeout).events_by_task) > 0
    _DRIVERS[gcs_address] = (dropped, known)
    return sum(known[job_id] for job_id in ended)


def actor_creation_task(handle: Any) -> str:
    """The id (hex) of the task that runs an actor's ``__init__``, from its handle."""
    from ray._raylet import TaskID

    return str(TaskID.for_actor_creation_task(handle._actor_id).hex())


def actor_id_hex(handle: Any) -> str:
    """An actor's id (hex), from its handle."""
    return str(handle._actor_id.hex())


def actor_class_name(handle: Any) -> str:
    """The name of the class an actor handle was made from."""
    return str(handle._ray_actor_creation_function_descriptor.class_name)


def pickled_by_value(module: Any) -> bool:
    """Whether Ray's cloudpickle ships ``module``'s objects by value (registered so)."""
    try:
        from ray.cloudpickle import cloudpickle as _cp

        return bool(_cp._is_registered_pickle_by_value(module))
    except Exception:  # noqa: BLE001 - an older cloudpickle: only the notebook's own code
        return False


def session_name() -> str | None:
    """The Ray session this process is connected to: a ``ray.init`` after ``ray.shutdown``
    (even at the same address) is another one. None when not connected, or through a
    ``ray://`` client."""
    from ray._private.worker import global_worker

    return getattr(getattr(global_worker, "node", None), "session_name", None)


def in_async_actor() -> bool:
    """Whether this worker runs an async actor, where Ray refuses a blocking ``ray.get`` (it
    warns, and would block the actor's event loop)."""
    from ray._private.worker import global_worker

    core = getattr(global_worker, "core_worker", None)
    return bool(core is not None and core.current_actor_is_asyncio())


# What Ray says when the head's raylet did not register within its fixed 30 s (it has no code).
_STARTUP_TIMEOUT = "timed out during startup"


def startup_timed_out(message: str) -> bool:
    """Whether a failed node start only ran out of Ray's fixed time for its raylet to register
    (a busy machine), so that another try may do: the one rule, for the embedded Ray
    (:func:`stop_failed_start`) and the launched clusters' ``ray start``.

    >>> startup_timed_out("The current node timed out during startup. This could happen ...")
    True
    """
    return _STARTUP_TIMEOUT in message


def stop_failed_start(exc: BaseException) -> bool:
    """Stop the processes of a local Ray node whose start raised ``exc``; whether the start
    only ran out of time (Ray's fixed 30 s for the raylet to register), so that one more try
    may do.

    ``ray.init`` (and ``ray.cluster_utils``) raise from inside ``Node.__init__`` and keep no
    handle: the node's GCS, raylet, dashboard and agents go on running in this process's
    children. The node is found in the traceback's frames and stopped with Ray's own
    ``kill_all_processes``, whatever the failure.
    """
    from ray._private.node import Node

    traceback = exc.__traceback__
    while traceback is not None:
        node = traceback.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
            return startup_timed_out(str(exc))
        traceback = traceback.tb_next
    return False


@dataclass(frozen=True)
class TaskEvent:
    """One task attempt as the GCS's task events hold it, in plain data (the live panes').

    Times are epoch seconds (None before the attempt got there); ``state`` is Ray's name of the
    latest state it went through; ``error`` is Ray's error message (a Python exception's
    formatted traceback for an application error), or None.
    """

    task_id: str
    attempt: int
    job_id: str
    name: str
    func: str
    kind: str  # Ray's task type: NORMAL_TASK, ACTOR_TASK, ACTOR_CREATION_TASK
    state: str
    node_id: str | None
    worker_id: str | None
    worker_pid: int | None
    submitted: float | None
    start: float | None
    end: float | None
    error: str | None
    error_type: str | None


@dataclass(frozen=True)
class TaskEvents:
    """What one task-event query gave: the attempts (newest first, in the GCS's order), and
    how many more matched than the limit let through (``truncated``)."""

    events: list[TaskEvent]
    truncated: int
    stored: int


def _seconds(ts_ns: int | None) -> float | None:
    return ts_ns / 1e9 if ts_ns else None


def _event(raw: Any, names: dict[int, str], types: dict[int, str], errors: dict[int, str]) -> Any:
    seen = raw.state_updates.state_ts_ns
    info, updates = raw.task_info, raw.state_updates
    running = seen.get(8)  # RUNNING
    ended = seen.get(11) or seen.get(12)  # FINISHED, FAILED
    has_error = updates.HasField("error_info")
    return TaskEvent(
        task_id=raw.task_id.hex(),
        attempt=int(raw.attempt_number),
        job_id=raw.job_id.hex(),
        name=str(info.name),
        func=str(info.func_or_class_name),
        kind=types.get(int(info.type), "NORMAL_TASK"),
        state=names[max(seen)] if seen else "NIL",
        node_id=updates.node_id.hex() or (info.node_id.hex() or None),
        worker_id=updates.worker_id.hex() or None,
        worker_pid=int(updates.worker_pid) or None,
        submitted=_seconds(seen.get(1) or seen.get(2) or min(seen.values(), default=0)),
        start=_seconds(running),
        end=_seconds(ended),
        error=str(updates.error_info.error_message) if has_error else None,
        error_type=errors.get(int(updates.error_info.error_type)) if has_error else None,
    )


#: The states of an attempt that neither runs nor ended (waiting for args, a node, a worker).
WAITING_STATES = (
    "NIL",
    "PENDING_ARGS_AVAIL",
    "PENDING_NODE_ASSIGNMENT",
    "PENDING_OBJ_STORE_MEM_AVAIL",
    "PENDING_ARGS_FETCH",
    "SUBMITTED_TO_WORKER",
    "PENDING_ACTOR_TASK_ARGS_FETCH",
    "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY",
    "GETTING_AND_PINNING_ARGS",
)


def task_events(
    gcs_address: str,
    *,
    job_id: str | None = None,
    states: tuple[str, ...] = (),
    not_states: tuple[str, ...] = (),
    limit: int = 1000,
    timeout: float = 5.0,
) -> TaskEvents:
    """The task attempts (drivers left out) in ``states`` (any of none: every state) and none
    of ``not_states``, of one job or all, at most ``limit``, from the GCS (blocking).

    The GCS answers in its own order: finished attempts first, the latest to finish first, then
    the others, the latest to appear first; so a small limit gives what just finished. Whatever
    the filters, the GCS copies every record of the job (of all jobs without ``job_id``) to
    answer: one query costs it about the same at any limit. ``states`` with more than one name
    is asked one name at a time (the GCS ands its filters). Raises what gRPC raises when the
    GCS does not answer.
    """
    from ray.core.generated import common_pb2, gcs_service_pb2

    pb: Any = gcs_service_pb2  # generated: no types for mypy
    status: Any = getattr(common_pb2, "TaskStatus")  # noqa: B009 - untyped for mypy
    task_type: Any = getattr(common_pb2, "TaskType")  # noqa: B009 - untyped for mypy
    error_type: Any = getattr(common_pb2, "ErrorType")  # noqa: B009 - untyped for mypy
    names = {int(number): str(name) for name, number in status.items()}
    types = {int(number): str(name) for name, number in task_type.items()}
    errors = {int(number): str(name) for name, number in error_type.items()}
    filters = pb.GetTaskEventsRequest.Filters
    stub = _task_stub(gcs_address)
    events: list[TaskEvent] = []
    truncated = stored = 0
    for state in states or (None,):
        only = filters(exclude_driver=True)
        if job_id is not None:
            only.job_filters.append(
                filters.JobIdFilter(
                    job_id=bytes.fromhex(job_id), predicate=pb.FilterPredicate.EQUAL
                )
            )
        if state is not None:
            only.state_filters.append(
                filters.StateFilter(state=state, predicate=pb.FilterPredicate.EQUAL)
            )
        for other in not_states:
            only.state_filters.append(
                filters.StateFilter(state=other, predicate=pb.FilterPredicate.NOT_EQUAL)
            )
        reply = stub.GetTaskEvents(
            pb.GetTaskEventsRequest(limit=limit, filters=only), timeout=timeout
        )
        if reply.status.code != 0:
            raise RuntimeError(f"the GCS refused the task query: {reply.status.message}")
        events.extend(_event(raw, names, types, errors) for raw in reply.events_by_task)
        truncated += int(reply.num_truncated)
        stored = max(stored, int(reply.num_total_stored))
    return TaskEvents(events=events, truncated=truncated, stored=stored)
