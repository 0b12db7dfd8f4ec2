"""The shapes the insights produce (:class:`Finding`, :class:`FunctionStats`) and the helpers
every detector shares. Pure: plain data in, plain data out.

>>> finding("tiny_tasks", "f", "It ran.", "Batch it.")["kind"]
'tiny_tasks'
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from ..._units import format_bytes

__all__ = ["Analysis", "Finding", "FunctionStats", "finding"]

Task = Mapping[str, Any]  # a TaskRecord of eugo_jupyter.hpc._profile.recording, read as a mapping


class Finding(TypedDict):
    """One pitfall seen in a run: what happened (``message``) and what to change (``fix``)."""

    kind: str
    function: str
    message: str
    fix: str


class FunctionStats(TypedDict):
    """Per function: calls, durations, speedup over one-after-another, utilisation, args."""

    function: str
    tasks: int
    finished: int
    failed: int
    median_s: float | None
    p95_s: float | None
    max_s: float | None
    busy_s: float
    span_s: float
    speedup: float | None
    utilisation: float | None
    workers: int
    peak_parallel: int
    arg_bytes_median: float
    arg_bytes_max: int
    asks: str


class Analysis(TypedDict):
    """What :func:`eugo_jupyter.hpc._insights.analyze` returns."""

    summary: dict[str, Any]
    functions: list[FunctionStats]
    findings: list[Finding]


def finding(kind: str, function: str, message: str, fix: str) -> Finding:
    return {"kind": kind, "function": function, "message": message, "fix": fix}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.0
    """
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def finished(tasks: Iterable[Task]) -> list[Task]:
    return [t for t in tasks if t.get("start") is not None and t.get("end") is not None]


def by_function(tasks: Iterable[Task]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        groups[task["function"]].append(task)
    return dict(groups)


def peak_concurrency(tasks: Sequence[Task]) -> int:
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def mb(size: float) -> str:
    """Bytes for a sentence, in the one format the package uses: ``'32 MiB'``."""
    return format_bytes(size)
