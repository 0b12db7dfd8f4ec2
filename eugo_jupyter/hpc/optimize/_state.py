"""The per-process cache of compiled versions, and what a profile reads of it.

One :class:`~._runtime.Entry` per cache key (see :mod:`._candidates`) lives in :data:`ENTRIES`
for the life of the process: a Ray worker compiles an unchanged function once, however many
tasks or batches it runs. :func:`snapshot` is what the worker side of ``eugo.hpc.profile()``
attaches to each call's timing; it imports nothing heavy.
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
    state: str  #: "compiled", "python" (kept plain), "verifying", "new"
    how: str
    reason: str
    compile_s: float
    versions: list[str]
    verified: int
    max_diff: float
    plain_s: float | None
    compiled_s: float | None
    calls: int
    python_fallbacks: int
    fallback_error: str
    difference: str
    help: list[dict[str, Any]]
    offload: str  #: what GPU offload did, or why it was not tried


def snapshot() -> list[Stats]:
    """The stats of every function optimized in this process."""
    return [entry.stats() for entry in ENTRIES.values()]
