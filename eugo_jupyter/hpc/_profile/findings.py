"""Keep a profiled run's findings next to its cluster's record, for the EugoHPC Manager's card.

When a ``with eugo.hpc.profile()`` block ends, :func:`save_later` analyzes the run in a
background thread (its tasks may still be finishing) and writes a small
:class:`~eugo_jupyter.records.RunFindings` through :func:`eugo_jupyter.records.write_findings`.
Only clusters the manager knows (a record whose address is the one this kernel is connected to)
get findings: the embedded Ray has no card to show them on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["cluster_id", "run_findings", "save", "save_later"]


def cluster_id() -> str | None:
    """The id of the manager's record for the cluster this kernel is connected to, else None."""
    from ... import records
    from .. import _session

    connection = _session.held()
    if connection is None or connection.embedded:
        return None
    known = records.list_records()
    for record in known:
        if record.get("address") == connection.address:
            return str(record["id"])
    # Ray may report the head by this machine's address where the record says 127.0.0.1
    host, _, port = connection.address.rpartition(":")
    for record in known:
        r_host, _, r_port = str(record.get("address", "")).rpartition(":")
        if r_port == port and (r_host in (host, "localhost") or r_host.startswith("127.")):
            return str(record["id"])
    return None


def _timeline(model: Mapping[str, Any]) -> dict[str, float]:
    done = [t for t in model["tasks"] if t.get("start") is not None]
    if not done:
        return {"workers": 0, "first_start_s": 0.0, "last_end_s": 0.0, "tail_s": 0.0}
    edges = sorted([(t["start"], 1) for t in done] + [(t["end"], -1) for t in done])
    running = peak = 0
    last_peak_end = 0.0
    for when, step in edges:
        running += step
        if running >= peak:
            peak, last_peak_end = running, when
    last_end = max(t["end"] for t in done)
    # the tail: from the last moment at peak concurrency to the end of the last task
    return {
        "workers": len({t["worker"] for t in done}),
        "first_start_s": min(t["start"] for t in done),
        "last_end_s": last_end,
        "tail_s": max(0.0, last_end - last_peak_end),
    }


def run_findings(report: Any) -> dict[str, Any]:
    """A report as a :class:`~eugo_jupyter.records.RunFindings`."""
    summary = {k: float(v) for k, v in report.summary.items() if isinstance(v, (int, float))}
    return {
        "version": 1,
        "created": time.time(),
        "functions": [str(f["function"]) for f in report.functions],
        "summary": summary,
        "timeline": _timeline(report.model),
        "findings": [
            {k: str(f[k]) for k in ("kind", "function", "message", "fix")} for f in report.findings
        ],
    }


def save(run: Any, target: str | None) -> None:
    """Analyze ``run`` and store its findings for cluster ``target``."""
    from ... import records

    if target is None or not run._tasks:
        return
    records.write_findings(target, run_findings(run.report()))  # type: ignore[arg-type]


def save_later(run: Any) -> threading.Thread | None:
    """Called as a profile ends: store its findings off the notebook's thread; the thread is
    kept on ``run._findings_thread`` so a caller can wait for it."""
    target = cluster_id()
    if target is None:
        return None

    def work() -> None:
        try:
            save(run, target)
        except Exception:  # noqa: BLE001 - the panel's copy must never break the user's run
            pass

    thread = threading.Thread(target=work, name="eugo-run-findings", daemon=True)
    run._findings_thread = thread
    thread.start()
    return thread
