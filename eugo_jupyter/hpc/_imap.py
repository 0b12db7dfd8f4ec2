"""``eugo.hpc.imap`` and the run behind ``map``: one engine, every item's outcome in one place.

A :class:`Run` is one ``map``/``imap`` call on the batching engine (:mod:`._batching`): it
checks the keywords, builds the engine and ``map``'s planner, and turns each finished batch
into its items' outcomes in :meth:`Run.settle`, the one place every result and failure passes
(a journal of the run hooks in there). ``imap`` yields them as they come; ``map`` keeps them.

Memory: the engine keeps ``IN_FLIGHT_PER_SLOT`` batches per slot in flight and counts the
finished batches ``imap`` still holds against that bound, and ``imap`` caps a batch at
:data:`IMAP_MAX_BATCH` items, so the input is read, and results are held, only a bounded way
ahead of the consumer, however long the input.

``timeout=``: the workers interrupt an item that runs past it (:mod:`._items`). A worker that
had to be ended instead (code that never returned to Python) loses its batch: ``map`` runs
with Ray's own retries off then (``max_retries=0`` unless given), and the planner splits the
lost batch into single items, so the next loss names the item that hangs, counted as an
``ItemTimeout``. Nothing here calls ``ray.cancel``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..exceptions import ItemTimeout, MapItemError, OptionsError
from . import _data_location, _session
from ._batching import Engine, Failure, Unit, slots
from ._items import Batch, run_items
from ._map import _first_unpicklable, _Items, _MapPlanner, _unwrap, check_batch_size
from ._options import optimize_mode, request_of
from ._results import Failed, MapResults

__all__ = ["IMAP_MAX_BATCH", "Run", "collect_all", "imap", "map"]

R = TypeVar("R")

#: The most items one ``imap`` batch holds: the bound on what the kernel holds per batch.
IMAP_MAX_BATCH = 10_000


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
        self.keywords = {
            "batch_size": batch_size,
            "progress": progress,
            "shared": shared,
            "retries": retries,
            "timeout": timeout,
            "backups": backups,
            **options,
        }
        source = _Items(items)
        opts, mode = optimize_mode(opts)
        if mode:
            from .optimize import _calls

            _session.ensure()
            plain = _calls.for_items(plain, mode, opts, source.total, slots(request_of(opts)))
        if timeout is not None:
            opts.setdefault("max_retries", 0)  # a replaced worker's batch is split here
        policy = None
        if self.collect or retries or timeout is not None:
            policy = (self.collect, retries, None if timeout is None else float(timeout))
        name = f"map({label})"
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
                raise error from failure.error
            results[offset] = failed
            self.engine.failed += 1
        return results  # type: ignore[no-any-return]

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

    def rerun(self, fn: Any, items: list[Any]) -> MapResults:
        return collect_all(
            self.fn if fn is None else fn,
            items,
            errors="collect",
            ordered=True,
            options={},
            **self.keywords,
        )


def collect_all(
    fn: Any, items: Iterable[Any], *, ordered: bool, options: dict[str, Any], **keywords: Any
) -> Any:
    """``map``: every batch's results kept, in input order (or as they finished)."""
    extra = {k: keywords.pop(k) for k in list(keywords) if k not in _RUN_KEYWORDS}
    journal = _journal_keywords(keywords)
    if journal is not None:
        return _collect_journaled(fn, items, journal, ordered, {**extra, **options}, keywords)
    run = Run(fn, items, options={**extra, **options}, **keywords)
    chunks: dict[int, list[Any]] = {}
    order: list[int] = []
    try:
        for key, results in run.units():
            chunks[key] = results
            order.append(key)
    except MapItemError as error:
        _set_debug_hook(error)
        for key, chunk in chunks.items():
            error.partial.update(enumerate(chunk, key))
        raise
    out: list[Any] = MapResults() if run.collect else []
    for key in sorted(chunks) if ordered else order:
        out.extend(chunks[key])
    if run.collect:
        out._rerun = run.rerun  # type: ignore[attr-defined]
    return out


_RUN_KEYWORDS = {
    "batch_size",
    "progress",
    "shared",
    "errors",
    "retries",
    "timeout",
    "backups",
    "journal",
    "key",
    "rerun_failed",
}


