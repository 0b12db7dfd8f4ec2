"""Worker side of ``map``/``imap``: a batch's items under the run's policy.

A batch is ``(start, items)`` or ``(start, items, policy)`` with ``policy = (collect, retries,
timeout)``. Without a policy the loop is the plain one (a ~10 µs item pays nothing extra).

- ``retries``: an item that raises is called again on this worker, up to that many times; only
  its last outcome is kept, so a result is used once.
- ``timeout``: each call runs under a ``SIGALRM`` timer (the worker runs tasks on its main
  thread), whose handler raises a ``BaseException`` inside the item (a user's ``except
  Exception`` does not swallow it); the item becomes an ``ItemTimeout`` and the batch goes on.
  Code that never returns to Python (a C loop holding the GIL) cannot be interrupted that way:
  ``faulthandler``'s watchdog, a C thread that needs no GIL, then ends the worker process after
  a grace period, Ray replaces it, and the driver sees the batch lost (see ``Run`` in
  :mod:`._run`). Nothing calls ``ray.cancel``, which aborts the driver when the task it
  cancels is finishing (Ray 2.60, see :mod:`._batching`).
- ``collect``: a failed item leaves ``None`` in its slot and a :class:`Failure` in ``failures``,
  and the batch goes on; otherwise the batch stops at the first failure, keeping what finished.

>>> run_items(lambda x: 10 // x, {}, (0, [1, 2, 0, 5], (True, 0, None))).failures[2].kind
'ZeroDivisionError'
"""

from __future__ import annotations

import faulthandler
import reprlib
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..exceptions import ItemTimeout
from ._batching import Failure

__all__ = ["Batch", "grace", "run_items"]

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60


def grace(timeout: float) -> float:
    """Seconds past ``timeout`` before a worker that does not interrupt is ended."""
    return 2.0 + 0.1 * timeout


class Batch:
    """A batch's outcome when an item failed or was retried: results by offset (``None`` where
    one failed), ``{offset: Failure}``, and how many calls were retries."""

    __slots__ = ("failures", "results", "retried")

    def __init__(self, results: list[Any], failures: dict[int, Failure], retried: int) -> None:
        self.results = results
        self.failures = failures
        self.retried = retried

    def __reduce__(self) -> tuple[Any, ...]:
        return (Batch, (self.results, self.failures, self.retried))


class _Expired(BaseException):
    """Raised inside an item by the timer: a BaseException, past a user's ``except
    Exception``."""


def _expire(signum: int, frame: Any) -> None:
    raise _Expired


def run_items(fn: Callable[..., Any], shared: dict[str, Any], unit: tuple[Any, ...]) -> Any:
    """``fn`` on each item of a batch: the results, or a :class:`Batch` if any item failed."""
    start, items = unit[0], unit[1]
    if len(unit) == 2:
        return _plain(fn, shared, start, items)
    collect, retries, timeout = unit[2]
    timed = timeout is not None and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _expire) if timed else None
    try:
        return _policed(fn, shared, start, items, collect, retries, timeout if timed else None)
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
            signal.signal(signal.SIGALRM, previous)


def _where(start: int, offset: int, item: Any) -> tuple[str, int, str]:
    shown = _repr.repr(item)
    return f"item #{start + offset} ({shown})", start + offset, shown


def _plain(fn: Callable[..., Any], shared: dict[str, Any], start: int, items: list[Any]) -> Any:
    results: list[Any] = []
    append = results.append  # the loop runs ~10 µs items: keep its per-item cost minimal
    try:
        if shared:
            for item in items:
                append(fn(item, **shared))
        else:
            for item in items:
                append(fn(item))
    except Exception as exc:  # noqa: BLE001 - reported with the item that caused it
        offset = len(results)
        where, index, shown = _where(start, offset, items[offset])
        return Batch(results, {offset: Failure(where, exc, index, shown)}, 0)
    return results


def _policed(
    fn: Callable[..., Any],
    shared: dict[str, Any],
    start: int,
    items: list[Any],
    collect: bool,
    retries: int,
    timeout: float | None,
) -> Any:
    results: list[Any] = []
    failures: dict[int, Failure] = {}
    retried = 0
    for offset, item in enumerate(items):
        attempts = 0
        failure = None
        while True:
            attempts += 1
            try:
                if timeout is not None:
                    faulthandler.dump_traceback_later(
                        timeout + grace(timeout), exit=True, file=sys.stderr
                    )
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                value = fn(item, **shared)
                if timeout is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    faulthandler.cancel_dump_traceback_later()
            except _Expired:
                faulthandler.cancel_dump_traceback_later()
                where, index, shown = _where(start, offset, item)
                error = ItemTimeout(
                    f"{where} was still running after timeout={timeout} s and was abandoned.",
                    index,
                    shown,
                    timeout,
                )
                failure = Failure(where, error, index, shown, attempts)
                break  # a hang is not retried: it would most likely hang again
            except Exception as exc:  # noqa: BLE001 - reported with the item that caused it
                if timeout is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    faulthandler.cancel_dump_traceback_later()
                if attempts <= retries:
                    retried += 1
                    continue
                where, index, shown = _where(start, offset, item)
                failure = Failure(where, exc, index, shown, attempts)
                break
            else:
                results.append(value)
                break
        if failure is not None:
            failures[offset] = failure
            if not collect:
                break
            results.append(None)
    if failures or retried:
        return Batch(results, failures, retried)
    return results
