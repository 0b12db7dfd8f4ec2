"""``eugo.hpc.map``: apply a function to every item on the cluster, in automatically sized batches.

How ``batch_size="auto"`` works: a first probe task runs one item and measures, on the worker,
how long an item takes; later batches hold enough items for a target time per task (growing at
most fourfold per batch while the estimate settles, and re-estimated from every finished batch).
The target is ``TARGET_S``, raised up to ``MAX_TARGET_S`` when the input's length is known and
the whole map is long: about four batches per slot, as ``multiprocessing.Pool.map`` does, so
the fixed cost per task stays a small share. Once the input is exhausted the remaining items
are spread over at least two batches per worker, so the last tasks are short and no worker
idles behind a big final batch (but none under ``TARGET_S`` of work: a batch costs a round trip
through the notebook to start). The batching engine (:mod:`._batching`) keeps a bounded number
of batches in flight and reads the input lazily, so a generator is consumed only as fast as the
cluster works; a sequence is sliced instead of iterated.

The function and the ``shared=`` keyword arguments go into the object store once; each worker
process deserializes them once and reuses them for every batch it runs.
"""

from __future__ import annotations

import itertools
import math
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..exceptions import MapItemError, OptionsError, SerializationError
from . import _data_location, _distribute, _session
from ._batching import IN_FLIGHT_PER_SLOT, Engine, Failure, Unit, in_order, slots
from ._options import optimize_mode, request_of, resolve_options
from ._serialized import pickle_problem

__all__ = [
    "IN_FLIGHT_PER_SLOT",
    "auto_batch_size",
    "batch_target",
    "check_batch_size",
    "final_batch_size",
    "map",
]

R = TypeVar("R")

#: Seconds of work each batch aims for at least: long enough that a few ms of overhead (more on
#: a busy machine) stays a small share, short enough to balance the load.
TARGET_S = 0.05
#: The most a batch aims for when a long map of known length allows bigger batches.
MAX_TARGET_S = 0.5
#: Batches per slot a long map of known length is cut into (``Pool.map`` uses four per process).
BATCHES_PER_SLOT = 4
_MAX_BATCH = 200_000


# The batch-size rules, as pure functions: ``map`` follows them and ``eugo.hpc.readiness``
# replays them to predict a map before it runs.


def batch_target(per_item: float | None, total: int | None, slots: int) -> float:
    """Seconds of work per batch: more for a long map of known length (fewer tasks).

    >>> batch_target(None, None, 2), batch_target(0.001, 100, 2), batch_target(0.001, 10**6, 2)
    (0.05, 0.05, 0.5)
    """
    if total is None or per_item is None:
        return TARGET_S
    whole = total * per_item / (max(1, slots) * BATCHES_PER_SLOT)
    return min(MAX_TARGET_S, max(TARGET_S, whole))


def auto_batch_size(per_item: float | None, last_size: int, target: float = TARGET_S) -> int:
    """The next batch size of ``batch_size="auto"``: 1 to probe, then about ``target`` of work,
    growing at most fourfold per batch while the estimate settles.

    >>> auto_batch_size(None, 0), auto_batch_size(0.001, 1), auto_batch_size(0.001, 100)
    (1, 4, 50)
    """
    if per_item is None:
        return 1  # the probe
    ideal = target / max(per_item, 1e-7)
    return int(max(1, min(ideal, 4 * max(last_size, 1), _MAX_BATCH)))


def final_batch_size(size: int, per_item: float, remaining: int, slots: int) -> int:
    """Once the input is exhausted: spread what remains over two batches per slot at least,
    none shorter than ``TARGET_S`` of work.

    A batch costs a round trip through the notebook to start (10 to 45 ms between two batches on
    a busy two-CPU machine), so a batch shorter than that loses more than it balances.

    >>> final_batch_size(1000, 0.001, 4000, 4), final_batch_size(1000, 0.001, 40, 4)
    (500, 50)
    """
    floor = max(1, int(TARGET_S / max(per_item, 1e-7)))
    return min(size, max(floor, math.ceil(remaining / (2 * max(1, slots)))))


