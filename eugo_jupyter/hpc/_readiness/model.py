"""The readiness prediction: pure functions over measured numbers, no Ray.

:mod:`.measure` measures (per-item time on a worker, sizes after serialization, what
``map`` costs on this cluster per batch and per byte shipped); this module turns the
measurements into a predicted ``eugo.hpc.map`` run and the checklist lines the numbers give;
:mod:`.report` turns them into a verdict and shows them.

The prediction replays ``map``'s own batching (:func:`.._map.auto_batch_size` and
:func:`.._map.final_batch_size`) on a small event simulation whose costs were all measured through
``map`` itself, so they include what ``map`` really pays (its setup, the engine's submission and
collection loop, Ray's dispatch), not just a bare task:

- ``start_s``: a whole ``map`` of one no-op item: setup plus one batch's round trip. The first
  batch costs this; with ``batch_size="auto"`` it is the probe, collected before anything else;
- ``overhead_s``: each further batch, from a ``map`` of no-op items one per batch (the notebook
  submits and collects batches one after another, so this cost is serial there);
- bytes: ``map`` ships a batch's items inside its task's arguments, which Ray copies into the
  object store from the notebook (``per_byte_s`` per byte, measured by putting the sampled
  items there as one batch; ``busy_per_byte_s`` the same while the sample keeps every slot busy,
  since on a node with few cores the notebook then competes with the workers for CPU) and a
  worker copies out again before its items run (``worker_per_byte_s``, measured as the sample's
  workers read their items: an object each has never read, pulled from the notebook's node when
  the worker is on another, as every batch of map's is; the slot is taken meanwhile). The
  notebook's rate for a batch is between the two by the share of slots busy when it is
  submitted. A batch's bytes are what pickling its items together gives: what the items share
  is shipped once per batch. Costs fixed per object (a few ms) are amortized over a batch's
  items, so they are not charged per byte;
- at most ``IN_FLIGHT_PER_SLOT`` batches per slot are in flight, and each batch occupies one slot
  for ``items x per-item time``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..._units import format_bytes
from ..._units import format_seconds as fmt_s
from .._map import IN_FLIGHT_PER_SLOT, auto_batch_size, batch_target, final_batch_size

__all__ = [
    "LARGE_ARG_BYTES",
    "TINY_ITEM_S",
    "WORTH_IT_SPEEDUP",
    "Check",
    "Measurements",
    "Prediction",
    "fmt_s",
    "median",
    "plan_batches",
    "predict",
    "timing_checks",
]

#: Below this predicted speedup distributing is not worth the trouble.
WORTH_IT_SPEEDUP = 1.5
#: Per-item time under which a task per item is dominated by overhead (Ray's rule of thumb).
TINY_ITEM_S = 0.010
#: An argument this large, shipped with every call, belongs in the object store once.
LARGE_ARG_BYTES = 1 << 20


@dataclass
class Measurements:
    """What :mod:`.measure` measured; every time in seconds, every size in bytes."""

    function: str
    items: int  # how many items the map would run
    sampled: int  # how many of them ran on a worker
    per_item_s: list[float]  # each sampled item's time, measured on the worker
    arg_bytes: float  # median serialized size of one item (plus its share of nothing else)
    result_bytes: float  # median serialized size of one result
    overhead_s: float  # each batch of map beyond the first (a map of no-ops, one per batch)
    latency_s: float  # one call's round trip (submit, run nothing, get)
    per_byte_s: float  # cost per byte a batch ships (a map of no-ops on the sampled items)
    slots: int  # calls with this request the cluster runs at once
    request: dict[str, float]
    batch_size: int | str  # "auto" or the fixed size asked for
    node: str  # the node the sample ran on
    node_memory: float = 0.0  # bytes of memory (Ray's "memory" resource) of the busiest node
    node_slots: int = 1  # calls with this request that node runs at once
    peak_item_bytes: float = 0.0  # extra memory one item needed while it ran (tracemalloc)
    # a whole map of one no-op item (setup + one round trip); 0: unknown, latency + overhead
    start_s: float = 0.0
    # bytes one more item adds to a batch's arguments; None: arg_bytes. Objects the items share
    # (one big array they all reference) are pickled once per batch: batch_shared_bytes
    shipped_bytes: float | None = None
    batch_shared_bytes: float = 0.0  # bytes every batch ships once, whatever its size
    # mean per-item time over a batch's worth of calls on every slot at once; None: the mean
    # of per_item_s (a few short calls can miss the pauses of a busy machine)
    sustained_per_item_s: float | None = None
    # seconds per byte the notebook spends shipping while every slot is busy; None: per_byte_s
    busy_per_byte_s: float | None = None
    # seconds per byte a worker spends reading a batch's arguments before its items run
    worker_per_byte_s: float = 0.0


@dataclass
class Check:
    """One checklist line: ``ok`` is True (passes), False (fails) or None (not applicable)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


