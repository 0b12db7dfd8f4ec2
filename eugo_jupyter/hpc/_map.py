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
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ..exceptions import OptionsError, SerializationError
from . import _distribute
from ._batching import IN_FLIGHT_PER_SLOT, Unit
from ._items import _repr
from ._options import resolve_options
from ._serialized import pickle_problem

__all__ = [
    "IN_FLIGHT_PER_SLOT",
    "auto_batch_size",
    "batch_target",
    "check_batch_size",
    "final_batch_size",
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

    def __init__(
        self,
        items: _Items,
        batch_size: int | str,
        slots: int,
        max_size: int | None = None,
        policy: tuple[bool, int, float | None] | None = None,
    ) -> None:
        self.items = items
        self.fixed = None if batch_size == "auto" else int(batch_size)
        self.max_size = max_size  # imap: a bound on the items (and results) one batch holds
        self.policy = policy  # (collect, retries, timeout) for the workers, None: plain
        self.requeued: list[Unit] = []  # lost batches split into single items, to run first
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
        size = auto_batch_size(self.per_item, self.last_size, target)
        return size if self.max_size is None else min(size, self.max_size)

    def _work(self, start: int, items: list[Any]) -> tuple[Any, ...]:
        return (start, items) if self.policy is None else (start, items, self.policy)

    def lost(self, unit: Unit) -> bool:
        """Take back a batch whose worker was replaced (``timeout=``): its items run again
        one per task, so only the one that hangs is lost the next time. False for one item."""
        self.probing = False
        if unit.size == 1:
            return False
        start, items = unit.work[0], unit.work[1]
        self.requeued.extend(
            Unit(start + i, 1, self._work(start + i, [item])) for i, item in enumerate(items)
        )
        return True

    def next_unit(self) -> Unit | None:
        if self.requeued:
            return self.requeued.pop(0)
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
        return Unit(start, size, self._work(start, self.items.take(size)))

    def finished(self, unit: Unit, seconds: float) -> None:
        self.finish_order.append(unit.key)
        self.probing = False
        self.measured_items += unit.size
        self.measured_seconds += seconds
        self.per_item = self.measured_seconds / self.measured_items