def check_batch_size(batch_size: Any) -> None:
    """Raise OptionsError unless ``batch_size`` is ``"auto"`` or a whole number, 1 or more
    (``map``'s rule, which ``readiness`` replays).

    >>> check_batch_size(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    eugo_jupyter.exceptions.OptionsError: batch_size=0 is not allowed: use "auto" or a whole ...
    """
    if batch_size != "auto" and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise OptionsError(
            f'batch_size={batch_size!r} is not allowed: use "auto" or a whole number, 1 or more.'
        )


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60


def _run_items(fn: Callable[..., Any], shared: dict[str, Any], unit: tuple[int, list[Any]]) -> Any:
    """Worker side: ``fn`` on each item of a batch; the results, or a Failure naming the item."""
    start, items = unit
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
        index = start + len(results)
        shown = _repr.repr(items[len(results)])
        return Failure(f"item #{index} ({shown})", exc, index=index, label=shown)
    return results


def _unwrap(fn: Any, options: Mapping[str, Any]) -> tuple[Callable[..., Any], str, dict[str, Any]]:
    """The plain function, its label, and the options to submit with (call site wins)."""
    defaults: dict[str, Any] = {}
    if isinstance(fn, _distribute.BoundCall):
        defaults = fn.options_dict
        fn = fn._function
    if isinstance(fn, _distribute.DistributedFunction):
        defaults = {**fn._defaults, **defaults}
        fn = fn._fn
    if isinstance(fn, _distribute.DistributedClass):
        raise TypeError(
            "eugo.hpc.map takes a function, not a distributed class; to use an actor, call its "
            "method on each item, or map a function that builds what it needs."
        )
    if hasattr(fn, "remote"):
        raise TypeError(
            f"{fn!r} is a Ray remote function; pass the plain function (or an "
            "@eugo.hpc.distribute one) to eugo.hpc.map."
        )
    if not callable(fn):
        raise TypeError(
            f"eugo.hpc.map needs a function as its first argument, not {type(fn).__name__}."
        )
    label = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    merged = {**defaults, **resolve_options(options, "task")}
    if merged.get("num_returns", 1) != 1:
        raise OptionsError(
            "num_returns= is not allowed in eugo.hpc.map: each item returns one result."
        )
    return fn, label, merged


def _first_unpicklable(items: list[Any], start: int) -> SerializationError | None:
    for offset, item in enumerate(items):
        problem = pickle_problem(item)
        if problem is not None:
            return SerializationError(
                f"Item #{start + offset} ({_repr.repr(item)}) cannot be sent to a worker: "
                f"{problem}. Nothing more was submitted. Fix: pass what the "
                "object is made from (a path, a number) and build it inside the function."
            )
    return None


