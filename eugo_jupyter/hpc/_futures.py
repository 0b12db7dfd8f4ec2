"""Working with futures: get (with progress and diagnosed timeouts), wait, as_completed, put,
cancel."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .. import _hooks
from .._feasibility import describe_request
from ..exceptions import GetTimeoutError
from . import _checks, _data_location, _output, _session, _submissions, _watch
from ._progress import PROGRESS_AFTER, in_notebook, make_bar

__all__ = ["as_completed", "cancel", "get", "put", "wait"]


def _as_list(futures: Any) -> tuple[list[Any], bool]:
    if isinstance(futures, (list, tuple)):
        return list(futures), True
    return [futures], False


def diagnose(pending: Sequence[Any]) -> str:
    """Why these futures are not ready: per function and request, never-runs or busy or running."""
    snap = _checks.current_snapshot(max_age=0)
    groups: Counter[tuple[str, _submissions.RequestKey]] = Counter()
    for ref in pending:
        groups[_submissions.lookup(ref) or ("a call made elsewhere", ())] += 1
    waiting_shapes = (
        {_submissions.request_key(shape) for shape, _ in snap.demands} if snap else set()
    )
    lines = []
    for (name, key), count in groups.most_common():
        request = dict(key)
        calls = f"{count} call{'s' if count != 1 else ''} of {name}"
        if not key:
            lines.append(f"- {calls}: still running or queued.")
            continue
        asks = f"({describe_request(request)})"
        never = _checks.infeasible_message(request, snap) if snap else None
        if never is not None:
            lines.append(f"- {calls} {asks}: will never start: {never}")
        elif key in waiting_shapes:
            lines.append(f"- {calls} {asks}: queued; the resources exist but are busy.")
        else:
            lines.append(f"- {calls} {asks}: running (or its result is on its way).")
    return "\n".join(lines)


def _timeout_error(pending: Sequence[Any], total: int, timeout: float | None) -> GetTimeoutError:
    return GetTimeoutError(
        f"{len(pending)} of {total} future{'s' if total != 1 else ''} not ready after "
        f"{timeout:g} s:\n{diagnose(pending)}"
    )


def _debug_after_cell(error: BaseException) -> None:
    """``%debug`` in the next cell opens on the failed call's worker frames (a notebook)."""
    from ._debug import after_cell

    after_cell(error)


def get(futures: Any, *, timeout: float | None = None, progress: bool | None = None) -> Any:
    """The value of a future, or the list of values of a list of futures.

    ``timeout`` (seconds) raises :class:`~eugo_jupyter.exceptions.GetTimeoutError`, whose message
    says what each unfinished call waits for. ``progress``: ``None`` shows a bar in notebooks once
    the wait passes two seconds; ``True`` shows one anywhere; ``False`` never.

    >>> get(square(3))                       # doctest: +SKIP
    9
    >>> get([square(i) for i in range(4)])   # doctest: +SKIP
    [0, 1, 4, 9]
    """
    import ray
    from ray.exceptions import GetTimeoutError as RayGetTimeoutError

    _session.ensure()
    refs, many = _as_list(futures)
    show = progress if progress is not None else in_notebook()
    recorder = _hooks.recorder
    began = time.time() if recorder is not None else 0.0
    try:
        if many and show and len(refs) > 1:
            _wait_with_bar(refs, timeout)
        values = _watch.get_watching(refs if many else refs[0], timeout)
    except RayGetTimeoutError:
        pending = [r for r in refs if isinstance(r, ray.ObjectRef)]
        pending = ray.wait(pending, num_returns=len(pending), timeout=0)[1] if pending else []
        raise _timeout_error(pending, len(refs), timeout) from None
    except OSError as exc:  # a task's path missing on its node: say where data has to live
        located = _data_location.explain(exc, _failed_ref(refs))
        if located is None:
            _debug_after_cell(exc)
            raise
        raise located from exc
    except ray.exceptions.RayTaskError as exc:
        _debug_after_cell(exc)
        raise
    finally:
        if recorder is not None:
            recorder.got(refs, began, time.time())
    if recorder is not None:
        recorder.returned(refs, values if many else [values])
    _output.settle(refs)  # the lines these calls printed are shown before their values
    _hooks.run_after_get(refs)  # the magics bind a finished --no-block cell's names here
    return values


