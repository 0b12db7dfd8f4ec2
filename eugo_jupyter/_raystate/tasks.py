"""The GCS's task events: counts by state, one task's node, and the attempts themselves."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ._gcs import task_stub


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
    stub = task_stub(gcs_address)
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
    reply = task_stub(gcs_address).GetTaskEvents(
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
    stub = task_stub(gcs_address)
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
    stub = task_stub(gcs_address)
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