class _Items:
    """The input, read in slices: a sequence is sliced, any other iterable read lazily."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.sequence = items if isinstance(items, (list, tuple, range)) else None
        self.total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        self.source = None if self.sequence is not None else iter(items)
        self.buffer: list[Any] = []  # read ahead from a lazy source, not yet batched
        self.position = 0  # index of the next item to batch
        self.exhausted = False

    def available(self, want: int) -> int:
        """Make ``want`` items ready if the input has them; how many are ready."""
        if self.sequence is not None:
            ready = len(self.sequence) - self.position
            self.exhausted = ready <= want
            return ready
        if len(self.buffer) < want and not self.exhausted:
            self.buffer.extend(itertools.islice(self.source, want - len(self.buffer)))  # type: ignore[arg-type]
            self.exhausted = len(self.buffer) < want
        return len(self.buffer)

    def take(self, size: int) -> list[Any]:
        if self.sequence is not None:
            batch = list(self.sequence[self.position : self.position + size])
        else:
            batch, self.buffer = self.buffer[:size], self.buffer[size:]
        self.position += size
        return batch


class _MapPlanner:
    """Batch sizes for ``map``: a one-item probe, then batches sized from the measured time."""

    def __init__(self, items: _Items, batch_size: int | str, slots: int) -> None:
        self.items = items
        self.fixed = None if batch_size == "auto" else int(batch_size)
        self.slots = slots
        self.per_item: float | None = None  # seconds per item, measured on the workers
        self.measured_items = 0
        self.measured_seconds = 0.0
        self.last_size = 0
        self.probing = False  # the probe is in flight: size nothing else until it is back
        self.finish_order: list[int] = []  # unit keys as they came back (for ordered=False)

    def waiting_on_results(self) -> bool:
        return self.probing

    def _size(self) -> int:
        if self.fixed is not None:
            return self.fixed
        target = batch_target(self.per_item, self.items.total, self.slots)
        return auto_batch_size(self.per_item, self.last_size, target)

    def next_unit(self) -> Unit | None:
        size = self._size()
        ready = self.items.available(size * (self.slots + 1))
        if self.items.exhausted and self.fixed is None and self.per_item is not None:
            # The end is in sight: spread what is left over at least two batches per slot.
            size = final_batch_size(size, self.per_item, ready, self.slots)
        size = min(size, ready)
        if size == 0:
            return None
        start = self.items.position
        if self.fixed is None and self.per_item is None:
            self.probing = True
        self.last_size = size
        return Unit(start, size, (start, self.items.take(size)))

    def finished(self, unit: Unit, seconds: float) -> None:
        self.finish_order.append(unit.key)
        self.probing = False
        self.measured_items += unit.size
        self.measured_seconds += seconds
        self.per_item = self.measured_seconds / self.measured_items


def map(  # noqa: A001 - the name users expect, as in multiprocessing.Pool.map
    fn: Callable[..., R] | Any,
    items: Iterable[Any],
    *,
    batch_size: int | str = "auto",
    ordered: bool = True,
    progress: bool | None = None,
    shared: Mapping[str, Any] | None = None,
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

    An exception in ``fn`` stops the map and raises
    :class:`~eugo_jupyter.exceptions.MapItemError` naming the item's index and value.

    >>> import eugo_jupyter as eugo
    >>> eugo.hpc.map(lambda x: x * x, range(5))                          # doctest: +SKIP
    [0, 1, 4, 9, 16]
    >>> eugo.hpc.map(score, rows, shared={"model": model}, num_cpus=2)   # doctest: +SKIP
    """
    plain, label, opts = _unwrap(fn, options)
    check_batch_size(batch_size)
    if shared is not None and not isinstance(shared, Mapping):
        raise TypeError(
            "shared= takes a dict of keyword arguments passed to every call, such as "
            "shared={'model': model}; the function is then called as fn(item, model=model)."
        )
    if not isinstance(items, Sequence) and not hasattr(items, "__iter__"):
        raise TypeError(f"eugo.hpc.map needs an iterable of items, not {type(items).__name__}.")
    source = _Items(items)
    opts, mode = optimize_mode(opts)
    if mode:
        from .optimize import _calls

        _session.ensure()
        plain = _calls.for_items(plain, mode, opts, source.total, slots(request_of(opts)))
    name = f"map({label})"
    engine = Engine(name, _run_items, plain, shared, opts, progress, source.total, "item")
    engine.check(stacklevel=2)
    planner = _MapPlanner(source, batch_size, engine.slots)

    def failed(failure: Failure, unit: Unit) -> BaseException:
        located = _data_location.hint(failure.error, unit.ref)  # a path missing on its node
        return MapItemError(
            f"{label} raised {failure.kind} on {failure.where}: {failure.text}\n"
            f"{located + chr(10) if located else ''}"
            f"Reproduce it here with {label}(item) on that item. Worker traceback:\n"
            f"{failure.trace}",
            failure.index,
            failure.label,
        )

    def lost(exc: BaseException, unit: Unit) -> BaseException:
        return MapItemError(
            f"eugo.hpc.map({label}) lost the batch of items #{unit.key} to "
            f"#{unit.key + unit.size - 1}: {type(exc).__name__}: {exc}",
            unit.key,
            None,
        )

    def unsendable(exc: BaseException, unit: Unit) -> BaseException | None:
        return _first_unpicklable(unit.work[1], unit.key)

    results = engine.run(planner, failed, lost, unsendable)
    if ordered:
        return list(in_order(results))
    out: list[Any] = []
    for key in planner.finish_order:
        out.extend(results[key])
    return out
