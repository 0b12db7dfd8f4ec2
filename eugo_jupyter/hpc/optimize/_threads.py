"""Threads inside a task follow its ``num_cpus``: numba's pool, BLAS/OpenMP, numexpr.

Ray sets ``OMP_NUM_THREADS`` for a task, but numba ignores it (it sizes its pool from the CPU
affinity or ``NUMBA_NUM_THREADS``), so a ``num_cpus=1`` task running a ``parallel=True`` kernel
would take every core of its node. :func:`limit` is called before a compiled version runs.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["limit", "threads_for"]

_applied: dict[str, int] = {}


def threads_for(num_cpus: float | None) -> int:
    """Threads a call with ``num_cpus`` may use: at least one, whole CPUs.

    >>> threads_for(None), threads_for(0.5), threads_for(4)
    (1, 1, 4)
    """
    return max(1, math.floor(num_cpus or 1))


def limit(num_cpus: float | None) -> int:
    """Cap numba's, BLAS/OpenMP's and numexpr's threads for the calls of this thread."""
    want = threads_for(num_cpus)
    numba: Any = sys.modules.get("numba")
    if numba is not None:
        cap = min(want, int(numba.config.NUMBA_NUM_THREADS))
        if numba.get_num_threads() != cap:
            numba.set_num_threads(cap)
    if _applied.get("pools") != want:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            threadpool_limits(limits=want)
        numexpr: Any = sys.modules.get("numexpr")
        if numexpr is not None:
            numexpr.set_num_threads(want)
        _applied["pools"] = want
    return want