@dataclass
class Prediction:
    """A predicted map run, serial baseline included, and where the time beyond ideal goes."""

    batches: list[int]
    serial_s: float
    parallel_s: float
    speedup: float
    efficiency: float
    ideal_s: float  # serial_s / slots: perfect scaling
    overhead_s: float  # map's own cost: its setup and every batch's submission and collection
    transfer_s: float  # bytes shipped: the notebook's and the workers' copies, all batches
    serial_part_s: float  # the probe batch, run alone before the rest
    extra: dict[str, float] = field(default_factory=dict)


def median(values: list[float]) -> float:
    """The median of a non-empty list.

    >>> median([3.0, 1.0, 2.0])
    2.0
    """
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def plan_batches(items: int, per_item_s: float, slots: int, batch_size: int | str) -> list[int]:
    """The batch sizes ``eugo.hpc.map`` would submit, in order, for ``items`` items.

    >>> plan_batches(10, 0.1, 2, 1)
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    >>> plan_batches(100, 0.001, 2, "auto")[:4]
    [1, 4, 16, 50]
    """
    sizes: list[int] = []
    left, last = items, 0
    while left > 0:
        if batch_size != "auto":
            size = int(batch_size)
        else:
            measured = None if not sizes else per_item_s
            size = auto_batch_size(measured, last, batch_target(measured, items, slots))
            # map reads size x (slots + 1) items ahead; when that reaches the end it shrinks
            if sizes and left < size * (slots + 1):
                size = final_batch_size(size, per_item_s, left, slots)
        size = min(size, left)
        sizes.append(size)
        left -= size
        last = size
    return sizes


def predict(m: Measurements) -> Prediction:
    """Replay map's batches on ``m.slots`` slots with the measured costs.

    >>> m = Measurements("f", 100, 5, [0.1] * 5, 100, 100, 0.001, 0.002, 0.0, 4, {"CPU": 1},
    ...                  "auto", "n1")
    >>> p = predict(m)
    >>> round(p.serial_s, 3), p.parallel_s < p.serial_s, 3.0 < p.speedup <= 4.0
    (10.0, True, True)

    No-op items cost what the measurements say: the first batch ``start_s``, each further one
    ``overhead_s`` (here 1 + 9 x 0.01 s):

    >>> noop = Measurements("f", 10, 1, [0.0], 0, 0, 0.01, 0.0, 0.0, 2, {}, 1, "n", start_s=1.0)
    >>> round(predict(noop).parallel_s, 6)
    1.09
    """
    # the mean, not the median: with skewed items the total is what the slow ones make it
    per_item = sum(m.per_item_s) / len(m.per_item_s) if m.per_item_s else 0.0
    if m.sustained_per_item_s is not None:
        per_item = m.sustained_per_item_s
    batches = plan_batches(m.items, per_item, m.slots, m.batch_size)
    shipped = m.arg_bytes if m.shipped_bytes is None else m.shipped_bytes
    per_batch_bytes = [m.batch_shared_bytes + b * (shipped + m.result_bytes) for b in batches]
    serial = m.items * per_item
    slots = max(1, m.slots)
    start = m.start_s or (m.latency_s + m.overhead_s)
    limit = max(2, IN_FLIGHT_PER_SLOT * slots)
    free = [0.0] * slots  # when each slot is next free
    ends: list[float] = []  # end times of batches in flight, to respect map's in-flight limit
    # the notebook's own time: map's setup, then submissions and collections one at a time;
    # start_s is setup plus the first batch's submission (overhead_s) and round trip
    clock = start - m.overhead_s
    finish = 0.0
    probe = 0.0
    transfer = 0.0
    busy_rate = m.per_byte_s if m.busy_per_byte_s is None else m.busy_per_byte_s
    for number, (size, nbytes) in enumerate(zip(batches, per_batch_bytes, strict=True)):
        # the notebook ships slower while the workers take the node's CPUs
        busy_share = sum(1 for f in free if f > clock) / slots
        shipping = nbytes * (m.per_byte_s + (busy_rate - m.per_byte_s) * busy_share)
        reading = nbytes * m.worker_per_byte_s  # on the slot, before the batch's items run
        transfer += shipping + reading
        clock += m.overhead_s + shipping
        if len(ends) >= limit:  # map waits for one batch to finish before submitting more
            clock = max(clock, heapq.heappop(ends))
        slot = heapq.heappop(free)
        if number == 0:
            # the first batch runs alone: a whole round trip (start_s), then its work
            end = start + shipping + reading + size * per_item
        else:
            end = max(clock, slot) + reading + size * per_item
        heapq.heappush(free, end)
        if number == 0 and m.batch_size == "auto" and len(batches) > 1:
            # the probe: map collects it before it sizes and submits anything else
            probe = clock = finish = end
            continue
        heapq.heappush(ends, end)
        finish = max(finish, end)
    parallel = max(finish, clock)
    speedup = serial / parallel if parallel > 0 else 0.0
    return Prediction(
        batches=batches,
        serial_s=serial,
        parallel_s=parallel,
        speedup=speedup,
        efficiency=speedup / slots,
        ideal_s=serial / slots,
        overhead_s=start + (len(batches) - 1) * m.overhead_s,
        transfer_s=transfer,
        serial_part_s=probe,
    )


