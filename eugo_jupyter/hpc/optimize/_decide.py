"""Does compiling pay? The break-even from measured time, compile cost and the calls known.

Before anything is compiled the saving per call is estimated as ``ASSUMED_SAVING`` of the
measured plain time (compiled loops usually run 10x to 1000x faster), and the compile cost as
the last one measured in this process, else ``COMPILE_ESTIMATE_S``; when the node cache holds
the function already, as ``LOAD_ESTIMATE_S`` (loading it). The first compile or load in a fresh
process also pays numba's start (``NUMBA_START_S``). When the number of calls
this process will make is known (a ``map``'s items per worker, the partitions per worker), the
function is compiled only when those calls save more than the compile costs. When it is not
known (single task calls), it is compiled: ``optimize=True`` asked for it.

A decision made on cost (kept Python by the break-even, or a verified compiled version dropped
as slower than Python on the calls measured) holds for calls of about that cost only
(:class:`PerCost`): a call whose plain cost, measured or predicted from its arguments' sizes
(:func:`size_of`), is ``FAR`` times or more what the decision rested on decides again. A version
dropped as slower is then used (it was verified; its answers do not change with the size), and
a function kept Python goes through the break-even again. A difference in the answers is never
decided again.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ASSUMED_SAVING",
    "COMPILE_ESTIMATE_S",
    "FAR",
    "Decision",
    "PerCost",
    "about_the_same",
    "typical",
    "before_compile",
    "equal_footing",
    "break_even",
    "size_of",
    "switch_text",
]

#: The share of the plain time a compiled version is assumed to save, before it is measured.
ASSUMED_SAVING = 0.9
#: Seconds one compile is assumed to cost before one was measured in this process.
COMPILE_ESTIMATE_S = 0.3
#: What the first compile in a fresh process adds: importing and initializing numba and LLVM
#: (0.5 s measured on an idle machine, 2 s on a busy one).
NUMBA_START_S = 1.0
#: Seconds loading a version from the node cache is assumed to take (20 to 60 ms measured).
LOAD_ESTIMATE_S = 0.05

#: A decision made on cost holds for calls up to this many times costlier than it rested on.
FAR = 10.0

_SIZED = frozenset({list, tuple, dict, str, bytes, range})

#: Calls measured far costlier in a row that decide again (one may be a preempted call).
FAR_CALLS = 3

_measured: list[float] = []  # compile seconds measured in this process, latest last


def note_compile(seconds: float) -> None:
    """Remember a measured compile (later estimates use it)."""
    _measured.append(seconds)


def compile_estimate(numba_was_loaded: bool = True, cached: bool = False) -> float:
    """The last compile measured in this process, else the first one's estimate; a load's when
    the node cache holds the function (``cached``)."""
    start = 0.0 if numba_was_loaded else NUMBA_START_S
    if cached:
        return LOAD_ESTIMATE_S + start
    if _measured:
        return _measured[-1]
    return COMPILE_ESTIMATE_S + start


def break_even(plain_s: float, compiled_s: float, compile_s: float) -> int | None:
    """Calls after which the compile has paid for itself; None when compiled is not faster.

    >>> break_even(0.010, 0.001, 0.3)
    34
    """
    saving = plain_s - compiled_s
    if saving <= 0:
        return None
    return max(1, math.ceil(compile_s / saving))


@dataclass
class Decision:
    compile: bool
    text: str


def before_compile(
    plain_s: float,
    expected_calls: int | None,
    estimate: float | None = None,
    cached: bool = False,
) -> Decision:
    """Whether to compile, from the sampled calls' measured plain time.

    >>> before_compile(0.001, 3, estimate=0.3).text
    'compiling pays after about 334 calls per worker; this run has 3 per worker: kept Python'
    >>> before_compile(0.001, 300, estimate=0.05, cached=True).text.split("; ")[0]
    'loading it from the node cache pays after about 56 calls per worker'
    """
    estimate = compile_estimate() if estimate is None else estimate
    calls = break_even(plain_s, plain_s * (1 - ASSUMED_SAVING), estimate) or 1
    what = "loading it from the node cache" if cached else "compiling"
    if expected_calls is None:
        return Decision(True, f"{what} pays after about {calls} calls per worker")
    verdict = "compiled" if expected_calls >= calls else "kept Python"
    text = (
        f"{what} pays after about {calls} calls per worker; this run has {expected_calls} per "
        f"worker: {verdict}"
    )
    return Decision(expected_calls >= calls, text)


def size_of(args: tuple, kwargs: dict | None = None) -> float:
    """What the arguments' sizes are (items of arrays and containers, integers' values): a
    call's plain cost is predicted to grow with it (a loop over them).

    >>> size_of((0.3, 10)), size_of(([1.0] * 5, 2))
    (10.0, 7.0)
    """
    total = 0.0
    for value in args:  # on every call kept Python on cost: the common types first
        kind = type(value)
        if kind is int:
            total += value if value >= 0 else -value
        elif kind is float:
            continue
        elif kind in _SIZED:
            total += len(value)
        elif hasattr(value, "shape"):  # an array
            size = getattr(value, "size", None)
            total += size if isinstance(size, int) else 0
    return total + size_of(tuple(kwargs.values())) if kwargs else total


@dataclass
class PerCost:
    """A decision made on the cost of the calls measured, which holds for calls of about that
    cost: keep Python (the break-even), or drop a verified compiled version (``spare``) that was
    slower than Python on them. :meth:`far` says when a call is far costlier."""

    plain_s: float  #: the plain seconds per call the decision rested on
    floor_s: float  #: the plain seconds per call from which it is decided again
    size: float  #: the arguments' size then (:func:`size_of`)
    inputs: tuple[Any, ...] = ()  #: the break-even's other inputs (count, numba, node cache)
    at_call: int = 0  #: the entry's calls when it was made (the calls left are fewer since)
    far_calls: int = 0  #: measured far costlier in a row (one alone may be the machine's load)
    spare: Any = None  #: the verified compiled version dropped as slower, kept for later

    def far(self, size: float | None = None, plain_s: float | None = None) -> float | None:
        """How many times costlier a call is (predicted from its arguments' ``size``, or its
        measured ``plain_s``) when that is far enough to decide again; else None.

        >>> round(PerCost(2e-6, 2e-5, 10.0).far(size=10.0**6))
        100000
        >>> PerCost(2e-6, 2e-5, 10.0).far(plain_s=3e-6) is None
        True
        """
        if plain_s is None:
            if size is None or size <= self.size * FAR:
                return None
            plain_s = self.plain_s * size / max(self.size, 1.0)
        if plain_s < self.floor_s or plain_s <= 0:
            return None
        return plain_s / self.plain_s if self.plain_s > 0 else math.inf


def switch_text(factor: float, call: int, compiled: bool) -> str:
    """What the stats and the report say when a call far costlier decided again.

    >>> switch_text(1.2e5, 4, True)
    'compiled version used from the 4th call on: calls became 10^5 times costlier'
    """
    power = f"10^{round(math.log10(factor))}" if math.isfinite(factor) else "many"
    what = "compiled version used" if compiled else "decided again"
    return f"{what} from the {_ordinal(call)} call on: calls became {power} times costlier"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def typical(plain_times: list[float]) -> float:
    """The mean plain time of the sampled calls, each counted at most 10 times the median (a
    call preempted by the machine's load is not a costly item).

    >>> typical([1e-6, 1e-6, 1e-6, 0.03])
    3.25e-06
    """
    ceiling = FAR * statistics.median(plain_times)
    return statistics.fmean(min(t, ceiling) for t in plain_times)


def about_the_same(a_s: float, b_s: float) -> bool:
    """Whether two plain costs per call are within ``FAR`` of each other (one decision holds).

    >>> about_the_same(2e-6, 5e-6), about_the_same(2e-6, 0.1)
    (True, False)
    """
    low, high = sorted((a_s, b_s))
    return high <= low * FAR if low > 0 else high == low


#: Runs of each version timed on equal footing, at most (fewer for costly calls).
EQUAL_ROUNDS = 5
#: The most seconds of plain runs spent timing on equal footing.
EQUAL_BUDGET_S = 0.05


def equal_footing(plain: Any, compiled: Any, fresh: Any, plain_s: float) -> tuple[float, float]:
    """The best seconds per call of each version on equal footing: the same arguments (a fresh
    copy from ``fresh()`` for each run, made outside the timing), both warm, taking turns.

    >>> p, c = equal_footing(sum, sum, lambda: ([1, 2],), 1e-6)
    >>> p > 0 and c > 0
    True
    """
    rounds = max(1, min(EQUAL_ROUNDS, int(EQUAL_BUDGET_S / max(plain_s, 1e-9))))
    best = [math.inf, math.inf]
    for _ in range(rounds):
        for i, version in enumerate((plain, compiled)):
            args = fresh()
            began = time.perf_counter()
            version(*args)
            best[i] = min(best[i], time.perf_counter() - began)
    return best[0], best[1]
