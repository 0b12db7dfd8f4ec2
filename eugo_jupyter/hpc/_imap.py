"""``eugo.hpc.map`` and ``eugo.hpc.imap``: every item's outcome kept, or yielded as it comes.

Both run on :class:`._run.Run` (the engine, the planner, and the one place every outcome
passes); ``map`` keeps the settled batches in input order (or as they finished), ``imap``
yields them and holds only the finished batches that wait for an earlier one. ``journal=``
runs go through :class:`._resume.Resumed`, which answers the stored items and hands the rest to
a :class:`._run.Run`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from ..exceptions import MapItemError, OptionsError
from ._map import _unwrap
from ._results import Failed, MapResults
from ._run import Run

__all__ = ["IMAP_MAX_BATCH", "collect_all", "imap", "map"]

R = TypeVar("R")

#: The most items one ``imap`` batch holds: the bound on what the kernel holds per batch.
IMAP_MAX_BATCH = 10_000


def collect_all(
    fn: Any, items: Iterable[Any], *, ordered: bool, options: dict[str, Any], **keywords: Any
) -> Any:
    """``map``: every batch's results kept, in input order (or as they finished)."""
    journal = _journal_keywords(keywords)
    if journal is not None:
        return _collect_journaled(fn, items, journal, ordered, options, keywords)
    run = Run(fn, items, options=options, **keywords)
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

        def rerun(fixed: Any, failed_items: list[Any]) -> MapResults:
            again = dict(keywords, errors="collect")
            return collect_all(  # type: ignore[no-any-return]
                fn if fixed is None else fixed, failed_items, ordered=True, options=options, **again
            )

        out._rerun = rerun  # type: ignore[attr-defined]
    return out


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
    method: str = "map",
) -> Any:
    """A started :class:`._resume.Resumed` run: stored items answered, the rest submitted."""
    from ._resume import Resumed

    plain, label, _ = _unwrap(fn, options)
    path, key, rerun_failed = journal
    collect = keywords.get("errors") == "collect"
    resumed = Resumed(path, plain, label, keywords.get("shared"), key, rerun_failed, collect)
    try:
        resumed.start(
            items,
            lambda pending: Run(
                fn, pending, options=options, max_size=max_size, method=method, **keywords
            ),
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
        resumed = _journaled(fn, items, journaled, options, keywords, IMAP_MAX_BATCH, "imap")
        return _journal_stream(resumed, ordered)
    run = Run(fn, items, options=options, max_size=IMAP_MAX_BATCH, method="imap", **keywords)
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
