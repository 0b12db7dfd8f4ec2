"""The shapes the insights produce (:class:`Finding`, :class:`FunctionStats`) and the helpers
every detector shares. Pure: plain data in, plain data out.

>>> finding("tiny_tasks", "f", "It ran.", "Batch it.")["kind"]
'tiny_tasks'
>>> doc_url("long_tail")
'https://eugo-jupyter.readthedocs.io/en/latest/guides/run-report.html#finding-long-tail'
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from ..._units import format_bytes

__all__ = ["DOCS_URL", "KINDS", "Analysis", "Finding", "FunctionStats", "doc_url", "finding"]

#: Every kind of finding a run report can emit, with its one-line title. A kind not listed here
#: is refused by :func:`finding`, and ``tests/test_docs.py`` checks that each one has its anchor
#: (``finding-<kind>``) in the run-report guide: a new finding cannot ship without its docs.
KINDS: dict[str, str] = {
    "blocking_too_early": "Blocking too early",
    "in_order_processing": "Results in submission order",
    "all_at_once": "One get on results that finished at different times",
    "get_in_async": "A blocking get inside async code",
    "unnecessary_get": "An unnecessary get",
    "get_too_large": "One get too large",
    "nested_get": "A nested get",
    "returned_put": "A task returns put",
    "tiny_tasks": "Tiny tasks",
    "straggler": "A straggler",
    "long_tail": "A long tail",
    "large_argument": "A large argument",
    "large_closure": "A large closure",
    "global_state": "A module global",
    "stale_global": "An actor on a stale global",
    "redefined_in_loop": "Redefined in a loop",
    "gpu_unused": "A GPU reserved and unused",
    "cpu_behind_gpu": "CPU work behind GPU work",
    "cpu_overrequest": "More CPUs requested than used",
    "cpu_underrequest": "More CPUs used than requested",
}

#: Where the docs site lives; ``$EUGO_DOCS_URL`` points the report's links at another build
#: (a local ``docs/_build/html/`` or a mirror). Read when a link is made.
DOCS_URL = "https://eugo-jupyter.readthedocs.io/en/latest/"

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
    if kind not in KINDS:
        raise ValueError(f"unknown finding kind {kind!r}: add it to KINDS and to the docs")
    return {"kind": kind, "function": function, "message": message, "fix": fix}


def doc_url(kind: str) -> str:
    """The docs page and anchor that explain a finding ``kind`` (Sphinx writes the label
    ``finding-long_tail`` as the HTML id ``finding-long-tail``)."""
    base = os.environ.get("EUGO_DOCS_URL") or DOCS_URL
    return f"{base.rstrip('/')}/guides/run-report.html#finding-{kind.replace('_', '-')}"


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