def timing_checks(m: Measurements, p: Prediction) -> list[Check]:
    """The checklist lines that follow from the numbers: items too small, arguments too large,
    memory per item times items in flight against the node's memory."""
    per_item = median(m.per_item_s) if m.per_item_s else 0.0
    out = []
    tiny = per_item < TINY_ITEM_S
    if tiny and m.batch_size != "auto" and int(m.batch_size) * per_item < TINY_ITEM_S:
        out.append(
            Check(
                "items large enough",
                False,
                f"each item takes {fmt_s(per_item)} and each task carries {m.batch_size} "
                f"item(s), while a task costs about {fmt_s(m.overhead_s)} of overhead",
                'let map batch them (batch_size="auto", the default) or run it here',
            )
        )
    else:
        detail = f"each item takes {fmt_s(per_item)}"
        if tiny:
            detail += f"; map batches them {max(p.batches)} to a task so overhead stays small"
        out.append(Check("items large enough", True, detail))
    if m.arg_bytes >= LARGE_ARG_BYTES:
        out.append(
            Check(
                "arguments small enough to ship per call",
                False,
                f"each item is {format_bytes(m.arg_bytes)} after serialization; shipping all "
                f"{m.items} costs about {fmt_s(p.transfer_s)}",
                "send a path on storage every node mounts, or pass what every call shares once "
                "(shared={...} or eugo.hpc.put) and keep the items small",
            )
        )
    else:
        out.append(
            Check(
                "arguments small enough to ship per call",
                True,
                f"an item is {format_bytes(m.arg_bytes)}, a result {format_bytes(m.result_bytes)}",
            )
        )
    if m.node_memory > 0 and m.peak_item_bytes > 0:
        in_flight = m.node_slots * (m.peak_item_bytes + max(p.batches) * m.result_bytes)
        ok = in_flight <= m.node_memory
        out.append(
            Check(
                "memory per item x items in flight fits a node",
                ok,
                f"an item needs about {format_bytes(m.peak_item_bytes)} while it runs; "
                f"{m.node_slots} at once on a node need {format_bytes(in_flight)} of "
                f"{format_bytes(m.node_memory)}",
                ""
                if ok
                else f'ask for memory per call (memory="{format_bytes(m.peak_item_bytes * 1.5)}") '
                "so fewer run at once, or process each item in pieces",
            )
        )
    return out