def _journal_keywords(keywords: dict[str, Any]) -> tuple[Any, Any, bool] | None:
    """Take ``journal=``, ``key=`` and ``rerun_failed=`` out of ``keywords``; the first three
    when a journal is asked for."""
    journal = keywords.pop("journal", None)
    key = keywords.pop("key", None)
    rerun_failed = keywords.pop("rerun_failed", False)
    if journal is None:
        if key is not None or rerun_failed:
            raise TypeError(
                "key= and rerun_failed= need journal=, the folder where the run's results are "
                'kept: map(fn, items, journal="runs/name", key=...).'
            )
        return None
    if not isinstance(rerun_failed, bool):
        raise OptionsError(f"rerun_failed={rerun_failed!r} is not allowed: use True or False.")
    return journal, key, rerun_failed


def _journaled(
    fn: Any,
    items: Iterable[Any],
    journal: tuple[Any, Any, bool],
    options: dict[str, Any],
    keywords: dict[str, Any],
    max_size: int | None = None,
) -> Any:
    """A started :class:`._resume.Resumed` run: stored items answered, the rest submitted."""
    from ._resume import Resumed

    plain, label, _ = _unwrap(fn, options)
    path, key, rerun_failed = journal
    collect = keywords.get("errors") == "collect"
    resumed = Resumed(path, plain, label, keywords.get("shared"), key, rerun_failed, collect)
    try:
        resumed.start(
            items, lambda pending: Run(fn, pending, options=options, max_size=max_size, **keywords)
        )
    except BaseException:
        resumed.writer.close()
        raise
    return resumed


def _collect_journaled(
    fn: Any,
    items: Iterable[Any],
    journal: tuple[Any, Any, bool],
    ordered: bool,
    options: dict[str, Any],
    keywords: dict[str, Any],
) -> Any:
    resumed = _journaled(fn, items, journal, options, keywords)
    got: dict[int, Any] = {}
    order: list[int] = []
    try:
        for index, value in resumed.results(ordered=False):
            got[index] = value
            order.append(index)
    except MapItemError as error:
        _set_debug_hook(error)
        error.partial.update({i: v for i, v in got.items() if not isinstance(v, Failed)})
        raise
    collect = resumed.collect
    out: list[Any] = MapResults() if collect else []
    out.extend(got[i] for i in (sorted(got) if ordered else order))
    if collect:
        path, key, _ = journal

        def rerun(fixed: Any, failed_items: list[Any]) -> Any:
            again = dict(keywords, errors="collect", journal=path, key=key, rerun_failed=True)
            return collect_all(fixed or fn, failed_items, ordered=True, options=options, **again)

        out._rerun = rerun  # type: ignore[attr-defined]
    return out


def map(  # noqa: A001 - the name users expect, as in multiprocessing.Pool.map
    fn: Callable[..., R] | Any,
    items: Iterable[Any],
    *,
    batch_size: int | str = "auto",
    ordered: bool = True,
    progress: bool | None = None,
    shared: Mapping[str, Any] | None = None,
    errors: str = "raise",
    retries: int = 0,
    timeout: float | None = None,
    backups: bool = False,
    journal: str | os.PathLike[str] | None = None,
    key: Callable[[Any], Any] | None = None,
    rerun_failed: bool = False,
    **options: Any,
) -> list[R]:
    """``[fn(item) for item in items]`` on the cluster, in batches sized for low overhead.

    ``fn`` is a plain function or an ``@eugo.hpc.distribute`` one (its options apply; ``options``
    given here win). ``items`` is any iterable; a generator is read lazily. ``batch_size="auto"``
    measures the items and aims for tens of milliseconds per task; an int fixes it. With
    ``ordered=False`` results come in the order they finish. ``shared`` is a dict of keyword
    arguments passed to every call (``fn(item, **shared)``), stored in the object store once
    instead of copied into every task. ``progress``: None shows a bar in notebooks once the map
    passes two seconds, True always, False never.

    ``errors="raise"`` (default): an exception in ``fn`` stops the map and raises
    :class:`~eugo_jupyter.exceptions.MapItemError` naming the item's index and value, whose
    ``.partial`` holds the results that finished. ``errors="collect"``: the map goes on and
    returns a :class:`~eugo_jupyter.hpc.MapResults` whose failed slots hold
    :class:`~eugo_jupyter.hpc.Failed` values (``.failures``, ``.rerun(fn)``). ``retries=N``
    tries a raising item again up to N times; ``timeout=S`` abandons an item still running
    after S seconds (an :class:`~eugo_jupyter.exceptions.ItemTimeout`); ``backups=True``
    copies a straggling batch onto an idle slot near the end (the first result wins).

    ``journal="runs/name"`` writes every finished item's result (or failure) to that folder as
    it arrives; running the same call again returns the stored results at once and runs only
    the items that have none (``key=`` a function of the item to match them by, by default a
    hash of the item; ``rerun_failed=True`` runs the stored failures again). See
    :func:`~eugo_jupyter.hpc.journal`.

    >>> import eugo_jupyter as eugo
    >>> eugo.hpc.map(lambda x: x * x, range(5))                          # doctest: +SKIP
    [0, 1, 4, 9, 16]
    >>> eugo.hpc.map(score, rows, shared={"model": model}, num_cpus=2)   # doctest: +SKIP
    >>> out = eugo.hpc.map(load, paths, errors="collect", retries=2)     # doctest: +SKIP
    """
    return collect_all(
        fn,
        items,
        batch_size=batch_size,
        ordered=ordered,
        progress=progress,
        shared=shared,
        errors=errors,
        retries=retries,
        timeout=timeout,
        backups=backups,
        journal=journal,
        key=key,
        rerun_failed=rerun_failed,
        options=options,
    )


