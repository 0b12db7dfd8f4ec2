"""``backups=True``: a copy of a straggling unit on an idle slot near the end of a run.

Spark's speculation rule: once :data:`AFTER_SHARE` of the units have finished and the input
is exhausted, a unit running longer than :data:`MULTIPLIER` times the median unit (and at
least :data:`MIN_EXTRA_S` longer than it) gets one copy on an idle slot. The engine keeps the
first result that comes back and lets go of the other copy: it is never ``ray.cancel``-ed
(cancelling a task that is finishing aborts the driver on Ray 2.60, see :mod:`._batching`);
it runs to its end on its worker and its result is dropped. A function with side effects may
so run twice on one unit, which is why it is off by default.

>>> s = Straggling(slots=2)
>>> for seconds in (0.1, 0.1, 0.1, 0.1):
...     s.finished(seconds)
>>> s.threshold()
0.35
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["AFTER_SHARE", "MIN_EXTRA_S", "MULTIPLIER", "Straggling"]

AFTER_SHARE = 0.75
MULTIPLIER = 1.5
MIN_EXTRA_S = 0.25
#: Finished units needed before a median means anything.
MIN_FINISHED = 3


class Straggling:
    """Which running units deserve a copy now (the engine asks after each step)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.durations: list[float] = []

    def finished(self, seconds: float) -> None:
        self.durations.append(seconds)

    def threshold(self) -> float | None:
        """Seconds past which a running unit is a straggler, or None while too few finished."""
        if len(self.durations) < MIN_FINISHED:
            return None
        median = statistics.median(self.durations)
        return max(MULTIPLIER * median, median + MIN_EXTRA_S)

    def due(self, refs_of: dict[Any, list[Any]], now: float) -> list[Any]:
        """The units to copy: the longest-running stragglers, one copy each, as many as
        slots are idle."""
        running = len(refs_of)
        idle = self.slots - sum(len(refs) for refs in refs_of.values())
        limit = self.threshold()
        if idle <= 0 or limit is None:
            return []
        if len(self.durations) < AFTER_SHARE * (len(self.durations) + running):
            return []
        late = [
            unit for unit, refs in refs_of.items() if len(refs) == 1 and now - unit.began > limit
        ]
        late.sort(key=lambda unit: unit.began)
        return late[:idle]
