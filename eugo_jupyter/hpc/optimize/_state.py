"""The per-process cache of compiled versions, and what a profile reads of it.

One :class:`~._runtime.Entry` per cache key (see :mod:`._candidates`) lives in :data:`ENTRIES`
for the life of the process: a Ray worker compiles an unchanged function once, however many
tasks or batches it runs (and loads it from the node cache, :mod:`._nodecache`, when another
process of its node compiled it first). :func:`snapshot` is what the worker side of
``eugo.hpc.profile()`` attaches to each call's timing; it imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["ENTRIES", "Stats", "snapshot"]

#: cache key -> Entry, for this process.
ENTRIES: dict[str, Any] = {}


class Stats(TypedDict, total=False):
    """One function's optimization in one process (cumulative since the process started)."""

    function: str
    key: str
    pid: int
    state: str  #: "compiled", "python" (kept plain), "verifying", "preparing" (compiling), "new"
    how: str
    reason: str
    compile_s: float  #: seconds compiling
    compiles: int  #: versions compiled
    load_s: float  #: seconds loading from the node cache
    loads: int  #: versions loaded from the node cache (compiled by another process)
    node_cache: str  #: the node cache folder, or why there is none
    versions: list[str]
    verified: int
    max_diff: float
    plain_s: float | None
    compiled_s: float | None
    calls: int  #: calls that took the checked path (not those straight to numba's dispatcher)
    preparing_calls: int  #: calls run in Python while numba started and compiled beside them
    numba_started_early: bool  #: numba was started here before a call needed it (_prewarm)
    at: float  #: when a snapshot read them (time.monotonic() of the process)
    python_fallbacks: int
    fallback_error: str
    difference: str
    help: list[dict[str, Any]]
    offload: str  #: what GPU offload did, or why it was not tried
    per_cost: str  #: decided again for costlier calls ("compiled version used from the 4th ...")


def snapshot() -> list[Stats]:
    """The stats of every function optimized in this process, with the time they were read."""
    import time

    now = time.monotonic()
    return [{**entry.stats(), "at": now} for entry in ENTRIES.values()]
