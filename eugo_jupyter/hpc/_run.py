"""One ``map``/``imap`` run on the batching engine (:mod:`._batching`).

A :class:`Run` checks the keywords, builds the engine and ``map``'s planner, and turns each
finished batch into its items' outcomes in :meth:`Run.settle`, the one place every result and
failure passes (a journal of the run hooks in there); :mod:`._imap` keeps them (``map``) or
yields them (``imap``).

Memory: the engine keeps ``IN_FLIGHT_PER_SLOT`` batches per slot in flight and counts the
finished batches ``imap`` still holds against that bound (``units(backlog=)``), and ``imap``
caps a batch at ``max_size`` items, so the input is read, and results are held, only a bounded
way ahead of the consumer, however long the input.

``timeout=``: the workers interrupt an item that runs past it (:mod:`._items`). A worker that
had to be ended instead (code that never returned to Python) loses its batch: ``map`` runs
with Ray's own retries off then (``max_retries=0`` unless given), and the planner splits the
lost batch into single items, so the next loss names the item that hangs, counted as an
``ItemTimeout``. Nothing here calls ``ray.cancel``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .. import _hooks
from ..exceptions import ItemTimeout, MapItemError, OptionsError
from . import _data_location, _session
from ._batching import Engine, Failure, Unit, slots
from ._items import Batch, run_items
from ._map import _first_unpicklable, _Items, _MapPlanner, _unwrap, check_batch_size
from ._options import optimize_mode, request_of
from ._results import Failed

__all__ = ["EARLIER_WAIT", "Run", "run_name"]

#: Seconds a run that stops at a failure waits for the batches before the failing one.
EARLIER_WAIT = 10.0


def _check_policy(errors: Any, retries: Any, timeout: Any) -> None:
    if errors not in ("raise", "collect"):
        raise OptionsError(
            f'errors={errors!r} is not allowed: use "raise" (stop at the first failure) or '
            '"collect" (go on and keep each failure in its slot).'
        )
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise OptionsError(f"retries={retries!r} is not allowed: use a whole number, 0 or more.")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise OptionsError(
            f"timeout={timeout!r} is not allowed: use seconds per item (a number above 0), "
            "or None for no limit."
        )


_run_names: dict[str, int] = {}  # a run's task name -> how many runs took it


def run_name(name: str) -> str:
    """The task name of one run: ``map(square) 14:03:21``, with ``#2`` after a second run of
    that name in the same second. The live panes' progress shows each run as its own bar (two
    runs of one function would count as one otherwise); the profile and ``waiting()`` keep
    the plain name.

    >>> run_name("map(square)").startswith("map(square) ")
    True
    """
    stamped = f"{name} {time.strftime('%H:%M:%S')}"
    count = _run_names[stamped] = _run_names.get(stamped, 0) + 1
    if len(_run_names) > 1000:  # a kernel that ran many maps: forget the old seconds
        _run_names.clear()
        _run_names[stamped] = count
    return stamped if count == 1 else f"{stamped} #{count}"


class Run:
    """One ``map``/``imap`` call: the engine, the planner, and :meth:`settle`."""

    def __init__(
        self,
        fn: Any,
        items: Iterable[Any],
        *,
        batch_size: int | str,
        progress: bool | None,
        shared: Mapping[str, Any] | None,
        errors: str,
        retries: int,
        timeout: float | None,
        backups: bool,
        options: dict[str, Any],
        max_size: int | None = None,
        method: str = "map",
    ) -> None:
        plain, label, opts = _unwrap(fn, options)
        check_batch_size(batch_size)
        _check_policy(errors, retries, timeout)
        if shared is not None and not isinstance(shared, Mapping):
            raise TypeError(
                "shared= takes a dict of keyword arguments passed to every call, such as "
                "shared={'model': model}; the function is then called as fn(item, model=model)."
            )
        if not isinstance(items, Sequence) and not hasattr(items, "__iter__"):
            raise TypeError(f"eugo.hpc.map needs an iterable of items, not {type(items).__name__}.")
        self.fn, self.label, self.collect, self.timeout = fn, label, errors == "collect", timeout
        source = _Items(items)
        opts, mode = optimize_mode(opts)
        if mode:
            _session.ensure()
            total, per = source.total, max(1, slots(request_of(opts)))
            expected = None if total is None else max(1, math.ceil(total / per))  # per worker
            plain = _hooks.the_optimizer().wrap(plain, mode, opts, expected)
        if timeout is not None:
            opts.setdefault("max_retries", 0)  # a replaced worker's batch is split here
        policy = None
        if self.collect or retries or timeout is not None:
            policy = (self.collect, retries, None if timeout is None else float(timeout))
        name = f"{method}({label})"
        opts.setdefault("name", run_name(name))  # Ray's task name: this run's, for the panes
        self.engine = Engine(
            name, run_items, plain, shared, opts, progress, source.total, "item", backups
        )
        self.engine.check(stacklevel=4)
        self.planner = _MapPlanner(source, batch_size, self.engine.slots, max_size, policy)

    # -- every item's outcome passes here --------------------------------------------------
    def settle(self, unit: Unit, outcome: Any) -> list[Any]:
        """A finished batch's results, with a :class:`Failed` in each failed slot
        (``errors="collect"``), or the :class:`MapItemError` of its first failure."""
        if not isinstance(outcome, Batch):
            return outcome  # type: ignore[no-any-return]
        self.engine.retried += outcome.retried
        results = outcome.results
        items = unit.work[1]
        for offset, failure in outcome.failures.items():
            failed = Failed.of(failure, items[offset])
            if not self.collect:
                error = self.error(failure, unit)
                error.partial.update(enumerate(results[:offset], unit.key))
                error.failed = failed
                error.__cause__ = failure.error
                raise self.first_failure(error, unit.key)
            results[offset] = failed
            self.engine.failed += 1
        return results  # type: ignore[no-any-return]

    def first_failure(self, error: MapItemError, key: int) -> MapItemError:
        """The run stops at ``error`` (``errors="raise"``): the batches before it that still
        run are waited for (up to :data:`EARLIER_WAIT` s), so that ``error.partial`` holds every
        item before the failing one and the error raised is the first in input order, as a
        loop over the items would give. A batch still running after that is let go, and its
        items are not in ``partial``."""
        try:
            for unit, outcome in self.engine.finish_before(key, EARLIER_WAIT):
                error.partial.update(enumerate(self.settle(unit, outcome), unit.key))
        except MapItemError as earlier:  # an earlier item failed too: it comes first
            earlier.partial.update(error.partial)
            return earlier
        return error

    def units(self, backlog: Callable[[], int] = lambda: 0) -> Iterator[tuple[int, list[Any]]]:
        """``(index of the batch's first item, its settled results)`` as batches finish."""
        for unit, outcome in self.engine.stream(
            self.planner, self.error, self.lost, self.unsendable, backlog
        ):
            yield unit.key, self.settle(unit, outcome)

    # -- the engine's callbacks ------------------------------------------------------------
    def error(self, failure: Failure, unit: Unit) -> MapItemError:
        located = _data_location.hint(failure.error, unit.ref)  # a path missing on its node
        label = self.label
        return MapItemError(
            f"{label} raised {failure.kind} on {failure.where}: {failure.text}\n"
            f"{located + chr(10) if located else ''}"
            f'Reproduce it here with {label}(item) on that item, or pass errors="collect" to '
            f"keep going (exc.partial holds what finished). Worker traceback:\n"
            f"{failure.trace}",
            failure.index,
            failure.label,
        )

    def lost(self, exc: BaseException, unit: Unit) -> Any:
        if self.timeout is not None and self.planner.lost(unit):
            return None  # split into single items, run again
        if self.timeout is not None or self.collect:
            # The item's worker is gone after Ray's retries (or, with timeout=, was ended):
            # each item of the batch counts as failed and the run goes on (or stops, "raise").
            start, items = unit.work[0], unit.work[1]
            failures = {}
            for offset, item in enumerate(items):
                shown = repr(item)[:60]
                where = f"item #{start + offset} ({shown})"
                error: BaseException = exc
                if self.timeout is not None:
                    error = ItemTimeout(
                        f"{where} did not finish within timeout={self.timeout} s and its worker "
                        f"had to be replaced ({type(exc).__name__}).",
                        start + offset,
                        shown,
                        self.timeout,
                    )
                failures[offset] = Failure(where, error, start + offset, shown)
            return Batch([None] * len(items), failures, 0)
        return MapItemError(
            f"eugo.hpc.map({self.label}) lost the batch of items #{unit.key} to "
            f"#{unit.key + unit.size - 1}: {type(exc).__name__}: {exc}",
            unit.key,
            None,
        )

    def unsendable(self, exc: BaseException, unit: Unit) -> BaseException | None:
        return _first_unpicklable(unit.work[1], unit.key)