def _failed_ref(refs: list[Any]) -> Any:
    """The first ready future whose task failed, for naming the node it ran on."""
    import ray

    for ref in refs:
        if isinstance(ref, ray.ObjectRef) and ray.wait([ref], timeout=0)[0]:
            try:
                ray.get(ref, timeout=0)
            except Exception:  # noqa: BLE001 - this is the one
                return ref
    return None


def _wait_with_bar(refs: list[Any], timeout: float | None) -> None:
    """Block until every ref is ready, drawing a bar if that takes over ``PROGRESS_AFTER``."""
    import ray
    from ray.exceptions import GetTimeoutError as RayGetTimeoutError

    deadline = None if timeout is None else time.monotonic() + timeout
    pending = [r for r in refs if isinstance(r, ray.ObjectRef)]
    first = PROGRESS_AFTER if timeout is None else min(PROGRESS_AFTER, timeout)
    _, pending = ray.wait(pending, num_returns=len(pending), timeout=first, fetch_local=False)
    if not pending:
        return
    bar = make_bar(len(refs), len(refs) - len(pending), "eugo.hpc.get")
    watch = _watch.Watch()
    try:
        while pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise RayGetTimeoutError()
            step = 0.25 if left is None else min(0.25, left)
            ready, pending = ray.wait(
                pending, num_returns=len(pending), timeout=step, fetch_local=False
            )
            bar.update(len(ready))
            watch.check()
    finally:
        bar.close()


def wait(
    futures: Iterable[Any], *, num_returns: int = 1, timeout: float | None = None
) -> tuple[list[Any], list[Any]]:
    """``(done, pending)``: returns once ``num_returns`` futures are ready or ``timeout`` passes.

    >>> done, pending = wait(futs, num_returns=1)   # doctest: +SKIP
    """
    _session.ensure()
    refs = list(futures)
    if not refs:
        return [], []
    return _wait_watching(refs, min(num_returns, len(refs)), timeout)


def _wait_watching(refs: list[Any], num_returns: int, timeout: float | None) -> Any:
    """``ray.wait``, in steps on a cluster so that a dead one raises ClusterError (see get)."""
    import ray

    address = _watch.watched_address()
    if address is None:
        return ray.wait(refs, num_returns=num_returns, timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    waited = False
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        step = _watch.STEP if left is None else min(_watch.STEP, left)
        done, pending = ray.wait(refs, num_returns=num_returns, timeout=step)
        if len(done) >= num_returns or (deadline is not None and time.monotonic() >= deadline):
            if waited:  # a task whose node went with its cluster is ready too (it failed): ask
                _watch.raise_if_gone(address)  # once, so a long wait says the cluster is gone
            return done, pending
        _watch.raise_if_gone(address)
        waited = True


def as_completed(futures: Iterable[Any], *, timeout: float | None = None) -> Iterator[Any]:
    """Yield each future as soon as it is ready, whatever the submission order.

    >>> for fut in as_completed(futs):      # doctest: +SKIP
    ...     print(get(fut))
    """
    _session.ensure()
    pending = list(futures)
    total = len(pending)
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, pending = _wait_watching(pending, 1, left)
        if not done:
            raise _timeout_error(pending, total, timeout)
        yield from done


def put(value: Any) -> Any:
    """Store a value in the cluster's object store once; pass the future to many calls.

    >>> table = put(big_array)                    # doctest: +SKIP
    >>> futs = [score(table, i) for i in range(100)]   # doctest: +SKIP
    """
    import ray

    _session.ensure()
    return ray.put(value)


def cancel(futures: Any, *, force: bool = False, recursive: bool = True) -> None:
    """Cancel a task (or a list of them): queued ones never start, running ones are interrupted.

    ``get`` on a cancelled future raises ``ray.exceptions.TaskCancelledError``. Futures that
    are already done are left alone. Ray 2.60 can abort this process when a task completes
    while it is being cancelled (a race in Ray's ``ray.cancel``, with any ``force`` or
    ``recursive``): cancel what you mean to stop, not a batch of tasks about to finish;
    ``eugo.hpc.map`` and the pandas accessors never cancel on their own.
    """
    import ray

    refs, _ = _as_list(futures)
    if not refs:
        return
    _, refs = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
    for ref in refs:
        ray.cancel(ref, force=force, recursive=recursive)
