"""``eugo.hpc.profile()``: record every call and ``get`` of a block, then report what slowed it.

While a profile records, each call made through ``eugo.hpc`` (``@distribute`` functions, actor
methods and ``map``) is submitted through :class:`~.recording.Recorder`, which also learns, as
a second Ray object, when the call ran and on which worker (measured on the worker). The caller
still receives the call's own future. Outside a profile the submission path is untouched: one
module-level ``None`` check.

The recorded run becomes a plain model (:meth:`Run.model`) that :mod:`.._insights` analyzes;
:class:`~.report.Report` renders it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ... import _hooks
from ..._gpu_use import AuditRecord
from .. import _session
from .._insights import analyze
from .recording import Recorder, RunModel, TaskRecord
from .report import Report
from .worker import Timing

__all__ = ["Report", "Run", "profile"]


class Run(Recorder):
    """A recording in progress (or finished): calls submitted and ``get`` calls made in a block.

    >>> with eugo.hpc.profile() as run:            # doctest: +SKIP
    ...     eugo.hpc.get([square(i) for i in range(100)])
    >>> run.report()                               # doctest: +SKIP
    """

    def __init__(self) -> None:
        super().__init__()
        self.ended: float | None = None
        self.cluster: dict[str, float] = {}
        self.memory: dict[str, float] = {}
        self._timings: list[Timing | None] | None = None

    def __enter__(self) -> Run:
        import ray

        _session.ensure()
        self.cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
        self.memory = _local_memory()
        self.started = time.time()
        _hooks.set_recorder(self)  # raises ConflictError while another profile records
        return self

    def __exit__(self, *exc: Any) -> None:
        _hooks.set_recorder(None)
        self.ended = time.time()
        self._sizes.clear()
        self._got.clear()
        from . import findings

        findings.save_later(self)  # the EugoHPC Manager shows the findings on the card

    def _collect(self, wait: float) -> list[Timing | None]:
        import ray

        # What a complete collection found holds until a call is recorded (the refs only grow).
        if self._timings is not None and len(self._timings) == len(self._timing_refs):
            return self._timings
        refs = [r for r in self._timing_refs if r is not None]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=wait, fetch_local=True)
        timings: list[Timing | None] = []
        complete = True
        for ref in self._timing_refs:
            if ref is None:
                timings.append(None)
                continue
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                timings.append(None)
                complete = False
                continue
            try:
                timings.append(ray.get(ref))
            except Exception:  # noqa: BLE001 - the task failed; its own future says why
                timings.append({"failed": True})
        if complete:
            self._timings = timings
        return timings

    def model(self, wait: float = 60.0) -> RunModel:
        """The run as plain data; times are seconds since the block began.

        Waits up to ``wait`` seconds for calls still running. ``tasks`` holds one
        :class:`~.recording.TaskRecord` per call, ``gets`` one :class:`~.recording.GetRecord`
        per ``get``; ``duration`` and ``cluster`` (resource totals) describe the run.
        """
        t0 = self.started if self.started is not None else time.time()
        timings = self._collect(wait)
        tasks: list[TaskRecord] = []
        for task, timing in zip(self._tasks, timings, strict=False):
            row: TaskRecord = {**task}  # type: ignore[typeddict-item]
            row["submit"] = task["submit"] - t0
            if timing and not timing.get("failed"):
                node = timing["node"] or "?"
                row.update(
                    {
                        "start": timing["start"] - t0,
                        "end": timing["end"] - t0,
                        "pid": timing["pid"],
                        "node": node,
                        "worker": f"{node[:8]}:{timing['pid']}",
                        "status": "finished",
                        "returned_put": timing.get("returned_put", False),
                        "nested_gets": timing.get("nested_gets", 0),
                        "nested_get_s": timing.get("nested_get_s", 0.0),
                        "cpu_s": timing.get("cpu_s"),
                        "optimizations": timing.get("optimizations", []),
                    }
                )
            else:
                status = "failed" if timing else "unknown"
                row.update(
                    {
                        "start": None,
                        "end": None,
                        "pid": None,
                        "node": None,
                        "worker": None,
                        "status": status,
                    }
                )
            tasks.append(row)
        gets = [{**g, "start": g["start"] - t0, "end": g["end"] - t0} for g in self._gets]
        end = self.ended if self.ended is not None else time.time()
        return {
            "duration": end - t0,
            "cluster": dict(self.cluster),
            "memory": dict(self.memory),
            "tasks": tasks,
            "gets": gets,  # type: ignore[typeddict-item]
            # Calls on actors that kept a global the notebook changed (see hpc/_freshness.py):
            # {"actor", "name", "actor_value", "notebook_value"} each; read with .get().
            "stale_globals": list(self.stale_globals),  # type: ignore[typeddict-unknown-key]
            "resumed": list(self.resumed_runs),
        }

    def report(self, gpu_audit: list[AuditRecord] | None = None, wait: float = 60.0) -> Report:
        """Per-function statistics and findings with fixes; renders as tables and a timeline.

        ``gpu_audit``: records of an ``eugo.gpu.audit()``; when omitted, those of the latest
        audit started (``eugo.gpu.audit_records()``, read through ``eugo_jupyter/_hooks.py``).

        >>> report = run.report()                      # doctest: +SKIP
        >>> [f["kind"] for f in report.findings]       # doctest: +SKIP
        ['blocking_too_early']
        """
        model = self.model(wait)
        audit = list(gpu_audit) if gpu_audit is not None else _hooks.latest_audit_records()
        return Report(model, analyze(model, audit))


def _local_memory() -> dict[str, float]:
    """Where a get's results land: this node's object store and this machine's free memory."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    stores = [
        n["Resources"].get("object_store_memory", 0.0) for n in ray.nodes() if n["NodeID"] == here
    ]
    store = stores[0] if stores else 0.0
    try:
        free = float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # not a POSIX system
        free = 0.0
    limit = min(v for v in (store, free) if v) if store or free else 0.0
    return {"object_store": float(store), "available": free, "limit": float(limit)}


def profile() -> Run:
    """Record the calls and ``get`` calls of a ``with`` block for :meth:`Run.report`.

    >>> import eugo_jupyter as eugo
    >>> with eugo.hpc.profile() as run:                     # doctest: +SKIP
    ...     results = eugo.hpc.get([work(x) for x in range(200)])
    >>> run.report()                                        # doctest: +SKIP
    """
    return Run()
