"""The live panes' data: one shared, bounded read of each cluster, whatever the number of panes.

:class:`LiveHub` keeps, per cluster, the task ledger (:mod:`.live_tasks`) fed by reads of the
GCS's task events, and the reporter agents' node summary (:mod:`.live_nodes`) read from the
dashboard with the cluster's token. Several panes and browsers polling the same cluster share
those reads: a read starts only when a request finds the data older than ``ttl`` seconds, one
at a time, and never sooner than twice the last read took after it (a busy head is not asked
more than half its time). A steady poll gets the data in hand at once while a read runs.

The costly part for the head is each task-event query: the GCS copies every record it keeps to
answer, whatever the filters. A task read is two queries (the latest to finish, limited;
the running and failed ones); the waiting ones are a third, read only while a progress pane
polls and at most every ``waiting_every`` seconds. Nothing is read while no pane polls.

>>> hub = LiveHub()
>>> await hub.tasks(target, since=None, limit=2000)           # doctest: +SKIP
{'cluster': 'c-1', 'status': 'running', 'now': ..., 'cursor': '3fa2c1-8', 'tasks': [...], ...}
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .. import _raystate
from ..exceptions import OptionsError
from . import live_nodes, live_tasks
from .live_tasks import Reading, TaskLedger
from .monitor import _use_token_auth

__all__ = ["LiveHub", "LiveTarget", "parse_limit"]

TASKS_LIMIT = (1, 5000, 2000)  # least, most, default
FAILURES_LIMIT = (1, 500, 100)
_ACTIVE_ROWS = 2000  # running and failed attempts a read brings back at most
_WAITING_ROWS = 1000
_FINISHED_ROWS = (200, 5000)  # the latest-finished rows a read asks for: least, most


@dataclass(frozen=True)
class LiveTarget:
    """A cluster as the routes found it: its model, and its dashboard (base URL and headers,
    a sentence saying why not, or None)."""

    cluster_id: str
    model: dict[str, Any]
    dashboard: tuple[str, dict[str, str]] | str | None = None


def parse_limit(value: str | None, bounds: tuple[int, int, int], name: str = "limit") -> int:
    """A ``limit`` query argument within its bounds; OptionsError with the fix otherwise.

    >>> parse_limit(None, (1, 500, 100))
    100
    >>> parse_limit("250", (1, 500, 100))
    250
    """
    least, most, default = bounds
    if value is None or value == "":
        return default
    if value.strip().isdigit() and least <= int(value) <= most:
        return int(value)
    raise OptionsError(
        f"{name} must be a whole number from {least} to {most}, not {value!r}; leave it out "
        f"for {default}."
    )


_CURSOR = re.compile(r"[0-9A-Za-z]{1,32}-[0-9]{1,18}")


def parse_since(value: str | None) -> str | None:
    """A ``since`` query argument: the ``cursor`` of an earlier reply, or None for a first call
    (a cursor of an earlier ledger, after a server restart, is a first call too); OptionsError
    with the fix for anything else.

    >>> parse_since("3fa2b1-120"), parse_since("")
    ('3fa2b1-120', None)
    """
    if value is None or value == "":
        return None
    if _CURSOR.fullmatch(value):
        return value
    raise OptionsError(
        f"since must be the cursor of an earlier reply (its 'cursor' field, such as "
        f"'3fa2b1-120'), not {value[:40]!r}; leave it out for the whole window."
    )


@dataclass
class _Watch:
    """One cluster's live data and its reads (the hub's, per cluster id and GCS address)."""

    address: str
    ledger: TaskLedger = field(default_factory=TaskLedger)
    tasks_read: asyncio.Task[None] | None = None
    tasks_at: float = 0.0  # monotonic time the last task read began (0: never)
    tasks_took: float = 0.0
    tasks_error: str | None = None
    finished_rows: int = _FINISHED_ROWS[1]
    waiting_at: float = 0.0
    progress_polled: float = 0.0
    summary: dict[str, Any] | None = None
    summary_read: asyncio.Task[None] | None = None
    summary_at: float = 0.0
    summary_error: str | None = None


Fetch = Callable[[str, dict[str, str]], Awaitable[dict[str, Any]]]


async def fetch_summary(base: str, headers: dict[str, str]) -> dict[str, Any]:
    """The dashboard's node summary (each reporter agent's latest figures)."""
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest

    request = HTTPRequest(f"{base}/nodes?view=summary", headers=headers, request_timeout=10)
    response = await AsyncHTTPClient().fetch(request)
    return json.loads(response.body)  # type: ignore[no-any-return]


class LiveHub:
    """Per cluster: the shared reads behind ``GET /eugo/clusters/{id}/live/...``."""

    def __init__(
        self,
        ttl: float = 1.0,
        waiting_every: float = 3.0,
        read_timeout: float = 5.0,
        fetch: Fetch = fetch_summary,
    ) -> None:
        self.ttl = ttl
        self.waiting_every = waiting_every
        self.read_timeout = read_timeout
        self.fetch = fetch  # the reporter's summary; a test gives its own (mock GPU figures)
        self._watches: dict[str, _Watch] = {}

    # -- the replies

    async def tasks(self, target: LiveTarget, since: str | None, limit: int) -> dict[str, Any]:
        """``GET .../live/tasks``: attempts that started or ended since the cursor."""
        reply, watch = await self._begin(target, {"cursor": since or "", "tasks": []})
        if watch is None:
            reply["truncated"] = False
            return reply
        await self._fresh_tasks(watch)
        ledger = watch.ledger
        rows, last, cut = ledger.rows_since(ledger.parse_cursor(since), limit, time.time())
        ips = _ips(target.model)
        for row in rows:
            row["node"] = ips.get(row["node_id"] or "")
        reply.update(cursor=f"{ledger.epoch}-{last}", tasks=rows, truncated=cut)
        return self._with_error(reply, watch.tasks_error)

    async def progress(self, target: LiveTarget) -> dict[str, Any]:
        """``GET .../live/progress``: per function, map run and cell; and what waits."""
        reply, watch = await self._begin(target, {"groups": [], "waiting": []})
        if watch is None:
            return reply
        watch.progress_polled = time.monotonic()
        await self._fresh_tasks(watch)
        reply["groups"] = watch.ledger.group_models()
        reply["waiting"] = list(target.model.get("waiting") or [])
        reply["waiting_truncated"] = watch.ledger.waiting_truncated
        return self._with_error(reply, watch.tasks_error)

    async def failures(self, target: LiveTarget, limit: int) -> dict[str, Any]:
        """``GET .../live/failures``: the failed attempts, the latest first."""
        reply, watch = await self._begin(target, {"failures": []})
        if watch is None:
            reply["truncated"] = False
            return reply
        await self._fresh_tasks(watch)
        failed = watch.ledger.failures
        ips = _ips(target.model)
        rows = [{**f, "node": ips.get(f["node_id"] or "")} for f in failed[:limit]]
        reply.update(failures=rows, truncated=len(failed) > limit)
        return self._with_error(reply, watch.tasks_error)

    async def nodes(self, target: LiveTarget) -> dict[str, Any]:
        """``GET .../live/nodes``: CPU, memory and object store per node."""
        reply, watch = await self._begin(target, {"nodes": []})
        if watch is None:
            return reply
        summary = await self._fresh_summary(watch, target)
        known = list(target.model.get("nodes") or [])
        reply["nodes"] = live_nodes.nodes_of(summary or {}, known)
        return self._with_error(reply, watch.summary_error)

    async def gpus(self, target: LiveTarget) -> dict[str, Any]:
        """``GET .../live/gpus``: every GPU of every node, with the tasks holding it."""
        reply, watch = await self._begin(target, {"gpus": [], "message": None})
        if watch is None:
            return reply
        summary = await self._fresh_summary(watch, target)
        held = any(gpu.get("processesPids") for e in live_nodes.entries(summary or {})
                   for gpu in e.get("gpus") or [])  # fmt: skip
        if held:  # which tasks run in those processes: the (shared) task read
            await self._fresh_tasks(watch)
        running = {
            (r["node_id"] or "", int(pid)): (r["task_id"], r["func"])
            for r, pid in watch_running(watch)
        }
        reply["gpus"] = live_nodes.gpus_of(summary or {}, running)
        if not reply["gpus"]:
            reply["message"] = (
                watch.summary_error
                if summary is None and watch.summary_error
                else live_nodes.no_gpu_message(list(target.model.get("nodes") or []))
            )
        return self._with_error(reply, watch.summary_error)

    # -- steps

    async def _begin(
        self, target: LiveTarget, empty: dict[str, Any]
    ) -> tuple[dict[str, Any], _Watch | None]:
        """The reply's common part; the cluster's watch, or None for a cluster that is not
        running (the reply then says so, with the empty data)."""
        model = target.model
        status = str(model.get("status"))
        reply = {"cluster": target.cluster_id, "status": status, "now": time.time(), **empty}
        address = str(model.get("address") or "")
        if status != "running":
            reply["message"] = (
                f"The cluster is {status}: nothing runs there to show. "
                + ("Start it again or make another cluster active." if status in (
                    "stopped", "stopping", "error") else "Its data appears once it is running.")
            )  # fmt: skip
            return reply, None
        if not address or address.startswith("ray://"):
            reply["message"] = (
                "Live panes need the head's GCS address (host:port); a ray:// address only "
                "lets kernels connect. Connect with the GCS address to see its tasks."
            )
            return reply, None
        watch = self._watches.get(target.cluster_id)
        if watch is None or watch.address != address:
            watch = self._watches[target.cluster_id] = _Watch(address=address)
        reply["message"] = None
        return reply, watch

    @staticmethod
    def _with_error(reply: dict[str, Any], error: str | None) -> dict[str, Any]:
        if error:
            reply["message"] = error
        return reply

    async def _fresh_tasks(self, watch: _Watch) -> None:
        """Start a task read if the data is older than ``ttl`` (and the head had its rest);
        wait for it only when there is no data yet or the data in hand is long stale."""
        now = time.monotonic()
        gap = max(self.ttl, 2 * watch.tasks_took)
        running = watch.tasks_read is not None and not watch.tasks_read.done()
        if not running and now - watch.tasks_at >= gap:
            watch.tasks_read = asyncio.ensure_future(self._read_tasks(watch))
            running = True
        stale = not watch.ledger.reads or now - watch.tasks_at > 3 * gap + self.read_timeout
        if running and stale and watch.tasks_read is not None:
            await asyncio.shield(watch.tasks_read)

    async def _read_tasks(self, watch: _Watch) -> None:
        loop = asyncio.get_running_loop()
        began = time.monotonic()
        watch.tasks_at = began
        waiting = (
            began - watch.progress_polled < 3 * self.waiting_every
            and began - watch.waiting_at >= self.waiting_every
        )
        if waiting:
            watch.waiting_at = began
        try:
            reading = await loop.run_in_executor(
                None, _read_tasks, watch.address, watch.finished_rows, waiting, self.read_timeout
            )
        except Exception as exc:  # noqa: BLE001 - any failure to read becomes a sentence
            watch.tasks_error = f"Could not read the cluster's tasks just now: {_text(exc)}"
            return
        finally:
            watch.tasks_took = time.monotonic() - began
        known = watch.ledger.rows
        new = sum((e.task_id, e.attempt) not in known for e in reading.finished)
        watch.ledger.take_reading(reading, time.time())
        watch.tasks_error = None
        least, most = _FINISHED_ROWS
        if new >= len(reading.finished) and len(reading.finished) >= watch.finished_rows:
            watch.finished_rows = min(most, watch.finished_rows * 2)  # may have missed some
        else:
            watch.finished_rows = max(least, min(most, 2 * new + 100))

    async def _fresh_summary(self, watch: _Watch, target: LiveTarget) -> dict[str, Any] | None:
        now = time.monotonic()
        running = watch.summary_read is not None and not watch.summary_read.done()
        if not running and now - watch.summary_at >= self.ttl:
            watch.summary_at = now
            watch.summary_read = asyncio.ensure_future(self._read_summary(watch, target))
            running = True
        if running and watch.summary is None and watch.summary_read is not None:
            await asyncio.shield(watch.summary_read)
        return watch.summary

    async def _read_summary(self, watch: _Watch, target: LiveTarget) -> None:
        if not isinstance(target.dashboard, tuple):
            watch.summary_error = (
                target.dashboard
                if isinstance(target.dashboard, str)
                else "This cluster has no dashboard, whose reporter agents gather the nodes' "
                "figures; start it with Ray's dashboard (ray[default])."
            )
            return
        base, headers = target.dashboard
        try:
            watch.summary = await asyncio.wait_for(self.fetch(base, headers), self.read_timeout)
            watch.summary_error = None
        except Exception as exc:  # noqa: BLE001 - the dashboard may be restarting
            watch.summary_error = f"The cluster's dashboard did not answer just now: {_text(exc)}"


def watch_running(watch: _Watch) -> list[tuple[Any, int]]:
    """The running rows of a watch with their worker pid (for the GPU processes)."""
    pids = watch.ledger.pids
    return [
        (row, pids[attempt])
        for attempt, (_, row) in watch.ledger.rows.items()
        if row["state"] == "RUNNING" and attempt in pids
    ]


@functools.lru_cache(maxsize=1)
def _read_tasks(address: str, finished_rows: int, waiting: bool, timeout: float) -> Reading:
    """One read of the task events (blocking): two queries, three with the waiting ones.

    The finished attempts are asked for last: each query costs the GCS a copy of its whole
    table, so what the stream shows is as fresh as the last query's start (an attempt that ends
    in between is in both lists: the ledger keeps it ended).
    """
    _use_token_auth()
    pending = (
        _raystate.task_events(
            address, not_states=live_tasks.NOT_WAITING, limit=_WAITING_ROWS, timeout=timeout
        )
        if waiting
        else None
    )
    active = _raystate.task_events(
        address, not_states=live_tasks.NOT_ACTIVE, limit=_ACTIVE_ROWS, timeout=timeout
    )
    finished = _raystate.task_events(
        address, states=("FINISHED",), limit=finished_rows, timeout=timeout
    )
    return Reading(
        finished=finished.events,
        active=active.events,
        waiting=pending.events if pending is not None else None,
        waiting_truncated=pending.truncated if pending is not None else 0,
    )


def _ips(model: dict[str, Any]) -> dict[str, str]:
    return {str(n["node_id"]): str(n.get("address")) for n in model.get("nodes") or []}


def _text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
