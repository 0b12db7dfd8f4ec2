"""Run insights: statistics and plain-language findings computed from a recorded run's model.

Pure functions over plain data (the model of :meth:`eugo_jupyter.hpc.Run.model`), so the panel
can show the same findings. A finding is a :class:`Finding` (``kind``, ``function``,
``message``, ``fix``); kinds, the pitfalls Ray's documentation lists:

- ``blocking_too_early``: get on each fresh future in a loop that keeps submitting;
- ``in_order_processing``: results fetched in submission order while later ones were done;
- ``all_at_once``: one get on many results, then processing them one by one with workers idle;
- ``tiny_tasks``: tasks so short that scheduling overhead rivals the work;
- ``straggler``: one task far slower than its peers;
- ``long_tail``: a fan-out ending on its longest calls, with workers idle;
- ``large_argument``: the same large object serialized into many calls;
- ``large_closure``: a function capturing a large object from the notebook;
- ``unnecessary_get``: a large result fetched only to be passed into another call;
- ``get_too_large``: one get on more data than fits where it lands;
- ``get_in_async``: a blocking get inside async code;
- ``returned_put``: a task returning ``put(value)`` instead of the value;
- ``nested_get``: get inside a task on futures passed to it inside a list;
- ``global_state``: a task or actor assigning a module global;
- ``stale_global``: an actor still using a global the notebook changed after it was created;
- ``redefined_in_loop``: a function or actor class decorated again on every iteration;
- ``gpu_unused``: GPU requested but never used (from the GPU audit's records);
- ``cpu_overrequest`` / ``cpu_underrequest``: a function's CPU use far from its ``num_cpus``;
- ``cpu_behind_gpu``: CPU-only tasks waiting on GPU tasks that wait for a device, while CPUs idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..._gpu_use import AuditRecord
from . import _cpus, _pipeline, _scheduling, _usage
from ._base import KINDS, Analysis, Finding, FunctionStats, doc_url, finished
from ._scheduling import function_stats

__all__ = [
    "KINDS",
    "Analysis",
    "Finding",
    "FunctionStats",
    "analyze",
    "doc_url",
    "findings",
    "function_stats",
]


def findings(
    model: Mapping[str, Any],
    gpu_audit: Sequence[AuditRecord] | None,
    stats: Sequence[FunctionStats],
) -> list[Finding]:
    """Every pitfall seen in the run, each with the fix (``stats``: its :func:`function_stats`)."""
    stragglers, straggling = _scheduling.stragglers(model)
    return [
        *_usage.global_state(model),
        *_cpus.cpu_sizing(model),
        *_usage.stale_globals(model),
        *_scheduling.blocking_too_early(model),
        *_scheduling.in_order(model),
        *_pipeline.all_at_once(model),
        *_usage.gets_in_async(model),
        *_usage.unnecessary_gets(model),
        *_usage.oversized_gets(model),
        *_usage.nested_gets(model),
        *_usage.returned_puts(model),
        *_scheduling.tiny_tasks(stats),
        *stragglers,
        *_scheduling.long_tails(model, straggling),
        *_usage.large_arguments(model),
        *_usage.large_closures(model),
        *_usage.redefinitions(model),
        *_usage.gpu_unused(gpu_audit or []),
        *_usage.cpu_behind_gpu(model),
    ]


def analyze(model: Mapping[str, Any], gpu_audit: Sequence[AuditRecord] | None = None) -> Analysis:
    """``{"summary", "functions", "findings"}`` for a recorded run's model.

    >>> model = {"duration": 1.0, "cluster": {"CPU": 2.0}, "tasks": [], "gets": []}
    >>> analyze(model)["findings"]
    []
    """
    stats = function_stats(model)
    done = finished(model["tasks"])
    busy = sum(t["end"] - t["start"] for t in done)
    cpu_seconds = sum((t["end"] - t["start"]) * t["request"].get("CPU", 0.0) for t in done)
    duration = float(model.get("duration") or 0.0)
    cpus = float(model.get("cluster", {}).get("CPU", 0.0))
    summary = {
        "tasks": len(model["tasks"]),
        "duration_s": duration,
        "busy_s": busy,
        "speedup": busy / duration if duration > 0 else 0.0,
        "utilisation": cpu_seconds / (duration * cpus) if duration > 0 and cpus else 0.0,
        "cpus": cpus,
        "gets": len(model["gets"]),
    }
    return {"summary": summary, "functions": stats, "findings": findings(model, gpu_audit, stats)}