def imap(
    fn: Callable[..., Any] | Any,
    items: Iterable[Any],
    *,
    ordered: bool = True,
    batch_size: int | str = "auto",
    progress: bool | None = None,
    shared: Mapping[str, Any] | None = None,
    errors: str = "raise",
    retries: int = 0,
    timeout: float | None = None,
    backups: bool = False,
    journal: str | os.PathLike[str] | None = None,
    key: Callable[[Any], Any] | None = None,
    rerun_failed: bool = False,
    **options: Any,
) -> Iterator[Any]:
    """``map`` as an iterator: results as they are ready, the kernel's memory flat.

    Only a bounded number of batches is in flight, the input is read lazily, and each result
    is let go once yielded, so a million results never sit in the kernel at once. With
    ``ordered=False`` each result comes as ``(index, result)`` as soon as it finishes. It takes
    ``map``'s keywords; with ``errors="collect"`` a failed item is yielded as its
    :class:`~eugo_jupyter.hpc.Failed` value in place. Stopping the loop early lets the batches
    in flight finish and drops their results. ``journal=``, ``key=`` and ``rerun_failed=`` as
    for ``map``: each batch is written as it arrives, whether or not the loop has reached it.

    >>> for tile in eugo.hpc.imap(load, paths, errors="collect"):     # doctest: +SKIP
    ...     write(tile)
    >>> for i, r in eugo.hpc.imap(score, rows, ordered=False): ...    # doctest: +SKIP
    """
    keywords: dict[str, Any] = {
        "batch_size": batch_size,
        "progress": progress,
        "shared": shared,
        "errors": errors,
        "retries": retries,
        "timeout": timeout,
        "backups": backups,
        "journal": journal,
        "key": key,
        "rerun_failed": rerun_failed,
    }
    journaled = _journal_keywords(keywords)
    if journaled is not None:
        resumed = _journaled(fn, items, journaled, options, keywords, IMAP_MAX_BATCH)
        return _journal_stream(resumed, ordered)
    run = Run(fn, items, options=options, max_size=IMAP_MAX_BATCH, **keywords)
    return _in_order(run) if ordered else _as_finished(run)


def _journal_stream(resumed: Any, ordered: bool) -> Iterator[Any]:
    try:
        yield from resumed.results(ordered)
    except MapItemError as error:
        _set_debug_hook(error)
        raise


def _in_order(run: Run) -> Iterator[Any]:
    held: dict[int, list[Any]] = {}  # finished batches waiting for an earlier one
    following = 0  # index of the next item to yield
    try:
        for key, results in run.units(backlog=held.__len__):
            held[key] = results
            while following in held:
                chunk = held.pop(following)
                following += len(chunk)
                yield from chunk
                del chunk
    except MapItemError as error:
        _set_debug_hook(error)
        for key, chunk in held.items():
            error.partial.update(enumerate(chunk, key))
        raise


def _as_finished(run: Run) -> Iterator[tuple[int, Any]]:
    try:
        for key, results in run.units():
            yield from enumerate(results, key)
    except MapItemError as error:
        _set_debug_hook(error)
        raise


def _set_debug_hook(error: MapItemError) -> None:
    from ._debug import after_cell

    after_cell(error)
