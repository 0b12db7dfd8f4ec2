"""The task stream's window, the progress groups and the failures, kept from task-event reads.

Pure bookkeeping (no Ray, no HTTP): :class:`TaskLedger` takes what each read of the GCS's task
events gave (:class:`~eugo_jupyter._raystate.TaskEvent` records: the latest to finish, the
ones running or failed, the ones waiting) and keeps

- a bounded window of the attempts that ran recently (``keep_s`` seconds, ``max_rows`` at most),
  each stamped with a sequence number when it appears or changes state, so that a pane asks
  only for what changed since its cursor;
- per group (a function, a ``map``/``imap`` run, a ``%%distribute`` cell) the attempts seen to
  finish or fail since the ledger began, and those running and waiting at the last read.

A group's ``done`` counts what finished since the server began watching the cluster (the first
read takes the latest few thousand that finished before): Ray keeps no per-name totals, and
counting them from its task table would make the GCS copy the whole table for every group.

>>> ledger = TaskLedger()
>>> ledger.take_reading(Reading(finished=[], active=[], waiting=None), now=0.0)
>>> ledger.rows_since(None, 10, now=0.0)[0]
[]
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .._raystate import WAITING_STATES, TaskEvent

__all__ = [
    "NOT_ACTIVE",
    "NOT_WAITING",
    "GroupModel",
    "Reading",
    "TaskLedger",
    "TaskRow",
    "error_lines",
    "group_of",
]


class TaskRow(TypedDict):
    """One attempt in ``GET .../live/tasks`` (``node`` filled in at reply time)."""

    task_id: str
    func: str
    name: str
    state: str  # FINISHED | FAILED | RUNNING
    node_id: str | None
    node: str | None
    worker_id: str | None
    start: float | None
    end: float | None
    error: str | None


class GroupModel(TypedDict):
    """One bar of ``GET .../live/progress``."""

    key: str
    label: str
    kind: str  # function | map | cell
    done: int
    running: int
    waiting: int
    failed: int


@dataclass(frozen=True)
class Reading:
    """One read of the task events: the latest to finish, the running and failed ones, and
    the waiting ones (None: not read this time; the last ones are kept)."""

    finished: list[TaskEvent]
    active: list[TaskEvent]
    waiting: list[TaskEvent] | None
    waiting_truncated: int = 0


# Our batch engine names its tasks "map(square) 14:03:21" (each map or imap run by when it
# began, "#2" after a second run in the same second), "apply(f)", "groupby.apply(f)"; the
# %%distribute magic "%%distribute In[3]" (or the cell's --name).
_RUN = re.compile(r"^(?P<method>[A-Za-z_][\w.]*)\((?P<label>.*)\)(?: \d\d:\d\d:\d\d(?: #\d+)?)?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def group_of(event: TaskEvent) -> tuple[str, str, str, str]:
    """``(key, label, kind, func)`` of an attempt: which bar it counts in, and the function
    name a pane colours it by.

    >>> from eugo_jupyter._raystate import TaskEvent
    >>> e = TaskEvent("t", 0, "01000000", "map(square)", "_execute", "NORMAL_TASK", "FINISHED",
    ...               None, None, None, None, None, None, None, None)
    >>> group_of(e)
    ('map:01000000:map(square)', 'map(square)', 'map', 'square')
    >>> import dataclasses
    >>> group_of(dataclasses.replace(e, name="imap(square) 14:03:21 #2"))[1:]
    ('imap(square) 14:03:21 #2', 'map', 'square')
    """
    func = event.func.rsplit(".", 1)[-1] if event.kind == "NORMAL_TASK" else event.func
    run = _RUN.match(event.name) if event.kind == "NORMAL_TASK" else None
    if run:  # (in a notebook the batch function is wrapped: its name is not always _execute)
        return f"map:{event.job_id}:{event.name}", event.name, "map", run["label"]
    if func == "notebook_cell" or event.name.startswith("%%distribute"):
        return f"cell:{event.job_id}:{event.name}", event.name, "cell", event.name
    shown = event.name or func
    return f"function:{event.job_id}:{shown}", shown, "function", shown


def error_lines(text: str | None) -> tuple[str | None, str | None]:
    """``(error, traceback)`` from Ray's error message: its last line (``ValueError: boom``),
    at most 300 characters, and the whole text without terminal colours."""
    if not text:
        return None, None
    plain = _ANSI.sub("", text).strip()
    lines = [line for line in plain.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else plain
    return last[:300], plain[:20000]


def _row(event: TaskEvent, func: str) -> TaskRow:
    state = event.state if event.state in ("FINISHED", "FAILED") else "RUNNING"
    return {
        "task_id": event.task_id,
        "func": func,
        "name": event.name,
        "state": state,
        "node_id": event.node_id,
        "node": None,
        "worker_id": event.worker_id,
        "start": event.start if event.start is not None else event.end,
        "end": event.end,
        "error": error_lines(event.error)[0],
    }


@dataclass
class _Group:
    label: str
    kind: str
    done: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    last: float = 0.0  # when something of it was last seen (the newest groups are kept)


@dataclass
class TaskLedger:
    """What the live panes show of a cluster's tasks, from successive reads (see module)."""

    keep_s: float = 300.0
    max_rows: int = 20000
    max_groups: int = 200
    max_failures: int = 500
    epoch: str = field(default_factory=lambda: secrets.token_hex(3))
    seq: int = 0
    # (task_id, attempt) -> (sequence number, row); oldest sequence first.
    rows: OrderedDict[tuple[str, int], tuple[int, TaskRow]] = field(default_factory=OrderedDict)
    groups: dict[str, _Group] = field(default_factory=dict)
    counted: set[tuple[str, int]] = field(default_factory=set)  # ended attempts in ``done``
    failures: list[dict[str, Any]] = field(default_factory=list)
    waiting_truncated: int = 0
    pids: dict[tuple[str, int], int] = field(default_factory=dict)  # running attempt -> pid
    reads: int = 0
    horizon: float = 0.0  # ends before it are history: neither new rows nor counted again

    def take_reading(self, reading: Reading, now: float) -> None:
        """Take one read: new or changed attempts get a sequence number; groups recount."""
        first = self.reads == 0
        self.reads += 1
        for group in self.groups.values():
            group.running = 0
            if reading.waiting is not None:
                group.waiting = 0
        ended = [e for e in reading.active if e.state == "FAILED"] + list(reading.finished)
        # An attempt that moved on between the read's queries is in two lists: the later holds.
        over = {(e.task_id, e.attempt) for e in ended}
        running = [
            e for e in reading.active if e.state != "FAILED" and (e.task_id, e.attempt) not in over
        ]
        for event in ended:
            if not first and event.end is not None and event.end < self.horizon:
                continue  # finished long ago and already dropped from the window
            self._ended(event, now)
        self.pids = {(e.task_id, e.attempt): e.worker_pid for e in running if e.worker_pid}
        for event in running:
            key, label, kind, func = group_of(event)
            self._group(key, label, kind, now).running += 1
            self._put(event, func)
        if reading.waiting is not None:
            self.waiting_truncated = reading.waiting_truncated
            seen = over | {(e.task_id, e.attempt) for e in running}
            for event in reading.waiting:
                if (event.task_id, event.attempt) in seen:
                    continue  # it started (or ended) between the queries
                key, label, kind, _ = group_of(event)
                self._group(key, label, kind, now).waiting += 1
        self.failures = self._failures(reading.active)
        self._prune(now)

    def _ended(self, event: TaskEvent, now: float) -> None:
        key, label, kind, func = group_of(event)
        attempt = (event.task_id, event.attempt)
        group = self._group(key, label, kind, now)
        if attempt not in self.counted:
            self.counted.add(attempt)
            if event.state == "FAILED":
                group.failed += 1
            else:
                group.done += 1
        self._put(event, func)

    def _group(self, key: str, label: str, kind: str, now: float) -> _Group:
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(label=label, kind=kind)
        group.last = now
        return group

    def _put(self, event: TaskEvent, func: str) -> None:
        """Stamp the attempt if it is new or its state changed; the window keeps it."""
        attempt = (event.task_id, event.attempt)
        row = _row(event, func)
        held = self.rows.get(attempt)
        if held is not None and held[1]["state"] == row["state"] and held[1]["end"] == row["end"]:
            return
        self.seq += 1
        self.rows.pop(attempt, None)
        self.rows[attempt] = (self.seq, row)

    def _failures(self, active: Iterable[TaskEvent]) -> list[dict[str, Any]]:
        failed = sorted((e for e in active if e.state == "FAILED"), key=lambda e: -(e.end or 0.0))[
            : self.max_failures
        ]
        out = []
        for event in failed:
            error, traceback = error_lines(event.error)
            out.append(
                {
                    "task_id": event.task_id,
                    "func": group_of(event)[3],
                    "node_id": event.node_id,
                    "node": None,
                    "error": error or (event.error_type or "failed"),
                    "traceback": traceback,
                    "end": event.end,
                }
            )
        return out

    def _prune(self, now: float) -> None:
        """Drop rows that ended before the window, and the oldest beyond ``max_rows``."""
        cut = now - self.keep_s
        for attempt in [a for a, (_, r) in self.rows.items() if r["end"] and r["end"] < cut]:
            del self.rows[attempt]
        while len(self.rows) > self.max_rows:
            self.rows.popitem(last=False)
        ends = [r["end"] for _, r in self.rows.values() if r["end"]]
        self.horizon = max(cut, min(ends)) if len(self.rows) >= self.max_rows and ends else cut
        # An ended attempt older than the horizon is never counted again: forget it.
        self.counted &= set(self.rows)
        if len(self.groups) > self.max_groups:
            keep = sorted(self.groups, key=lambda k: self.groups[k].last)[-self.max_groups :]
            self.groups = {k: self.groups[k] for k in keep}

    # -- replies

    def parse_cursor(self, since: str | None) -> int | None:
        """The sequence number a cursor stands for; None for a first call, or a cursor of an
        earlier ledger (the server restarted, the cluster changed): a first call again."""
        if not since:
            return None
        epoch, _, number = since.partition("-")
        if epoch != self.epoch or not number.isdigit():
            return None
        return int(number)

    def rows_since(
        self, since: int | None, limit: int, now: float
    ) -> tuple[list[TaskRow], int, bool]:
        """Rows changed after sequence ``since`` (None: the whole window), oldest change
        first, at most ``limit``; the sequence number to continue from, and whether more
        remain (the newest ``limit`` of the window on a first call)."""
        if since is None:
            held = list(self.rows.values())
            cut = len(held) > limit
            chosen = held[-limit:] if cut else held
            return [dict(r) for _, r in chosen], self.seq, cut  # type: ignore[misc]
        changed = [(s, r) for s, r in self.rows.values() if s > since]
        changed.sort(key=lambda item: item[0])
        cut = len(changed) > limit
        chosen = changed[:limit]
        last = chosen[-1][0] if cut else self.seq
        return [dict(r) for _, r in chosen], last, cut  # type: ignore[misc]

    def group_models(self) -> list[GroupModel]:
        """The groups, the latest active first, at most ``max_groups``."""
        ordered = sorted(self.groups.items(), key=lambda kv: -kv[1].last)[: self.max_groups]
        return [
            {
                "key": key,
                "label": g.label,
                "kind": g.kind,
                "done": g.done,
                "running": g.running,
                "waiting": g.waiting,
                "failed": g.failed,
            }
            for key, g in ordered
        ]


#: What the waiting-tasks read leaves out: every attempt that runs or ended (one query: the
#: GCS ands its filters).
NOT_WAITING = ("FINISHED", "FAILED", "RUNNING", "RUNNING_IN_RAY_GET", "RUNNING_IN_RAY_WAIT")
#: What the running-and-failed read leaves out: the finished and the waiting attempts.
NOT_ACTIVE = ("FINISHED", *WAITING_STATES)
