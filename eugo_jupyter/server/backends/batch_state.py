"""Reading a batch cluster's state: the jobs as the scheduler reports them, as the card shows them.

Reads only, changes nothing (the manager acts on an end once, :meth:`.batch.BatchBackend.release`):
the head's address from the shared folder, each job's state, why a pending job waits (and whether
waiting can ever help), why an ended worker or head ended, from the scheduler or the job's log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...exceptions import SchedulerError
from .base import Observed

__all__ = ["JobState", "ended_sentence", "observe"]


@dataclass
class JobState:
    """One job as the scheduler reports it, in its own words and in the base's.

    ``phase`` is what the base acts on: "pending", "running" or "ended"; ``end`` says how an
    ended job ended when the scheduler knows ("timeout", "cancelled", "failed", "completed").
    """

    id: str
    state: str  # the scheduler's own word (RUNNING, PENDING, qw, r...), shown on the card
    phase: str
    reason: str = ""  # the scheduler's pending reason or message, raw
    nodes: list[str] = field(default_factory=list)
    time_left: int | None = None
    end: str | None = None


class Scheduler(Protocol):
    """What the reading uses of a scheduler (a :class:`.batch.BatchBackend`)."""

    @property
    def label(self) -> str: ...
    def record_part(self, record: dict[str, Any]) -> dict[str, Any]: ...
    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]: ...
    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]: ...
    def log_path(self, folder: Path, job: dict[str, Any]) -> Path: ...


def observe(backend: Scheduler, record: dict[str, Any]) -> Observed:
    """What the scheduler and the shared folder say now; reads only, changes nothing."""
    part = backend.record_part(record)
    jobs = part.get("jobs", [])
    spec = record.get("spec") or {}
    observed = Observed(address=record.get("address"), dashboard_url=record.get("dashboard_url"))
    head_file = Path(part.get("dir", "/nonexistent")) / "head"
    if observed.address is None and head_file.exists():
        address, _, dashboard = head_file.read_text().strip().partition(" ")
        observed.address, observed.dashboard_url = address, dashboard or None
    public = {"dir": part.get("dir"), "walltime": part.get("walltime")}
    try:
        states = backend.query([j["id"] for j in jobs], record)
    except SchedulerError as exc:
        observed.waiting = True
        observed.detail = {**public, "jobs": [], "error": str(exc)}
        return observed
    rows = []
    for job in jobs:
        seen = states.get(job["id"]) or JobState(job["id"], "GONE", "ended")
        reason = None
        if seen.phase == "pending":
            reason, never = backend.pending_sentence(seen, spec)
            if never:
                observed.blocked = (
                    f"{backend.label} cannot run job {job['id']} ({job['role']}) as asked: "
                    f"{reason}."
                )
            observed.waiting = True
        elif job["role"] == "worker" and seen.phase == "ended":
            log = backend.log_path(Path(part.get("dir", "")), job)
            reason = _last_line(log) or None
            observed.blocked = (
                f"Worker job {job['id']} ended ({seen.state})"
                + (f": {reason}" if reason else "")
                + f". Its log: {log}. Shut the cluster down and launch again."
            )
        rows.append(
            {
                "id": job["id"],
                "role": job["role"],
                "state": seen.state,
                "reason": reason,
                "nodes": seen.nodes,
                "time_left": seen.time_left,
                "_end": seen.end,
                "_phase": seen.phase,
            }
        )
    observed.nodes_expected = sum(r["_phase"] != "ended" for r in rows)
    head = next((r for r in rows if r["role"] == "head"), None)
    if head is not None and head["_phase"] == "ended":
        observed.ended = ended_sentence(backend, head, part)
    observed.detail = {
        **public,
        "jobs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
    }
    return observed


def ended_sentence(backend: Scheduler, head: dict[str, Any], part: dict[str, Any]) -> str:
    """Why the cluster ended, from how its head's job ended."""
    job, state, end = head["id"], head["state"], head.get("_end")
    if end == "timeout":
        return (
            f"The wall time ({part.get('walltime')}) ran out: {backend.label} ended job {job} "
            "(the Ray head), and the cluster with it. Launch again with a longer wall time."
        )
    if end == "cancelled":
        return f"Job {job} (the Ray head) was cancelled outside the manager; the cluster ended."
    if state == "GONE":
        return f"{backend.label} no longer knows job {job} (the Ray head): the cluster has ended."
    log = backend.log_path(Path(part.get("dir", "")), head)
    last = _last_line(log)
    return (
        f"Job {job} (the Ray head) ended with {backend.label} state {state}"
        + (f": {last}" if last else "")
        + f". Its log: {log}."
    )


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
