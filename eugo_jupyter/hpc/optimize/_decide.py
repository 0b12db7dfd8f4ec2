"""Does compiling pay? The break-even from measured time, compile cost and the calls known.

Before anything is compiled the saving per call is estimated as ``ASSUMED_SAVING`` of the
measured plain time (compiled loops usually run 10x to 1000x faster), and the compile cost as
the last one measured in this process, else ``COMPILE_ESTIMATE_S``; when the node cache holds
the function already, as ``LOAD_ESTIMATE_S`` (loading it). The first compile or load in a fresh
process also pays numba's start (``NUMBA_START_S``). When the number of calls
this process will make is known (a ``map``'s items per worker, the partitions per worker), the
function is compiled only when those calls save more than the compile costs. When it is not
known (single task calls), it is compiled: ``optimize=True`` asked for it. After the first
calls the measured times decide for good: a compiled version slower than Python is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ASSUMED_SAVING",
    "COMPILE_ESTIMATE_S",
    "Decision",
    "before_compile",
    "break_even",
    "fmt",
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


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"
